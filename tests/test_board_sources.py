"""What the live board takes from the agents' own records besides their state: when the running turn began
(so a board started in the middle of a turn shows the turn's age, not its own) and OpenCode's tokens and
cost (its store records them per assistant message). Each adapter answers through the plugin API
(``working_since()``, ``usage()``); the board on a real 80-column pane shows both.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.plugin.usage import SessionUsage
from pipeline.views.board import Board, render
from plugins.codex.reader import parse_timestamp
from plugins.opencode.reader import OpenCodeStore
from tests.support.claude import Scene as ClaudeScene
from tests.support.codex import Scene as CodexScene
from tests.support.codex import append, upto
from tests.support.opencode import Scene as OpenCodeScene
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import until, wait_for
from tests.support.tmux import TmuxServer

FIVE_MIN = 300.0


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---- the board's clock ------------------------------------------------------------------------------------


def test_the_clock_counts_from_the_turn_start_the_agent_recorded() -> None:
    now = time.time()
    board = Board([("coder", "claude"), ("tests", "shell")])
    board.update({"tile": "coder", "state": "busy"}, now=now, started=now - 130)
    board.update({"tile": "tests", "state": "busy"}, now=now - 5)  # no record: first seen
    lines = render(board, 80, 24, now)
    assert "working 2m10s" in lines[2] and "working 5s" in lines[4]
    board.update({"tile": "coder", "state": "waiting (permission prompt)"}, now=now + 1)
    board.update({"tile": "coder", "state": "busy"}, now=now + 2, started=now + 60)  # from the future: no
    assert "working 0s" in render(board, 80, 24, now + 2)[2]
    board.update({"tile": "coder", "state": "busy"}, now=now + 3, started=now - 130)
    assert "working 2m13s" in render(board, 80, 24, now + 3)[2]


# ---- each adapter's working_since -------------------------------------------------------------------------


@pytest.mark.tmux
@pytest.mark.anyio
async def test_claude_code_turn_start_from_the_prompt_line_else_the_status_change(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    scene = ClaudeScene(tmux_server, tmp_path)
    adapter = scene.adapter
    tx = scene.transcript()
    tx.turn("an earlier turn", "done")
    status_ms = int((time.time() - 40) * 1000)
    scene.status("busy", statusUpdatedAt=status_ms)
    # the prompt line is not written yet: the session file's statusUpdatedAt (ms)
    assert await adapter.working_since() == status_ms / 1000
    asked = time.time() - FIVE_MIN
    tx.write({**tx.line({"type": "user", "promptId": "p2", "message": {"role": "user", "content": "go"}}),
              "timestamp": iso(asked)})
    scene.status("busy", statusUpdatedAt=status_ms + 1)  # a status change: read again
    assert await adapter.working_since() == pytest.approx(asked, abs=0.001)
    scene.status("waiting", waitingFor="permission prompt", statusUpdatedAt=status_ms + 2)
    assert await adapter.working_since() == pytest.approx(asked, abs=0.001)  # still the same turn
    tx.assistant("msg_2", {"type": "text", "text": "ok"})
    tx.end()
    scene.status("idle")
    assert await adapter.working_since() is None


@pytest.mark.tmux
@pytest.mark.anyio
async def test_codex_turn_start_from_task_started(tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = CodexScene(tmux_server, tmp_path)
    records = scene.turns()
    assert await scene.adapter.working_since() is None  # no rollout yet
    started = upto(records, "task_started")
    records[started - 1]["timestamp"] = iso(time.time() - FIVE_MIN)  # a turn older than the board
    append(scene.rollout, records[:started])
    since = await asked_until(scene.adapter.working_since)  # the rollout is looked for again within 0.25 s
    assert since == parse_timestamp(records[started - 1]["timestamp"])
    append(scene.rollout, records[started: upto(records, "task_complete")])
    assert await scene.adapter.working_since() is None


async def asked_until(ask: Callable[[], Awaitable[float | None]]) -> float:
    return await until(ask, 10, "an answer")


# ---- OpenCode's tokens and cost ---------------------------------------------------------------------------


def test_opencode_usage_from_a_recorded_store() -> None:
    store = OpenCodeStore(FIXTURES / "opencode" / "opencode.db")
    try:
        by_session = {s.id: store.usage(s.id) for s in store.sessions()}
    finally:
        store.close()
    # 1.18.33 against the fake provider: 100 in / 20 out per step, cost 0 (OpenCode priced it)
    assert by_session == {
        "ses_dc8f096a4ffeWFuw0M4C3iwELG": SessionUsage(800, 160, cost_usd=0.0, models=("fake-model",)),
        "ses_dc8f17e47ffeab8GULcqzFgvSu": SessionUsage(100, 20, cost_usd=0.0, models=("fake-model",)),
    }


TOKENS = {"total": 1900, "input": 1000, "output": 150, "reasoning": 50, "cache": {"write": 200, "read": 500}}


@pytest.mark.tmux
@pytest.mark.anyio
async def test_opencode_usage_and_turn_start_through_the_adapter(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    scene = OpenCodeScene(tmux_server, tmp_path)
    w = scene.writer
    pane = scene.start()
    adapter = scene.adapter(pane)
    session = w.session(scene.project)
    assert await adapter.usage() is None and await adapter.working_since() is None  # nothing recorded yet
    user = w.user(session, "read the code")
    step = w.step(session, user)
    opened = w.conn.execute("SELECT time_created FROM message WHERE id = ?", (user,)).fetchone()[0]
    assert await adapter.working_since() == opened / 1000
    w.finish(session, step, texts=("done",), tokens=TOKENS, cost=0.0123)
    assert await adapter.working_since() is None
    # a sub-agent's session (the task tool) counts with it; a row that is not JSON, odd shapes: nothing
    child = w.session(scene.project, parent=session)
    sub = w.step(child, w.user(child, "sub task"))
    w.finish(child, sub, texts=("sub done",), tokens={"input": 10, "output": "many", "cache": None},
             cost=0.001)
    w.conn.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) "
                   "VALUES ('msg_bad', ?, 1, 1, '{not json')", (session,))
    w.conn.commit()
    usage = await adapter.usage()
    assert usage == SessionUsage(input=1010, output=200, cache_read=500, cache_write=200,
                                 cost_usd=pytest.approx(0.0133), models=("fake-model",))
    later = w.step(session, w.user(session, "again"))  # tokens but no cost: tokens only
    w.finish(session, later, texts=("x",), tokens={"input": 5, "output": 5})
    assert (await adapter.usage()).cost_usd is None


# ---- on a real pane ---------------------------------------------------------------------------------------


@pytest.mark.tmux
def test_a_board_started_mid_turn_shows_the_turns_age_and_opencodes_cost(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    (tmp_path / "c").mkdir()
    claude = ClaudeScene(tmux_server, tmp_path / "c")
    tx = claude.transcript()
    tx.write({**tx.line({"type": "user", "promptId": "p1", "message": {"role": "user", "content": "go"}}),
              "timestamp": iso(time.time() - FIVE_MIN)})
    claude.status("busy", statusUpdatedAt=int((time.time() - FIVE_MIN) * 1000))
    (tmp_path / "o").mkdir()
    oc = OpenCodeScene(tmux_server, tmp_path / "o")
    oc_pane = oc.start()
    session = oc.writer.session(oc.project)
    step = oc.writer.step(session, oc.writer.user(session, "hi"))
    oc.writer.finish(session, step, texts=("Hello from OpenCode",), tokens=TOKENS, cost=0.4321)
    config = tmp_path / "routes.yaml"
    config.write_text(f"""version: 1
