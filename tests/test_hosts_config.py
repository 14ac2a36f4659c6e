"""Tiles on several hosts in one routes.yaml: `host:`, `settings.bus`, and what `baton check` says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine.config import ConfigError, parse_config
from pipeline.system.logs import redact

TWO_HOSTS = """\
version: 1
tiles:
  a: {pane: "%1", agent: demo, host: laptop}
  b: {pane: "%2", agent: demo, host: gpu-box}
  c: {pane: "%3", agent: demo, host: laptop}
routes:
  - {from: a, to: b}
  - {from: a, to: c}
"""


def test_a_route_crossing_hosts_without_a_bus_is_an_error_at_its_position(monkeypatch) -> None:
    monkeypatch.delenv("BATON_BUS_URL", raising=False)
    with pytest.raises(ConfigError) as err:
        parse_config(TWO_HOSTS, "routes.yaml")
    assert [str(p) for p in err.value.problems] == [
        "routes.yaml:7:19: error: routes[0].to: route crosses hosts (laptop -> gpu-box) but no bus is "
        "configured; "
        "set settings.bus.servers or BATON_BUS_URL (nats://HOST:4222; `baton bus` starts one)"
    ]


def test_bus_from_settings_or_env(monkeypatch) -> None:
    monkeypatch.delenv("BATON_BUS_URL", raising=False)
    config, warnings = parse_config(TWO_HOSTS + "settings:\n  bus: {servers: nats://10.0.0.1:4222}\n")
    assert config.settings.bus is not None and config.settings.bus.servers == ["nats://10.0.0.1:4222"]
    assert warnings == []
    assert set(config.tiles_on("laptop")) == {"a", "c"} and set(config.tiles_on("gpu-box")) == {"b"}
    assert config.crosses_hosts("laptop") and config.crosses_hosts("gpu-box")
    assert not config.crosses_hosts("elsewhere")
    monkeypatch.setenv("BATON_BUS_URL", "nats://127.0.0.1:4222")
    config, _ = parse_config(TWO_HOSTS)
    assert config.settings.bus is None


def test_single_machine_config_is_unchanged_and_loads_no_nats_client() -> None:
    code = (
        "import sys; from pipeline.engine.config import parse_config; "
        'c, _ = parse_config(\'version: 1\\ntiles: {a: {pane: "%1"}, b: {pane: "%2"}}\\n'
        "routes: [{from: a, to: b}]\\n'); "
        "import pipeline.engine.runtime, pipeline.engine.daemon; "
        "assert not c.crosses_hosts('any'), c; assert set(c.tiles_on('any')) == {'a', 'b'}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nats', 'nkeys') or "
        "m.startswith('pipeline.bus')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_bad_bus_and_host_values_are_reported(monkeypatch) -> None:
    monkeypatch.delenv("BATON_BUS_URL", raising=False)
    text = (
        TWO_HOSTS.replace("host: gpu-box", "host: 'gpu box'")
        + "settings:\n  bus: {servers: [10.0.0.1], pasword: x}\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_config(text, "routes.yaml")
    messages = [f"{p.line}:{p.path}: {p.message}" for p in err.value.problems]
    assert "4:tiles.b.host: host 'gpu box' has spaces or a '*' or '>' in it" in messages
    assert "10:settings.bus.servers: '10.0.0.1' is not a URL; write nats://HOST:4222" in messages
    assert "10:settings.bus.pasword: unknown key 'pasword'" in messages


def test_tiles_without_host_beside_crossing_routes_are_a_warning(monkeypatch) -> None:
    monkeypatch.setenv("BATON_BUS_URL", "nats://127.0.0.1:4222")
    _, warnings = parse_config(TWO_HOSTS.replace('"%3", agent: demo, host: laptop', '"%3", agent: demo'),
                               "routes.yaml")
    assert [p.path for p in warnings] == ["tiles.c"]
    assert "every host's baton run will follow it" in warnings[0].message


def test_check_cli_exit_status(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("BATON_BUS_URL", raising=False)
    path = tmp_path / "routes.yaml"
    path.write_text(TWO_HOSTS)
    run = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "check", "-c", str(path)], capture_output=True, text=True
    )
    assert run.returncode == 1 and "routes[0].to: route crosses hosts" in run.stderr


def test_bus_credentials_in_urls_and_env_are_redacted(monkeypatch) -> None:
    monkeypatch.setenv("BATON_BUS_PASSWORD", "hunter2-secret")
    assert redact("nats://bob:pw@h:4222 and hunter2-secret") == "nats://[redacted]@h:4222 and [redacted]"


@pytest.mark.tmux
def test_status_and_up_show_only_the_tiles_of_this_host(tmux_server, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BATON_BUS_URL", "nats://127.0.0.1:1")  # named, never reached by these commands
    pane = tmux_server.new_pane()
    tmux_server.run("select-pane", "-t", pane, "-T", "a")
    path = tmp_path / "routes.yaml"
    path.write_text(TWO_HOSTS.replace('"%1"', '"title:a"'))
    base = [sys.executable, "-m", "pipeline.cli", "-L", tmux_server.socket, "-c", str(path)]
    run = subprocess.run([*base, "status", "--host", "laptop", "--json"], capture_output=True, text=True)
    assert sorted(r["tile"] for r in json.loads(run.stdout)) == ["a", "c"], run.stderr
    run = subprocess.run([*base, "status", "--host", "gpu-box", "--json"], capture_output=True, text=True)
    assert [r["tile"] for r in json.loads(run.stdout)] == ["b"]
    run = subprocess.run([*base, "up", "--host", "nowhere"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "", run.stderr
