"""The second newcomer trial (issue #34): ``baton run`` and its words, each run as a person would — a real
tmux server, real demo agents, the real journal — and the exact outcome checked."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import messages, start_agent, transcript_answers
from tests.support.cli import baton, start_baton, write_routes
from tests.support.daemons import has_started, wait_followed, write_config
from tests.support.paths import REPO
from tests.support.polling import wait_for
from tests.support.standin_targets import StandinTarget
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux]


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=20)


def _writer_and_reviewer(tmux_server: TmuxServer, tmp_path: Path,
                         daemon_factory) -> tuple[str, str, Path, Any]:
    """Two demo agents, writer -> reviewer, and a running daemon following the writer."""
    writer = start_agent(tmux_server, tmp_path / "writer.jsonl", "writer", work_s=0.1)
    reviewer = start_agent(tmux_server, tmp_path / "reviewer.jsonl", "reviewer", work_s=0.1)
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket, {
        "writer": {"pane": writer, "agent": "demo"}, "reviewer": {"pane": reviewer, "agent": "demo"}},
        [{"from": "writer", "to": "reviewer"}])
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "writer")
    return writer, reviewer, config, daemon


def test_a_dry_run_beside_the_daemon_decides_from_its_journal(tmux_server: TmuxServer, tmp_path: Path,
                                                              daemon_factory) -> None:
    """A turn the running daemon handed off is no "history" to a ``--dry-run`` started beside it: the
    dry run reads a copy of the journal, so it skips nothing and prints no prompt for it, and says how
    many turns ended since the tile's mark once per tile, in good English."""
    writer, reviewer, config, daemon = _writer_and_reviewer(tmux_server, tmp_path, daemon_factory)
    wait_followed(daemon, "reviewer")
    tmux_server.type(writer, "plan the release")
    wait_for(lambda: len(messages(tmp_path / "reviewer.jsonl")) == 1, what="the hand-off to the reviewer")
    wait_for(lambda: [r.state for r in Journal(default_journal_path()).history()] == ["delivered"],
             what="the hand-off recorded delivered")
    wait_for(lambda: len(transcript_answers(Path(os.environ["XDG_STATE_HOME"]))) == 2,
             what="the reviewer's answer")

    err = tmp_path / "dry.err"
    dry = start_baton("run", "--dry-run", "-c", str(config), stderr=err)
    try:
        wait_for(lambda: "writer: 1 turn ended since" in err.read_text(), what="the dry run's catch-up")
        wait_for(lambda: "reviewer: 1 turn ended since" in err.read_text(), what="the reviewer's catch-up")
        # the adapters' own first look at their sessions comes next: it must not say it all again
        time.sleep(1.5)  # shapes the scenario
    finally:
        assert _stop(dry) == 0
    assert daemon.stop() == 0
    text = err.read_text()
    assert "skipped" not in text and "--- writer->reviewer" not in text, text
    for tile in ("writer", "reviewer"):
        assert text.count(f"{tile}: 1 turn ended since") == 1, text
    assert "turns ended" not in text, text
    assert len(messages(tmp_path / "reviewer.jsonl")) == 1


def test_run_with_no_tmux_server_says_it_waits_and_follows_the_tiles_once_tmux_is_there(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """No tmux server yet is no failure of ``run`` (docs/json.md): its start-up line says it keeps running,
    each tile is said gone with what becomes of hand-offs to it, and once the server and the pane are
    there the tile is back; Ctrl-C ends it with status 0."""
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"coder": {"pane": "work:0.0", "agent": "shell"}}, [])
    err = tmp_path / "run.err"
    daemon = start_baton("run", "-c", str(config), stderr=err)
    try:
        wait_for(lambda: has_started(err.read_text()), what="the daemon to start")
        lines = err.read_text().splitlines()
        assert [line.split(" ", 1)[1] for line in lines] == [
            "tile coder: pane work:0.0 is gone (no tmux server is running: start tmux, or `baton up` creates "
            "the panes); hand-offs to it are kept and typed once it is back (for up to give_up_s=600s), its "
            "turns followed from then",
            f"running: 1 tile, 0 routes on tmux -L {tmux_server.socket} (no tmux server runs there yet: "
            "baton run keeps running and follows each tile once tmux and its pane are there)"], lines
        tmux_server.run("new-session", "-d", "-s", "work", "bash --norc --noprofile")
        wait_for(lambda: "tile coder: pane work:0.0 is back (shell)" in err.read_text(), what="'is back'")
    finally:
        assert _stop(daemon) == 0, err.read_text()


