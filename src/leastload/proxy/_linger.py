"""Closing a connection after its last answer without losing the answer (a lingering close).

Closing a socket while bytes the client sent wait unread in it (the rest of a
body refused with 413, a request pipelined behind a `Connection: close`) makes
the kernel answer with a reset and drop what it has not sent yet, and a
client that meets the reset before it reads may never see the answer
(RFC 9112, section 9.6). So the proxy, its admin port and the fan-out end a
connection in two steps: `half_close` sends the answer and then a FIN, while
the connection goes on reading and dropping what the client still sends; the
connection closes when the client closes its side, or LINGER_SECONDS later,
whichever comes first. The client sees the answer and the end of the stream
at once, as with a plain close.

The bound is one span from the moment the answer is written out, not a
silence timeout, and a number of bytes: a client that sends more than
`linger_bytes` (LINGER_BYTES unless set) once the answer is written is reset
(`reset`: SO_LINGER 0, then close), as HAProxy closes one after 64 KiB; after
a refused head (414, 431: nothing of the client's request is worth reading) a
quarter of it, after a 413 the declared body as well (`byte_bound`). Only a
client still reading a large last answer (what the transport holds unsent
shrinks from one span to the next) gets another span; one that reads nothing
for a whole span is aborted (`span_over`). A transport that
cannot half-close (TLS) closes at once.
"""

import asyncio
import socket
import struct

from ..config.proxy_settings import DEFAULT

LINGER_SECONDS = 5.0  # after the last answer is written: read and drop until the client closes, at most this
LINGER_BYTES: int = DEFAULT["linger_bytes"]  # ... and at most this many bytes (unless linger_bytes says)
_ABORTIVE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset and frees the socket at once


def byte_bound(status: int, linger_bytes: int, declared_body: int = 0, max_body: int = 0) -> int:
    """What a lingering close after an answer of this status reads before the reset: a quarter
    of linger_bytes after a refused head (414, 431: nothing the client sends is worth reading);
    after a 413, linger_bytes and the body the client declared (Content-Length), which an upload
    client sends whole before it reads, up to 4 x max_body (an upload a few times too large is
    answered gently, a Content-Length of 2**60 is not); linger_bytes otherwise (requests
    pipelined behind a close, a chunked body past max_body)."""
    if status in (414, 431):
        return linger_bytes // 4
    if status == 413 and declared_body > 0:
        return linger_bytes + min(declared_body, 4 * max_body)
    return linger_bytes


def reset(transport: asyncio.Transport) -> None:
    """Ends the connection with a reset (the client sent past the byte bound)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _ABORTIVE)
        except (OSError, AttributeError, ValueError):
            pass  # a closed socket, or a stand-in without setsockopt: a plain abort
    transport.abort()


def lingers_after(status: int) -> bool:
    """Whether a connection's last answer, of this status, ends it with a lingering close: yes
    (the rest of the request may still come), except after a 408: a client that slow is not
    waited for (its descriptor is freed with the answer, which matters under a slow-client attack)."""
    return status != 408


def half_close(transport: asyncio.Transport) -> bool:
    """Ends the writing side once what is written is sent, and reads on; False if the
    transport is already closing or cannot half-close (then it is closed)."""
    if transport.is_closing():
        return False
    if not transport.can_write_eof():
        transport.close()
        return False
    transport.write_eof()
    transport.resume_reading()  # a paused transport would leave the client's bytes unread: the reset again
    return True


def span_over(transport: asyncio.Transport, backlog: int) -> int:
    """A linger span has passed; `backlog` is what the transport held unsent at its start. While
    that shrinks (the client is reading a large last answer), another span: returns what it holds
    now, to compare next time. Else the connection ends, and 0: a close when all that was written
    is with the kernel (which goes on sending it, and the FIN, on its own), an abort when the
    client has read nothing for a whole span."""
    left = transport.get_write_buffer_size()
    if 0 < left < backlog:
        return left
    if left:
        transport.abort()
    else:
        transport.close()
    return 0
