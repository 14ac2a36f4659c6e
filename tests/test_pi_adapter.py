"""The pi adapter against files and screens recorded from the real pi 1.6.0 and 0.73.1
(tests/fixtures/pi-1.6.0, tests/fixtures/pi-0.73.1; their README says how): the session file's turns and
answers, the screen's busy line, input box, paste placeholders and trust dialog, ``baton extract`` and
``recognizes_file`` over every agent's recorded files, the extension hook's install, usage and cost, the
resolution's folder and the Node check."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipeline.plugin.manager import load_registries
from pipeline.plugin.tools import proc
from pipeline.system.text import sanitize
from plugins.pi.adapter import PiAdapter
from plugins.pi.hooks import hook_kind, install_extension
from plugins.pi.resolve import folder_name, node_check, session_start
from plugins.pi.screen import approval_answer, input_draft, is_busy, paste_placeholder, waiting_for
from plugins.pi.session import SessionFile
from plugins.pi.usage import session_usage
from tests.support.paths import FIXTURES
from tests.support.polling import wait_for

VERSIONS = ("pi-1.6.0", "pi-0.73.1")


def session(version: str) -> Path:
    [path] = (FIXTURES / version / "sessions").glob("*.jsonl")
    return path


def screen(version: str, name: str) -> str:
    return (FIXTURES / version / "screens" / f"{name}.txt").read_text(encoding="utf-8")


def test_the_1_6_0_session_has_a_completed_an_interrupted_and_a_tool_turn() -> None:
    file = SessionFile(session("pi-1.6.0"))
    file.read()
    turns = file.state.turns()
    assert [t.prompt for t in turns[:3]] == ["Hello there PI-1", "SLOWTEST: hello PI-2",
                                             "TOOLTEST: run it PI-3"]
    assert [(t.outcome, t.detail) for t in turns[:3]] == [("completed", ""), ("failed", "interrupted"),
                                                          ("completed", "")]
    assert turns[0].answer.startswith("FAKE_ANSWER_BEGIN") and turns[0].answer.endswith("FAKE_ANSWER_END")
    assert turns[2].answer.startswith("TOOL_FINAL_BEGIN") and turns[2].model_calls == 2  # the tool call, then
    assert file.state.version == 3 and turns[0].turn_id == f"pi:{file.state.session_id}:13225f3e"
    # 1.x writes system messages (the prompt and tools): no turn of their own
    assert any(m["role"] == "system" for _, _, m in file.state.messages)


def test_the_0_73_1_session_reads_the_same_way() -> None:
    file = SessionFile(session("pi-0.73.1"))
    file.read()
    turns = file.state.turns()
    assert [t.outcome for t in turns[:2]] == ["completed", "completed"]
    assert turns[1].answer.startswith("TOOL_FINAL_BEGIN")
    assert not any(m["role"] == "system" for _, _, m in file.state.messages)


def test_a_turn_is_open_until_a_final_stop_reason_and_an_error_is_provisional(tmp_path: Path) -> None:
    lines = session("pi-1.6.0").read_text().splitlines()
    tool_call = next(i for i, line in enumerate(lines) if '"stopReason":"toolUse"' in line)
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines[:tool_call + 1]) + "\n")
    file = SessionFile(path)
    file.read()
    assert file.state.turns()[-1].outcome is None  # the tool runs: the turn goes on
    error = json.loads(lines[tool_call])
    error["message"].update(stopReason="error", errorMessage="500 overloaded", content=[])
    with path.open("a") as f:
        f.write(json.dumps(error) + "\n")
    file.read()
    last = file.state.turns()[-1]
    assert (last.outcome, last.provisional, last.detail) == ("failed", True, "error: 500 overloaded")


@pytest.mark.parametrize("version", VERSIONS)
def test_busy_idle_and_the_input_box_on_the_recorded_screens(version: str) -> None:
    assert is_busy(screen(version, "busy")) and not is_busy(screen(version, "idle"))
    assert input_draft(screen(version, "idle")) == ""
    assert waiting_for(screen(version, "idle")) is None


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("case", "text"), [
    ("paste_lines14", "\n".join(f"line {i} of the paste" for i in range(14))),
    ("paste_chars1001", "z" * 1001),
    ("paste_lines10", "\n".join(f"l{i}" for i in range(10))),
])
def test_the_recorded_paste_is_taken_for_its_text_and_no_other(version: str, case: str, text: str) -> None:
    draft = input_draft(screen(version, case))
    assert draft
    adapter = PiAdapter.__new__(PiAdapter)
    assert adapter.shows_paste(draft, sanitize(text)), draft
    assert not adapter.shows_paste(draft, sanitize(text) + "\nanother line never pasted")
    assert not adapter.shows_paste(draft, "a person's own words")
    assert paste_placeholder(draft, text) == (case != "paste_lines10")  # 10 lines are drawn inline


def test_the_paste_rule_counts_lines_over_ten_then_utf16_units_over_a_thousand() -> None:
    assert paste_placeholder("[paste #2 +11 lines]", "\n".join("x" * 11))
    assert not paste_placeholder("[paste #1 +10 lines]", "\n".join("x" * 10))
    assert paste_placeholder("[paste #1 1001 chars]", "😀" * 500 + "x")  # an emoji is two units
    assert not paste_placeholder("[paste #1 1000 chars]", "y" * 1000)


def test_the_trust_dialog_is_waiting_and_approve_trusts_for_this_session_only() -> None:
    first = screen("pi-1.6.0", "trust_dialog")
    assert waiting_for(first) == "project trust dialog" and input_draft(first) is None
    assert approval_answer(first, True) == ["Down", "Down", "Enter"]
    assert approval_answer(first, False) == ["Down", "Down", "Down", "Down", "Enter"]
    third = (FIXTURES / "pi-1.6.0" / "screens" / "trust_dialog_third.ansi.txt").read_text()
    assert approval_answer(third, True) == ["Enter"]
    assert approval_answer(third, False) == ["Down", "Down", "Enter"]
    assert approval_answer(screen("pi-1.6.0", "idle"), True) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_extract_reads_the_last_finished_turn(version: str) -> None:
    response = PiAdapter.extract_file(session(version))
    assert response is not None and response.text.startswith(("TOOL_FINAL_BEGIN", "FAKE_ANSWER_BEGIN"))


def _agent_files() -> list[Path]:
    """Every agent's recorded JSON-lines files."""
    return sorted(p for p in FIXTURES.rglob("*.jsonl") if p.is_file())


