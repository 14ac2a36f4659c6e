"""Plugins: documented hooks, built-ins registered like third-party plugins, a real third-party plugin."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Config, parse_config
from pipeline.engine.runtime import Pipeline
from pipeline.plugin import hookspecs
from pipeline.plugin.events import Delivery
from pipeline.plugin.manager import DEFAULT_PLUGINS, load_registries, make_plugin_manager
from pipeline.plugin.registry import UnknownName
from tests.support.agents import demo_agent_command, messages, start_agent
from tests.support.daemons import write_config
from tests.support.pipelines import first_look
from tests.support.plugins import SHOUT, install_plugin
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

REPO = Path(__file__).resolve().parent.parent

HOOKS = [name for name, obj in vars(hookspecs).items()
         if callable(obj) and getattr(obj, "batonpass_spec", None) is not None]


def test_there_are_hooks() -> None:
    assert set(HOOKS) >= {"register_agents", "register_transforms"}


@pytest.mark.parametrize("name", HOOKS)
def test_every_hook_is_documented(name: str) -> None:
    func = getattr(hookspecs, name)
    doc = inspect.getdoc(func) or ""
    assert len(doc) > 40, f"hook {name} has no docstring"
    for param in inspect.signature(func).parameters:
        assert f":param {param}:" in doc, f"hook {name} does not document its argument {param!r}"


def test_builtins_come_from_the_same_hooks() -> None:
    pm = make_plugin_manager(load_external=False)
    assert [pm.get_name(p) for p in pm.get_plugins() if pm.get_name(p) in DEFAULT_PLUGINS]
    registries = load_registries(pm)
    assert {"claude", "codex", "shell", "terminal", "demo", "amp", "opencode"} <= set(
        registries.agents.names()
    )
    assert {"raw", "full-output", "template"} <= set(registries.transforms.names())
    assert registries.transforms.origin("raw") == "batonpass (built-in)"


def test_unknown_name_lists_the_known_ones() -> None:
    registries = load_registries(make_plugin_manager(load_external=False))
    with pytest.raises(UnknownName) as err:
        registries.transforms.get("rwa")
    assert "unknown transform 'rwa'; known: " in str(err.value) and "raw" in str(err.value)


def test_a_misspelt_hook_fails_loudly() -> None:
    import types

    import pluggy

    from pipeline.plugin.markers import hookimpl

    bad = types.ModuleType("bad_plugin")
    bad.register_transfroms = hookimpl(lambda register: None)
    pm = make_plugin_manager(load_external=False)
    pm.register(bad)
    with pytest.raises(pluggy.PluginValidationError):
        pm.check_pending()


@pytest.fixture(scope="module")
def shout_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shout plugin, installed in its own folder."""
    site = tmp_path_factory.mktemp("shout-site")
    install_plugin(site, "baton_shout", SHOUT, "baton-shout", "1.2.3", "shout")
    return site


def baton(*args: str, pythonpath: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": f"{pythonpath}{os.pathsep}{REPO}", **env}
    if "BATON_DISABLE_EXTERNAL_PLUGINS" not in env:
        environ.pop("BATON_DISABLE_EXTERNAL_PLUGINS", None)
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, env=environ
    )


def test_plugins_command_lists_the_third_party_plugin(shout_plugin: Path) -> None:
    result = baton("plugins", "--json", pythonpath=shout_plugin)
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)["classes"]}
    assert rows["shout"]["from"] == "baton-shout 1.2.3"
    assert rows["shout"]["kind"] == "transform"
    assert rows["raw"]["from"] == "batonpass (built-in)"
    disabled = baton("plugins", "--json", pythonpath=shout_plugin, BATON_DISABLE_EXTERNAL_PLUGINS="1")
    assert "shout" not in {r["name"] for r in json.loads(disabled.stdout)["classes"]}


def test_third_party_options_are_checked_at_load(shout_plugin: Path, tmp_path: Path) -> None:
    (tmp_path / "routes.yaml").write_text("version: 1\ntiles: {a: {pane: '%1'}, b: {pane: '%2'}}\nroutes:\n"
                                          "  - {from: a, to: b, transform: {type: shout, sufix: '?'}}\n")
    result = baton("check", "-c", str(tmp_path / "routes.yaml"), pythonpath=shout_plugin)
    assert result.returncode == 1
    assert (
        "routes.yaml:4:47: error: routes[0].transform.sufix: unknown option 'sufix' for transform 'shout'"
        in result.stderr
    )


