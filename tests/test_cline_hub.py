"""Two and three REAL Cline TUIs sharing one hub daemon (``cline`` 3.0.65 from npm, against the fake Chat
Completions server on 127.0.0.1), each its own tile: the first TUI starts the hub; the ones started while it
runs have their sessions run BY the hub (their records name the hub's pid) and their hooks fired in the hub
with the first pane's ``$TMUX_PANE``. Each pane's turns are handed on from its own tile exactly once — the
second pane prompting before the first ever did (the case the chain by time alone got wrong: the first
pane took the second's session for its own), a third pane in another folder — ``baton status`` shows each
tile's own state (one working while the others are idle), ``baton resolve`` names each pane's own session,
and every Cline of the home, the hub too, is gone after the test."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_versions import resolve
from tests.fakes.openai_chat import FakeChat
from tests.support.agents import messages, start_agent
from tests.support.cli import write_routes
from tests.support.cline import ClineHome, cline_session
from tests.support.pipelines import make_config, running
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.real_cli import baton, completions, npm_package, signals_seen
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.anyio]

CLINE = resolve("cline")
#: B's first answer, streamed a word every 0.5 s (SLOWTEST): long enough to see B working, A idle
SLOW = "B-ANSWER-1: " + " ".join(["slowly"] * 14)


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with FakeChat() as server:
        yield server


@pytest.fixture
def cline(tmp_path: Path, chat: FakeChat, tmux_server: TmuxServer) -> Iterator[ClineHome]:
    with cline_session(tmux_server, tmp_path / "cl", api_url=chat.url, cline_bin=npm_package(CLINE),
                       state=tmp_path / "state") as home:
        yield home
    assert home.processes() == []  # no TUI, and no hub daemon, is left


def status(routes: Path) -> dict[str, dict[str, object]]:
    """``baton status --json``'s rows, by tile."""
    done = baton("status", "--json", "-c", str(routes))
    assert done.returncode == 0, done.stdout + done.stderr
    return {row["tile"]: row for row in json.loads(done.stdout)}


def resolved(server: TmuxServer, pane: str) -> str:
    """The session record ``baton resolve`` names for ``pane``."""
    done = baton("resolve", pane, "-L", server.socket, "--agent", "cline", "--json")
    steps = {s["step"]: s for s in json.loads(done.stdout)["steps"]}
    return str(steps["transcript"]["value"])


async def test_cline_panes_sharing_one_hub_hand_on_each_their_own_turns_once(
        tmux_server: TmuxServer, tmp_path: Path, cline: ClineHome, chat: FakeChat,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the daemon's hook spool
    installed = baton("hooks", "install", "--agent", "cline", env={"HOME": str(cline.home)})
    assert installed.returncode == 0, installed.stdout + installed.stderr
    a = cline.start(tmux_server)  # starts the hub daemon
    wait_for(cline.hubs, 30, what="the hub daemon the first TUI starts")
    b = cline.start(tmux_server)  # the same folder, its sessions run by the hub
    c = cline.start_in(tmux_server, cline.project.parent / "other")  # another folder, the same hub
    assert len(cline.hubs()) == 1
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("a", "b", "c")}
    tiles: dict[str, dict[str, str]] = {name: {"pane": pane, "agent": "cline"}
                                        for name, pane in (("a", a), ("b", b), ("c", c))}
    for name, log in logs.items():
        tiles[f"t{name}"] = {"pane": start_agent(tmux_server, log, f"t{name}"), "agent": "demo"}
    routes = [{"from": name, "to": f"t{name}", "transform": "raw"} for name in logs]
    routes_file = write_routes(tmp_path, tmux_server.socket, tiles, routes)
    caplog.set_level(logging.DEBUG, logger="batonpass")
    chat.script(SLOW, "A-ANSWER-1: from a", "C-ANSWER-1: from c", "B-ANSWER-2: from b")
    async with running(make_config(tiles, routes), tmux_server):
        cline.say(tmux_server, b, "SLOWTEST: B-ONE, before A ever prompted")
        rows = await until(lambda: (r := status(routes_file))["b"]["state"] == "working" and r, 30,
                           "B working on the board")
        assert (rows["a"]["state"], rows["c"]["state"]) == ("idle", "idle"), rows
        await until(lambda: messages(logs["b"]), 40, "B's answer handed on")
        cline.say(tmux_server, a, "A-ONE: from a")
        await until(lambda: messages(logs["a"]), 40, "A's answer handed on")
        cline.say(tmux_server, c, "C-ONE: from c")
        await until(lambda: messages(logs["c"]), 40, "C's answer handed on")
        cline.say(tmux_server, b, "B-TWO: from b again")
        await until(lambda: len(messages(logs["b"])) == 2, 40, "B's second answer handed on")
        await aquiet_for(2.0, "a hand-off from the wrong tile, or twice")
        rows = status(routes_file)
        assert {name: rows[name]["state"] for name in logs} == {"a": "idle", "b": "idle", "c": "idle"}
        sessions = {name: cline.session_of(prompt) for name, prompt in
                    (("a", "A-ONE"), ("b", "B-ONE"), ("c", "C-ONE"))}
        assert {name: rows[name]["transcript"] for name in logs} == \
            {name: str(path) for name, path in sessions.items()}
        for name, pane in (("a", a), ("b", b), ("c", c)):
            assert resolved(tmux_server, pane) == str(sessions[name]), name
    [hub] = cline.hubs()
    runs = {name: json.loads(path.read_text())["pid"] for name, path in sessions.items()}
    assert runs["b"] == runs["c"] == hub, runs  # the hub runs the sessions of the TUIs started after it
    assert [m.strip() for m in messages(logs["a"])] == ["A-ANSWER-1: from a"]
    assert [m.strip() for m in messages(logs["b"])] == [SLOW, "B-ANSWER-2: from b"]
    assert [m.strip() for m in messages(logs["c"])] == ["C-ANSWER-1: from c"]
    for name, count in (("a", 1), ("b", 2), ("c", 1)):
        ends = completions(caplog, name)
        assert [o for _, o, _ in ends] == ["completed"] * count, (name, ends)
        for turn, _, _ in ends:  # the session file and the hook (fired in the hub for B's and C's)
            assert signals_seen(caplog, turn) == {"session file", "hook"}, (name, turn)
