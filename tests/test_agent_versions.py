"""The agent versions the real-CLI tests use come from one module, pinned unless ``BATON_AGENTS=latest``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import agent_versions
from tests.fakes import npm_agents


def test_pins_are_the_default_and_name_each_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATON_AGENTS", raising=False)
    assert agent_versions.mode() == "pinned"
    assert agent_versions.resolve("claude") == ("@anthropic-ai/claude-code", "2.1.332")
    assert {a: agent_versions.version(a) for a in agent_versions.AGENTS} == {
        a: v for a, (_, v) in agent_versions.PINNED.items()}
    assert npm_agents.CLAUDE_CODE == agent_versions.PINNED["claude"]


def test_a_bad_mode_or_agent_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_AGENTS", "newest")
    with pytest.raises(agent_versions.AgentVersionError, match="use 'pinned'"):
        agent_versions.resolve("claude")
    monkeypatch.setenv("BATON_AGENTS", "pinned")
    with pytest.raises(KeyError, match="known: claude, codex, opencode"):
        agent_versions.resolve("cursor")


def test_latest_is_resolved_by_npm_and_keys_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """With ``latest``, the version comes from ``npm view`` (here a stand-in npm on PATH: no network) and the
    cache entry is named by that version, never by the word ``latest``."""
    npm = tmp_path / "npm"
    npm.write_text("#!/bin/sh\n[ \"$1 $3\" = \"view version\" ] && echo 9.8.7 && exit 0\nexit 3\n")
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("BATON_AGENTS", "latest")
    agent_versions.npm_latest.cache_clear()
    try:
        assert agent_versions.resolve("codex") == ("@openai/codex", "9.8.7")
        assert npm_agents.entry_name(*agent_versions.resolve("codex")) == "openai_codex@9.8.7"
    finally:
        agent_versions.npm_latest.cache_clear()


def test_the_canary_runs_again_only_the_agents_whose_latest_is_not_the_pin(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """``.ci/run`` runs ``tests/test_<agent>_e2e.py`` (and its ``_states.py``) again on ``latest`` only
    where ``latest`` differs from the pin (a stand-in npm answers: Codex has a newer release, every other
    agent's latest is its pin)."""
    codex_package = agent_versions.PINNED["codex"][0]
    answers = "".join(f'[ "$2" = "{package}" ] && echo {"99.0.0" if agent == "codex" else pinned} && exit 0\n'
                      for agent, (package, pinned) in agent_versions.PINNED.items())
    npm = tmp_path / "npm"
    npm.write_text(f"#!/bin/sh\n{answers}exit 3\n")
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    agent_versions.npm_latest.cache_clear()
    try:
        # its states' proof where there is one, and the workflow's file, one of whose reviewers is Codex
        proof = "test_codex_states.py"
        states = [f"tests/{proof}"] if (Path(__file__).parent / proof).is_file() else []
        expected = ["tests/test_codex_e2e.py", *states, "tests/test_workflow_e2e.py"]
        assert agent_versions.canary_files() == expected
        assert agent_versions.npm_latest(codex_package) == "99.0.0"
    finally:
        agent_versions.npm_latest.cache_clear()
    for agent in agent_versions.AGENTS:
        assert (Path(__file__).parent / f"test_{agent}_e2e.py").is_file(), agent
    for path in agent_versions.MIXED_FILES:
        assert (Path(__file__).parents[1] / path).is_file(), path
