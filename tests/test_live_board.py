"""``baton status --watch``: the live board on a real tmux pane 80 columns wide, and what it is made of —
token counts read from recorded transcripts and rollouts as they grow, lines that never pass the width.

The board's pane is driven with send-keys and read with capture-pane. The Claude tile is the stand-in of
test_claude_adapter (a process named claude and the session file / transcript Claude Code writes): the
test writes ``busy``, ``waiting`` on a permission prompt and ``idle`` and reads each from the board. The
board's slow look is pushed out to a minute, so each state can only have come from a file change.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest

from pipeline.engine.journal import Journal
from pipeline.plugin.events import Completion, Prompt
from pipeline.plugin.usage import MatchingLines, SessionUsage
from pipeline.views.board import Board, HandoffView, columns, render
from plugins.claude_code.usage import TranscriptUsage, price_of
from plugins.codex.usage import RolloutUsage
from tests.support.claude import Scene, text
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

CLAUDE_332 = FIXTURES / "claude-code-2.1.332" / "home" / ".claude" / "projects" / "-home-dev-my-app"
CODEX = FIXTURES / "codex" / "codex_home" / "sessions" / "2026" / "12" / "02"


# ---- tokens and cost --------------------------------------------------------------------------------------


def test_claude_usage_counts_each_message_once_and_the_subagents_too(tmp_path: Path) -> None:
    session = "291eb835-bf54-495e-8cdf-44a5fdbe4c06"
    shutil.copytree(CLAUDE_332, tmp_path / "p")
    usage = TranscriptUsage(tmp_path / "p" / f"{session}.jsonl").read()
    # main chain 133704 in / 418 out over 9 messages (12 lines), its subagent 30989 / 216; a model no price
    # table knows (the fake server's claude-opus-5-5): tokens only
    assert usage == SessionUsage(input=133704 + 30989, output=418 + 216, cost_usd=None,
                                 models=("claude-opus-5-5",))
    old = TranscriptUsage(FIXTURES / "claude-code-old" / "1.0.98-uuid-keyed.jsonl").read()
    assert old is not None and (old.input, old.output) == (20, 45)  # 1.0.x: no cache fields
    assert old.cost_usd == pytest.approx((20 * 3 + 45 * 15) / 1e6)  # claude-sonnet-4-20250514
    # usage: null
    assert TranscriptUsage(FIXTURES / "claude-code-old" / "agent-a1b2c3d4.jsonl").read() is None


def test_claude_usage_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    tally = TranscriptUsage(path)
    assert tally.read() is None  # no file yet

    def assistant(msg: str, usage: object, model: str = "claude-sonnet-4-5-20250929") -> bytes:
        return json.dumps({"type": "assistant", "message": {"id": msg, "model": model, "usage": usage,
                                                            "content": [text("hi")]}}).encode() + b"\n"

    big = json.dumps({"type": "user", "message": {"content": "x" * 3_000_000}}).encode() + b"\n"
    usage = {"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 5000,
             "cache_creation_input_tokens": 100, "cache_creation": {"ephemeral_1h_input_tokens": 40}}
    path.write_bytes(big + assistant("m1", usage) + assistant("m1", usage))  # two blocks of one message
    first = tally.read()
    assert first is not None and (first.input, first.output, first.cache_read, first.cache_write) == \
        (1000, 200, 5000, 100)
    assert first.cost_usd == pytest.approx((1000 * 3 + 200 * 15 + 5000 * 0.3 + 60 * 3.75 + 40 * 6) / 1e6)
    read_to = tally._tails[path].offset
    half = assistant("m2", {"input_tokens": 7, "output_tokens": 3})
    with path.open("ab") as f:  # unknown shapes add nothing, a half-written line waits for its end
        f.write(assistant("m3", "lots") + assistant("m4", {"input_tokens": "x", "output_tokens": -5})
                + b'{"type":"assistant","usage":' + b"\n" + half[:20])
    assert tally.read().total == first.total
    with path.open("ab") as f:
        f.write(half[20:] + assistant("m5", {"input_tokens": 1, "output_tokens": 1}, model="gpt-who"))
    after = tally.read()
    assert (after.input, after.output, after.cost_usd) == (1008, 204, None)  # an unpriced model: tokens only
    assert tally._tails[path].offset == path.stat().st_size > read_to
    path.write_bytes(assistant("m9", {"input_tokens": 5, "output_tokens": 5}))  # replaced: counted anew
    assert tally.read().total == 10


def test_codex_usage_from_0_171_and_older_rollouts(tmp_path: Path) -> None:
    rollout = next(CODEX.glob("rollout-*01a236f2-8213*.jsonl"))
    usage = RolloutUsage(rollout).read()
    # the running total of 4 turns: 4936 input of which 4000 cached, 224 output; model gpt-fake: no price
    assert usage == SessionUsage(input=936, output=224, cache_read=4000, cost_usd=None,
                                 models=("gpt-fake",))
    older = RolloutUsage(next((FIXTURES / "codex-old").glob("rollout-2026-*.jsonl"))).read()
    assert older is not None and older.models == ("gpt-5-codex",) and older.total == 1280
    assert older.cost_usd == pytest.approx((1200 * 1.25 + 80 * 10) / 1e6)
    assert RolloutUsage(next((FIXTURES / "codex-old").glob("rollout-2025-*.jsonl"))).read() is None
    flat = tmp_path / "flat.jsonl"  # the flat payload of early event_msg rollouts: one response each, summed
    line = {"type": "event_msg", "payload": {"type": "token_count", "input_tokens": 100,
                                             "cached_input_tokens": 40, "output_tokens": 10}}
    flat.write_text(json.dumps({"type": "turn_context", "payload": {"model": "gpt-5"}}) + "\n"
                    + (json.dumps(line) + "\n") * 2)
    two = RolloutUsage(flat).read()
    assert (two.input, two.cache_read, two.output) == (120, 80, 20)
    assert price_of("claude-opus-4-1-20250805") is not None and price_of("claude-opus-4-9") is None


def test_matching_lines_skips_a_line_past_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"usage": 1, "pad": "' + b"y" * 5000 + b'"}\n{"usage": 2}\n{"other": 3}\n')
    lines = MatchingLines(path, (b"usage",), max_line_bytes=1000)
    assert lines.read() == [{"usage": 1, "pad": "y" * 5000}, {"usage": 2}]  # one chunk: under CHUNK
    path.write_bytes(b"")
    assert lines.read() == [] and lines.restarted


# ---- the lines -----------------------------------------------------------------------------------------


def test_no_line_passes_the_width_whatever_the_agents_wrote() -> None:
    now = time.time()
    board = Board([("coder", "claude"), ("一二三四五六七八九十", "opencode"), ("x" * 40, "shell")], "r.yaml")
    board.update({"tile": "coder", "state": "waiting (permission prompt)",
                  "last_response": "\x1b[31mred\x1b[0m\ttab 漢字" * 20}, now=now - 130)
    board.update({"tile": "一二三四五六七八九十", "state": "busy", "last_response": "🙂" * 100}, now=now - 5)
    board.update({"tile": "x" * 40, "state": "absent"}, "vim\x1b]0;evil\x07")
    board.views["coder"].usage = SessionUsage(203_106, 444, 1_200_000, 0, 4.123)
    board.views["coder"].last = HandoffView("r", "coder", "reviewer" * 9, "delivered", now - 75, "")
    board.note = "12:00:00 " + "a warning " * 30
    for width in (80, 60, 40, 200):
        lines = render(board, width, 24, now, colour=True)
        plain = [line.replace("\x1b[0m", "").replace("\x1b[1;31m", "").replace("\x1b[33m", "")
                 .replace("\x1b[2m", "") for line in lines]
        assert all("\x1b" not in line and "\t" not in line for line in plain)
        assert max(columns(line) for line in plain) <= width
    lines = render(board, 80, 24, now)
    assert "waiting: permission prompt" in lines[2] and "$4.12" in lines[2] and "1.4M" in lines[2]
    assert "→reviewer" in lines[3] and "working 5s" in lines[4] and "absent: runs vim" in lines[6]
    assert len(render(board, 80, 5, now)) <= 5  # too short a terminal: cut, never scrolled


#: text rich counts narrower than tmux draws it (skin tones, a Devanagari conjunct) or wider (a soft hyphen)
CLUSTERS = "ok 👍🏽 👩🏽‍💻 क्षि a\u00adb 👨‍👩‍👧 ❤️ 1️⃣ 漢字 "


def test_lines_fit_a_real_80_column_pane_whatever_the_clusters(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """tmux is the judge of widths: the board's lines printed in an 80-column pane take one row each (a line
    too wide would wrap onto the next) and each row ends with what the board put last."""
    now = time.time()
    board = Board([("coder", "claude"), ("漢字👍🏽", "codex")], "r.yaml")
    for tile in board.views:
        board.update({"tile": tile, "state": "idle", "last_response": CLUSTERS * 10}, now=now)
        board.views[tile].last = HandoffView("r", tile, "reviewer", "delivered", now - 75, "")
    lines = render(board, 80, 24, now)
    (tmp_path / "board.txt").write_text("".join(line + "\n" for line in lines) + "END\n")
    pane = tmux_server.new_pane("bash --norc --noprofile -c 'cat board.txt; sleep 60'", cwd=tmp_path,
                                width=80, height=24)
    rows = wait_for(lambda: (r := _screen(tmux_server, pane)) and "END" in r and r, 10,
                    what="the board printed")
    assert rows[: rows.index("END")] == [line.rstrip() for line in lines]  # no line wrapped
    assert sum(row.endswith("→reviewer delivered 1m15s ago") for row in rows) == 2, rows


def test_rich_markup_in_what_agents_wrote_is_shown_as_written() -> None:
    """The board is drawn by rich; what an agent wrote is text to show, never markup to obey (a closing
    ``[/]`` with nothing open would even be an error), nor an emoji code."""
    now = time.time()
    answer = "[bold]done[/bold] [/] [red]x[/red] [link=https://evil.example]y[/link] :smile: \\[z]"
    board = Board([("[b]coder", "claude")], "[i]r.yaml")
    board.update({"tile": "[b]coder", "state": "idle", "last_response": answer}, now=now)
    board.note = "12:00:00 [blink]warned[/]"
    lines = render(board, 120, 24, now, colour=True)
    assert "[i]r.yaml" in lines[0] and lines[2].startswith("[b]coder ")
    assert lines[3] == f"  └ {answer}" and lines[4] == board.note
    # the only escape sequences: the state's colour around the state, and its end
    sgr = [re.findall(r"\x1b\[[0-9;]*m", line) for line in lines]
    assert sgr == [[], [], ["\x1b[32m", "\x1b[0m"], [], []]
    assert "\x1b]8;" not in "".join(lines)  # no hyperlink


# ---- the board on a real pane ------------------------------------------------------------------------------


def _screen(server: TmuxServer, pane: str) -> list[str]:
    return server.run("capture-pane", "-p", "-t", pane).splitlines()


def _row(server: TmuxServer, pane: str, tile: str) -> str:
    return next((line for line in _screen(server, pane) if line.startswith(tile + " ")), "")


@pytest.mark.tmux
def test_the_board_follows_a_tile_busy_waiting_idle_on_an_80_column_pane(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    tx = scene.transcript()
    tx.prompt("refactor the parser")
    tx.write(tx.line({"type": "assistant", "message": {
        "id": "msg_1", "model": "claude-sonnet-4-5-20250929", "role": "assistant", "stop_reason": "end_turn",
        "content": [text("Refactored the parser; all 41 tests pass.\nDetails follow.")],
        "usage": {"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 5000}}}))
    tx.end()
    shell = tmux_server.new_pane()
    config = tmp_path / "routes.yaml"
    config.write_text(f"""version: 1