@pytest.mark.tmux
@pytest.mark.anyio
async def test_a_hand_off_goes_through_the_third_party_transform(
        shout_plugin: Path, tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.syspath_prepend(str(shout_plugin))
    monkeypatch.delenv("BATON_DISABLE_EXTERNAL_PLUGINS", raising=False)
    registries = load_registries(make_plugin_manager())
    assert registries.transforms.origin("shout") == "baton-shout 1.2.3"
    log = tmp_path / "target.jsonl"
    shell = tmux_server.new_pane()
    target = tmux_server.new_pane(demo_agent_command(log=log, work_s=0.1))
    wait_for(lambda: "$" in tmux_server.capture(shell) and "demo❯" in tmux_server.capture(target))
    text = (
        f"version: 1\ntiles:\n  sh: {{pane: '{shell}', agent: shell}}\n  agent: "
        f"{{pane: '{target}', agent: demo}}\n"
        "routes:\n  - {from: sh, to: agent, transform: {type: shout, suffix: ' !!'}}\n"
    )
    config: Config = parse_config(text, "r.yaml", registries)[0]
    deliveries: list[Delivery] = []
    pipeline = Pipeline(config, registries, tmux_server.tmux,
                        report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        await until(lambda: first_look(pipeline, "sh"), what="the shell tile to learn its prompt")
        tmux_server.type(shell, "echo crash please")   # the plugin raises: logged, the pipeline goes on
        await until(lambda: "shout cannot handle this one" in caplog.text, what="the failure logged")
        tmux_server.type(shell, "echo quiet words")
        await until(lambda: deliveries, 20, "the hand-off of the quiet words")
        await aquiet_for(0.5, "a second hand-off")
        tg.cancel_scope.cancel()
    assert messages(log) == ["QUIET WORDS !!"]


BROKEN_IMPORT = "import baton_no_such_module  # the plugin's own dependency is missing\n"
RAISING_HOOK = """\
from pipeline.plugin.markers import hookimpl


@hookimpl
def register_agents(register):
    raise RuntimeError("the agents hook broke")
"""
LOUD_RAW = """\
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.transforms import Transform


class LoudRaw(Transform):
    name = "raw"
    summary = "a third-party raw"

    async def apply(self, data):
        return data.response.text.upper()


@hookimpl
def register_transforms(register):
    register(LoudRaw)
"""


@pytest.fixture(scope="module")
def plugin_zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four third-party plugins in one site: shout (fine), one that cannot import, one whose hook raises,
    and one that overrides the built-in ``raw`` transform."""
    site = tmp_path_factory.mktemp("zoo-site")
    install_plugin(site, "baton_shout", SHOUT, "baton-shout", "1.2.3", "shout")
    install_plugin(site, "baton_broken", BROKEN_IMPORT, "baton-broken", "0.1", "broken")
    install_plugin(site, "baton_raising", RAISING_HOOK, "baton-raising", "0.2", "raising")
    install_plugin(site, "baton_loud", LOUD_RAW, "baton-loud", "0.3", "loud")
    return site


def test_a_broken_plugin_is_reported_by_name_and_the_rest_works(plugin_zoo: Path, tmp_path: Path) -> None:
    result = baton("plugins", "--json", pythonpath=plugin_zoo)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    failed = {f["name"]: f for f in report["failed"]}
    assert set(failed) == {"broken", "raising"}
    assert failed["broken"]["from"] == "baton-broken 0.1"
    assert (
        "ModuleNotFoundError" in failed["broken"]["error"]
        and "baton_no_such_module" in failed["broken"]["error"]
    )
    assert failed["raising"]["error"] == "register_agents raised RuntimeError: the agents hook broke"
    names = {r["name"] for r in report["classes"]}
    assert {"shout", "raw", "claude", "shell"} <= names  # the others, built-in or not, still register
    assert "plugin broken (baton-broken 0.1) is left out: ModuleNotFoundError" in result.stderr
    assert "plugin raising (baton-raising 0.2) is left out" in result.stderr
    assert "Traceback" not in result.stderr

    table_view = baton("plugins", pythonpath=plugin_zoo)
    assert table_view.returncode == 0
    row = next(line for line in table_view.stdout.splitlines() if " broken " in line)
    assert row.split()[:3] == ["plugin", "broken", "baton-broken"] and "failed: ModuleNotFoundError" in row

    (tmp_path / "routes.yaml").write_text("version: 1\ntiles: {a: {pane: '%1'}, b: {pane: '%2'}}\nroutes:\n"
                                          "  - {from: a, to: b, transform: shout}\n")
    check = baton("check", "-c", str(tmp_path / "routes.yaml"), pythonpath=plugin_zoo)
    assert check.returncode == 0 and "ok" in check.stdout, check.stderr
    assert "plugin broken" in check.stderr and "Traceback" not in check.stderr


def test_an_override_of_a_built_in_is_logged_with_both_origins(plugin_zoo: Path) -> None:
    result = baton("plugins", "--json", pythonpath=plugin_zoo)
    rows = {r["name"]: r for r in json.loads(result.stdout)["classes"]}
    assert rows["raw"]["from"] == "baton-loud 0.3" and rows["raw"]["summary"] == "a third-party raw"
    assert "transform 'raw' from baton-loud 0.3 overrides the one from batonpass (built-in)" in result.stderr


def test_external_plugins_can_be_disabled_one_by_one(plugin_zoo: Path) -> None:
    result = baton("plugins", "--json", pythonpath=plugin_zoo,
                   BATON_DISABLED_PLUGINS="broken, raising,baton-loud")  # entry-point or distribution names
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["failed"] == [] and sorted(report["disabled"]) == ["broken", "loud", "raising"]
    rows = {r["name"]: r for r in report["classes"]}
    assert rows["raw"]["from"] == "batonpass (built-in)" and rows["shout"]["from"] == "baton-shout 1.2.3"
    assert result.stderr == ""
    table_view = baton("plugins", pythonpath=plugin_zoo, BATON_DISABLED_PLUGINS="shout")
    assert " shout " not in table_view.stdout
    assert "(disabled by BATON_DISABLED_PLUGINS: shout)" in table_view.stdout


@pytest.mark.tmux
def test_a_plugin_installed_while_baton_run_runs_is_used_on_reload(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34 item 2: the plugin is installed (into a folder already on the daemon's path, as pip installs
    into site-packages) after ``baton run`` started; routes.yaml then names its transform, and the reload
    uses it — where it said ``unknown transform type 'shout'`` while ``baton check`` said ok."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{REPO}")
    monkeypatch.delenv("BATON_DISABLE_EXTERNAL_PLUGINS", raising=False)
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a, b = start_agent(tmux_server, alog, "a", work_s=0.1), start_agent(tmux_server, blog, "b", work_s=0.1)
    tiles = {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}}
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket, tiles, [{"from": "a", "to": "b"}])
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    install_plugin(site, "baton_shout", SHOUT, "baton-shout", "1.2.3", "shout")
    write_config(config, tmux_server.socket, tiles, [{"from": "a", "to": "b", "transform": "shout"}])
    wait_for(lambda: daemon.stderr().count("running:") >= 2, what="the pipeline restarted on the new routes")
    tmux_server.type(a, "quiet words")
    wait_for(lambda: messages(blog) == ["QUIET WORDS!"], what="the hand-off through the new plugin")
    assert daemon.stop() == 0
    err = daemon.stderr()
    assert "unknown transform" not in err
    assert "plugin shout (baton-shout 1.2.3) installed since the start: loaded" in err


def test_a_misspelt_disabled_name_is_said_and_check_says_disabled_not_unknown(
        plugin_zoo: Path, tmp_path: Path) -> None:
    """Issue 34 item 9: a name in BATON_DISABLED_PLUGINS that names no plugin is said in one warning with the
    installed ones; a route using a disabled plugin is "disabled by BATON_DISABLED_PLUGINS", not unknown."""
    typo = baton("plugins", pythonpath=plugin_zoo, BATON_DISABLED_PLUGINS="shuot,broken,raising,loud")
    assert typo.returncode == 0
    [line] = typo.stderr.splitlines()
    assert line.endswith(" BATON_DISABLED_PLUGINS names no installed plugin: shuot (it blocks third-party "
                         "plugins; the built-ins always load); installed: baton-broken, "
                         "baton-loud, baton-raising, baton-shout, broken, loud, raising, shout")
    (tmp_path / "routes.yaml").write_text("version: 1\ntiles: {a: {pane: '%1'}, b: {pane: '%2'}}\nroutes:\n"
                                          "  - {from: a, to: b, transform: shout}\n")
    check = baton("check", "-c", str(tmp_path / "routes.yaml"), pythonpath=plugin_zoo,
                  BATON_DISABLED_PLUGINS="shout,broken,raising,loud")
    assert check.returncode == 1
    assert "routes.yaml:4:33: error: routes[0].transform: transform type 'shout' is disabled by " \
           "BATON_DISABLED_PLUGINS; known: " in check.stderr
    assert "unknown" not in check.stderr
