"""What the end-to-end tests of a real agent CLI against the real Claude Code share (tests/test_gemini_e2e.py,
test_pi_e2e.py, test_qwen_e2e.py): an npm install that skips the test off CI, ``baton`` as a subprocess, the
Claude Code pane at the other end, and the detector's log read back (which turns it accepted, and every
signal that reported one)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from plugins.claude_code.screen import input_box
from tests.fakes.npm_agents import NpmInstallError, install
from tests.support.claude import ClaudeHome, make_claude_home
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = [
    "baton", "claude_answer", "completions", "installed", "launch_claude", "npm_package", "signals_seen",
    "wait_claude",
]


def installed(what: str, get: Callable[[], Path]) -> Path:
    """``get()``: an npm install of ``what``; one that fails fails the test in CI and skips it elsewhere."""
    try:
        return get()
    except NpmInstallError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"cannot install {what} from npm: {exc}")
        pytest.skip(f"cannot install {what} from npm (not in CI, so skipped): {exc}")


def npm_package(package: tuple[str, str], node: Path | None = None) -> Path:
    """The command of npm ``package`` (name, version), installed (on ``node``) or the test skipped off CI."""
    return installed(f"{package[0]}@{package[1]}", lambda: install(*package, node=node))


def baton(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)


def claude_answer(prompt: str) -> str:
    """What the fake Claude answers (its length tells which prompt it read)."""
    return f"Claude read {len(prompt)} characters and agrees"


def launch_claude(server: TmuxServer, root: Path, *, api_url: str, claude_bin: Path,
                  version: str) -> tuple[ClaudeHome, str]:
    """A pane where the real ``claude`` was just typed, in its own home under ``root`` (not waited for:
    :func:`wait_claude`)."""
    cc = make_claude_home(root, api_url=api_url, claude_bin=claude_bin, version=version)
    pane = server.new_pane(cc.shell_command(), cwd=cc.project, width=120, height=40)
    server.type(pane, "claude")
    return cc, pane


def wait_claude(server: TmuxServer, cc: ClaudeHome, pane: str) -> None:
    """Until Claude Code shows its empty input box, its session file written."""
    wait_for(lambda: cc.session_files() and input_box(server.capture(pane)) == "", 60,
             what="Claude Code's input box")


def completions(caplog: pytest.LogCaptureFixture, tile: str) -> list[tuple[str, str, str]]:
    """(turn id, outcome, signal) of each completion of ``tile`` the detector accepted."""
    return [(r.args[1], r.args[2], r.args[3]) for r in caplog.records
            if r.msg.startswith("completion") and r.args[0] == tile]


def signals_seen(caplog: pytest.LogCaptureFixture, turn: str) -> set[str]:
    """Every signal that reported ``turn``: the one accepted and those dropped as duplicates."""
    seen = set()
    for record in caplog.records:
        args = record.args
        if isinstance(args, tuple) and turn in args:
            if record.msg.startswith("completion"):
                seen.add(args[3])
            elif "already seen" in record.msg:
                seen.add(args[2])
    return seen
