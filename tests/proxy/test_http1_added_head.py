"""ResponseReader.add_to_head (the proxy's --backend-header line), on both HTTP/1.1 layers
(conftest.py's http1 fixture: the compiled module and the pure _http1.py): the line is in every
final response head, whichever path the response takes, never in a 1xx; without it the bytes
pass as they came."""

import pytest

PLAIN = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
EARLY = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n" + PLAIN
LINE = b"X-Served-By: app1\r\n"


def run(http1, data, line=None, pieces=1, **start):
    reader = http1.ResponseReader(http1.Limits())
    if line is not None:
        reader.add_to_head(line)
    out = []
    for _ in range(2):  # two responses on one connection: the line stays for the second
        reader.start(start.get("head_only", False), start.get("http10", False), start.get("keep_alive", True))
        step = max(1, len(data) // pieces)
        for i in range(0, len(data), step):
            out += reader.feed(data[i:i + step])
        assert reader.complete
    return b"".join(bytes(p) for p in out)


@pytest.mark.parametrize("pieces", [1, 7])
def test_the_line_is_in_every_final_head(http1, pieces):
    for data in (PLAIN, CHUNKED):
        out = run(http1, data, LINE, pieces)
        heads = [part.split(b"\r\n\r\n")[0] for part in out.split(b"HTTP/1.1 ")[1:]]
        assert len(heads) == 2 and all(LINE.rstrip() in h.split(b"\r\n") for h in heads), out
    out = run(http1, EARLY, LINE, pieces)
    assert out.count(LINE) == 2 and out.count(b"Link: </a.css>\r\n\r\n") == 2  # not in the 103s


def test_without_it_the_response_passes_as_it_came(http1):
    assert run(http1, PLAIN) == PLAIN * 2
