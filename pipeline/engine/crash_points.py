"""Crash points, for the tests only: every committed journal write counted, and the process killed right
after the Nth (docs/testing.md, "The crash-point sweep").

The journal writes each step of a hand-off before its side effect, so a crash right after any one write
must leave the journal enough to finish the hand-off exactly once. To prove it for *every* write, the sweep
kills ``baton run`` after write 1, then 2, … up to the last of a scenario. Two environment variables, both
unset outside the tests (then the journal's connection is SQLite's own, untouched):

- ``BATON_CRASH_AFTER_WRITES=N``: right after the Nth committed write the process sends itself SIGKILL —
  from inside, so the kill lands at that write and nowhere else;
- ``BATON_COUNT_WRITES=PATH``: one line per committed write appended to PATH, ``N<TAB>label``; the label
  says what was written (``update handoffs delivering review/b@…``) for a failure message;
- ``BATON_CRASH_BEFORE_ENTER=1``: the process sends itself SIGKILL once a paste shows in the target's
  input, before its Enter (:func:`before_enter`) — the crash window of the crash-at-paste tests, which a
  kill from outside no longer hits reliably since the Enter follows the paste's drawing within
  milliseconds (docs/performance.md, "The latency a person feels").

A write is a committed change: a transaction's COMMIT (one write, however many statements it held), or an
INSERT, UPDATE or DELETE outside a transaction (SQLite commits it by itself). Reads, BEGIN, ROLLBACK and the
schema's own statements are not writes here. The count is the process's, across every journal it opens.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
from typing import Any

__all__ = ["COUNT_ENV", "CRASH_ENV", "ENTER_ENV", "before_enter", "connection_class"]

CRASH_ENV = "BATON_CRASH_AFTER_WRITES"
ENTER_ENV = "BATON_CRASH_BEFORE_ENTER"
COUNT_ENV = "BATON_COUNT_WRITES"
_WRITE = re.compile(r"\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+(\w+)", re.I)
_COMMIT = re.compile(r"\s*(?:COMMIT|END)\b", re.I)
#: how much of a label to keep
_LABEL_CHARS = 240

#: committed writes so far in this process
_written = 0


def before_enter() -> None:
    """Between a paste that shows in the target's input and its Enter: die here when the switch says so."""
    if os.environ.get(ENTER_ENV):
        os.kill(os.getpid(), signal.SIGKILL)


def connection_class() -> type[sqlite3.Connection]:
    """The class the journal's connection is made of: one that counts when either variable is set, SQLite's
    own otherwise (read when the journal opens)."""
    if os.environ.get(CRASH_ENV) or os.environ.get(COUNT_ENV):
        return CountingConnection
    return sqlite3.Connection


class CountingConnection(sqlite3.Connection):
    """A connection that counts its committed writes, and dies right after the one the switch names."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        crash = os.environ.get(CRASH_ENV, "")
        self.crash_after = int(crash) if crash.isdigit() else 0
        self.count_to = os.environ.get(COUNT_ENV, "")
        #: what the open transaction wrote so far (its COMMIT is one write, labelled with all of it)
        self.pending: list[str] = []

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        cursor = super().execute(sql, parameters)
        write = _WRITE.match(sql)
        if write is not None:
            self.pending.append(_label(write[0].split()[0].lower(), write[1], parameters))
        if self.in_transaction:
            return cursor
        if self.pending and (write is not None or _COMMIT.match(sql)):
            self._committed(" + ".join(self.pending))
        self.pending = []  # committed, rolled back, or nothing written
        return cursor

    def _committed(self, label: str) -> None:
        global _written
        _written += 1
        if self.count_to:
            with open(self.count_to, "a", encoding="utf-8") as f:
                f.write(f"{_written}\t{label[:_LABEL_CHARS]}\n")
        if _written == self.crash_after:
            os.kill(os.getpid(), signal.SIGKILL)


def _label(verb: str, table: str, parameters: Any) -> str:
    """``verb table`` and the statement's short text arguments (a key, a tile, a state), not its long ones
    (a prompt) nor its numbers (times)."""
    values = parameters.values() if isinstance(parameters, dict) else parameters
    short: list[str] = []
    for value in values:
        if isinstance(value, str) and len(value) <= 80 and "\n" not in value and value not in short:
            short.append(value)
    return " ".join([verb, table, *short[:6]])
