"""The Gemini CLI adapter on the recordings of Gemini CLI 0.61.0 (tests/fixtures/gemini-cli-0.61.0): its
session file's turns (the tool loop, the approval that looks finished, the interrupt), the screen (busy,
dialogs, the input box, the paste placeholders), the hooks it installs, usage, ``baton extract``, and the
chain from a pane to the session file on a real tmux server with a process that looks like Gemini CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from pipeline import cli
from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.tiles import identify_agent
from pipeline.spool import HookRecord
from pipeline.system import proc
from plugins.gemini.adapter import GeminiAdapter
from plugins.gemini.hooks import install_hooks
from plugins.gemini.resolve import resolve_session
from plugins.gemini.screen import approval_answer, input_draft, paste_placeholder, waiting_for
from plugins.gemini.session import SessionFile
from plugins.gemini.usage import session_usage
from tests.support.paths import FIXTURES
from tests.support.pipelines import REGISTRIES
from tests.support.polling import until, wait_for
from tests.support.tmux import TmuxServer

REC = FIXTURES / "gemini-cli-0.61.0"
STEPS = REC / "session-steps"
MAIN = "session-2026-12-06T03-55-cf255326.jsonl"
#: an adapter with no tile: what it says of a screen or a draft needs none
SLOW = "Slow answer part one, part two, part three, almost done. SLOWTEST finished."
TOOL_FINAL = "The command ran and printed `hello`. TOOLTEST finished."
OFFLINE = GeminiAdapter(None)  # type: ignore[arg-type]


def turns(step: str, name: str = MAIN):
    session = SessionFile(STEPS / step / name)
    session.read(final=True)
    return session.state.turns()


def screen(name: str) -> str:
    return (REC / "screens" / f"screen_{name}.txt").read_text()


# ---- the session file ---------------------------------------------------------------------------------


def test_a_session_with_no_prompt_has_no_turn_and_the_context_message_is_not_a_prompt() -> None:
    assert turns("02_idle_start") == []


def test_a_plain_turn_ends_at_the_answer_but_only_provisionally_while_it_is_the_last() -> None:
    [first] = turns("03_prompt1_done")
    assert (first.outcome, first.provisional) == ("completed", True)
    assert first.answer.startswith("## Summary") and first.answer.endswith("Done.")
    first, second = turns("04_prompt2_done")
    assert not first.provisional and second.provisional


def test_the_tool_loop_answer_is_the_last_model_call_and_the_one_before_the_tool_is_never_taken() -> None:
    tool = turns("05_tooltest_done")[-1]
    assert tool.prompt == "TOOLTEST: run echo hello in the shell."
    assert (tool.outcome, tool.answer, tool.tool_calls, tool.model_calls) == (
        "completed", TOOL_FINAL, 1, 2)
    turn_id = tool.turn_id
    assert turn_id.startswith("gemini:cf255326-c359-4744-8383-fae0b9193132:")


def test_a_tool_waiting_for_approval_looks_finished_in_the_file_so_it_is_provisional() -> None:
    """The trap: the call's first line (no toolCalls yet) reads like a final answer."""
    ask = turns("06_approval_prompt_waiting")[-1]
    assert (ask.outcome, ask.provisional, ask.answer) == ("completed", True, "I will run a command.")
    done = turns("07_toolask_done")[-1]
    assert (done.turn_id, done.answer) == (ask.turn_id, TOOL_FINAL)


def test_streaming_writes_nothing_so_the_turn_is_open_then_ends() -> None:
    assert turns("08_slow_busy_3s")[-1].outcome is None
    assert turns("09_slow_done")[-1].answer == SLOW


def test_an_interrupt_is_a_failed_turn_and_the_history_rewrite_changes_no_turn() -> None:
    before = turns("09_slow_done")
    after = turns("10_after_interrupt")
    assert [t.answer for t in after[:-1]] == [t.answer for t in before]
    assert (after[-1].outcome, after[-1].detail, after[-1].answer) == ("failed", "interrupted", None)
    ctrl_c = turns("13_nohooks_session_after_quit", "session-2026-12-06T03-58-0b5e55a1.jsonl")[-1]
    assert (ctrl_c.outcome, ctrl_c.detail) == ("failed", "interrupted")


