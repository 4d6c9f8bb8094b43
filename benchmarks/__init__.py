"""The benchmarks: a package so that its scripts import each other and the harness
(leastload_testkit) normally. Run a script from the repository's root as a module:
`python -m benchmarks.proxy_vs_haproxy --quick`; the pytest ones with
`python -m pytest benchmarks`.
"""
