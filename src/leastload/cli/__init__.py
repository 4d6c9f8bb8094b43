"""The `leastload` command's parts (leastload/__main__.py dispatches): `demo`,
`show` (showconfig), `ctl` (the proxy's runtime API) and the toy `backends`
(also importable as leastload.backends). The proxy's and the simulator's
commands live with their packages (proxy/_cli.py, sim/simulate.py); the
argument plumbing every command shares is leastload.cmdline, at the bottom."""
