"""The Copilot CLI adapter on the recordings of the real 1.0.102 (tests/fixtures/copilot-1.0.102): the turns
folded from events.jsonl (a model call inside a tool loop is not the end; interrupts and declined approvals
fail), the screen (busy, approval, the input and its paste placeholder), the hooks, usage, extract, and the
process chain on a real process whose comm is ``MainThread``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine.tiles import identify_agent
from pipeline.plugin.manager import load_registries
from pipeline.plugin.tools import AppendedLines
from plugins.copilot.adapter import CopilotAdapter
from plugins.copilot.events import SessionEvents
from plugins.copilot.hooks import hook_kind, install_copilot_hooks
from plugins.copilot.resolve import find_copilot_process, resolve_session
from plugins.copilot.screen import (
    approval_answer,
    approval_prompt,
    input_draft,
    is_working,
    paste_placeholder,
)
from plugins.copilot.usage import EventsUsage
from tests.support.paths import FIXTURES

REC = FIXTURES / "copilot-1.0.102"
SESSION1 = "6be1aeb7-efc7-4bc0-9fb1-1d7745c1b872"
TOOL_ANSWER = "The command ran and printed `hello`. TOOLTEST finished."


def fold(name: str) -> SessionEvents:
    state = SessionEvents()
    for record in AppendedLines(REC / "events" / name).read(final=True):
        state.feed(record)
    return state


def screen(name: str) -> str:
    return (REC / "screens" / f"screen_{name}.txt").read_text()


def test_every_user_turn_of_the_recorded_session_ends_once_with_its_answer_or_its_interrupt() -> None:
    state = fold("session1_final.jsonl")
    assert state.session_id == SESSION1 and state.cwd == "/home/dev/my-app"
    ends = [(t.prompt.split(":")[0].split(" ")[0], t.outcome, t.detail) for t in state.finished()]
    assert ends == [("Explain", "completed", ""), ("And", "completed", ""), ("TOOLTEST", "completed", ""),
                    ("TOOLASK", "completed", ""), ("SLOWTEST", "completed", ""),
                    ("SLOWTEST", "failed", "interrupted (user_abort)"), ("SLOWTEST", "completed", "")]
    tool_turn = state.finished()[2]
    assert tool_turn.answer == TOOL_ANSWER  # the second model call's, not "I will run a command."
    assert state.finished()[5].answer is None and not state.busy and state.shut_down


def test_a_model_call_that_asked_for_a_tool_is_not_the_end_of_the_turn() -> None:
    """Fed line by line: after the tool call's turn_end (turnId 0) the turn is still open."""
    lines = (REC / "events" / "session1_final.jsonl").read_text().splitlines()
    state, ended, tool_calls_closed = SessionEvents(), [], 0
    for line in lines:
        record = json.loads(line)
        state.feed(record)
        new = state.take_finished()
        ended += new
        if record["type"] == "assistant.turn_end" and state.busy:
            assert new == []  # a model call that asked for a tool: the turn is open still
            tool_calls_closed += 1
    # TOOLTEST's and TOOLASK's first calls, and the call an Esc cut (its abort comes next)
    assert len(ended) == 7 and tool_calls_closed == 3


def test_an_approval_in_progress_is_a_person_asked_and_the_turn_still_open() -> None:
    state = fold("step_04_approval_prompt_waiting.jsonl")
    assert state.busy and state.asking is not None
    assert state.asking_for == "touch approved.txt && echo hello"
    assert [t.prompt for t in state.finished()][-1].startswith("TOOLTEST")


def test_a_streaming_turn_is_open_and_an_interrupt_fails_it_without_an_answer() -> None:
    assert fold("step_06_slow_busy_3s.jsonl").busy
    state = fold("step_08_after_interrupt.jsonl")
    last = state.last_finished()
    assert last is not None and not state.busy
    assert (last.outcome, last.answer, last.detail) == ("failed", None, "interrupted (user_abort)")


def test_a_declined_approval_and_a_ctrl_c_fail_their_turns() -> None:
    state = fold("session2_pinned_final.jsonl")
    assert [(t.outcome, t.detail) for t in state.finished()] == [
        ("completed", ""), ("failed", "interrupted (user_initiated)"),
        ("failed", "interrupted (user_initiated)")]
    assert state.asking is None  # the cancelled permission.completed came after the abort


def test_a_model_api_error_fails_the_turn_with_its_message() -> None:
    state = fold("failed_400.jsonl")
    last = state.last_finished()
    assert last is not None and not state.busy
    assert (last.outcome, last.answer, last.detail) == ("failed", None, "400 model overloaded (fake)")


