"""The Qwen Code adapter held to what the real Qwen Code 0.24.4 recorded (tests/fixtures/qwen-code-0.24.4):
its session file's turns, its screens (busy, dialogs, drafts, the follow-up suggestion, paste placeholders),
its permission prompt's keys, its hooks, its pid file, and whose file ``baton extract`` takes it for."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pipeline.commands.extract import whose_file
from pipeline.spool import HookRecord
from plugins.qwen.adapter import QwenAdapter
from plugins.qwen.hooks import install_hooks
from plugins.qwen.resolve import pid_session, project_folder
from plugins.qwen.screen import input_draft, is_ghost, paste_placeholder, waiting_for
from plugins.qwen.session import SessionFile
from tests.support.paths import FIXTURES
from tests.support.pipelines import REGISTRIES

pytestmark = pytest.mark.anyio

RECORDED = FIXTURES / "qwen-code-0.24.4"
SESSION = RECORDED / "session.jsonl"


def screen(name: str) -> str:
    return (RECORDED / "screens" / f"{name}.ansi").read_text()


def turns(path: Path = SESSION) -> list[Any]:
    session = SessionFile(path)
    session.read(final=True)
    return session.state.turns


# ---- the session file --------------------------------------------------------------------------------------

def test_turns_end_at_a_reply_without_function_calls_and_an_interrupt_is_a_failed_turn() -> None:
    got = [(t.prompt.split("\n")[-1], t.outcome, t.detail, (t.answer or "")[:16]) for t in turns()]
    assert got == [
        ("say hello please", "completed", "", "FAKE_ANSWER_BEGI"),
        ("second one", "completed", "", "FAKE_ANSWER_BEGI"),
        ("please TOOLASK now", "completed", "", "TOOL_FINAL_BEGIN"),  # the tool's call is not the end
        ("SLOWTEST please", "failed", "interrupted", "FAKE_ANSWER_BEGI"),  # partial, written without usage
        ("TOOLTEST now", "completed", "", "TOOL_FINAL_BEGIN"),
    ]
    assert [t.prompt_id.rsplit("#", 1)[1] for t in turns()] == ["0", "1", "2", "3", "4"]


def test_a_turn_is_open_while_its_tool_waits_and_until_its_reply_is_written(tmp_path: Path) -> None:
    lines = SESSION.read_text().splitlines(keepends=True)
    ask = next(i for i, ln in enumerate(lines) if "please TOOLASK now" in ln)
    call = next(i for i in range(ask, len(lines)) if '"functionCall"' in lines[i])
    cut = tmp_path / "s.jsonl"
    cut.write_text("".join(lines[:call + 1]))
    assert turns(cut)[-1].outcome is None  # waiting for approval: the call is written, the turn goes on
    cut.write_text("".join(lines[:ask + 1]))
    assert turns(cut)[-1].outcome is None


def test_an_api_error_fails_the_turn_provisionally(tmp_path: Path) -> None:
    lines = SESSION.read_text().splitlines(keepends=True)
    first = next(i for i, ln in enumerate(lines) if "say hello please" in ln)
    error = dict(json.loads(lines[first]), type="system", provenance="system", subtype="ui_telemetry",
                 systemPayload={"uiEvent": {"event.name": "qwen-code.api_error", "error": "500 overloaded"}})
    del error["message"]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(lines[:first + 1]) + json.dumps(error) + "\n")
    [turn] = turns(path)
    assert (turn.outcome, turn.provisional, turn.detail) == ("failed", True, "error: 500 overloaded")


def test_usage_counts_each_reply_and_leaves_the_cost_unknown() -> None:
    session = SessionFile(SESSION)
    session.read(final=True)
    usage = session.state.usage()
    assert usage is not None and (usage.input, usage.output, usage.models) == (600, 120, ("fake-model",))
    assert usage.cost_usd is None  # whatever model the endpoint serves, at its price


def test_baton_extract_reads_it_as_qwen_codes_and_no_other_adapter_claims_it() -> None:
    assert whose_file(REGISTRIES, SESSION) == ["qwen"]
    response = QwenAdapter.extract_file(SESSION)
    assert response is not None and response.text.startswith("TOOL_FINAL_BEGIN")
    claude = sorted((FIXTURES / "claude-code-2.1.332").rglob("*.jsonl"))
    assert claude and not any(QwenAdapter.recognizes_file(p) for p in claude)


# ---- the screen ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["busy", "busy-streaming"])
def test_busy_screens_are_busy(name: str) -> None:
    assert QwenAdapter.is_busy(QwenAdapter.__new__(QwenAdapter), screen(name))


@pytest.mark.parametrize("name", ["idle-empty", "idle-after-first", "after-tool", "after-tooltest"])
def test_idle_screens_show_an_empty_input_and_are_not_busy(name: str) -> None:
    assert input_draft(screen(name)) == ""
    assert not QwenAdapter.is_busy(QwenAdapter.__new__(QwenAdapter), screen(name))
    assert waiting_for(screen(name)) is None


def test_the_follow_up_suggestion_is_no_draft_only_its_colour_tells() -> None:
    shown = screen("suggestion")
    assert "> run the tests" in shown.replace("\x1b[4m", "").replace("\x1b[39m", "").replace(
        "\x1b[0m", "").replace("\x1b[38;5;103m", "").replace("\x1b[49m", "").replace("\x1b[38;5;183m", "")
    assert input_draft(shown) == ""
    assert input_draft(screen("draft")) == "my draft"  # a person's words, in the default colour
    # the cursor moved to a draft's start (Home) puts it on the first cell too: the rest stays default
    home = "\x1b[38;5;183m> \x1b[4m\x1b[39mm\x1b[0m\x1b[39m\x1b[49my draft"
    assert not is_ghost(home) and is_ghost(shown.split("\n")[[i for i, ln in enumerate(
        shown.split("\n")) if "un the tests" in ln][0]])


def test_the_input_box_shows_drafts_and_pastes_and_an_interrupt_puts_the_prompt_back() -> None:
    assert input_draft(screen("paste-14-lines")) == "[Pasted Content 111 chars]"
    assert input_draft(screen("paste-1001-chars")) == "[Pasted Content 1001 chars]"
    assert input_draft(screen("paste-10-lines-inline")) == "\n".join(f"l{i}" for i in range(1, 11))
    assert input_draft(screen("paste-1000-chars-inline")).replace("\n", "") == "y" * 1000  # type: ignore[union-attr]
    assert input_draft(screen("interrupted")) == "SLOWTEST please"
    assert input_draft(screen("permission")) is None  # a dialog, no input box


def test_the_placeholder_rule_more_than_10_lines_or_1000_code_points_counts_characters() -> None:
    fourteen = "\n".join(f"line {i:02d}" for i in range(1, 15))
    assert paste_placeholder("[Pasted Content 111 chars]", fourteen)
    assert paste_placeholder("[Pasted Content 111 chars] #2", fourteen)
    assert not paste_placeholder("[Pasted Content 110 chars]", fourteen)
    assert not paste_placeholder("[Pasted Content 29 chars]", "\n".join(f"l{i}" for i in range(1, 11)))
    assert paste_placeholder("[Pasted Content 1001 chars]", "x" * 1001)
    assert not paste_placeholder("[Pasted Content 1000 chars]", "x" * 1000)  # drawn inline
    assert paste_placeholder("[Pasted Content 1001 chars]", "😀" * 1001)  # code points, not UTF-16 units


def test_the_permission_prompt_is_waited_for_and_answered_once_or_refused() -> None:
    shown = screen("permission")
    assert waiting_for(shown) == "permission prompt: touch"
    adapter = QwenAdapter.__new__(QwenAdapter)
    assert adapter.answer_keys(shown, True) == ["Enter"]  # › 1. Yes, allow once
    assert adapter.answer_keys(shown, False) == ["Down", "Down", "Down", "Enter"]  # 4. No, suggest changes
    assert adapter.answer_keys(screen("idle-empty"), True) is None


class ScreenContext:
    """A tile context whose pane shows one recorded screen (and is never resolved to a process)."""

    name = "qw"
    watcher = None

    def __init__(self, shown: str) -> None:
        self.shown = shown

    async def capture(self, escapes: bool = False, start: int | None = None, end: int | None = None) -> str:
        return self.shown if escapes else self.shown.replace("\x1b", "")


@pytest.mark.parametrize(("name", "holds"), [
    ("suggestion", "empty"),  # never our paste (no Enter), never a person's draft (typed once it is ready)
    ("paste-14-lines", "prompt"),
    ("draft", "other"),
])
async def test_after_a_crash_the_input_is_told_a_suggestion_from_a_draft_and_from_our_paste(
        name: str, holds: str) -> None:
    adapter = QwenAdapter(ScreenContext(screen(name)))
    assert await adapter.input_holds("\n".join(f"line {i:02d}" for i in range(1, 15))) == holds


# ---- hooks, the pid file -------------------------------------------------------------------------------

def test_hooks_install_adds_stop_stopfailure_and_notification_and_keeps_the_rest(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": {"name": "m"}, "hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "mine.sh"}]}]}}))
    said = install_hooks(settings, ["python", "-m", "pipeline.spool", "qwen"])
    assert "added the Stop hook, added the StopFailure hook, added the Notification hook" in said
    data = json.loads(settings.read_text())
    assert data["model"] == {"name": "m"} and data["hooks"]["Stop"][0]["hooks"][0]["command"] == "mine.sh"
    assert "already installed" in install_hooks(settings, ["python", "-m", "pipeline.spool", "qwen"])


def test_hook_payloads_name_the_turn_by_its_prompt_id() -> None:
    records = [json.loads(ln) for ln in (RECORDED / "hooks" / "hooks.jsonl").read_text().splitlines()]
    stops = [r["prompt_id"] for r in records if r["hook_event_name"] == "Stop"]
    assert stops == [t.prompt_id for t in turns() if t.outcome == "completed"]  # no Stop after an interrupt
    asks = [r for r in records if r.get("notification_type") == "permission_prompt"]
    assert len(asks) == 1 and "run_shell_command" in asks[0]["message"]


async def test_a_notification_other_than_a_permission_prompt_is_ignored() -> None:
    adapter = QwenAdapter(ScreenContext(""))
    payload = {"hook_event_name": "Notification", "notification_type": "idle_prompt"}
    record = HookRecord(agent="qwen", payload=payload, pane=None, written_at=0.0)
    assert await adapter.hook_completion(record) is None


def test_the_pid_file_names_the_session_of_its_own_process_only(tmp_path: Path) -> None:
    data = json.loads((RECORDED / "pid-file.json").read_text())
    (tmp_path / "sessions").mkdir()
    shutil.copy(RECORDED / "pid-file.json", tmp_path / "sessions" / f"{data['pid']}.json")
    assert pid_session(tmp_path, data["pid"]) == data["sessionId"] == turns()[0].turn_id.split(":")[1]
    shutil.copy(RECORDED / "pid-file.json", tmp_path / "sessions" / "1.json")
    assert pid_session(tmp_path, 1) is None  # a stale file of another process
    assert project_folder(data["cwd"]) == SESSION.read_text().split('"cwd":"')[1].split('"')[0].replace(
        "/", "-").replace(".", "-")
