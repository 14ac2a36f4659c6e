"""What the real-CLI end-to-end files share: the CLI from npm (skipped outside CI when npm cannot install
it, a failure in CI), ``baton`` run as a person runs it, and the completions the detector logged per tile
and per turn (which signals reported a turn: the one accepted and those dropped as duplicates). The older
e2e files keep their own copies of these; new ones use this module."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.npm_agents import NpmInstallError

__all__ = ["baton", "completions", "installed", "signals_seen"]


def installed(what: str, get: Callable[[], Path]) -> Path:
    try:
        return get()
    except NpmInstallError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"cannot install {what} from npm: {exc}")
        pytest.skip(f"cannot install {what} from npm (not in CI, so skipped): {exc}")


def baton(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)


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
