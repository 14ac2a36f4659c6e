"""The Cline adapter against files and screens recorded from the real Cline CLI 3.0.65
(tests/fixtures/cline-3.0.65; its README says how): the session's turns and answers (a tool turn, an
interrupt, a failed call, a 14-line paste), the screen's busy line, input box, paste placeholder, approval
and start-up dialogs, the approval's keys, ``baton extract``, the hooks' install, usage, and the hub daemon
never taken for the pane's agent."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from pipeline.plugin.tools import proc
from pipeline.system.text import sanitize
from plugins.cline.adapter import ClineAdapter
from plugins.cline.hooks import HOOK_MARK, hook_kind, hook_session, install_hooks
from plugins.cline.resolve import find_cline, is_cline
from plugins.cline.screen import (
    approval_answer,
    approval_question,
    input_draft,
    paste_placeholder,
    sent_prompts,
    waiting_for,
)
from plugins.cline.session import SessionFile
from plugins.cline.usage import session_usage
from tests.support.cli import baton
from tests.support.crash_at_paste import LONG_TEMPLATE
from tests.support.paths import FIXTURES
from tests.support.polling import wait_for

ROOT = FIXTURES / "cline-3.0.65"
FIRST = ROOT / "sessions" / "1796611381136_b3872" / "1796611381136_b3872.json"
HUBBED = ROOT / "sessions" / "1796611691105_fwr23" / "1796611691105_fwr23.json"
FOURTEEN = "\n".join(f"line {i} of the long paste" for i in range(1, 15))
CRASH = LONG_TEMPLATE.format(marker="CLINE-1").replace("{response}", "demo answer text here")


def screen(name: str) -> str:
    return (ROOT / "screens" / f"{name}.ans").read_text(encoding="utf-8")


def read(path: Path) -> SessionFile:
    file = SessionFile(path)
    assert file.read()
    return file


def test_the_session_folds_into_turns_a_tool_turn_an_interrupt_a_failure_and_a_paste() -> None:
    state = read(FIRST).state
    turns = {t.prompt: t for t in state.turns()}
    hello, tool = turns["Say hello please"], turns["TOOLTEST now"]
    assert hello.outcome == "completed" and (hello.answer or "").startswith("FAKE_ANSWER_BEGIN")
    assert hello.turn_id == "cline:1796611381136_b3872:f3a2156b-1f11-4ef0-a700-86c15e31f180"
    assert tool.outcome == "completed" and (tool.answer or "").startswith("TOOL_FINAL_BEGIN")  # after a tool
    assert (turns["SLOWTEST interrupt me"].outcome, turns["SLOWTEST interrupt me"].answer) == ("failed", None)
    failed = turns["this will fail"]
    assert failed.outcome == "failed" and failed.detail.startswith("error: Cannot connect to API")
    assert FOURTEEN in turns  # stored wrapped in <user_input mode="act">, its line ends as \r
    assert state.status == "completed" and state.cwd == "/tmp/clx/home/proj"


def test_an_interrupted_last_turn_fails_once_the_session_is_idle_and_stays_open_while_it_runs(
        tmp_path: Path) -> None:
    folder = tmp_path / "s_1"
    folder.mkdir()
    record = json.loads(HUBBED.read_text())
    messages = json.loads(HUBBED.with_name(HUBBED.stem + ".messages.json").read_text())
    messages["messages"] = [m for m in messages["messages"]][:1]  # the prompt only: Esc before any step
    (folder / "s_1.messages.json").write_text(json.dumps(messages))
    for status, outcome in (("running", None), ("pending", None), ("idle", "failed")):
        (folder / "s_1.json").write_text(json.dumps({**record, "status": status}))
        [turn] = read(folder / "s_1.json").state.turns()
        assert turn.outcome == outcome and (outcome is None or turn.detail == "interrupted")


def test_the_screen_busy_draft_placeholder_and_dialogs() -> None:
    adapter = ClineAdapter.__new__(ClineAdapter)
    assert adapter.is_busy(screen("busy")) and adapter.is_busy(screen("thinking"))
    assert not any(adapter.is_busy(screen(n)) for n in ("idle", "draft", "placeholder_14_lines"))
    assert input_draft(screen("idle")) == "" and input_draft(screen("busy")) == ""
    assert input_draft(screen("draft")) == "a short draft\nof two lines"
    placeholder = input_draft(screen("placeholder_14_lines"))
    assert placeholder == "[line 1 of the long paste line 2 of the long past... Pasted +14 lines]"
    assert paste_placeholder(placeholder, FOURTEEN)
    welcome = input_draft(screen("placeholder_welcome"))  # the first prompt's narrow box wraps it
    assert welcome == "[CRASH-AT-PASTE CLINE-1: review this answer demo... Pasted +14\nlines]"
    assert paste_placeholder(welcome, sanitize(CRASH))
    assert waiting_for(screen("approval")) == "permission prompt: Approve tool call?"
    assert input_draft(screen("approval")) is None  # no input box: never typed into
    assert approval_question(screen("approval")) == \
        "Approve tool call?\nrun_commands: touch approved.txt && echo FAKE_TOOL_OK"
    assert approval_answer(screen("approval"), True) == ["y"]
    assert approval_answer(screen("approval"), False) == ["n"]
    assert approval_answer(screen("idle"), True) is None
    assert waiting_for(screen("provider_picker")) == "provider picker: sign in or bring your own provider"
    assert waiting_for(screen("notice")) == "start-up notice"
    assert all(waiting_for(screen(n)) is None for n in ("idle", "busy", "draft", "placeholder_14_lines"))
    assert sent_prompts(screen("busy"))[-2:] == [placeholder, "SLOWTEST busy screen"]


@pytest.mark.parametrize(("text", "shown", "is_it"), [
    (FOURTEEN, "[line 1 of the long paste line 2 of the long past... Pasted +14 lines]", True),
    ("l1\nl2\nl3\nl4\nl5", "[l1 l2 l3 l4 l5... Pasted +5 lines]", True),  # 5 lines: the first drawn so
    ("l1\nl2\nl3\nl4\nl5\n", "[l1 l2 l3 l4 l5... Pasted +5 lines]", True),  # a trailing line end: not one
    ("l1\nl2\nl3\nl4", "[l1 l2 l3 l4... Pasted +4 lines]", False),  # 4 lines are drawn inline
    ("l1\nl2\nl3\nl4\nl5\nl6", "[l1 l2 l3 l4 l5... Pasted +5 lines]", False),  # another count
    ("m1\nl2\nl3\nl4\nl5", "[l1 l2 l3 l4 l5... Pasted +5 lines]", False),  # other words
])
def test_the_paste_placeholder_rule_measured_on_3_0_65(text: str, shown: str, is_it: bool) -> None:
    assert paste_placeholder(shown, sanitize(text)) is is_it


def test_extract_reads_a_session_record_or_its_messages_and_is_told_apart() -> None:
    for path in (HUBBED, HUBBED.with_name(HUBBED.stem + ".messages.json")):
        assert ClineAdapter.recognizes_file(path)
        found = baton("extract", "--json", str(path))
        assert found.status == 0, found.err
        out = json.loads(found.out)
        assert out["agent"] == "cline" and out["text"].startswith("FAKE_ANSWER_BEGIN")
    assert not ClineAdapter.recognizes_file(ROOT / "hooks" / "TaskComplete.json")


def test_usage_counts_every_model_calls_tokens_without_a_price() -> None:
    usage = session_usage(read(HUBBED).state.messages)
    assert usage is not None and usage.output > 0 and usage.input > 0
    assert usage.cost_usd is None and usage.models == ("fake-model",)  # a custom endpoint: no price


def test_the_hooks_are_executables_in_the_hooks_folder_installed_once(tmp_path: Path) -> None:
    folder = tmp_path / "hooks"
    said = install_hooks(folder, ["/venv/python", "-m", "pipeline.spool", "cline"])
    assert "added the TaskComplete hook" in said and "added the TaskError hook" in said
    for name in ("TaskComplete", "TaskError"):
        assert os.stat(folder / name).st_mode & stat.S_IXUSR and HOOK_MARK in (folder / name).read_text()
    assert "already installed" in install_hooks(folder, ["/venv/python", "-m", "pipeline.spool", "cline"])
    (folder / "TaskError").write_text("#!/bin/sh\necho mine\n")
    with pytest.raises(ValueError, match="another hook"):
        install_hooks(folder, ["/other/python", "-m", "pipeline.spool", "cline"])
    assert "/venv/python" in (folder / "TaskComplete").read_text()  # nothing was changed


def test_the_recorded_hook_payloads_name_their_kind_and_session() -> None:
    complete = json.loads((ROOT / "hooks" / "TaskComplete.json").read_text())
    assert hook_kind(complete) == "agent_end" and hook_session(complete) == "1796611691105_fwr23"
    assert hook_kind(json.loads((ROOT / "hooks" / "TaskStart.json").read_text())) is None
    assert hook_kind(json.loads((ROOT / "hooks" / "SessionShutdown.json").read_text())) is None


def test_the_hub_daemon_is_never_the_panes_agent(tmp_path: Path) -> None:
    """The TUI's hub daemon is the same binary (comm ``cline``) run as ``cline --cline-hub-daemon``, its
    child: the pane's agent is the other one."""
    fake = tmp_path / "cline"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(0o755)
    shell = subprocess.Popen(["sh", "-c", f"'{fake}' --cline-hub-daemon & '{fake}' & wait"])
    try:
        found = wait_for(lambda: find_cline(shell.pid) if len(list(proc.subtree(shell.pid))) >= 3 else None)
        assert found is not None and "--cline-hub-daemon" not in found.argv
        daemon = next(p for p in proc.subtree(shell.pid) if "--cline-hub-daemon" in proc.cmdline(p.pid))
        assert not is_cline(daemon) and not ClineAdapter.claims_process(daemon)
    finally:
        for p in reversed(list(proc.subtree(shell.pid))[1:]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, 15)
        shell.wait(timeout=10)


def test_a_status_rewritten_within_one_clock_tick_is_read(tmp_path: Path) -> None:
    """``running`` → ``pending`` (an approval) keeps the record's size, and two writes within a clock tick
    keep its mtime: the record is read at every look, not by its stamp."""
    folder = tmp_path / "s_1"
    folder.mkdir()
    record = folder / "s_1.json"
    record.write_text(json.dumps({"session_id": "s_1", "status": "running"}))
    file = read(record)
    stat_before = record.stat()
    record.write_text(json.dumps({"session_id": "s_1", "status": "pending"}))
    os.utime(record, ns=(stat_before.st_atime_ns, stat_before.st_mtime_ns))
    assert record.stat().st_size == stat_before.st_size
    assert file.read() and file.state.status == "pending" and file.state.busy
    assert not file.read()  # nothing changed since
