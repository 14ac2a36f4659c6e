"""docs/adapters.md, run: its agent, adapter and pyproject.toml are read out of the page, built into a wheel,
pip-installed into a folder of their own and used by `baton run` on a real tmux server.

The wheel is written here (PEP 427: the module and a ``.dist-info`` with METADATA, WHEEL, entry_points.txt
and a hashed RECORD, from the page's pyproject.toml), because a PEP 517 build needs the ``wheel`` package or a
newer setuptools than the test environment may have; what is installed is an ordinary wheel all the same.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import anyio
import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.watch import FileWatcher, Subscription
from pipeline.plugin import AgentAdapter, Completion, Emit, TileContext
from pipeline.plugin.screen import ScreenAdapter
from tests.support.agents import messages, start_agent
from tests.support.cli import json_lines
from tests.support.daemons import wait_followed, write_config
from tests.support.paths import REPO
from tests.support.polling import until, wait_for
from tests.support.tmux import TmuxServer

GUIDE = REPO / "docs" / "adapters.md"


def guide_files(marker: str = "file") -> dict[str, str]:
    """The files of one of the guide's packages: each fenced block right after a ``<!-- MARKER: NAME -->``
    line (``file``: logbot's, ``screen-file``: chatty's, ``box-file``: boxbot's)."""
    found = re.findall(rf"<!-- {marker}: (\S+) -->\n```\w*\n(.*?)^```", GUIDE.read_text(), re.S | re.M)
    return dict(found)


def build_wheel(src: Path, out: Path) -> Path:
    """A wheel of the py-modules and entry points ``src/pyproject.toml`` declares."""
    meta = tomllib.loads((src / "pyproject.toml").read_text())
    project = meta["project"]
    dist = project["name"].replace("-", "_")
    info = f"{dist}-{project['version']}.dist-info"
    files = {f"{m}.py": (src / f"{m}.py").read_bytes() for m in meta["tool"]["setuptools"]["py-modules"]}
    requires = "".join(f"Requires-Dist: {d}\n" for d in project.get("dependencies", []))
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
        f"Summary: {project.get('description', '')}\n{requires}"
    ).encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: batonpass-tests\nRoot-Is-Purelib: true\n" \
        b"Tag: py3-none-any\n"
    files[f"{info}/entry_points.txt"] = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
        for group, points in project["entry-points"].items()
    ).encode()

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{name},sha256={digest(data)},{len(data)}\n" for name, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheel = out / f"{dist}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel


def baton(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          check=True).stdout


#: the `baton` console script pip made for this environment (the real entry point)
BATON = Path(sys.executable).parent / "baton"


def baton_script(*args: str) -> subprocess.CompletedProcess[str]:
    command = [str(BATON)] if BATON.exists() else [sys.executable, "-m", "pipeline.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60)


def install_guide_package(tmp: Path, marker: str) -> tuple[Path, Path]:
    """One of the guide's packages in a folder, built into a wheel and pip-installed into a folder of its
    own: (the source folder, the folder to put on PYTHONPATH)."""
    src, site = tmp / marker, tmp / "site"
    src.mkdir()
    for name, text in guide_files(marker).items():
        (src / name).write_text(text)
    wheel = build_wheel(src, tmp)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(site), str(wheel)], check=True)
    return src, site


def x_through_bot_to_b(tmux_server: TmuxServer, tmp_path: Path, daemon_factory: Any, bot: str,
                       agent: str) -> tuple[str, Path, Path, Any]:
    """Two demo agents around the guide's agent in pane ``bot``: x's answers go to bot, bot's to b (as
    "AGENT says: …"), under a started ``baton run`` that follows x and bot: (x's pane, b's log, the
    routes.yaml, the daemon)."""
    x = start_agent(tmux_server, tmp_path / "x.jsonl", "x", work_s=0.05)
    blog = tmp_path / "b.jsonl"
    b = start_agent(tmux_server, blog, "b", work_s=0.05)
    config = write_config(
        tmp_path / "routes.yaml", tmux_server.socket,
        {"x": {"pane": x, "agent": "demo"}, "bot": {"pane": bot, "agent": agent},
         "b": {"pane": b, "agent": "demo"}},
        [{"from": "x", "to": "bot"},  # the guide's agent as a target
         {"from": "bot", "to": "b",
          "transform": {"type": "template", "template": f"{agent} says: {{response}}"}}],
    )
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "x")
    wait_followed(daemon, "bot")
    return x, blog, config, daemon