tiles:
  coder: {{pane: "{claude.pane}", agent: claude}}
  oc: {{pane: "{oc_pane}", agent: opencode}}
routes:
  - {{from: coder, to: oc}}
""")
    board = [sys.executable, "-m", "pipeline.cli", "-L", tmux_server.socket, "-c", str(config),
             "status", "--watch"]
    pane = tmux_server.new_pane(f"bash --norc --noprofile -c {shlex.quote(shlex.join(board) + '; sleep 60')}",
                                cwd=REPO, width=80, height=24,
                                env={"CLAUDE_CONFIG_DIR": str(claude.config), "NO_COLOR": "1"})

    def row(tile: str) -> str:
        lines = tmux_server.run("capture-pane", "-p", "-t", pane).splitlines()
        return next((line for line in lines if line.startswith(tile + " ")), "")

    # the turn began five minutes before the board did: its clock says so (not "working 0s")
    wait_for(lambda: re.search(r"working 5m\d\ds", row("coder")), 20, what="coder working for 5 minutes")
    # 1000 in + 200 out (50 of them reasoning) + 500 cache read + 200 cache write, and OpenCode's own cost
    wait_for(lambda: re.search(r"1\.9k +\$0\.43$", row("oc")), 10, what="OpenCode's tokens and cost")
    tmux_server.run("send-keys", "-t", pane, "q")
