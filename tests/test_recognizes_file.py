"""Whose file is it: every adapter's ``recognizes_file`` over every agent's recorded files (tests/fixtures,
one folder per agent version) — exactly one adapter, the file's own, says yes to each — and what ``baton
extract`` says without ``--agent`` and with the wrong one (issue #39, item 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.plugin.manager import load_registries
from tests.support.cli import baton
from tests.support.paths import FIXTURES

#: every agent's sessions, transcripts, rollouts, events and stores among the fixtures, by whose they are
AGENT_FILES: dict[str, tuple[str, ...]] = {
    "claude": ("claude-code*/**/projects/**/*.jsonl", "claude-code-old/*.jsonl"),
    "codex": ("codex/codex_home/sessions/**/rollout-*.jsonl", "codex/failed-turns/*.jsonl",
              "codex/approval/rollout_*.jsonl", "codex-old/rollout-*.jsonl"),
    "copilot": ("copilot-*/events/*.jsonl",),
    "gemini": ("gemini-cli-*/**/session-*.jsonl",),
    "opencode": ("opencode/opencode.db",),
    "cline": ("cline-*/sessions/*/*.json",),
}
FILES = [(agent, path) for agent, patterns in AGENT_FILES.items() for pattern in patterns
         for path in sorted(FIXTURES.glob(pattern))]
GEMINI_INTERRUPTED = next(FIXTURES.glob("gemini-cli-*/session-steps/10_after_interrupt/session-*.jsonl"))
COPILOT_EVENTS = next(FIXTURES.glob("copilot-*/events/session1_final.jsonl"))
GEMINI_SESSION = next(FIXTURES.glob("gemini-cli-*/session-steps/09_slow_done/session-*.jsonl"))


def test_every_agent_has_files_in_the_matrix() -> None:
    assert {agent for agent, _ in FILES} == set(AGENT_FILES)
    assert all(sum(a == agent for a, _ in FILES) >= 1 for agent in AGENT_FILES)


@pytest.mark.parametrize(("agent", "path"), FILES, ids=[str(p.relative_to(FIXTURES)) for _, p in FILES])
def test_exactly_one_adapter_recognizes_each_agents_file_its_own(agent: str, path: Path) -> None:
    registries = load_registries()
    says_yes = [name for name in registries.agents.names()
                if registries.agents.get(name).recognizes_file(path)]
    assert says_yes == [agent]


@pytest.mark.parametrize("path", [COPILOT_EVENTS, GEMINI_SESSION], ids=["copilot", "gemini"])
def test_extract_without_agent_reads_copilot_events_and_gemini_sessions_as_theirs(path: Path) -> None:
    """Both were read as Claude Code transcripts: "holds no finished turn"."""
    found = baton("extract", "--json", str(path))
    assert found.status == 0, found.err
    assert json.loads(found.out)["agent"] == ("copilot" if path == COPILOT_EVENTS else "gemini")


def test_extract_of_an_interrupted_gemini_turn_does_not_call_it_a_claude_transcript() -> None:
    result = baton("extract", "--agent", "gemini", str(GEMINI_INTERRUPTED))
    line = result.one_line_error(1, "it left no answer")
    assert "--agent claude" not in line and "Claude Code" not in line
