"""pi's session file, read as it grows: its header, its messages and the turns they make.

``<sessions>/--<cwd>--/<ISO time>_<session id>.jsonl`` (docs/agents.md, pi), one JSON entry per line: a
header ``{"type": "session", "version": 3, "id", "timestamp", "cwd"}``, then entries ``{"type", "id",
"parentId", "timestamp", …}``. A ``message`` entry holds ``message: {"role": user|assistant|toolResult|
system, "content": [...], …}``; an assistant message ends with a ``stopReason``: ``stop``/``length`` (the
answer), ``toolUse`` (a tool runs and the turn goes on), ``error``/``aborted`` (the turn failed; an ``error``
may still be retried). Each message is written whole once it is finished: nothing while it streams.

A turn begins at a ``user`` message and ends at its last assistant message with a final stop reason. An
``error`` is only *provisional*: pi may retry it (:mod:`plugins.pi.follow` waits for the screen or the hook).
1.x also writes ``system`` messages (the prompt and the tools) that are no part of a turn; 0.73.1 writes none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.plugin.events import Outcome
from pipeline.plugin.session_file import FollowedFile
from pipeline.plugin.tools import iso_time, json_object
from pipeline.plugin.turns import FileTurn

__all__ = ["SessionFile", "SessionState", "Turn", "message_text", "stop_outcome"]

#: stop reasons that end a turn, and how
COMPLETED = ("stop", "length")
FAILED = ("error", "aborted")


def stop_outcome(reason: object) -> Outcome | None:
    """``completed``, ``failed`` or None (``toolUse``, or none yet) for an assistant's ``stopReason``."""
    return "completed" if reason in COMPLETED else "failed" if reason in FAILED else None


def message_text(content: object) -> str:
    """A message's text: the string, or its ``text`` blocks joined (tool calls and thinking left out)."""
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(b.get("text"), str))


@dataclass
class Turn(FileTurn):
    """One user turn of a session; ``provisional``: an ``error`` end pi may still retry (confirmed by the
    screen going idle or the hook)."""

    model_calls: int = 0


@dataclass
class SessionState:
    """The entries of one session file (fed line by line) and the turns they make."""

    session_id: str | None = None
    started_at: float | None = None
    cwd: str | None = None
    version: int | None = None
    #: the ``message`` entries' messages, in file order, with the entry's id and timestamp
    messages: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)
    lines: int = 0
    #: bumped by every line: a look at an unchanged state can be told from a look at a changed one
    changes: int = 0
    _turns: tuple[int, list[Turn]] | None = field(default=None, init=False, repr=False, compare=False)

    def feed(self, record: dict[str, Any]) -> None:
        self.lines += 1
        self.changes += 1
        kind = record.get("type")
        if kind == "session":
            self.session_id = str(record.get("id") or "") or None
            self.started_at = iso_time(record.get("timestamp"))
            self.cwd = record.get("cwd") if isinstance(record.get("cwd"), str) else None
            self.version = record.get("version") if isinstance(record.get("version"), int) else None
        elif kind == "message":
            message = json_object(record.get("message"))
            if isinstance(message.get("role"), str):
                at = iso_time(record.get("timestamp")) or 0.0
                self.messages.append((str(record.get("id") or len(self.messages)), at, message))

    def turns(self) -> list[Turn]:
        """Every user turn, oldest first (worked out again only after new lines)."""
        if self._turns is None or self._turns[0] != self.changes:
            self._turns = (self.changes, self._read_turns())
        return self._turns[1]

    def _read_turns(self) -> list[Turn]:
        turns: list[Turn] = []
        for key, at, message in self.messages:
            role = message["role"]
            if role == "user":
                if turns and turns[-1].outcome is None:
                    _unanswered(turns[-1], at)
                turns.append(Turn(turn_id=f"pi:{self.session_id or '?'}:{key}",
                                  prompt=message_text(message.get("content")), started_at=at))
            elif role == "assistant" and turns:
                _assistant(turns[-1], message, at)
        return turns

    def prompts(self) -> list[str]:
        return [t.prompt for t in self.turns()]

    def assistant_messages(self) -> list[dict[str, Any]]:
        return [m for _, _, m in self.messages if m["role"] == "assistant"]


def _assistant(turn: Turn, message: dict[str, Any], at: float) -> None:
    """An assistant message of ``turn``: a final stop reason ends it (a later message opens it again: a
    retried ``error``)."""
    turn.model_calls += 1
    reason = message.get("stopReason")
    outcome = stop_outcome(reason)
    turn.outcome, turn.ended_at, turn.provisional = outcome, at if outcome else None, reason == "error"
    turn.answer = message_text(message.get("content")) if outcome else None
    if reason == "aborted":
        turn.detail = "interrupted"
    elif reason == "error":
        turn.detail = f"error: {message.get('errorMessage') or 'the model call failed'}"
    else:
        turn.detail = "cut at the length limit" if reason == "length" else ""


def _unanswered(turn: Turn, at: float) -> None:
    """A turn a later prompt followed before any end was written (pi killed mid-turn)."""
    turn.outcome, turn.ended_at, turn.detail = "failed", at, "no answer before the next prompt"


class SessionFile(FollowedFile[SessionState]):
    """A session file and its state, read incrementally; a file replaced or cut short is read again."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, SessionState)
