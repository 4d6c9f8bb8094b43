"""The engine layer: one virtual server's state and its picks.

The C engine (`_engine`, built from _engine.pyx and the parts in _binding/,
over the core in csrc/) and the pure-Python reference (`oracle`) apply the
same rules (`rules` is the reference's statement of them, which explain()
applies too); `policy` is what both share above the per-request path
(settings from the `settings` table, slow start, passive ejection, show(),
explain()), and the twins `native` and `reference` put it over each engine
(leastload.reference is the reference's public name).
`methods` is the method registry, `errors` the shared checks and exceptions.
Nothing here imports a layer above it (hashing is below).
"""