def test_extract_reads_the_last_answer_and_names_an_interrupted_last_turn(tmp_path: Path) -> None:
    response = CopilotAdapter.extract_file(REC / "events" / "session1_final.jsonl")
    assert response is not None and response.text.startswith("Slow answer part one")
    assert response.completion.turn_id.startswith("copilot:session1_final") is False
    with pytest.raises(LookupError, match="interrupted"):
        CopilotAdapter.extract_file(REC / "events" / "step_08_after_interrupt.jsonl")
    empty = tmp_path / "events.jsonl"
    empty.write_text("")
    with pytest.raises(LookupError, match="no prompt"):
        CopilotAdapter.extract_file(empty)


def test_the_hand_off_turn_id_is_the_same_from_the_file_and_names_the_session() -> None:
    state = fold("session1_final.jsonl")
    first = state.finished()[0]
    assert state.turn_key(first) == f"copilot:{SESSION1}:{first.interaction_id}"


@pytest.mark.parametrize(("name", "working"), [
    ("04_prompt1_busy", True), ("11_slow_busy_0s", True), ("13_slow_busy_3s", True),
    ("16_after_first_esc", True), ("02_idle_start", False), ("05_prompt1_done", False),
    ("17_after_interrupt", False), ("09_approval_prompt", False)])
def test_the_footer_says_when_copilot_works(name: str, working: bool) -> None:
    assert is_working(screen(name)) is working


@pytest.mark.parametrize("name", ["09_approval_prompt", "28_pinned_approval_prompt"])
def test_the_approval_box_is_a_person_asked(name: str) -> None:
    assert approval_prompt(screen(name)) == "permission prompt"
    assert input_draft(screen(name)) is None  # its "❯ 1. Yes" is not the input


def test_the_folder_trust_dialog_is_a_dialog_open_that_approve_trusts_for_the_session() -> None:
    """At start in a folder not trusted yet (``baton approve`` takes "1. Yes", never "remember")."""
    trust = screen("01_first_run_folder_trust")
    assert approval_prompt(trust) == "dialog open" and input_draft(trust) is None
    assert approval_answer(trust, approve=True) == ["Enter"]
    assert approval_answer(trust, approve=False) == ["Down", "Down", "Enter"]


def test_no_other_recorded_screen_asks_a_person() -> None:
    asking = [p.name for p in (REC / "screens").glob("*.txt") if approval_prompt(p.read_text())]
    assert sorted(asking) == ["screen_01_first_run_folder_trust.txt", "screen_09_approval_prompt.txt",
                              "screen_28_pinned_approval_prompt.txt"]


def test_the_input_between_the_rules_is_read_as_the_draft() -> None:
    assert input_draft(screen("02_idle_start")) == ""
    assert input_draft(screen("03_prompt1_typed")) == "Explain what app.py does and list the files."
    assert input_draft(screen("18_paste_2lines")) == "first pasted line\nsecond pasted line"
    assert input_draft(screen("20_paste_12lines")) == "[Paste #1 - 12 lines]"
    assert input_draft(screen("01_first_run_folder_trust")) is None  # the trust dialog: no input yet


@pytest.mark.parametrize(("shown", "paste"), [
    ("18_paste_2lines", "paste2.txt"), ("20_paste_12lines", "paste12.txt"),
    ("21_paste_1500chars", "paste1500.txt")])
def test_each_recorded_paste_is_recognised_as_that_paste(shown: str, paste: str) -> None:
    adapter = CopilotAdapter.__new__(CopilotAdapter)
    draft = input_draft(screen(shown))
    text = (REC / "pastes" / paste).read_text().rstrip("\n")
    assert draft and adapter.shows_paste(draft, text)
    assert not adapter.shows_paste(draft, text + "\nand one more line")


def test_the_placeholder_needs_the_same_line_count_and_more_than_ten_lines() -> None:
    eleven = "\n".join(f"line {i}" for i in range(11))
    assert paste_placeholder("[Paste #3 - 11 lines]", eleven)
    assert not paste_placeholder("[Paste #3 - 12 lines]", eleven)
    assert not paste_placeholder("[Paste #1 - 10 lines]", "\n".join("x" * 10))  # 10 lines are inline
    assert not paste_placeholder("[Paste #1 - 11 lines][Paste #2 - 11 lines]", eleven)