def test_the_summary_appended_by_the_next_process_changes_no_turn() -> None:
    assert turns("11_after_quit") == turns("12_pinned_session_after_quit")


def test_an_error_message_fails_the_turn(tmp_path: Path) -> None:
    path = tmp_path / "session-2026-12-06T04-00-abcdef12.jsonl"
    lines = (STEPS / "03_prompt1_done" / MAIN).read_text().splitlines()[:4]
    lines.append(json.dumps({"id": "e1", "timestamp": "2026-12-06T03:56:12.000Z", "type": "error",
                             "content": "[API Error: quota exceeded]"}))
    path.write_text("\n".join(lines) + "\n")
    session = SessionFile(path)
    session.read()
    [turn] = session.state.turns()
    assert (turn.outcome, turn.detail) == ("failed", "error: [API Error: quota exceeded]")


def test_the_hint_written_after_an_error_leaves_the_turn_failed(tmp_path: Path) -> None:
    """0.61.0 writes an ``info`` after the API's error (seen in tests/test_gemini_states.py); the turn read
    open until then, the board said working for a minute after the failure and no failure was reported."""
    path = tmp_path / "session-2026-12-06T04-00-abcdef12.jsonl"
    lines = (STEPS / "03_prompt1_done" / MAIN).read_text().splitlines()[:4]
    for i, (kind, content) in enumerate([
            ("error", '[API Error: {"error":{"code":400,"message":"Request contains an invalid '
                      'argument."}}]'),
            ("info", 'This request failed. Press F12 for diagnostics, or run /settings and change "Error '
                     'Verbosity" to full for full details.')]):
        lines.append(json.dumps({"id": f"e{i}", "timestamp": f"2026-12-06T03:56:1{i}.000Z", "type": kind,
                                 "content": content}))
    path.write_text("\n".join(lines) + "\n")
    session = SessionFile(path)
    session.read()
    [turn] = session.state.turns()
    assert turn.outcome == "failed" and (turn.detail or "").startswith("error: [API Error:")


def test_usage_counts_each_message_once_with_its_price() -> None:
    session = SessionFile(STEPS / "07_toolask_done" / MAIN)
    session.read()
    total = session_usage(session.state.messages)
    # 6 model calls: 2 plain (20 out), 2 tool calls (10 out, written twice: counted once), 2 finals (20 out)
    assert (total.input, total.output, total.cache_read) == (600, 100, 0)
    assert total.models == ("gemini-2.5-flash",)
    assert total.cost_usd == pytest.approx((600 * 0.30 + 100 * 2.50) / 1e6)


# ---- baton extract ------------------------------------------------------------------------------------


def test_baton_extract_prints_the_last_answer_and_says_why_when_there_is_none(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["extract", "--agent", "gemini", str(STEPS / "09_slow_done" / MAIN)]) == 0
    assert capsys.readouterr().out == SLOW + "\n"
    assert cli.main(["extract", "--agent", "gemini", str(STEPS / "10_after_interrupt" / MAIN)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "no answer" in err
    assert cli.main(["extract", "--agent", "gemini", str(STEPS / "02_idle_start" / MAIN)]) == 1
    assert "no prompt was written" in capsys.readouterr().err


# ---- the screen ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["06_prompt1_busy", "13_slow_busy_0s", "15_slow_busy_3s",
                                  "27_nohooks_busy_0s", "28_nohooks_busy_2s", "17_interrupt_busy_before_esc"])
def test_busy_screens_are_busy(name: str) -> None:
    assert OFFLINE.is_busy(screen(name))


