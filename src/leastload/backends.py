"""leastload.backends, as the docs' examples import it: the code is leastload.cli.backends."""
from .cli.backends import *  # noqa: F401,F403
from .cli.backends import __all__  # noqa: F401