def test_the_recorded_hook_payloads_are_told_apart_without_an_event_name() -> None:
    kinds: dict[str, set[str | None]] = {}
    for line in (REC / "hooks" / "hooks.jsonl").read_text().splitlines():
        record = json.loads(line)
        kinds.setdefault(record["hook_arg"], set()).add(hook_kind(record["stdin"]))
    assert kinds["agentStop"] == {"agentStop"} and kinds["notification"] == {"notification"}
    assert all(v == {None} for k, v in kinds.items() if k not in ("agentStop", "notification"))


def test_hooks_install_writes_its_own_file_in_the_recorded_shape_and_only_once(tmp_path: Path) -> None:
    home = tmp_path / ".copilot"
    (home / "hooks").mkdir(parents=True)
    shutil.copy(REC / "hooks" / "log-hooks.json", home / "hooks" / "log-hooks.json")
    said = install_copilot_hooks(home, "/venv/bin/python -m pipeline.spool copilot")
    assert "agentStop" in said
    mine = json.loads((home / "hooks" / "batonpass.json").read_text())
    recorded = json.loads((REC / "hooks" / "log-hooks.json").read_text())
    assert mine["version"] == recorded["version"]
    assert set(mine["hooks"]["agentStop"][0]) == set(recorded["hooks"]["agentStop"][0])
    assert mine["hooks"]["agentStop"][0]["bash"] == "/venv/bin/python -m pipeline.spool copilot"
    assert "already" in install_copilot_hooks(home, "/venv/bin/python -m pipeline.spool copilot")
    assert (home / "hooks" / "log-hooks.json").read_text() == (REC / "hooks" / "log-hooks.json").read_text()
    (home / "hooks" / "batonpass.json").write_text("{not json")
    with pytest.raises(ValueError, match="nothing was changed"):
        install_copilot_hooks(home, "python -m pipeline.spool copilot")


def test_usage_adds_up_every_model_call_and_prices_none_it_does_not_know() -> None:
    usage = EventsUsage(REC / "events" / "session1_final.jsonl").read()
    calls = (REC / "events" / "session1_final.jsonl").read_text().count('"type":"session.usage_record"')
    assert usage is not None and calls > 0
    counted = (usage.input, usage.output, usage.cost_usd, usage.models)
    assert counted == (100 * calls, 20 * calls, None, ("fake",))


def test_byok_claude_tokens_are_priced_and_a_subscriptions_are_not(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    line = {"type": "session.usage_record", "data": {"usage": {
        "model": "claude-sonnet-4.5", "inputTokens": 1_000_000, "outputTokens": 0, "isByok": True}}}
    events.write_text(json.dumps(line) + "\n")
    usage = EventsUsage(events).read()
    assert usage is not None and usage.cost_usd == pytest.approx(3.0)
    line["data"]["usage"]["isByok"] = False  # type: ignore[index]
    events.write_text(json.dumps(line) + "\n")
    assert EventsUsage(events).read().cost_usd is None  # type: ignore[union-attr]


@pytest.fixture
def fake_copilot(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real process named like the native binary (its executable ``copilot``, its comm ``MainThread``),
    with the lock file Copilot writes in its session folder."""
    exe = tmp_path / "copilot-linux-x64" / "copilot"
    exe.parent.mkdir()
    shutil.copy(os.path.realpath(sys.executable), exe)  # a process renames only itself
    home = tmp_path / "home" / ".copilot"
    script = "import sys; open('/proc/self/comm', 'w').write('MainThread'); print(); sys.stdin.read()"
    child = subprocess.Popen([str(exe), "-c", script], env={**os.environ, "COPILOT_HOME": str(home)},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "\n"  # renamed by now
        session = home / "session-state" / SESSION1
        session.mkdir(parents=True)
        (session / f"inuse.{child.pid}.lock").write_text(str(child.pid))
        yield child.pid, home, session
    finally:
        child.kill()
        child.wait()


def test_the_chain_goes_from_the_process_to_its_lock_file_to_the_events(fake_copilot) -> None:  # type: ignore[no-untyped-def]
    pid, home, session = fake_copilot
    process = find_copilot_process(pid)
    assert process is not None and process.proc.comm == "MainThread" and process.home == home
    res = resolve_session(pid)
    assert (res.rule, res.session_dir, res.events) == ("lock file", session, session / "events.jsonl")
    assert [s.step for s in res.steps] == ["process", "copilot home", "lock file", "session", "transcript"]
    assert "appears at the first prompt" in res.steps[-1].detail


def test_agent_auto_finds_copilot_by_its_executable_not_its_comm(fake_copilot) -> None:  # type: ignore[no-untyped-def]
    pid, _, _ = fake_copilot
    assert identify_agent(pid, load_registries().agents) == "copilot"