@pytest.mark.parametrize("name", ["04_idle_start", "07_prompt1_done", "16_slow_done", "18_after_interrupt",
                                  "29_nohooks_done", "30_nohooks_after_ctrl_c_interrupt",
                                  "12_tool_approved_done"])
def test_idle_screens_are_idle_with_an_empty_input(name: str) -> None:
    """Including the stale ``Executing Hook: … AfterAgent`` line left after a turn."""
    assert not OFFLINE.is_busy(screen(name))
    assert waiting_for(screen(name)) is None
    assert input_draft(screen(name)) == ""


def test_dialogs_are_what_a_person_is_waited_for() -> None:
    assert waiting_for(screen("11_approval_prompt")) == "permission prompt: Shell"
    assert waiting_for(screen("11b_approval_prompt_bottom")) == "permission prompt: Shell"
    assert waiting_for((REC / "screens" / "screen_11_approval_prompt.ansi.txt").read_text()) == \
        "permission prompt: Shell"
    assert waiting_for(screen("01_first_run_trust_dialog")) == "folder trust dialog"
    assert waiting_for(screen("02_auth_dialog_after_trust_restart")) == "authentication dialog"


def test_the_trust_dialog_answered_stays_drawn_above_the_restart_and_waits_for_no_one() -> None:
    """The ~5 s the new process takes to start, the answered dialog stays on the screen above ``Gemini CLI
    is restarting to apply the trust changes...`` (tests/test_gemini_states.py: a false waiting)."""
    answered = screen("01b_trust_answered_restarting")
    assert "Do you trust the files in this folder?" in answered
    assert waiting_for(answered) is None
    assert approval_answer(answered, True) is None and approval_answer(answered, False) is None


def test_the_input_box_shows_drafts_inline_and_long_pastes_as_placeholders() -> None:
    assert input_draft(screen("05_prompt1_typed")) == "Explain what app.py does and list the files."
    assert input_draft((REC / "screens" / "screen_05_prompt1_typed.ansi.txt").read_text()) == \
        "Explain what app.py does and list the files."
    two = (REC / "pastes" / "paste2.txt").read_text().rstrip("\n")
    assert OFFLINE.shows_paste(input_draft(screen("19_paste_2lines")), two)
    assert input_draft(screen("21_paste_12lines")) == "[Pasted Text: 12 lines]"
    assert input_draft(screen("22_paste_1500chars")) == "[Pasted Text: 1500 chars]"
    assert input_draft(screen("20_after_ctrl_c_clear")) == ""
    assert input_draft(screen("01_first_run_trust_dialog")) is None


def test_the_placeholder_rule_more_than_5_lines_else_more_than_500_utf16_units() -> None:
    twelve = (REC / "pastes" / "paste12.txt").read_text().rstrip("\n")
    long = (REC / "pastes" / "paste1500.txt").read_text().rstrip("\n")
    assert paste_placeholder("[Pasted Text: 12 lines]", twelve)
    assert paste_placeholder("[Pasted Text: 1500 chars]", long)
    assert paste_placeholder("[Pasted Text: 1500 chars #2]", long)
    assert not paste_placeholder("[Pasted Text: 11 lines]", twelve)
    assert not paste_placeholder("[Pasted Text: 1500 chars]", twelve)  # 12 lines: counted in lines
    assert not paste_placeholder("[Pasted Text: 1499 chars]", long)
    six = "\n".join(["x"] * 6)
    assert paste_placeholder("[Pasted Text: 6 lines]", six)
    assert not paste_placeholder("[Pasted Text: 5 lines]", "\n".join(["x"] * 5))  # 5 lines: inline
    emoji = "😀" * 251  # 502 UTF-16 units, 251 characters
    assert paste_placeholder("[Pasted Text: 502 chars]", emoji)


