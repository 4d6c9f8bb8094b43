"""What the proxy's and the httpx transport's key tests share: three backends that
answer with bodies of their own sizes (so a response tells which one served it), and
a twin vserver that says where a key should go (a hash pick depends on the key and
the eligible services only)."""

from leastload_testkit.backends import start_backend

SIZES = (100, 101, 102)
NAMES = ("b0", "b1", "b2")


def start_backends():
    """The three backends, answering SIZES bytes each (stop them with stop_backends)."""
    return [start_backend(0.0, size) for size in SIZES]


def stop_backends(procs):
    for p in procs:
        p.stop()


def specs(procs):
    """The backends as NAME=127.0.0.1:PORT specs, in NAMES order."""
    return [f"{name}=127.0.0.1:{p.port}" for name, p in zip(NAMES, procs)]


def twin(impl, method, **settings):
    """A vserver with the same names and weights, and no traffic."""
    vs = impl.VirtualServer(method, **settings)
    for name in NAMES:
        vs.bind(name)
    return vs


def expected(vs, key, exclude=()):
    """Where the twin sends `key`, excluding `exclude` (the pick is ended at once)."""
    name = vs.select(list(exclude), key=key)
    vs.finish(name)
    return name
