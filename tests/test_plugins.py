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
from tests.conftest import TmuxServer, demo_agent_command, messages, wait_for

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


SHOUT = '''\
"""A third-party batonpass plugin, as someone else would publish it."""
from pydantic import BaseModel, ConfigDict
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.transforms import Transform


class Shout(Transform):
    name = "shout"
    summary = "upper-cases the answer"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        suffix: str = "!"

    async def apply(self, data):
        if "crash" in data.response.text:
            raise RuntimeError("shout cannot handle this one")
        return data.response.text.upper() + self.options.suffix


@hookimpl
def register_transforms(register):
    register(Shout)
'''


@pytest.fixture(scope="module")
def shout_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real installed distribution with an entry point — the layout pip leaves in site-packages (the
    module plus its ``.dist-info`` with METADATA, entry_points.txt and RECORD) — in its own folder."""
    site = tmp_path_factory.mktemp("shout-site")
    (site / "baton_shout.py").write_text(SHOUT)
    info = site / "baton_shout-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: baton-shout\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[batonpass]\nshout = baton_shout\n")
    (info / "top_level.txt").write_text("baton_shout\n")
    (info / "RECORD").write_text("baton_shout.py,,\nbaton_shout-1.2.3.dist-info/METADATA,,\n"
                                 "baton_shout-1.2.3.dist-info/entry_points.txt,,\nbaton_shout-1.2.3.dist-info/RECORD,,\n")
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
        shout_plugin: Path, tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
        await anyio.sleep(0.5)
        tmux_server.type(shell, "echo crash please")   # the plugin raises: logged, the pipeline goes on
        await anyio.sleep(1.0)
        tmux_server.type(shell, "echo quiet words")
        with anyio.fail_after(20):
            while not deliveries:
                await anyio.sleep(0.05)
        await anyio.sleep(0.5)
        tg.cancel_scope.cancel()
    assert messages(log) == ["QUIET WORDS !!"]