#: pasted into the real Gemini CLI 0.61.0 (120 columns) with the dispatcher's paste, 2026-12-06: the text,
#: and the placeholder it drew (None: drawn inline)
EDGES = {
    "\n".join(f"line {i} of five" for i in range(5)): None,
    "\n".join(f"line {i} of six" for i in range(6)): "[Pasted Text: 6 lines]",
    "a" * 500: None,
    "b" * 501: "[Pasted Text: 501 chars]",
    "😀" * 250: None,
    "😀" * 251: "[Pasted Text: 502 chars]",
    "\n".join("c" * 119 for _ in range(5)): "[Pasted Text: 599 chars]",
}


def test_the_placeholder_rule_draws_what_the_real_cli_drew_at_its_edges() -> None:
    for text, drawn in EDGES.items():
        assert paste_placeholder(drawn or text, text) is (drawn is not None), (text[:20], drawn)
        assert OFFLINE.shows_paste(drawn or text, text)
    seven = "\n".join(f"twice {i}" for i in range(7))
    assert not OFFLINE.shows_paste("[Pasted Text: 7 lines][Pasted Text: 7 lines #2]", seven)


# ---- hooks --------------------------------------------------------------------------------------------


def test_baton_hooks_install_adds_after_agent_and_notification_and_keeps_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path))
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    recorded = json.loads((REC / "home" / ".gemini" / "settings.json").read_text())
    settings.write_text(json.dumps(recorded))
    assert cli.main(["hooks", "install", "--agent", "gemini"]) == 0
    assert "added the AfterAgent hook" in capsys.readouterr().out
    data = json.loads(settings.read_text())
    for event in ("AfterAgent", "Notification"):
        commands = [h["command"] for e in data["hooks"][event] for h in e["hooks"]]
        assert commands[0].startswith("/home/dev/bin/log-hook")
        assert commands[1].endswith("-m pipeline.spool gemini")
    assert data["model"] == recorded["model"]
    assert data["hooks"]["BeforeTool"] == recorded["hooks"]["BeforeTool"]
    assert cli.main(["hooks", "install", "--agent", "gemini"]) == 0
    assert "already installed" in capsys.readouterr().out
    settings.write_text("{not json")
    assert cli.main(["hooks", "install", "--agent", "gemini"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid JSON" in err and settings.read_text() == "{not json"


def test_install_hooks_refuses_hooks_of_another_shape(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"AfterAgent": {"x": 1}}}))
    with pytest.raises(ValueError, match="not a list"):
        install_hooks(settings, [sys.executable, "-m", "pipeline.spool", "gemini"])


