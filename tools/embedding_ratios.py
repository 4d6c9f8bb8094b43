"""The embedding API's figures in one run: what exclude=, handles and the control plane cost (C engine).

    python tools/embedding_ratios.py [--quick] [--sizes 3,64,16384] [--control-sizes 100000,1000000]

Per call, in ns (best of several timed loops, time.perf_counter_ns; each loop's
figure includes one `for` step):
  select()                  LEASTBANDWIDTH, random loads (steady: a pick moves no key)
  select(exclude={best})    the service select() picks is excluded
  select(exclude={other})   another service is excluded
  select()+finish(name)     the same vserver
  acquire()+t.finish()
  with acquire(): pass
  _noop(1)                  the empty call into the engine
with the ratios between them, at n = 3, 64, 16384; then the control plane at
10**5 and 10**6 services: set_state pairs (UP <-> OUT_OF_SERVICE, DOWN <-> UP
with slow start on and off), bind + unbind of a new service with automated slow
start on and off, drain + bind again; per call (a pair's time / 2).
"""
import argparse
import os
import sys
import time
from time import perf_counter_ns

os.environ.setdefault("LEASTLOAD_IMPLEMENTATION", "c")

import leastload.engine.native as c  # noqa: E402
from leastload.bench import cases  # noqa: E402


BUDGET_NS = 200_000_000  # one timed loop takes about this long at most