@pytest.fixture(scope="module")
def guide_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """logbot's package, installed."""
    return install_guide_package(tmp_path_factory.mktemp("guide"), "file")


@pytest.fixture(scope="module")
def chatty_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """chatty's package (the screen-only adapter), installed."""
    return install_guide_package(tmp_path_factory.mktemp("chatty"), "screen-file")


def test_the_guide_has_its_three_files() -> None:
    assert set(guide_files()) == {"logbot", "baton_logbot.py", "pyproject.toml"}
    assert set(guide_files("screen-file")) == {"chatty", "baton_chatty.py", "pyproject.toml"}
    assert set(guide_files("box-file")) == {"boxbot", "baton_boxbot.py", "pyproject.toml"}


@pytest.mark.parametrize("module", ["baton_logbot.py", "baton_chatty.py", "baton_boxbot.py"])
def test_the_guides_adapters_import_nothing_of_batonpass_but_the_plugin_api(module: str) -> None:
    source = {**guide_files(), **guide_files("screen-file"), **guide_files("box-file")}[module]
    imported = {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names}
    ours = {m for m in imported if m.split(".")[0] in ("pipeline", "plugins")}
    assert ours and all(m == "pipeline.plugin" or m.startswith("pipeline.plugin.") for m in ours), ours


def test_the_contracts_required_members_fit_on_one_screen() -> None:
    """Three methods (and ``name``, ``process_names``); an adapter that leaves one out is refused."""
    assert AgentAdapter.__abstractmethods__ == {"follow", "response", "target_state"}

    class Incomplete(AgentAdapter):
        name = "incomplete"

        async def follow(self, emit: Emit) -> None: ...

    with pytest.raises(TypeError, match="response"):
        Incomplete(None)  # type: ignore[abstract,arg-type]


def _public(cls: type) -> set[str]:
    """The public members a class (and the bases it brings from batonpass's plugin API) defines."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("pipeline.plugin") and klass is not object:
            names |= {n for n in vars(klass) if not n.startswith("_")}
            names |= {n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_")}
    return names


@pytest.mark.parametrize("contract", [AgentAdapter, TileContext, ScreenAdapter], ids=lambda c: c.__name__)
def test_every_public_member_of_the_contract_is_documented(contract: type) -> None:
    """As datasette does for its hooks: a member the guide does not name is a member nobody can use."""
    guide = GUIDE.read_text()
    section = guide[guide.index("## The contract, member by member"):]
    missing = sorted(n for n in _public(contract) if f"`{n}`" not in section and f"`{n}(" not in section)
    assert missing == [], f"{contract.__name__} members missing from docs/adapters.md: {missing}"


def test_baton_extract_and_hooks_install_take_the_installed_adapter(
    guide_wheel: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commands for one kind of agent are driven by the registry: a third-party adapter gets them."""
    monkeypatch.setenv("PYTHONPATH", str(guide_wheel[1]))
    monkeypatch.delenv("BATON_DISABLE_EXTERNAL_PLUGINS", raising=False)
    log = tmp_path / "4242.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in [
        {"type": "prompt", "turn": "t1", "text": "hi", "at": 1.0},
        {"type": "answer", "turn": "t1", "text": "first answer", "at": 2.0},
        {"type": "prompt", "turn": "t2", "text": "again", "at": 3.0},
        {"type": "answer", "turn": "t2", "text": "second answer", "at": 4.0},
    ]))
    last = baton_script("extract", "--agent", "logbot", str(log))
    assert (last.returncode, last.stdout) == (0, "second answer\n"), last
    known = baton_script("extract", str(log))  # no --agent: logbot's recognizes_file claims it
    assert (known.returncode, known.stdout) == (0, "second answer\n"), known
    named = baton_script("extract", "--agent", "logbot", "-o", "turn=t1", "--json", str(log))
    assert named.returncode == 0, named
    answer = json.loads(named.stdout)
    assert (answer["turn_id"], answer["text"]) == ("logbot:t1", "first answer")
    wrong = baton_script("extract", "--agent", "logbot", "--session", "s1", str(log))
    assert (wrong.returncode, wrong.stderr) == (
        1, "baton extract: --session is not an option for logbot files (its options: turn)\n")

    claude, codex = tmp_path / "claude", tmp_path / "codex"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("CODEX_HOME", str(codex))
    gemini = tmp_path / "gemini"
    monkeypatch.setenv("GEMINI_CLI_HOME", str(gemini))
    none = baton_script("hooks", "install", "--agent", "logbot")
    assert none.returncode == 1 and "the logbot adapter has no hooks to install" in none.stderr, none
    assert not claude.exists() and not codex.exists()
    every = baton_script("hooks", "install")  # every adapter that has hooks: the built-ins, not logbot
    assert every.returncode == 0 and every.stderr == "", every
    assert "pipeline.spool claude" in (claude / "settings.json").read_text()
    assert "pipeline.spool" in (codex / "config.toml").read_text()
    assert "pipeline.spool gemini" in (gemini / ".gemini" / "settings.json").read_text()
    alias = baton_script("hooks", "install", "--codex")  # the old flag: = --agent codex, again (no change)
    assert alias.returncode == 0, alias
    assert (codex / "config.toml").read_text().count("pipeline.spool") == 1