# ---- the chain, on a real tmux server -------------------------------------------------------------------


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FakeGemini:
    """A pane whose process looks like Gemini CLI from outside: ``node …/bin/gemini`` (a Python copied as
    ``node`` running a script named ``gemini``) whose child has ``GEMINI_CLI_NO_RELAUNCH=true`` (and is
    started again when it exits, as the trust dialog's restart does), in a project with a ``projects.json``
    slug — and session files written as Gemini CLI writes them."""

    def __init__(self, server: TmuxServer, tmp: Path, args: str = "") -> None:
        bin_dir = tmp / "opt" / "node_modules" / ".bin"
        bin_dir.mkdir(parents=True)
        shutil.copy(Path(sys.executable).resolve(), bin_dir / "node")
        (bin_dir / "gemini").write_text(
            "import os, subprocess, sys, time\n"
            "while os.environ.get('GEMINI_CLI_NO_RELAUNCH') != 'true':  # relaunched when it exits\n"
            "    subprocess.call([sys.executable, *sys.argv],\n"
            "                    env={**os.environ, 'GEMINI_CLI_NO_RELAUNCH': 'true'})\n"
            "    time.sleep(0.05)\n"
            "time.sleep(300)\n")
        self.home, self.project = tmp / "home", tmp / "my-app"
        self.project.mkdir()
        gemini = self.home / ".gemini"
        self.chats = gemini / "tmp" / "my-app" / "chats"
        self.chats.mkdir(parents=True)
        (gemini / "projects.json").write_text(json.dumps({"projects": {str(self.project): "my-app"}}))
        self.server, self.command = server, f"{bin_dir / 'node'} {bin_dir / 'gemini'} {args}"
        self.pane = server.new_pane(self.command, cwd=self.project,
                                    env={"GEMINI_CLI_HOME": str(self.home), "PATH": "/usr/bin:/bin"})
        self.shell = server.pane_pid(self.pane)
        self.child()
        self.ctx = EngineContext(name="gem", tile=Tile(pane=self.pane, agent="gemini"), tmux=server.tmux)
        self.adapter = GeminiAdapter(self.ctx)

    def child(self, not_pid: int = 0, shell: int = 0) -> int:
        """The relaunched child's pid, once there is one (other than ``not_pid``)."""
        def child() -> int | None:
            under = proc.subtree(shell or self.shell)
            return next((p.pid for p in under if p.comm == "node" and p.pid != not_pid
                         and proc.environ(p.pid).get("GEMINI_CLI_NO_RELAUNCH") == "true"), None)

        return wait_for(child, what="the relaunched child")

    def another_pane(self) -> int:
        """Another pane running the same Gemini CLI in the same folder and home; its shell's pid."""
        pane = self.server.new_pane(self.command, cwd=self.project,
                                    env={"GEMINI_CLI_HOME": str(self.home), "PATH": "/usr/bin:/bin"})
        shell = self.server.pane_pid(pane)
        self.child(shell=shell)
        return shell

    def session(self, session_id: str | None = None, *, start: str | None = None) -> Path:
        session_id = session_id or str(uuid.uuid4())
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M")
        path = self.chats / f"session-{stamp}-{session_id[:8]}.jsonl"
        head = {"sessionId": session_id, "projectHash": "x", "startTime": start or now_iso(),
                "lastUpdated": now_iso(), "kind": "main"}
        path.write_text(json.dumps(head) + "\n")
        return path


def append(path: Path, *records: dict) -> None:
    with path.open("a") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


def prompt(text: str) -> dict:
    return {"id": str(uuid.uuid4()), "timestamp": now_iso(), "type": "user", "content": [{"text": text}]}


def answer(text: str, msg_id: str | None = None, **extra: object) -> dict:
    return {"id": msg_id or str(uuid.uuid4()), "timestamp": now_iso(), "type": "gemini", "content": text,
            "tokens": {"input": 100, "output": 20, "cached": 0, "thoughts": 0, "tool": 0, "total": 120},
            "model": "gemini-2.5-flash", **extra}


