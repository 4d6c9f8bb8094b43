"""The hash methods' arithmetic, below the engine: request key forms, XXH64 (the
reference formula the C core's must equal), and the weighted rendezvous rank."""
