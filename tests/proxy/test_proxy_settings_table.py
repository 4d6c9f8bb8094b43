"""The proxy's settings table (leastload.config.proxy_settings) against each surface that derives
from it: Proxy's keywords and checks, the flags, the TOML form's [proxy] keys, the HTTP/1.1
limits, the fan-out's and the linger's defaults, and the generated docs page."""

import inspect
import pathlib

import pytest

from leastload.config import PROXY_KEYS, ConfigError, parse_toml
from leastload.config import proxy_settings
from leastload.config.proxy_settings import SETTINGS, SETTING
from leastload.net import upstream
from leastload.proxy import Proxy, _cli, _fanout, _health, _http1, _linger
from leastload.proxy._accesslog import FORMATS

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "proxy-settings.md"
BACKENDS = ["a=127.0.0.1:9"]


def _flag_action(flag):
    for action in _cli._parser()._actions:
        if flag in action.option_strings:
            return action
    raise AssertionError(f"no flag {flag}")


def _parse(*argv):
    return _cli._parser().parse_args(["--backend", BACKENDS[0], *argv])


def test_the_table_names_each_setting_once_and_its_kinds_are_known():
    assert len(SETTING) == len(SETTINGS)
    for s in SETTINGS:
        assert s.kind in ("int", "seconds", "bool", "choice", "path", "text", "address", "files", "header"), s
        assert s.group in proxy_settings.GROUPS, s
        assert (s.low is not None and s.high is not None) == (s.kind == "int"), s
        assert bool(s.choices) == (s.kind == "choice"), s
        if s.default is not None:
            assert proxy_settings.check(s.name, s.default) == s.default, s


def test_proxy_keywords_default_to_the_table():
    parameters = inspect.signature(Proxy.__init__).parameters
    for s in SETTINGS:
        if s.keyword:
            assert parameters[s.name].default == s.default, s.name
    assert "workers" not in parameters and "log_level" not in parameters  # the command's own


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.keyword and s.kind == "int"], ids=lambda s: s.name)
def test_proxy_takes_an_int_setting_at_its_bounds_and_refuses_it_past_them(setting):
    for value in (setting.low, setting.high):
        if setting.name == "overload_connections":  # also at most max_connections
            Proxy(BACKENDS, max_connections=1 << 20, **{setting.name: value})
        else:
            Proxy(BACKENDS, **{setting.name: value})
    for value in (setting.low - 1, setting.high + 1):
        with pytest.raises(ValueError, match=rf"^{setting.name} must be an int in {setting.low}\.\.{setting.high}, "
                                             rf"got {value}$"):
            Proxy(BACKENDS, **{setting.name: value})
    with pytest.raises(TypeError, match=rf"^{setting.name} must be"):
        Proxy(BACKENDS, **{setting.name: True})


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.keyword and s.kind in ("seconds", "bool", "choice",
                                                                                       "path")],
                         ids=lambda s: s.name)
def test_proxy_refuses_what_the_table_refuses(setting):
    bad = {"seconds": 0, "bool": 1, "choice": "nonsense", "path": "no-slash"}[setting.kind]
    with pytest.raises((TypeError, ValueError), match=rf"^{setting.name} must be .*, got "):
        Proxy(BACKENDS, **{setting.name: bad})
    if setting.kind == "seconds":
        Proxy(BACKENDS, **{setting.name: 86400})  # the bound itself is taken
        with pytest.raises(ValueError, match=rf"^{setting.name} must be a number of seconds in \(0, 86400\]"):
            Proxy(BACKENDS, **{setting.name: 86400.5})


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.flag is not None], ids=lambda s: s.name)
def test_each_flag_is_its_row(setting):
    action = _flag_action(setting.flag)
    assert action.dest == setting.name
    # a repeated flag's default is None, and not given, the setting is the table's (_proxy_settings)
    assert action.default == (None if setting.kind == "files" else setting.default)
    assert action.help == (setting.help.format(default=setting.default) if setting.default is not None
                           else setting.help)
    if setting.kind == "choice":
        assert tuple(action.choices) == setting.choices
    if setting.kind == "bool":
        assert getattr(_parse(setting.flag), setting.name) is (not setting.default)
    if setting.kind == "int":
        for value in (setting.low, setting.high):
            assert getattr(_parse(setting.flag, str(value)), setting.name) == value
        for value in (setting.low - 1, setting.high + 1):
            with pytest.raises(SystemExit):
                _parse(setting.flag, str(value))


def test_the_flags_give_proxy_what_they_say():
    args = _parse("--retries", "100", "--max-body", "0", "--outlier-keep-on-health", "--xff", "replace",
                  "--header-timeout", "0.5")
    args.admin_token = None
    settings = _cli._proxy_settings(args)
    assert (settings["retries"], settings["max_body"], settings["health_ends_ejection"], settings["xff"],
            settings["header_timeout"]) == (100, 0, False, "replace", 0.5)
    proxy = _cli._proxy_from(args)
    assert (proxy.retries, proxy.max_body, proxy.health_ends_ejection) == (100, 0, False)