@pytest.mark.tmux
def test_agent_auto_claims_a_node_running_gemini_and_not_another_node(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    gem = FakeGemini(tmux_server, tmp_path / "g")
    assert identify_agent(gem.shell, REGISTRIES.agents) == "gemini"
    other_bin = tmp_path / "other"
    other_bin.mkdir()
    shutil.copy(Path(sys.executable).resolve(), other_bin / "node")
    (other_bin / "server.js").write_text("import time\ntime.sleep(300)\n")
    other = tmux_server.new_pane(f"{other_bin / 'node'} {other_bin / 'server.js'}")
    assert identify_agent(tmux_server.pane_pid(other), REGISTRIES.agents) == "shell"


@pytest.mark.tmux
def test_the_chain_picks_the_session_that_started_after_the_process_not_the_newest_modified(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    gem = FakeGemini(tmux_server, tmp_path)
    old = gem.session(start="2026-12-06T03:55:47.971Z")
    mine = gem.session()
    append(old, {"$set": {"summary": "written by the new process's startup"}})  # the newest modified
    res = resolve_session(gem.shell)
    assert res.session == mine and res.rule == "start time", [s.detail for s in res.steps]
    assert [s.step for s in res.steps][:3] == ["process", "gemini home", "project"]
    assert "relaunched child" in res.steps[0].detail
    assert resolve_session(gem.shell, hook_transcript=str(old)).rule == "hook"


@pytest.mark.tmux
def test_a_resumed_session_is_the_one_written_to_since_the_process_started(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    gem = FakeGemini(tmux_server, tmp_path, args="--resume latest")
    resumed = gem.session(start="2026-12-06T03:55:47.971Z")
    os.utime(resumed, (time.time() - 3600, time.time() - 3600))  # last written an hour ago
    assert resolve_session(gem.shell).session is None
    append(resumed, prompt("and one more thing"))
    res = resolve_session(gem.shell)
    assert (res.session, res.rule) == (resumed, "written since start")


@pytest.mark.tmux
def test_the_session_id_in_argv_decides_between_two_files_of_the_same_prefix(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    wanted = "0b5e55a1-0000-4000-8000-00000000beef"
    gem = FakeGemini(tmux_server, tmp_path, args=f"--session-id {wanted}")
    gem.session("0b5e55a1-0000-4000-8000-0000000000aa")
    time.sleep(0.01)  # shapes the scenario (two files, modified one after the other)
    mine = gem.session(wanted, start="2026-12-06T03:57:00.000Z")
    res = resolve_session(gem.shell)
    assert (res.session, res.rule) == (mine, "--session-id")


@pytest.mark.tmux
@pytest.mark.anyio
async def test_clear_starts_a_new_session_in_the_same_process_and_the_follower_takes_it(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """``/clear`` (no hooks): a new session file, same process; the folder changed, so the follower
    resolves again and the chain takes the newest session started since the process."""
    gem = FakeGemini(tmux_server, tmp_path)
    first = gem.session()
    append(first, prompt("before the clear"), answer("done"))
    adapter = gem.adapter
    await adapter.refresh(force=True)
    await adapter.refresh()  # the folder stamped
    assert adapter.file is not None and adapter.file.path == first
    cleared = gem.session()
    await adapter.refresh()
    assert adapter.file is not None and adapter.file.path == cleared
    res = resolve_session(gem.shell)
    assert (res.session, res.rule, res.unsure) == (cleared, "start time", False)
    assert "the newest: /clear of 2" in res.steps[-2].detail


@pytest.mark.tmux
def test_another_pane_in_the_folder_keeps_its_sessions_and_the_screen_tells_whose_clear_it_is(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """Two Gemini CLIs in one folder: the other's first session is never this pane's; a newer session may
    be either one's ``/clear``, so the pane keeps the one it follows until its screen shows the new
    session's prompt."""
    gem = FakeGemini(tmux_server, tmp_path)
    mine = gem.session()
    other = gem.another_pane()
    theirs = gem.session()
    assert resolve_session(gem.shell).session == mine
    assert resolve_session(other).session == theirs
    cleared = gem.session()  # whose /clear?
    res = resolve_session(gem.shell, current=mine)
    assert (res.session, res.unsure) == (mine, True) and "the one followed of 2" in res.steps[-2].detail
    assert resolve_session(other, current=theirs).session == theirs
    append(cleared, prompt("review the parser, then the lexer"))
    screen = "Gemini CLI v0.61.0\n > review the parser, then the lexer\n ⊷ Thinking..."
    res = resolve_session(gem.shell, current=mine, screen=screen)
    assert (res.session, res.rule) == (cleared, "screen")
    assert resolve_session(other, current=theirs, screen="Gemini CLI v0.61.0\n > another thing").session \
        == theirs


@pytest.mark.tmux
@pytest.mark.anyio
async def test_the_follower_takes_a_newer_session_once_its_pane_shows_that_sessions_prompt(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """Another Gemini CLI in the folder: a new session may be its ``/clear``; the follower keeps its own
    until the new session's prompt shows on its pane (looked at again on each change while unsure)."""
    gem = FakeGemini(tmux_server, tmp_path)
    mine = gem.session()
    gem.another_pane()
    gem.session()  # the other pane's
    adapter = gem.adapter
    await adapter.refresh(force=True)
    await adapter.refresh()
    assert adapter.file is not None and adapter.file.path == mine
    cleared = gem.session()
    await adapter.refresh()
    assert adapter.file.path == mine
    append(cleared, prompt("review the parser, then the lexer"))
    tty = tmux_server.run("display-message", "-p", "-t", gem.pane, "#{pane_tty}").strip()
    with open(tty, "w") as screen:  # what Gemini CLI shows of a prompt typed in its pane
        screen.write("\r\n > review the parser, then the lexer\r\n")

    async def follows_cleared() -> bool:
        await adapter.refresh()
        return adapter.file is not None and adapter.file.path == cleared

    await until(follows_cleared, 10, "the cleared session followed")


@pytest.mark.tmux
@pytest.mark.anyio
async def test_a_new_child_with_a_new_session_after_the_trust_restart_is_followed(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """The folder-trust dialog restarts Gemini CLI into a new child with a new session and deletes the
    first session's file: the adapter follows the new child's session."""
    gem = FakeGemini(tmux_server, tmp_path)
    first = gem.session()
    adapter = gem.adapter
    await adapter.refresh(force=True)
    assert adapter.file is not None and adapter.file.path == first
    old = gem.child()
    os.kill(old, signal.SIGKILL)
    first.unlink()
    gem.child(not_pid=old)
    second = gem.session()

    async def follows_second() -> bool:
        await adapter.refresh()
        return adapter.file is not None and adapter.file.path == second

    await until(follows_second, 10, "the new child's session followed")


@pytest.mark.tmux
@pytest.mark.anyio
async def test_a_final_looking_answer_waits_for_the_hook_or_an_idle_screen(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """The file of a tool waiting for approval looks finished: the hook confirms the end, under the file's
    turn id, with the file's answer (not the hook's garbled one)."""
    gem = FakeGemini(tmux_server, tmp_path)
    path = gem.session()
    session_id = json.loads(path.read_text().splitlines()[0])["sessionId"]
    ask = prompt("TOOLASK: create approved.txt")
    append(path, ask, answer("I will run a command."))
    adapter = gem.adapter
    assert await adapter.finished_turns(0.0) is not None
    turn_id = f"gemini:{session_id}:{ask['id']}"
    assert adapter._turn(turn_id).provisional
    record = HookRecord("gemini", {"hook_event_name": "Notification", "session_id": session_id,
                                   "transcript_path": str(path),
                                   "details": {"title": "Confirm Shell Command"}}, gem.pane, time.time())
    assert await adapter.hook_completion(record) is None
    assert adapter.waiting_now == "permission prompt: Confirm Shell Command"
    call_id = str(uuid.uuid4())
    append(path, answer("I will run a command.", call_id, toolCalls=[{"name": "run_shell_command"}]),
           {"id": str(uuid.uuid4()), "timestamp": now_iso(), "type": "user",
            "content": [{"functionResponse": {"name": "run_shell_command"}}]},
           answer("The command ran."))
    done = HookRecord("gemini", {"hook_event_name": "AfterAgent", "session_id": session_id,
                                 "transcript_path": str(path), "prompt": ask["content"][0]["text"],
                                 "prompt_response": "I will run a command.\n \nThe command ran. garbled"},
                      gem.pane, time.time())
    other_pane = HookRecord("gemini", dict(done.payload), "%999", time.time())
    assert await adapter.hook_completion(other_pane) is None
    completion = await adapter.hook_completion(done)
    assert completion is not None and (completion.turn_id, completion.signal) == (turn_id, "hook")
    response = await adapter.response(completion)
    assert response.text == "The command ran." and response.source == "transcript"
    emitted: list = []

    async def emit(c: object) -> None:
        emitted.append(c)

    async with anyio.create_task_group() as tg:
        tg.start_soon(adapter.follow, emit)
        await until(lambda: emitted, 10, "the follower's completion")
        tg.cancel_scope.cancel()
    assert [c.turn_id for c in emitted] == [turn_id]
    usage = await adapter.usage()
    assert usage is not None and usage.output == 60
