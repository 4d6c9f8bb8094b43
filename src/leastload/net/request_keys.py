"""Each request's key for the hash methods, as the proxy and the httpx transport derive it.

A hash method picks by a value of the request (`vs.acquire(key=...)`); which
value depends on the method, as on the appliance:

    SOURCEIPHASH       the client's IP address
    DESTINATIONIPHASH  the address the client sent the request to
    SRCIPDESTIPHASH    (client IP, destination IP)
    SRCIPSRCPORTHASH   (client IP, client port)
    URLHASH            the request target's path and query, as sent (bytes)
    DOMAINHASH         the host name (absolute-form target, else the Host header), without its port;
                       none: None, and the engine picks as LEASTCONNECTION does
    CALLIDHASH         the Call-ID header (or its compact form `i`); none: MissingKey
    TOKEN              the header the operator names (token_header); none: the client's IP, as text

`KeyRule.key(method, request)` reads only what the method needs from a
`RequestView` (the proxy's client connection, or the httpx transport's view of
an httpx.Request); the other methods get None, which they ignore.
"""
import ipaddress
import re
from typing import Callable, Dict, Optional, Protocol, Tuple, Union

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

# RFC 9110 5.1: a header name is a token
_TOKEN_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
CALL_ID_HEADERS = (b"call-id", b"i")  # SIP's compact form of Call-ID is "i"


class MissingKey(ValueError):
    """The request lacks the value its method hashes (CALLIDHASH without a Call-ID header)."""


class RequestView(Protocol):
    """What a key is read from. Addresses are ipaddress objects (None: unknown)."""

    @property
    def source_ip(self) -> Optional[Address]: ...
    @property
    def source_port(self) -> Optional[int]: ...
    @property
    def destination_ip(self) -> Optional[Address]: ...
    @property
    def target(self) -> bytes: ...          # the request target as sent: origin or absolute form
    def header(self, name: bytes) -> Optional[bytes]: ...  # the first header of that lowercase name


def check_token_header(value: object) -> Optional[bytes]:
    """The TOKEN method's header name (None: none given) as lowercase bytes; ValueError naming it otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or not _TOKEN_NAME.match(value):
        raise ValueError(f"token_header must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~), "
                         f"got {value!r}")
    return value.lower().encode("ascii")


def split_target(target: bytes) -> Tuple[bytes, Optional[bytes]]:
    """(path and query, authority or None) of a request target.

    `/a?b` -> (`/a?b`, None); `http://h:81/a?b` -> (`/a?b`, `h:81`); `http://h` -> (`/`, `h`)."""
    if target.startswith(b"/") or b"://" not in target:
        return target, None
    rest = target.split(b"://", 1)[1]
    cut = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0), default=len(rest))
    path = rest[cut:]
    if not path.startswith(b"/"):
        path = b"/" + path
    authority = rest[:cut].rpartition(b"@")[2]  # without any user info
    return path, authority


def host_name(authority: Optional[bytes]) -> Optional[bytes]:
    """A Host header's (or an authority's) name without its port; an IPv6 literal without brackets.
    None or nothing left: None."""
    if not authority:
        return None
    authority = authority.strip()
    if authority.startswith(b"["):
        name = authority[1:authority.find(b"]")] if b"]" in authority else authority[1:]
    else:
        name, colon, port = authority.rpartition(b":")
        if not colon or not port.isdigit() and port:
            name = authority
    return name or None


class KeyRule:
    """Derives each request's key for the vserver's method (read per request, so a
    method changed at run time with `vs.set(method=...)` is followed)."""

    def __init__(self, token_header: Optional[str] = None) -> None:
        self.token_header = check_token_header(token_header)

    def key(self, method: str, request: RequestView) -> object:
        derive = _DERIVE.get(method)
        return None if derive is None else derive(self, request)

    # ---- one per hash method ------------------------------------------------------

    def _source(self, r: RequestView) -> object:
        return _need(r.source_ip, "SOURCEIPHASH", "the client's address")

    def _destination(self, r: RequestView) -> object:
        return _need(r.destination_ip, "DESTINATIONIPHASH", "the destination address")

    def _source_and_destination(self, r: RequestView) -> object:
        return (_need(r.source_ip, "SRCIPDESTIPHASH", "the client's address"),
                _need(r.destination_ip, "SRCIPDESTIPHASH", "the destination address"))

    def _source_and_port(self, r: RequestView) -> object:
        return (_need(r.source_ip, "SRCIPSRCPORTHASH", "the client's address"),
                _need(r.source_port, "SRCIPSRCPORTHASH", "the client's port"))

    def _url(self, r: RequestView) -> object:
        return split_target(r.target)[0]

    def _domain(self, r: RequestView) -> object:
        authority = split_target(r.target)[1]
        return host_name(authority if authority is not None else r.header(b"host"))

    def _call_id(self, r: RequestView) -> object:
        for name in CALL_ID_HEADERS:
            value = r.header(name)
            if value and value.strip():
                return value.strip()
        raise MissingKey("CALLIDHASH picks by the request's Call-ID header, and the request has none")

    def _token(self, r: RequestView) -> object:
        if self.token_header is not None:
            value = r.header(self.token_header)
            if value and value.strip():
                return value.strip()
        source = r.source_ip
        if source is None:
            raise MissingKey("TOKEN: the request has no token header and its client's address is unknown")
        return str(source)  # no token: the client's address stands in, so its requests still stay together


def _need(value: object, method: str, what: str) -> object:
    if value is None:
        raise MissingKey(f"{method} picks by {what}, which is unknown for this request")
    return value


_DERIVE: Dict[str, Callable[[KeyRule, RequestView], object]] = {
    "SOURCEIPHASH": KeyRule._source,
    "DESTINATIONIPHASH": KeyRule._destination,
    "SRCIPDESTIPHASH": KeyRule._source_and_destination,
    "SRCIPSRCPORTHASH": KeyRule._source_and_port,
    "URLHASH": KeyRule._url,
    "DOMAINHASH": KeyRule._domain,
    "CALLIDHASH": KeyRule._call_id,
    "TOKEN": KeyRule._token,
}
KEYED_METHODS = frozenset(_DERIVE)  # the methods whose picks need a key (KeyRule.key is None for the rest)


def ip_or_none(text: object) -> Optional[Address]:
    """An address from a socket's name (a scope id dropped), None for anything else (a Unix socket)."""
    if not isinstance(text, str):
        return None
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
