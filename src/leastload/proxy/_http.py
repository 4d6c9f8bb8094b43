"""Answers the proxy writes itself (errors)."""

_REASONS = {400: b"Bad Request", 413: b"Content Too Large", 431: b"Request Header Fields Too Large",
            501: b"Not Implemented", 502: b"Bad Gateway", 503: b"Service Unavailable", 504: b"Gateway Timeout"}


def error_response(status: int, text: str, close: bool) -> bytes:
    body = text.encode() + b"\n"
    return b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status, _REASONS[status], len(body), b"Connection: close\r\n" if close else b"", body)
