"""The face both engines share: configuration and slow-start policy.

`VirtualServer` of each implementation is `class VirtualServer(VirtualServerFacade, Engine)`:
the engine (C or reference) does the per-request work, this mixin holds what
runs rarely, in plain Python, identical for both.
"""


class VirtualServerFacade:
    """Mixin over an engine class. Slow start and show() arrive with issue 3."""

    __slots__ = ()
