"""What the network-facing parts share, above the engine: backends and their
specs, the retry-and-accounting rule (`upstream`), request keys per method
(`request_keys`) and packet counts from TCP_INFO (`tcpinfo`). Used by both the
proxy and the httpx transport."""