tiles:
  coder: {{pane: "{scene.pane}", agent: claude}}
  reviewer: {{pane: "{shell}", agent: shell}}
  ghost: {{pane: "%999", agent: claude}}
routes:
  - {{from: coder, to: reviewer}}
""")
    journal = Journal()  # baton run has made it (before it, the board finds it on its slow look)
    board = [sys.executable, "-m", "pipeline.cli", "-L", tmux_server.socket, "-c", str(config),
             "status", "--watch"]
    script = (f"{shlex.join(board)}; echo EXIT1=$?; {shlex.join(board)}; echo EXIT2=$?; "
              "stty -a | tr ' ;' '\\n\\n' | grep -x -e -icanon -e icanon -e -echo -e echo; sleep 60")
    pane = tmux_server.new_pane(f"bash --norc --noprofile -c {shlex.quote(script)}", cwd=REPO, width=80,
                                height=24, env={"CLAUDE_CONFIG_DIR": str(scene.config),
                                                "BATON_BOARD_LOOK_S": "60", "NO_COLOR": "1"})
    assert tmux_server.run("display-message", "-p", "-t", pane, "#{pane_width}").strip() == "80"

    def shows(tile: str, words: str) -> bool:
        return words in _row(tmux_server, pane, tile)

    wait_for(lambda: shows("coder", "idle"), 20, what="the board showing coder idle")
    # 1000 + 200 + 5000 tokens at sonnet 4.5's prices (read in a task of their own: they may come later)
    wait_for(lambda: re.search(r"6\.2k +\$0\.01$", _row(tmux_server, pane, "coder")), 5,
             what="coder's tokens and cost")
    assert shows("reviewer", "idle") and shows("ghost", "gone")
    assert any("└ Refactored the parser; all 41 tests pass." in line for line in _screen(tmux_server, pane))
    for status, words in (("busy", "working"), ("waiting", "waiting: permission prompt"), ("idle", "idle")):
        scene.status(status, **({"waitingFor": "permission prompt"} if status == "waiting" else {}))
        wait_for(lambda words=words: shows("coder", words), 5, what=f"the board showing coder {words}")
    # baton run queues a hand-off, then delivers it: both show
    completion = Completion(tile="coder", turn_id="claude:s:k1")
    journal.record_completion(completion)
    prompt = Prompt(route="coder->reviewer", source="coder", target="reviewer", text="go",
                    turn_id="claude:s:k1", hop=1)
    journal.record_routing(completion, [(prompt, "coder->reviewer", "reviewer", "transformed", "")])
    wait_for(lambda: shows("reviewer", " 1 "), 5, what="the board showing 1 hand-off queued for reviewer")
    journal.set_state("coder->reviewer@claude:s:k1", "delivered")
    wait_for(lambda: any("→reviewer delivered" in line for line in _screen(tmux_server, pane)), 5,
             what="the last hand-off on the board")
    journal.close()
    assert all(columns(line) <= 80 for line in _screen(tmux_server, pane))

    tmux_server.run("send-keys", "-t", pane, "q")
    wait_for(lambda: "EXIT1=0" in "\n".join(_screen(tmux_server, pane)), 10, what="q quitting the board")
    wait_for(lambda: shows("coder", "idle"), 20, what="the second board")
    tmux_server.run("send-keys", "-t", pane, "C-c")
    wait_for(lambda: "EXIT2=0" in "\n".join(_screen(tmux_server, pane)), 10, what="Ctrl-C quitting the board")
    after = wait_for(lambda: [line for line in _screen(tmux_server, pane) if line in ("icanon", "echo",
                                                                                        "-icanon", "-echo")])
    assert after == ["icanon", "echo"], after  # the terminal is put back
    assert not any("Traceback" in line for line in _screen(tmux_server, pane))


def test_watch_needs_a_terminal_and_is_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli import main

    config = tmp_path / "routes.yaml"
    config.write_text('version: 1\ntiles:\n  a: {pane: "%1", agent: shell}\n  b: {pane: "%2", agent: shell}\n'
                      "routes:\n  - {from: a, to: b}\n")
    assert main(["-L", "baton-no-such-server", "-c", str(config), "status", "--watch"]) == 1
    assert "needs a terminal" in capsys.readouterr().err
    assert main(["-c", str(config), "status", "--watch", "--json"]) == 2
    assert "use one of them" in capsys.readouterr().err