def test_every_recorded_file_is_recognised_by_at_most_one_adapter_and_pi_files_by_pi() -> None:
    agents = load_registries().agents
    claims: dict[Path, list[str]] = {}
    for path in _agent_files():
        claims[path] = [name for name in agents if agents.get(name).recognizes_file(path)]
    assert all(len(names) <= 1 for names in claims.values()), {p: n for p, n in claims.items() if len(n) > 1}
    for version in VERSIONS:
        assert claims[session(version)] == ["pi"]
    assert not [p for p, names in claims.items() if names == ["pi"] and "/pi-" not in str(p)]


def test_usage_and_cost_are_pis_own_records() -> None:
    file = SessionFile(session("pi-1.6.0"))
    file.read()
    usage = session_usage(file.state.assistant_messages())
    assert usage is not None and usage.models == ("fake-model",)
    assert usage.input == sum(m["usage"]["input"] for m in file.state.assistant_messages())
    assert usage.cost_usd == pytest.approx(sum(m["usage"]["cost"]["total"]
                                               for m in file.state.assistant_messages()))


def test_the_extension_is_installed_once_with_the_hook_command(tmp_path: Path) -> None:
    command = ["/usr/bin/python3", "-m", "pipeline.spool", "pi"]
    assert "added the batonpass extension" in install_extension(tmp_path, command)
    assert "already installed" in install_extension(tmp_path, command)
    source = (tmp_path / "batonpass.ts").read_text()
    assert f"const BATON_COMMAND: string[] = {json.dumps(command)};" in source
    assert 'pi.on("agent_end"' in source and 'pi.on("agent_settled"' in source
    assert hook_kind({"hook_event_name": "agent_settled", "session_file": "/x.jsonl"}) == "agent_settled"
    assert hook_kind({"hook_event_name": "Stop"}) is None


def test_the_session_folder_and_start_follow_pis_naming() -> None:
    assert folder_name("/tmp/piex/h16/proj/my-app") == "--tmp-piex-h16-proj-my-app--"
    assert folder_name("/a/b:c\\d") == "--a-b-c-d--"
    path = session("pi-1.6.0")
    assert path.parent.name == "sessions" and session_start(path) is not None


def test_the_node_check_names_a_node_too_old_for_pi(tmp_path: Path) -> None:
    """A pane whose PATH has pi 1.x and a Node 20: the resolve step says pi cannot start there."""
    package = tmp_path / "lib" / "node_modules" / "@earendil-works" / "pi-coding-agent"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "@earendil-works/pi-coding-agent",
                                                      "version": "1.6.0", "engines": {"node": ">=22.19.0"}}))
    (package / "dist" / "cli.js").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pi").symlink_to(package / "dist" / "cli.js")
    (bin_dir / "node").write_text("#!/bin/sh\necho v20.20.2\n")
    (bin_dir / "node").chmod(0o755)
    (package / "dist" / "cli.js").chmod(0o755)
    shell = subprocess.Popen(["sleep", "30"], env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    try:
        wait_for(lambda: "PATH" in proc.environ(shell.pid), 5, what="the shell's environment")
        ok, words = node_check(shell.pid) or (True, "")
    finally:
        shell.kill()
        shell.wait()
    assert not ok and "needs Node 22.19.0 or newer" in words and "v20.20.2" in words, words