@pytest.mark.tmux
@pytest.mark.slow
def test_the_guides_adapter_installed_with_pip_routes_turns_on_real_tmux(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory, monkeypatch: pytest.MonkeyPatch,
    guide_wheel: tuple[Path, Path]
) -> None:
    (src, site), home = guide_wheel, tmp_path / "logbot-home"
    monkeypatch.setenv("PYTHONPATH", str(site))  # `baton run` and `baton plugins` see the installed plugin
    monkeypatch.setenv("LOGBOT_HOME", str(home))
    monkeypatch.delenv("BATON_DISABLE_EXTERNAL_PLUGINS", raising=False)
    rows = {r["name"]: r for r in json.loads(baton("plugins", "--json"))["classes"]}
    assert (rows["logbot"]["from"], rows["logbot"]["kind"]) == ("baton-logbot 0.1.0", "agent"), rows

    bot = tmux_server.new_pane(f"{sys.executable} {src / 'logbot'}", env={"LOGBOT_HOME": str(home)})
    wait_for(lambda: "logbot>" in tmux_server.capture(bot), what="logbot")
    x, blog, _, daemon = x_through_bot_to_b(tmux_server, tmp_path, daemon_factory, bot, "logbot")
    tmux_server.type(x, "hello")
    wait_for(lambda: messages(blog), timeout=30, what="the hand-off through logbot")
    assert messages(blog) == ["logbot says: logbot read 5 characters: HELLO"]

    daemon.kill()  # a turn that ends while batonpass is down is caught up through finished_turns()
    tmux_server.type(bot, "again")
    wait_for(lambda: "AGAIN" in tmux_server.capture(bot), what="logbot's answer")
    daemon.start()
    wait_for(lambda: len(messages(blog)) >= 2, timeout=30, what="the caught-up hand-off")

    def delivered() -> list[tuple[str, str]]:
        return sorted((h["source"], h["target"]) for h in json_lines(baton("history", "--json"))
                      if h["state"] == "delivered")

    # the paste is in b's log a moment before the daemon has seen b's turn start and recorded it delivered
    wait_for(lambda: delivered() == [("bot", "b"), ("bot", "b"), ("x", "bot")], what="three delivered")
    assert daemon.stop() == 0
    assert messages(blog) == ["logbot says: logbot read 5 characters: HELLO",
                              "logbot says: logbot read 5 characters: AGAIN"]


