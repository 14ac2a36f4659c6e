"""Copilot CLI's ``events.jsonl``, folded into user turns (docs/agents.md, GitHub Copilot CLI).

One JSON object a line, ``{"type", "data", "id", "timestamp", "parentId"}``. A user turn is one
``interactionId``: it opens at ``user.message`` and holds one or more model calls, each
``assistant.turn_start`` … ``assistant.turn_end`` (``turnId`` "0", "1", … restarting at every prompt).
``assistant.turn_end`` closes **one model call**, not the turn: a call whose ``assistant.message`` asked for
tools is followed by the tools and the next call. The turn is finished when a ``turn_end`` follows an
``assistant.message`` with an empty ``toolRequests`` in the same ``turnId`` (the answer is its
``content``); it failed as ``interrupted`` when ``abort`` follows (no answer is saved), and at
``session.error``.
Sub-agent calls (``parentToolCallId``) are not the user's turn and are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.plugin.events import Outcome
from pipeline.plugin.tools import iso_time as parse_timestamp
from pipeline.plugin.tools import json_object

__all__ = ["Interaction", "SessionEvents", "parse_timestamp", "turn_id"]


def turn_id(session_id: str, interaction_id: str) -> str:
    """The stable id of a user turn, the same from the file and from the hook."""
    return f"copilot:{session_id}:{interaction_id}"


@dataclass
class Interaction:
    """One user turn: its prompt, and how and when it ended (``outcome`` None while it runs)."""

    interaction_id: str
    prompt: str
    started_at: float
    outcome: Outcome | None = None
    answer: str | None = None
    ended_at: float | None = None
    detail: str = ""
    #: the model call whose assistant.message had no tool requests: (turnId, its content)
    pending: tuple[str, str] | None = None


@dataclass
class SessionEvents:
    """The turns of one session, fed record by record as the file grows."""

    session_id: str | None = None
    cwd: str | None = None
    started_at: float | None = None
    turns: dict[str, Interaction] = field(default_factory=dict)
    #: the interaction that has not ended (None: idle)
    open: str | None = None
    #: a permission request not answered yet: the person is asked (its request id)
    asking: str | None = None
    #: what the request is for (the command), for the board
    asking_for: str = ""
    #: when the file last recorded anything (epoch seconds)
    last_at: float | None = None
    #: the session ended (``/exit``)
    shut_down: bool = False
    #: finished turns not handed out by :meth:`take_finished` yet
    _new: list[str] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return self.open is not None

    @property
    def prompts(self) -> int:
        return len(self.turns)

    def feed(self, record: dict[str, Any]) -> None:
        kind, data = record.get("type"), json_object(record.get("data"))
        at = parse_timestamp(record.get("timestamp"))
        if at is not None:
            self.last_at = at
        if data.get("parentToolCallId"):
            return  # a sub-agent's model call, inside one of the user's turn's tools
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(self, data, at if at is not None else (self.last_at or 0.0))

    # ---- the record kinds ------------------------------------------------------------------------

    def _start(self, data: dict[str, Any], at: float) -> None:
        sid = data.get("sessionId")
        self.session_id = sid if isinstance(sid, str) else self.session_id
        cwd = json_object(data.get("context")).get("cwd")
        self.cwd = cwd if isinstance(cwd, str) else self.cwd
        self.started_at = parse_timestamp(data.get("startTime")) or at

    def _user(self, data: dict[str, Any], at: float) -> None:
        iid = data.get("interactionId")
        if not isinstance(iid, str) or not iid:
            return
        if iid not in self.turns:
            content = data.get("content")
            self.turns[iid] = Interaction(iid, content if isinstance(content, str) else "", at)
        self.open = iid

    def _message(self, data: dict[str, Any], at: float) -> None:
        turn = self._current(data)
        if turn is None:
            return
        requests, content, call = data.get("toolRequests"), data.get("content"), data.get("turnId")
        if not requests and isinstance(call, str):
            turn.pending = (call, content if isinstance(content, str) else "")
        else:
            turn.pending = None

    def _turn_end(self, data: dict[str, Any], at: float) -> None:
        turn = self._current(data)
        if turn is not None and turn.pending is not None and turn.pending[0] == data.get("turnId"):
            self._finish(turn, "completed", at, answer=turn.pending[1])

    def _abort(self, data: dict[str, Any], at: float) -> None:
        turn = self._current(data)
        if turn is not None:
            reason = data.get("reason")
            self._finish(turn, "failed", at, detail=f"interrupted ({reason})" if reason else "interrupted")
        self.asking = None

    def _error(self, data: dict[str, Any], at: float) -> None:
        turn = self._current(data)
        if turn is not None:
            what = data.get("message") or data.get("errorType") or "session.error"
            self._finish(turn, "failed", at, detail=str(what))

    def _asked(self, data: dict[str, Any], at: float) -> None:
        rid = data.get("requestId")
        self.asking = rid if isinstance(rid, str) else "?"
        request = json_object(data.get("permissionRequest"))
        what = request.get("fullCommandText") or request.get("intention") or request.get("kind") or ""
        self.asking_for = str(what)

    def _answered(self, data: dict[str, Any], at: float) -> None:
        if self.asking is None or data.get("requestId") in (self.asking, None):
            self.asking, self.asking_for = None, ""

    def _shutdown(self, data: dict[str, Any], at: float) -> None:
        self.shut_down = True
        turn = self._current(data)
        if turn is not None:
            self._finish(turn, "failed", at, detail="interrupted: the session ended")

    # ---- turns -----------------------------------------------------------------------------------

    def _current(self, data: dict[str, Any]) -> Interaction | None:
        """The open turn a record belongs to (by its interactionId when it names one)."""
        if self.open is None:
            return None
        iid = data.get("interactionId")
        if isinstance(iid, str) and iid and iid != self.open:
            return None
        return self.turns.get(self.open)

    def _finish(self, turn: Interaction, outcome: Outcome, at: float, *, answer: str | None = None,
                detail: str = "") -> None:
        turn.outcome, turn.answer, turn.ended_at, turn.detail = outcome, answer, at, detail
        turn.pending = None
        self.open = None
        self.asking = None
        self._new.append(turn.interaction_id)

    def take_finished(self) -> list[Interaction]:
        """The turns that finished since the last call, oldest first."""
        out = [self.turns[i] for i in self._new if i in self.turns]
        self._new = []
        return out

    def finished(self) -> list[Interaction]:
        return [t for t in self.turns.values() if t.outcome is not None]

    def last_finished(self) -> Interaction | None:
        done = self.finished()
        return done[-1] if done else None

    def turn_key(self, interaction: Interaction) -> str:
        return turn_id(self.session_id or "?", interaction.interaction_id)

    def received(self, text: str) -> bool:
        """Whether one of the newest prompts is ``text`` (whitespace at the ends ignored)."""
        want = text.strip()
        return any(t.prompt.strip() == want for t in list(self.turns.values())[-8:])


_HANDLERS = {
    "session.start": SessionEvents._start,
    "session.resume": SessionEvents._start,
    "user.message": SessionEvents._user,
    "assistant.message": SessionEvents._message,
    "assistant.turn_end": SessionEvents._turn_end,
    "abort": SessionEvents._abort,
    "session.error": SessionEvents._error,
    "permission.requested": SessionEvents._asked,
    "permission.completed": SessionEvents._answered,
    "session.shutdown": SessionEvents._shutdown,
}