def best_ns(loop, k, repeats):
    """Best ns per iteration of loop(k) over `repeats` runs; k is cut so that a
    loop takes about BUDGET_NS (slow calls: fewer iterations, at least one)."""
    once = loop(1)  # warm up, and a first estimate
    k = max(1, min(k, BUDGET_NS // max(once, 1)))
    if k > 1:
        k = max(1, min(k, BUDGET_NS * k // max(loop(k), 1)))
    return min(loop(k) for _ in range(repeats)) / k


def per_call_rows(n, k, repeats):
    vs, _ = cases.loaded(c, "LEASTBANDWIDTH", n)
    best = vs.select()
    other = next(name for name in vs.services if name != best)
    select, finish, acquire, noop = vs.select, vs.finish, vs.acquire, vs._noop
    ex_best, ex_other = {best}, {other}

    def loop_select(k):
        t = perf_counter_ns()
        for _ in range(k):
            select()
        return perf_counter_ns() - t

    def loop_select_ex_best(k):
        t = perf_counter_ns()
        for _ in range(k):
            select(exclude=ex_best)
        return perf_counter_ns() - t

    def loop_select_ex_other(k):
        t = perf_counter_ns()
        for _ in range(k):
            select(exclude=ex_other)
        return perf_counter_ns() - t

    def loop_select_finish(k):
        t = perf_counter_ns()
        for _ in range(k):
            finish(select())
        return perf_counter_ns() - t

    def loop_acquire_finish(k):
        t = perf_counter_ns()
        for _ in range(k):
            acquire().finish()
        return perf_counter_ns() - t

    def loop_with_acquire(k):
        t = perf_counter_ns()
        for _ in range(k):
            with acquire():
                pass
        return perf_counter_ns() - t

    def loop_noop(k):
        t = perf_counter_ns()
        for _ in range(k):
            noop(1)
        return perf_counter_ns() - t

    def loop_empty(k):
        t = perf_counter_ns()
        for _ in range(k):
            pass
        return perf_counter_ns() - t

    rows = {}
    # the select-only loops leave active growing on LEASTBANDWIDTH (keys unchanged):
    # run the pairs first, so their vserver state is the loaded one
    for label, loop in (("select()+finish(name)", loop_select_finish),
                        ("acquire()+t.finish()", loop_acquire_finish),
                        ("with acquire(): pass", loop_with_acquire),
                        ("select()", loop_select),
                        ("select(exclude={best})", loop_select_ex_best),
                        ("select(exclude={other})", loop_select_ex_other),
                        ("_noop(1)", loop_noop),
                        ("empty for step", loop_empty)):
        rows[label] = best_ns(loop, k, repeats)
    return rows


def print_per_call(sizes, k, repeats):
    print(f"C engine, per call (ns, best of {repeats} loops of {k}), LEASTBANDWIDTH random loads")
    table = {n: per_call_rows(n, k, repeats) for n in sizes}
    labels = list(next(iter(table.values())))
    print(f"{'':28}" + "".join(f"{'n=' + str(n):>12}" for n in sizes))
    for label in labels:
        print(f"{label:28}" + "".join(f"{table[n][label]:12.1f}" for n in sizes))
    ratios = (("select(exclude={best}) / select()", "select(exclude={best})", "select()"),
              ("select(exclude={other}) / select()", "select(exclude={other})", "select()"),
              ("acquire+t.finish / select+finish", "acquire()+t.finish()", "select()+finish(name)"),
              ("with acquire / select+finish", "with acquire(): pass", "select()+finish(name)"),
              ("select() / _noop(1)", "select()", "_noop(1)"),
              ("select()+finish / _noop(1)", "select()+finish(name)", "_noop(1)"),
              ("acquire+t.finish / _noop(1)", "acquire()+t.finish()", "_noop(1)"))
    print("ratios")
    for label, a, b in ratios:
        print(f"  {label:40}" + "".join(f"{table[n][a] / table[n][b]:12.2f}" for n in sizes))
    return table


def control_rows(n, k, repeats):
    vs = c.VirtualServer("LEASTCONNECTION", clock=c.ManualClock(0.0))
    t0 = time.perf_counter()
    vs.reserve(n + 16)
    bind = vs.bind
    for name in cases.names(n):
        bind(name)
    for _ in range(64):
        vs.select()
    build_s = time.perf_counter() - t0
    name = cases.names(n)[n // 2]
    set_state, unbind, drain = vs.set_state, vs.unbind, vs.drain
    on = dict(new_service_request=4, new_service_request_increment_interval=10)
    off = dict(new_service_request=0, new_service_request_increment_interval=0)

    def pair(a, b):
        def loop(k):
            t = perf_counter_ns()
            for _ in range(k):
                a()
                b()
            return perf_counter_ns() - t
        return loop

    rows = {}
    cases_ = (
        ("set_state OUT_OF_SERVICE/UP", off, lambda: set_state(name, "OUT_OF_SERVICE"), lambda: set_state(name, "UP")),
        ("set_state DOWN/UP, slow start off", off, lambda: set_state(name, "DOWN"), lambda: set_state(name, "UP")),
        ("set_state DOWN/UP, slow start on", on, lambda: set_state(name, "DOWN"), lambda: set_state(name, "UP")),
        ("bind/unbind, slow start off", off, lambda: bind("new"), lambda: unbind("new")),
        ("bind/unbind, slow start on", on, lambda: bind("new"), lambda: unbind("new")),
        ("drain/bind again", off, lambda: drain(name), lambda: bind(name)),
    )
    for label, settings, a, b in cases_:
        vs.set(**settings)
        rows[label] = best_ns(pair(a, b), k, repeats) / 2  # per call
    vs.set(**off)
    return rows, build_s


def print_control(sizes, k, repeats):
    print(f"\nC engine, control plane per call (ns, a pair's time / 2, best of {repeats} loops of {k} pairs)")
    table, builds = {}, {}
    for n in sizes:
        table[n], builds[n] = control_rows(n, k, repeats)
    labels = list(next(iter(table.values())))
    print(f"{'':36}" + "".join(f"{'n=' + str(n):>14}" for n in sizes))
    for label in labels:
        print(f"{label:36}" + "".join(f"{table[n][label]:14.0f}" for n in sizes))
    print(f"{'(building: bind n services, s)':36}" + "".join(f"{builds[n]:14.2f}" for n in sizes))
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and loops (a smoke run)")
    ap.add_argument("--sizes", default=None, help="per-call sizes, default 3,64,16384")
    ap.add_argument("--control-sizes", default=None, help="control-plane sizes, default 100000,1000000")
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in (args.sizes or ("3,64" if args.quick else "3,64,16384")).split(",")]
    control = [int(x) for x in (args.control_sizes or ("1000,10000" if args.quick else "100000,1000000")).split(",")]
    repeats = args.repeats or (3 if args.quick else 7)
    print(f"python {sys.version.split()[0]}, leastload C engine, pid {os.getpid()}")
    print_per_call(sizes, 20_000 if args.quick else 200_000, repeats)
    print_control(control, 200 if args.quick else 2_000, repeats)


if __name__ == "__main__":
    main()
