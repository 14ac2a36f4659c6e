"""What a send leaves in the journal: its action and its hand-off.

A send (``baton send``, the web page's Send, ``baton retry``) is journaled as a hand-off of route ``send``
(source ``send``, target the tile's name or the ``%N``) once something is to be typed: recorded
``unconfirmed`` ("stopped before it knew") *before* the paste — a send killed mid-way leaves that, never a
hand-off the daemon would type again after a restart — then ``delivered`` or ``unconfirmed``, or ``failed``
when the typing failed. A send refused before anything was typed (the pane gone, no agent of the kind
expected, busy, a draft) writes no hand-off: nothing was handed off; its action says ``refused`` and why.
``baton send`` journals its action here too (the web page's is journaled by
:func:`pipeline.engine.actions.perform`): each send is both, the action, then its hand-off (docs/json.md).

A journal that cannot be written is said once and not tried again: the record is history, not the
delivery's guard.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable

from pipeline.engine.journal import HandoffState, Journal, default_journal_path
from pipeline.plugin.events import Completion, Prompt

__all__ = ["SEND_ROUTE", "RetryRecord", "SendRecord"]

log = logging.getLogger("batonpass")

#: the route (and source) a send is journaled under: ``baton history --route send``
SEND_ROUTE = "send"


class SendRecord:
    """The send's rows in the journal: its hand-off (route ``send``), and for ``baton send`` its action."""

    def __init__(self, turn_id: str | None = None) -> None:
        self.turn_id = turn_id or f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"
        self.key = f"{SEND_ROUTE}@{self.turn_id}"
        #: where a journal that cannot be written is said (``baton send``: its standard error)
        self.warn: Callable[[str], None] = log.warning
        self._journal: Journal | None = None
        self._broken = False
        self._action: str | None = None

    def start(self, target: str, text: str, state: HandoffState, why: str) -> None:
        """The hand-off, in one transaction (``record_routing`` writes a hand-off in the state given)."""
        prompt = Prompt(SEND_ROUTE, SEND_ROUTE, target, text, self.turn_id, 0)
        self._write(lambda j: j.record_routing(Completion(tile=SEND_ROUTE, turn_id=self.turn_id),
                                               [(prompt, SEND_ROUTE, target, state, why)]))

    def refused(self, target: str, why: str) -> None:
        """Nothing typed: no hand-off (the action, where there is one, says why)."""

    def end(self, state: HandoffState, *, note: str = "", error: str | None = None,
            pane: str | None = None) -> None:
        self._write(lambda j: j.set_state(self.key, state, note=note, error=error, pane=pane, attempt=True))

    def start_action(self, action_id: str, target: str, origin: str, host: str) -> None:
        """``baton send``'s action, ``started`` before anything is looked at (ended by :meth:`end_action`)."""
        self._action = action_id
        # as given on the command line: bytes that are no UTF-8 (surrogates) kept as escapes, not refused
        shown = target.encode("utf-8", "backslashreplace").decode("utf-8")
        self._write(lambda j: j.start_action(action_id, SEND_ROUTE, shown, origin, host))

    def end_action(self, ok: bool, message: str) -> None:
        action = self._action
        if action is not None:
            self._write(lambda j: j.end_action(action, ok, message))

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()

    def _write(self, do: Callable[[Journal], object]) -> None:
        if self._broken:
            return
        try:
            if self._journal is None:
                self._journal = Journal()
            do(self._journal)
        except (sqlite3.Error, OSError, UnicodeError) as exc:
            self._broken = True
            self.warn(f"not recorded in the journal {default_journal_path()}: {exc}")


class RetryRecord(SendRecord):
    """``baton retry``: the typing journaled on the failed hand-off's own row (``key``), not a new one; a
    retry refused leaves that hand-off ``failed``, with why."""

    def __init__(self, key: str, journal: Journal) -> None:
        super().__init__()
        self.key, self._journal, self.started = key, journal, False

    def start(self, target: str, text: str, state: HandoffState, why: str) -> None:
        self.started = True
        failed = state == "failed"
        self._write(lambda j: j.set_state(self.key, state, note=None if failed else why,
                                          error=why if failed else None))

    def refused(self, target: str, why: str) -> None:
        self.start(target, "", "failed", why)

    def close(self) -> None:
        """The journal is the caller's."""