def test_the_toml_keys_are_the_table_rows_with_a_toml_key_and_check_the_same_bounds():
    assert PROXY_KEYS == tuple(s.toml for s in SETTINGS if s.toml is not None)
    assert set(_cli.PROXY_TABLE_FLAGS) == set(PROXY_KEYS)
    for s in SETTINGS:
        if s.toml is None or s.kind != "int":
            continue
        for value in (s.low, s.high):
            assert parse_toml(f"[proxy]\n{s.toml} = {value}\n", "t.toml").proxy == {s.toml: value}
        for value in (s.low - 1, s.high + 1):
            with pytest.raises(ConfigError, match=rf"proxy: {s.toml}: must be an integer in {s.low}\.\.{s.high}"):
                parse_toml(f"[proxy]\n{s.toml} = {value}\n", "t.toml")


def test_the_edge_settings_from_flags_and_toml():
    args = _parse("--tls-cert", "a.crt", "--tls-key", "a.key", "--tls-cert", "b.crt", "--tls-key", "b.key",
                  "--accept-proxy", "--backend-header", "X-Served-By")
    args.admin_token = None
    settings = _cli._proxy_settings(args)
    assert (settings["tls_cert"], settings["tls_key"]) == (["a.crt", "b.crt"], ["a.key", "b.key"])
    assert settings["accept_proxy"] is True and settings["backend_header"] == "X-Served-By"
    args = _parse()
    args.admin_token = None
    settings = _cli._proxy_settings(args)
    assert (settings["tls_cert"], settings["tls_key"], settings["accept_proxy"], settings["backend_header"]) == \
        ((), (), False, None)
    with pytest.raises(SystemExit):
        _parse("--backend-header", "X Bad")
    config = parse_toml('[proxy]\ntls_cert = ["a.crt"]\ntls_key = "a.key"\naccept_proxy = true\n'
                        'backend_header = "X-Served-By"\n', "t.toml")
    assert config.proxy == {"tls_cert": ["a.crt"], "tls_key": ["a.key"], "accept_proxy": True,
                            "backend_header": "X-Served-By"}
    for bad in ('tls_cert = []', 'tls_cert = [1]', 'backend_header = "a b"', 'accept_proxy = 1'):
        with pytest.raises(ConfigError, match=r"proxy: (tls_cert|backend_header|accept_proxy): must be"):
            parse_toml(f"[proxy]\n{bad}\n", "t.toml")


def test_proxy_refuses_bad_edge_keywords_naming_them():
    with pytest.raises(TypeError, match=r"^tls_cert must be a list of file names"):
        Proxy(BACKENDS, tls_cert="a.crt", tls_key="a.key")
    with pytest.raises(ValueError, match=r"^tls_key must be as many keys as certificates \(tls_cert has 1, "
                                         r"tls_key 0\)"):
        Proxy(BACKENDS, tls_cert=["a.crt"])
    with pytest.raises(ValueError, match=r"^backend_header must be a header name"):
        Proxy(BACKENDS, backend_header="X: y")
    with pytest.raises(TypeError, match=r"^accept_proxy must be True or False"):
        Proxy(BACKENDS, accept_proxy="yes")
    proxy = Proxy(BACKENDS, accept_proxy=True)
    assert proxy.edge is not None and proxy.edge.accept_proxy and proxy.edge.tls is None
    assert Proxy(BACKENDS).edge is None  # without TLS and the PROXY protocol: no edge on the accept path


def test_retries_has_one_bound_everywhere():
    retries = SETTING["retries"]
    assert retries.high == upstream.MAX_RETRIES
    assert parse_toml(f"[proxy]\nretries = {retries.high}\n", "t.toml").proxy == {"retries": retries.high}
    assert Proxy(BACKENDS, retries=retries.high).retries == retries.high


def test_the_lower_layers_take_their_defaults_from_the_table():
    limits = _http1.Limits()
    for name in ("max_request_line", "max_header_size", "max_headers", "max_body"):
        assert getattr(limits, name) == SETTING[name].default
    assert _fanout.HEADER_TIMEOUT == SETTING["header_timeout"].default
    assert _linger.LINGER_BYTES == SETTING["linger_bytes"].default
    assert _health.KINDS == SETTING["health_check"].choices
    assert FORMATS == SETTING["log_format"].choices


def test_the_docs_page_is_what_the_table_generates():
    assert DOCS.read_text(encoding="utf-8") == proxy_settings.markdown_table(), \
        "regenerate: python -m leastload.config.proxy_settings > docs/proxy-settings.md"
