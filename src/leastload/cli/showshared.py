"""`leastload show --shared NAME`: a live shared vserver, as show() prints it.

Attaches to the segment of NAME (VirtualServer(shared=NAME): an nginx upstream
with leastload, `leastload proxy --workers N`, any process that made one) with
the settings its maker recorded there, prints show(), and leaves: nothing of
the vserver changes. A NAME with no segment is an error, not a new vserver.
"""
from __future__ import annotations

import json
import os
import sys

from ..cmdline import UserError


def _exists(name: str) -> bool:
    """Whether the segment is there to attach to (where the system shows its segments)."""
    if sys.platform.startswith("linux"):
        return os.path.exists(f"/dev/shm/leastload.{name}")
    return True  # elsewhere the attach itself tells (and a segment made here is removed)


def show_shared(name: str) -> str:
    from ..engine import native
    from ..engine._engine import Engine, unlink_shared
    from ..engine.errors import check_shared_name

    try:
        check_shared_name(name)
    except (TypeError, ValueError) as exc:
        raise UserError(f"--shared: {exc}") from None
    if not _exists(name):
        raise UserError(f"--shared {name!r}: no shared vserver of that name (/dev/shm/leastload.{name})")
    probe = Engine()
    try:
        record = probe._open_shared(name, 1, b"")
    except OSError as exc:
        raise UserError(f"--shared {name!r}: {exc.strerror or exc}") from None
    probe._close_shared()
    if record is None:  # made here: it was not there after all
        unlink_shared(name)
        raise UserError(f"--shared {name!r}: no shared vserver of that name")
    try:
        values = json.loads(record)
    except ValueError:
        raise UserError(f"--shared {name!r}: its maker recorded no settings leastload can read") from None
    if not isinstance(values, dict):
        raise UserError(f"--shared {name!r}: its maker recorded no settings leastload can read")
    try:
        vs = native.VirtualServer(shared=name, name=name, **values)
    except (TypeError, ValueError) as exc:  # a maker's record this version does not read
        raise UserError(f"--shared {name!r}: {exc}") from None
    try:
        return str(vs.show())
    finally:
        vs._close_shared()
