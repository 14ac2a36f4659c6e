"""The one place that says which agent CLI versions the real-agent tests run.

The pins are the releases the facts of docs/agents.md were recorded from (or re-checked against).
``BATON_AGENTS=latest`` switches every agent to whatever npm calls ``latest`` today, resolved once per test
process with ``npm view PACKAGE version`` — the canary step of ``.ci/run`` runs the real-CLI tests that way,
so a new release that breaks batonpass fails CI instead of a user's day. ``BATON_AGENTS=pinned`` (or unset)
keeps the pins. The npm cache (:mod:`tests.fakes.npm_agents`) is keyed by the resolved version, never by the
word ``latest``.

``python -m tests.agent_versions`` prints the versions a run would use (``.ci/run`` prints them first).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["AGENTS", "MIXED_FILES", "PINNED", "PI_PREVIOUS", "AgentVersionError", "canary_files", "mode",
           "npm_latest", "resolve", "version"]

#: package and pinned version per agent (docs/agents.md: Claude Code 2.1.332, Codex, OpenCode)
PINNED: dict[str, tuple[str, str]] = {
    "claude": ("@anthropic-ai/claude-code", "2.1.332"),
    "codex": ("@openai/codex", "0.171.0"),
    "opencode": ("opencode-ai", "1.18.33"),
    "copilot": ("@github/copilot", "1.0.102"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
    "cline": ("cline", "3.0.65"),
    "qwen": ("@qwen-code/qwen-code", "0.24.4"),
    "pi": ("@earendil-works/pi-coding-agent", "1.6.0"),
}
AGENTS = tuple(PINNED)
#: the older Claude Code release the first recordings (tests/fixtures/claude-code) came from; still tested
CLAUDE_CODE_PREVIOUS = ("@anthropic-ai/claude-code", "2.1.197")
#: pi's package before it moved to @earendil-works, frozen at this release (what most installs still run);
#: tests/test_pi_e2e.py follows its session files too
PI_PREVIOUS = ("@mariozechner/pi-coding-agent", "0.73.1")

VERSION = re.compile(r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$")


class AgentVersionError(RuntimeError):
    """``latest`` could not be resolved (npm missing or failing): the message says what npm said."""


def mode() -> str:
    """``pinned`` or ``latest``, from ``BATON_AGENTS``; anything else is an error worth stopping for."""
    value = (os.environ.get("BATON_AGENTS") or "pinned").strip().lower()
    if value not in ("pinned", "latest"):
        raise AgentVersionError(f"BATON_AGENTS={value!r}: use 'pinned' (the default) or 'latest'")
    return value


@functools.cache
def npm_latest(package: str) -> str:
    if shutil.which("npm") is None:
        raise AgentVersionError(f"BATON_AGENTS=latest needs npm to resolve {package}'s latest version")
    try:
        result = subprocess.run(
            ["npm", "view", package, "version"],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise AgentVersionError(f"npm view {package} version took over 120s") from None
    found = result.stdout.strip().splitlines()[-1:] if result.returncode == 0 else []
    if not found or not VERSION.match(found[0].strip()):
        raise AgentVersionError(f"npm view {package} version gave no version ({result.returncode}): "
                                f"{(result.stderr or result.stdout)[-800:]}")
    return found[0].strip()


def resolve(agent: str) -> tuple[str, str]:
    """``(package, version)`` the tests use for ``agent`` (``claude``, ``codex``, ``opencode``) in this
    run."""
    try:
        package, pinned = PINNED[agent]
    except KeyError:
        raise KeyError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}") from None
    return (package, npm_latest(package) if mode() == "latest" else pinned)


def version(agent: str) -> str:
    """Just the version of :func:`resolve`."""
    return resolve(agent)[1]


#: real-CLI test files that run several agents: each is run again when any of its agents' ``latest`` moved
MIXED_FILES: dict[str, tuple[str, ...]] = {"tests/test_workflow_e2e.py": ("claude", "codex")}


def canary_files() -> list[str]:
    """The real-CLI test files of the agents whose npm ``latest`` is not the pin: what the canary must run
    again — ``tests/test_<agent>_e2e.py``, ``tests/test_<agent>_states.py`` (the board's states proven on the
    CLI, docs/board.md) where there is one, and each of :data:`MIXED_FILES` holding one of them. An agent
    whose ``latest`` is its pin was tested at that very version by the pinned run, so running it again would
    test nothing new."""
    here = Path(__file__).parent
    moved = [agent for agent, (package, pinned) in PINNED.items() if npm_latest(package) != pinned]
    return [f"tests/{name}" for agent in moved
            for name in (f"test_{agent}_e2e.py", f"test_{agent}_states.py")
            if name.endswith("_e2e.py") or (here / name).is_file()] + [
        path for path, agents in MIXED_FILES.items() if set(agents) & set(moved)]


def main(argv: list[str] | None = None) -> int:
    if (argv if argv is not None else sys.argv[1:]) == ["--canary-files"]:
        print(" ".join(canary_files()))
        return 0
    print(f"agent versions ({mode()}):")
    for agent in AGENTS:
        package, ver = resolve(agent)
        pinned = PINNED[agent][1]
        print(f"  {agent:9} {package}@{ver}" + ("" if ver == pinned else f"   (pinned: {pinned})"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
