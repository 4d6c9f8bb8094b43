"""leastload.httpx, as the docs' examples import it: the code is leastload.integrations.httpx."""
from .integrations.httpx import *  # noqa: F401,F403
from .integrations.httpx import __all__  # noqa: F401
