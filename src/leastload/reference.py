"""leastload.reference, the public name of the pure-Python reference (the docs' API page, the
public-API test): the code is leastload.engine.reference, beside its twin engine.native."""
from .engine.reference import *  # noqa: F401,F403
from .engine.reference import __all__  # noqa: F401
