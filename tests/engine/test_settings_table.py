"""The settings table (leastload.engine.settings) is what the vserver's settings are.

The constructor's explicit keywords and their defaults, the names set()
accepts, the properties' docs, show()'s hash line, the config's vserver
options and the proxy's setting flags all agree with it, on both engines.
"""
import inspect

import pytest

from leastload.engine import settings as _settings
from leastload.engine.settings import SETTABLE, SETTING, SETTINGS
from leastload.engine.policy import VirtualServerFacade


def test_rows_are_distinct_and_documented():
    names = [s.name for s in SETTINGS]
    assert len(set(names)) == len(names)
    assert all(s.doc and "\n" not in s.doc for s in SETTINGS)
    # the constructor's only: name, and where the vserver's state lives
    assert SETTABLE == tuple(n for n in names if n not in ("name", "shared", "shared_capacity"))


def test_signature_keywords_are_the_table(impl):
    sig = inspect.signature(impl.VirtualServer.__init__)
    params = {p.name: p.default for p in list(sig.parameters.values())[1:] if p.name != "clock"}
    assert list(params) == [s.name for s in SETTINGS]  # the same names, in the table's order
    for s in SETTINGS:
        assert params[s.name] == s.default and type(params[s.name]) is type(s.default), s.name


def test_defaults_read_back(impl):
    vs = impl.VirtualServer()
    for s in SETTINGS:
        assert getattr(vs, s.name) == s.default, s.name


def test_set_accepts_exactly_the_settable_names(impl):
    vs = impl.VirtualServer()
    for name in SETTABLE:
        vs.set(**{name: getattr(vs, name)})  # every table name is accepted ...
    for name in ("name", "clock", "bogus", "hash_length"):  # ... and nothing else
        with pytest.raises(TypeError, match=f"^set\\(\\) got an unknown setting '{name}'$"):
            vs.set(**{name: 1})


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_a_bad_value_names_the_setting(impl, setting):
    bad = object()
    with pytest.raises(TypeError) as made:
        impl.VirtualServer(**{setting.name: bad})
    assert str(made.value).startswith(setting.name + " must be")
    with pytest.raises(TypeError) as checked:
        setting.check(bad)
    assert str(checked.value) == str(made.value)
    if setting.settable:
        vs = impl.VirtualServer()
        with pytest.raises(TypeError) as changed:
            vs.set(**{setting.name: bad})
        assert str(changed.value) == str(made.value)


def test_the_rate_is_checked_against_the_unit(impl):
    with pytest.raises(ValueError, match=r"^new_service_request must be an int in 0\.\.100 \(PERCENT\), got 150$"):
        impl.VirtualServer(new_service_request=150, new_service_request_unit="PERCENT")
    vs = impl.VirtualServer(new_service_request=150)
    with pytest.raises(ValueError, match=r"^new_service_request must be an int in 0\.\.100 \(PERCENT\), got 150$"):
        vs.set(new_service_request_unit="PERCENT")
    assert vs.new_service_request_unit == "PER_SECOND"


def test_property_docs_are_the_table():
    props = [s for s in SETTINGS if isinstance(VirtualServerFacade.__dict__.get(s.name), property)]
    assert props  # the facade's settings
    for s in props:
        assert VirtualServerFacade.__dict__[s.name].__doc__ == s.doc
    doc = " ".join((VirtualServerFacade.set.__doc__ or "").split())
    assert ", ".join(SETTABLE) in doc


def test_show_prints_the_method_specific_rows(impl):
    hashing = [s.name for s in SETTINGS if "URLHASH" in s.methods]
    shown = impl.VirtualServer("URLHASH", hashlength=7).show().hashing
    assert shown is not None and [part.split()[0] for part in shown.split(", ")] == hashing
    assert "hashlength 7" in shown
    assert impl.VirtualServer("ROUNDROBIN").show().hashing is None
    assert impl.VirtualServer("PEAKEWMA", peakewma_decay=3).show().peakewma_decay == 3.0
    assert impl.VirtualServer("ROUNDROBIN").show().peakewma_decay is None


def test_the_config_options_are_the_table():
    from leastload.config import netscaler
    assert netscaler._VSERVER_OPTIONS == tuple(s.netscaler for s in SETTINGS if s.netscaler)


def test_the_proxy_flags_are_the_table():
    from leastload.proxy import _cli
    actions = {a.dest: a for a in _cli._parser()._actions}
    own_default = {"outlier_failures": 5, "hashlength": None, "netmask": None, "v6netmasklen": None,
                   "hash_seed": None}  # the proxy ejects by default; a hash flag not given: the engine's
    for s in SETTINGS:
        if s.flag is None:
            continue
        action = actions[_settings.flag_dest(s)]
        assert action.option_strings == [s.flag]
        assert action.default == own_default.get(s.name, s.default), s.name
        if s.flag_help is not None:
            default = own_default.get(s.name, s.default)
            assert action.help == s.flag_help.format(default=s.default if default is None else default)
    assert set(_cli.FILE_FLAGS) == {s.flag for s in SETTINGS if s.netscaler}


def test_the_docs_table_is_the_table():
    """docs/api.md's settings table: one row per setting, in order, saying what the table says."""
    import pathlib
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("### Settings", 1)[1].split("::: ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    want = [f"| `{s.name}` | `{s.default!r}` | {s.doc} | {'yes' if s.settable else 'no'} | "
            f"{'`-' + s.netscaler + '`' if s.netscaler else ''} | {'`' + s.flag + '`' if s.flag else ''} |"
            for s in SETTINGS]
    assert rows == want
