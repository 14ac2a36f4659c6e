"""Where the repository and its recorded agent files are."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FIXTURES", "REPO"]

REPO = Path(__file__).resolve().parents[2]
#: recorded agent files, part of the suite (see tests/fixtures/README.md); nothing reads outside the repo
FIXTURES = REPO / "tests" / "fixtures"