@pytest.mark.tmux
@pytest.mark.slow
def test_the_screen_only_adapter_installed_with_pip_routes_turns_both_ways_on_real_tmux(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory, monkeypatch: pytest.MonkeyPatch,
    chatty_wheel: tuple[Path, Path]
) -> None:
    """chatty, written against the public plugin API alone (ScreenAdapter), takes a hand-off and hands its
    answer on: its turn end, answer and readiness all read from its screen."""
    src, site = chatty_wheel
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.delenv("BATON_DISABLE_EXTERNAL_PLUGINS", raising=False)
    rows = {r["name"]: r for r in json.loads(baton("plugins", "--json"))["classes"]}
    assert (rows["chatty"]["from"], rows["chatty"]["kind"]) == ("baton-chatty 0.1.0", "agent"), rows
    bot = tmux_server.new_pane(f"{sys.executable} {src / 'chatty'}")
    wait_for(lambda: "chatty>" in tmux_server.capture(bot), what="chatty")
    x, blog, _, daemon = x_through_bot_to_b(tmux_server, tmp_path, daemon_factory, bot, "chatty")
    tmux_server.type(x, "hello")
    wait_for(lambda: messages(blog), timeout=30, what="the hand-off through chatty")
    # x (an echo agent) answered "hello"; chatty took it as its prompt; b got the answer cut from its screen
    assert messages(blog) == ["chatty says: chatty heard 5 characters: HELLO"]
    assert daemon.stop() == 0


@pytest.mark.tmux
def test_preview_status_and_the_board_read_the_guides_adapter_as_run_does(
    tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guide_wheel: tuple[Path, Path]
) -> None:
    """Issue 34 item 9: logbot's answer is in its log, where ``baton run`` reads it (``finished_turns``
    then ``response``); ``baton preview``, ``baton status`` and the board read that same answer — not its
    screen, and not "(no answer yet)"."""
    (src, site), home = guide_wheel, tmp_path / "logbot-home"
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("LOGBOT_HOME", str(home))
    monkeypatch.delenv("BATON_DISABLE_EXTERNAL_PLUGINS", raising=False)
    bot = tmux_server.new_pane(f"{sys.executable} {src / 'logbot'}", env={"LOGBOT_HOME": str(home)})
    wait_for(lambda: "logbot>" in tmux_server.capture(bot), what="logbot")
    shell = tmux_server.new_pane()
    tmux_server.type(bot, "hello")
    wait_for(lambda: "HELLO" in tmux_server.capture(bot), what="logbot's answer")
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"bot": {"pane": bot, "agent": "logbot"}, "sh": {"pane": shell, "agent": "shell"}},
                          [{"from": "bot", "to": "sh", "transform": {"type": "template",
                                                                     "template": "logbot says: {response}"}}])
    answer = "logbot read 5 characters: HELLO"
    preview = baton_script("-c", str(config), "preview", "bot->sh")
    assert (preview.returncode, preview.stdout) == (0, f"logbot says: {answer}\n"), preview
    assert "from its transcript" in preview.stderr, preview.stderr
    status = baton_script("-c", str(config), "status", "--json")
    rows = {r["tile"]: r for r in json.loads(status.stdout)}
    assert rows["bot"]["last_response"] == answer, status
    board = [sys.executable, "-m", "pipeline.cli", "-c", str(config), "status", "--watch"]
    pane = tmux_server.new_pane(shlex.join(board), cwd=REPO, width=100, height=20,
                                env={"PYTHONPATH": str(site), "LOGBOT_HOME": str(home), "NO_COLOR": "1"})
    wait_for(lambda: f"└ {answer}" in tmux_server.capture(pane), what="the board showing logbot's answer")
    assert "(no answer yet)" not in tmux_server.capture(pane).split("bot ", 1)[-1].split("sh ", 1)[0]
    tmux_server.run("send-keys", "-t", pane, "q")


class RecordingWatcher(FileWatcher):
    """The engine's file watcher, keeping what was subscribed to."""

    def __init__(self) -> None:
        super().__init__()
        self.subscriptions: list[Subscription] = []

    def subscribe(self, *args: Any, **kwargs: Any) -> Subscription:
        sub = super().subscribe(*args, **kwargs)
        self.subscriptions.append(sub)
        return sub


def boxbot_pane(tmux_server: TmuxServer, tmp_path: Path) -> tuple[Path, str]:
    """The guide's boxbot, run from the page in a real pane in a folder of its own: (its folder, the pane)."""
    agent, work = tmp_path / "boxbot", tmp_path / "work"
    agent.write_text(guide_files("box-file")["boxbot"])
    work.mkdir()
    pane = tmux_server.new_pane(f"{sys.executable} {agent}", cwd=work)
    wait_for(lambda: "╰" in tmux_server.capture(pane), what="boxbot's input box")
    return work, pane


