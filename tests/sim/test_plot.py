"""`simulate --plot` and the README's figure: the data behind the figure equals
the simulated counts, and the file is a valid PNG of sensible size."""
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

from leastload.sim.plot import SERIES_KEY, Panel, figure  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SLOWSTART = str(ROOT / "examples" / "slowstart.conf")


def png_chunks(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    return chunks


def png_text(chunks, key):
    for kind, body in chunks:
        if kind == b"tEXt":
            k, _, v = body.partition(b"\0")
            if k.decode("latin-1") == key:
                return v.decode("latin-1")
        elif kind == b"iTXt":
            k, _, rest = body.partition(b"\0")
            compressed, _method = rest[0], rest[1]
            _lang, _, rest = rest[2:].partition(b"\0")
            _translated, _, text = rest.partition(b"\0")
            if k.decode("latin-1") == key:
                return (zlib.decompress(text) if compressed else text).decode("utf-8")
        elif kind == b"zTXt":
            k, _, rest = body.partition(b"\0")
            if k.decode("latin-1") == key:
                return zlib.decompress(rest[1:]).decode("latin-1")
    raise AssertionError(f"no {key!r} text chunk")


def check_png(path):
    data = Path(path).read_bytes()
    chunks = png_chunks(data)
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert 600 <= width <= 2000 and 250 <= height <= 2000, (width, height)
    assert 10_000 < len(data) < 1_000_000
    return json.loads(png_text(chunks, SERIES_KEY))


def test_simulate_plot_draws_the_simulated_counts(tmp_path):
    result = subprocess.run([sys.executable, "-m", "leastload", "simulate", SLOWSTART, "--plot", "out.png",
                             "--json", "out.json"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    (panel,) = check_png(tmp_path / "out.png")
    (vs,) = json.loads((tmp_path / "out.json").read_text())["vservers"]
    assert panel["series"] == vs["requests_per_second"] and panel["start"] == vs["start"] == 0
    series = panel["series"]
    assert list(series) == [f"Service{i}" for i in range(1, 6)]
    assert series["Service5"][::10] == [0, 4, 8, 12, 16, 20]  # the vendor's figure
    assert series["Service1"][::10] == [25, 24, 23, 22, 21, 20]
    assert all(sum(row) == 100 for row in zip(*series.values()))


def test_the_figure_lines_are_the_series():
    series = {"A": [1, 2, 3], "B": [1, 2, 3], "C": [0, 5, 1]}
    fig = figure([Panel("p", 10, series, ((11.0, "bind C"),))])
    (ax,) = fig.axes
    drawn = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()
             if not line.get_label().startswith("_")}
    # equal series share one line, labelled with every name
    assert drawn == {"A, B": ([10, 11, 12], [1, 2, 3]), "C": ([10, 11, 12], [0, 5, 1])}
    event_lines = [line for line in ax.get_lines() if line.get_label().startswith("_")]
    assert [list(line.get_xdata()) for line in event_lines] == [[11.0, 11.0]]


def test_the_readme_figure_is_the_automated_scenario():
    """docs/images/slow-start-automated.png (made by `leastload demo --plot`) holds the
    same counts as simulating examples/slowstart.conf: the committed figure is not stale."""
    from leastload import reference
    from leastload.config import build, load
    from leastload.cli.demo import AUTOMATED_SECONDS, automated
    from leastload.sim.simulate import simulate

    (panel,) = check_png(ROOT / "docs" / "images" / "slow-start-automated.png")
    sim = automated(reference)
    assert panel["series"] == {n: [int(c) for c in sim.of(n)] for n in sim.services}
    clock = reference.ManualClock(0.0)
    vs = build(load(SLOWSTART), clock, reference)["vs-slowstart"]
    from_config = simulate(vs, clock, rate=100, duration=AUTOMATED_SECONDS)
    assert from_config.counts.tolist() == sim.counts.tolist()


def test_one_panel_per_vserver_with_its_events(tmp_path):
    conf = str(ROOT / "examples" / "two-vservers.toml")
    result = subprocess.run([sys.executable, "-m", "leastload", "simulate", conf, "--workload", "poisson",
                             "--rate", "200", "--duration", "12", "--event", "4:down:fast", "--event", "8:up:fast",
                             "--plot", "out.png", "--json", "out.json"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    panels = check_png(tmp_path / "out.png")
    vservers = json.loads((tmp_path / "out.json").read_text())["vservers"]
    assert [p["title"] for p in panels] == ["lb vserver web (LEASTRESPONSETIME)", "lb vserver api (LEASTCONNECTION)"]
    for panel, vs in zip(panels, vservers):
        assert panel["series"] == vs["requests_per_second"]
        assert all(c == 0 for c in panel["series"]["fast"][4:8])  # DOWN from 4 s to 8 s
        assert sum(panel["series"]["fast"][:4]) > 0 and sum(panel["series"]["fast"][8:]) > 0
    result = subprocess.run([sys.executable, "-m", "leastload", "simulate", conf, "--vserver", "api",
                             "--duration", "3", "--json", "api.json"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [v["name"] for v in json.loads((tmp_path / "api.json").read_text())["vservers"]] == ["api"]
