"""What every test gets without asking: its own state folder, the root logger as it found it, asyncio."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["anyio_backend", "private_state", "restore_root_logging"]


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own XDG_STATE_HOME (journal, hook spool, demo agents' transcripts)."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.delenv("BATON_DEMO_HOME", raising=False)
    return state


@pytest.fixture(autouse=True)
def restore_root_logging() -> Iterator[None]:
    """Tests that call ``pipeline.cli.main()`` in-process set up logging; undo it for the next test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