@pytest.mark.tmux
@pytest.mark.anyio
async def test_boxbots_adapter_follows_its_turns_file_through_the_watcher_and_reads_its_box(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """Issue 39 item 17: the guide's second adapter, as the page has it, on a real pane: the completion
    carries the answer from boxbot's file (its second line is never on the screen), the follower is woken
    by its ``ctx.watcher.subscribe`` (its recheck set beyond the test's patience: no timer can have woken
    it), and the draft is read from the box by the ``draft()`` override."""
    module_path = tmp_path / "baton_boxbot.py"
    module_path.write_text(guide_files("box-file")["baton_boxbot.py"])
    spec = importlib.util.spec_from_file_location("baton_boxbot", module_path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    work, pane = boxbot_pane(tmux_server, tmp_path)
    watcher, resolved = RecordingWatcher(), anyio.Event()

    async def on_resolved() -> None:
        resolved.set()

    ctx = EngineContext(name="bot", tile=Tile(pane=pane, agent="boxbot"), tmux=tmux_server.tmux,
                        watcher=watcher, on_resolved=on_resolved)
    adapter = module.BoxbotAdapter(ctx)
    adapter.recheck_s = 600.0
    completions: list[Completion] = []

    async def emit(completion: Completion) -> None:
        completions.append(completion)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        tg.start_soon(adapter.follow, emit)
        with anyio.fail_after(30):
            await resolved.wait()
        turns = work / ".boxbot" / f"turns-{(await adapter.agent_process()).pid}.jsonl"
        assert [sub.path for sub in watcher.subscriptions] == [turns]
        assert await adapter.target_state() == "ready"
        tmux_server.type(pane, "half a thought", enter=False)
        await until(lambda: "│ half a thought" in tmux_server.capture(pane), what="the draft in the box")
        assert (await adapter.target_state(), await adapter.current_draft()) == ("draft", "half a thought")
        tmux_server.type(pane, " and the rest")
        await until(lambda: completions, what="boxbot's turn, from its file")
        assert await until(lambda: adapter.target_state() if "esc to stop" not in tmux_server.capture(pane)
                           else None, what="boxbot done working") == "ready"
        tg.cancel_scope.cancel()
    answer = "boxbot read 6 words.\nUpper-cased: HALF A THOUGHT AND THE REST"
    record = json.loads(turns.read_text())
    turn = f"boxbot:{record['id']}"
    assert [(c.turn_id, c.signal, c.text) for c in completions] == [(turn, "turns", answer)]
    assert "Upper-cased" not in tmux_server.capture(pane)  # the screen shows the first line only
    response = await adapter.response(completions[0])
    assert (response.text, response.source) == (answer, "transcript")


@pytest.fixture(scope="module")
def boxbot_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """boxbot's package (files for turns, the screen for readiness), installed."""
    return install_guide_package(tmp_path_factory.mktemp("boxbot"), "box-file")


@pytest.mark.tmux
@pytest.mark.slow
def test_boxbot_installed_with_pip_takes_a_hand_off_and_hands_on_the_answer_from_its_file(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory, monkeypatch: pytest.MonkeyPatch,
    boxbot_wheel: tuple[Path, Path]
) -> None:
    """Under ``baton run``: typed into boxbot's box when its screen says ready, its answer read from its
    file (both lines, where the screen shows one), and ``baton status`` shows the file as its transcript."""
    monkeypatch.setenv("PYTHONPATH", str(boxbot_wheel[1]))
    monkeypatch.delenv("BATON_DISABLE_EXTERNAL_PLUGINS", raising=False)
    work, bot = boxbot_pane(tmux_server, tmp_path)
    x, blog, config, daemon = x_through_bot_to_b(tmux_server, tmp_path, daemon_factory, bot, "boxbot")
    tmux_server.type(x, "three little words")
    wait_for(lambda: messages(blog), timeout=30, what="the hand-off through boxbot")
    assert messages(blog) == ["boxbot says: boxbot read 3 words.\nUpper-cased: THREE LITTLE WORDS"]
    assert daemon.stop() == 0
    status = baton_script("-c", str(config), "status", "--json")
    row = {r["tile"]: r for r in json.loads(status.stdout)}["bot"]
    pid = row["agent_pid"]
    assert (row["state"], row["transcript"]) == ("idle", str(work / ".boxbot" / f"turns-{pid}.jsonl")), row