def test_a_hand_off_waiting_for_a_draft_says_it_is_kept_and_when_it_is_typed(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    """A person's draft in the target's input holds the hand-off: the daemon's line says what it waits for
    and that the hand-off is kept and typed once the draft is sent or cleared — and then it is."""
    writer, reviewer, config, daemon = _writer_and_reviewer(tmux_server, tmp_path, daemon_factory)
    tmux_server.type(reviewer, "half a thought", enter=False)
    tmux_server.type(writer, "plan the release")
    key = wait_for(lambda: [r.key for r in Journal(default_journal_path()).history()], what="the hand-off")[0]
    wait_for(lambda: "waiting     reviewer" in daemon.stderr(), what="the daemon to wait for the draft")
    line = next(ln for ln in daemon.stderr().splitlines() if "waiting     reviewer" in ln)
    assert line.split(" ", 1)[1] == (f"waiting     reviewer has a draft in its input (text not yet sent); "
                                     f"hand-off {key} is kept and typed once that draft is sent or cleared")
    tmux_server.run("send-keys", "-t", reviewer, "Enter")
    wait_for(lambda: len(messages(tmp_path / "reviewer.jsonl")) == 2, what="the hand-off typed after it")
    assert messages(tmp_path / "reviewer.jsonl")[0] == "half a thought"
    assert daemon.stop() == 0


def test_status_has_a_session_column(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """Which session each agent is in, at a glance: its id's first 8 characters in the table, the whole id
    (and its file) below it, ``session_id`` in the JSON; ``-`` for an agent that names none."""
    claude = StandinTarget(tmux_server, tmp_path, "claude", name="coder")
    demo = StandinTarget(tmux_server, tmp_path, "demo", name="notes")
    config = write_routes(tmp_path, tmux_server.socket, {"coder": claude.tile, "notes": demo.tile})
    session_file = wait_for(lambda: next((claude.home / "sessions").glob("*.json"), None),
                            what="the stand-in's session file")
    session = json.loads(session_file.read_text())["sessionId"]
    rows = json.loads(baton("status", "--json", "-c", str(config)).out)
    assert [(r["tile"], r["session_id"]) for r in rows] == [("coder", session), ("notes", None)], rows
    result = baton("status", "-c", str(config))
    assert result.status == 0, result
    lines = result.out.splitlines()
    assert lines[0].split() == ["TILE", "PANE", "AGENT", "PID", "SESSION", "STATE", "LAST", "ANSWER"], lines
    assert lines[1].split()[:6] == ["coder", claude.pane, "claude", str(rows[0]["agent_pid"]), session[:8],
                                    "idle"], lines
    assert lines[2].split()[:6] == ["notes", demo.pane, "demo", str(rows[1]["agent_pid"]), "-", "idle"], \
        lines
    assert f"coder session: {session} ({session_file})" in lines, lines


def test_hooks_with_no_action_is_one_line_naming_the_actions() -> None:
    """``baton hooks`` alone is bad usage: one line with the usage and the actions, exit 2 — not the help
    page with no word of what was wrong."""
    baton("hooks").one_line_error(
        2, "baton hooks: error: which action? usage: baton hooks ACTION, one of: install; see baton hooks -h")
    assert baton("hooks").out == ""


def test_resolve_names_its_argument_a_tile_or_a_pane(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """``baton resolve TILE`` reads the tile's pane (its usage says so); a tile whose pane is not there is
    one line naming the pane."""
    shell = tmux_server.new_pane()
    config = write_routes(tmp_path, tmux_server.socket, {"sh": {"pane": shell, "agent": "shell"},
                                                          "gone": {"pane": "title:zz", "agent": "shell"}})
    assert "TILE|PANE" in baton("resolve", "-h").out
    result = baton("resolve", "sh", "-c", str(config))
    assert result.status == 0 and result.out.splitlines()[0] == f"{shell}: agent shell (tile sh)", result
    baton("resolve", "gone", "-c", str(config)).one_line_error(
        1, "baton resolve: tile gone's pane title:zz is not there (no `command:`, so baton up cannot make "
        f"it): no pane has the title 'zz' on tmux -L {tmux_server.socket}")


def test_up_on_the_example_routes_yaml_says_the_tests_pane_does_not_exist(tmux_server: TmuxServer,
                                                                           tmp_path: Path) -> None:
    """The README's example, brought up as is (on the test's server): its ``tests`` tile has no command,
    and ``up`` says its pane does not exist and how to make it — not just "nothing to start"."""
    example = tmp_path / "routes.yaml"
    example.write_text((REPO / "routes.yaml").read_text())
    # neither claude nor codex on this PATH: their panes exit at once (status 127), whatever is installed
    result = baton("up", "-L", tmux_server.socket, cwd=tmp_path,
                   env={"PATH": f"{Path(shutil.which('tmux') or '/usr/bin/tmux').parent}:/bin"})
    assert result.status == 1, result
    assert result.out.split(None, 2) == [
        "tests", "no", "command  its pane title:tests does not exist, and up starts nothing without a "
        "`command:`: make a pane titled tests (tmux select-pane -T tests) yourself, or give the tile a "
        "command\n"], result
    failed = [line.split()[:2] for line in result.error_lines if ": warning: " not in line]  # no API key
    assert failed == [["coder", "exited"], ["reviewer", "exited"]], result.err
