"""End to end with the REAL Gemini CLI (npm, cached) against a fake Gemini API on 127.0.0.1, WITHOUT hooks,
through the real ``baton run`` and ``baton history``: the two ways the pane's session changes under a
running daemon (docs/agent-versions.md, Gemini CLI).

* the folder-trust dialog, answered as a person would (Enter on "1. Trust folder"), restarts the CLI as a
  new process with a new session and deletes the first session's file: the next answer is handed off once;
* ``/clear`` starts a new session file in the same process: the answer after it is handed off once, the
  turn before it never again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.gemini.resolve import find_gemini
from plugins.gemini.screen import input_draft
from tests.fakes.gemini_api import FakeGemini
from tests.support.agents import messages, start_agent
from tests.support.cli import baton, json_lines, start_baton, write_routes
from tests.support.gemini import GeminiHome, gemini_cli, make_gemini_home
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

TRUST_DIALOG = "Do you trust the files in this folder?"


@pytest.fixture
def gemini_api() -> Iterator[FakeGemini]:
    with FakeGemini() as api:
        yield api


def delivered(route: str) -> list[dict]:
    """The hand-offs of ``route`` that ``baton history --json`` shows."""
    shown = baton("history", "--json", "--route", route)
    assert shown.status == 0, shown
    return [r for r in json_lines(shown.out) if r.get("kind") != "action"]


def run_baton(server: TmuxServer, tmp: Path, g_pane: str, target: str) -> tuple[object, Path]:
    """``baton run -v`` routing gem -> t (no hooks installed: the session file and the screen tell)."""
    config = write_routes(tmp, server.socket, {"gem": {"pane": g_pane, "agent": "gemini"},
                                               "t": {"pane": target, "agent": "demo"}},
                          [{"from": "gem", "to": "t", "transform": "raw"}])
    err = tmp / "run.err"
    return start_baton("run", "-v", "-c", str(config), stderr=err), err


def followed(err: Path, session: Path) -> bool:
    """The daemon follows ``session`` (its log names each session file it switches to)."""
    text = err.read_text()
    return f"gem: gemini session file {session} " in text


def hand_off(server: TmuxServer, gem: GeminiHome, pane: str, api: FakeGemini, log: Path, prompt: str,
             before: list[str]) -> str:
    """A person's prompt in the Gemini pane; its answer reaches the target once. Returns the answer."""
    gem.say(server, pane, prompt)
    answer = api.answer(prompt)
    wait_for(lambda: messages(log) == [*before, answer], 60, what=f"the answer to {prompt!r} in the target")
    return answer


def test_real_gemini_trust_restart_under_a_running_daemon_hands_the_next_answer_off_once(
        tmux_server: TmuxServer, tmp_path: Path, gemini_api: FakeGemini) -> None:
    gem = make_gemini_home(tmp_path / "g", api_url=gemini_api.url, gemini_bin=gemini_cli(), trusted=False)
    pane = gem.launch(tmux_server)
    wait_for(lambda: TRUST_DIALOG in tmux_server.capture(pane) and gem.session_files(), 60,
             what="the trust dialog and the first session file")
    [first] = gem.session_files()
    shell = tmux_server.pane_pid(pane)
    before = find_gemini(shell)
    assert before is not None and before.relaunched
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    daemon, err = run_baton(tmux_server, tmp_path, pane, target)
    try:
        wait_for(lambda: followed(err, first), 30, what="the daemon following the first session")
        assert "● 1. Trust folder (my-app)" in tmux_server.capture(pane)
        tmux_server.run("send-keys", "-t", pane, "Enter")  # the highlighted choice, as a person would
        wait_for(lambda: not first.exists() and gem.session_files()
                 and input_draft(tmux_server.capture(pane)) == "", 60,
                 what="the restart into a new session, at its input box")
        after = find_gemini(shell)
        assert after is not None and after.relaunched and after.proc != before.proc
        [second] = gem.session_files()
        answer = hand_off(tmux_server, gem, pane, gemini_api, log, "E2E-T1: after the trust restart", [])
        assert followed(err, second), err.read_text()
        quiet_for(2.0, "a second hand-off")
        assert len(messages(log)) == 1
        assert daemon.poll() is None, err.read_text()
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
    assert "Traceback" not in err.read_text()
    rows = delivered("gem->t")
    assert [(r["state"], r["prompt"], r["hop"]) for r in rows] == [("delivered", answer, 1)], rows
    assert json.loads(second.read_text().splitlines()[0])["sessionId"] in rows[0]["turn_id"]


def test_real_gemini_clear_without_hooks_hands_off_the_next_answer_once_and_never_the_earlier(
        tmux_server: TmuxServer, tmp_path: Path, gemini_api: FakeGemini) -> None:
    gem = make_gemini_home(tmp_path / "g", api_url=gemini_api.url, gemini_bin=gemini_cli())
    pane = gem.start(tmux_server)
    [first] = gem.session_files()
    shell = tmux_server.pane_pid(pane)
    worker = find_gemini(shell)
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    daemon, err = run_baton(tmux_server, tmp_path, pane, target)
    try:
        wait_for(lambda: followed(err, first), 30, what="the daemon following the session")
        one = hand_off(tmux_server, gem, pane, gemini_api, log, "E2E-C1: before the clear", [])
        gem.say(tmux_server, pane, "/clear")
        wait_for(lambda: len(gem.session_files()) == 2 and input_draft(tmux_server.capture(pane)) == "", 30,
                 what="/clear's new session file")
        [second] = [p for p in gem.session_files() if p != first]
        now = find_gemini(shell)
        assert worker is not None and now is not None and now.proc == worker.proc  # /clear restarts nothing
        two = hand_off(tmux_server, gem, pane, gemini_api, log, "E2E-C2: after the clear", [one])
        assert followed(err, second), err.read_text()
        quiet_for(2.0, "a third hand-off")
        assert len(messages(log)) == 2
        assert daemon.poll() is None, err.read_text()
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
    assert "Traceback" not in err.read_text()
    rows = delivered("gem->t")
    assert [(r["state"], r["prompt"]) for r in rows] == [("delivered", one), ("delivered", two)], rows
    sessions = [json.loads(p.read_text().splitlines()[0])["sessionId"] for p in (first, second)]
    assert [s in r["turn_id"] for r, s in zip(rows, sessions, strict=True)] == [True, True], rows
