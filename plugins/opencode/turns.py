"""OpenCode's rows, and what a turn is in them.

A turn is a user message and the assistant messages whose ``parentID`` is it, one per step. The turn is
done when its newest assistant message has ``time.completed`` and a ``finish`` other than ``tool-calls``
or ``unknown`` (OpenCode's own loop-exit rule) with no tool still running, or an ``error`` (an abort or a
provider failure: outcome ``failed``). The answer is that message's text parts, joined in order, as
OpenCode joins them. Reading the rows out of the store is :mod:`plugins.opencode.reader`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipeline.plugin.events import Outcome
from pipeline.plugin.tools import json_object

__all__ = [
    "CONTINUING_FINISHES",
    "MessageRow",
    "SessionRow",
    "TurnEnd",
    "is_final",
    "newest_turn_open",
    "part_text",
    "turn_ends",
]

#: finishes after which OpenCode's loop goes on to another step (so the turn is not over)
CONTINUING_FINISHES = frozenset({"tool-calls", "unknown"})


# ---- rows ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    directory: str
    title: str
    created_ms: int
    updated_ms: int
    #: the texts of its newest user messages, newest first (to tell panes apart by what was typed)
    recent_prompts: tuple[str, ...] = ()
    #: the id of its newest user message (a new one means a prompt was taken)
    newest_user: str | None = None


@dataclass(frozen=True, slots=True)
class MessageRow:
    id: str
    session_id: str
    created_ms: int
    role: str
    parent_id: str | None
    finish: str | None
    completed_ms: int | None
    error: str | None
    cwd: str | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> MessageRow:
        mid, session_id, created, raw = row
        try:
            data = json.loads(raw)
        except (TypeError, ValueError):
            data = {}
        data = data if isinstance(data, dict) else {}
        times = json_object(data.get("time"))
        error = data.get("error")
        if isinstance(error, dict):
            detail = error.get("data", {}).get("message") if isinstance(error.get("data"), dict) else None
            error = ": ".join(str(x) for x in (error.get("name") or "error", detail) if x)
        path = json_object(data.get("path"))
        return cls(
            id=mid,
            session_id=session_id,
            created_ms=int(created or 0),
            role=str(data.get("role") or ""),
            parent_id=data.get("parentID"),
            finish=data.get("finish"),
            completed_ms=times.get("completed"),
            error=str(error) if error else None,
            cwd=path.get("cwd"),
        )


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """One finished turn: ``turn_id`` is its final assistant message's id."""

    turn_id: str
    session_id: str
    user_id: str
    outcome: Outcome
    text: str
    completed_ms: int
    cwd: str | None = None
    detail: str = ""


def is_final(message: MessageRow) -> bool:
    """Whether ``message`` (the newest assistant message of its turn) ends the turn, judged from the message
    alone; :meth:`OpenCodeStore.turn_end` also checks that no tool part is still running."""
    if message.role != "assistant" or message.completed_ms is None:
        return False
    return message.error is not None or (
        message.finish is not None and message.finish not in CONTINUING_FINISHES
    )


def turn_ends(messages: list[MessageRow]) -> list[MessageRow]:
    """The final assistant messages of the finished turns among ``messages`` (oldest first)."""
    newest: dict[str, MessageRow] = {}
    for message in sorted(messages, key=lambda m: (m.created_ms, m.id)):
        if message.role == "assistant" and message.parent_id:
            newest[message.parent_id] = message
    return sorted((m for m in newest.values() if is_final(m)), key=lambda m: (m.completed_ms or 0, m.id))


def newest_turn_open(messages: list[MessageRow]) -> bool:
    """Whether the session's newest user message still waits for its turn to end (the agent is busy)."""
    users = [m for m in messages if m.role == "user"]
    if not users:
        return False
    user = max(users, key=lambda m: (m.created_ms, m.id))
    chain = sorted((m for m in messages if m.role == "assistant" and m.parent_id == user.id),
                   key=lambda m: (m.created_ms, m.id))
    return not chain or not is_final(chain[-1])


def part_text(rows: list[tuple[Any, ...]]) -> tuple[str, bool]:
    """(the text parts joined in order, whether a tool part is still pending or running)."""
    texts, running = [], False
    for (raw,) in rows:
        try:
            part = json.loads(raw)
        except (TypeError, ValueError):
            continue
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and not part.get("synthetic") and not part.get("ignored"):
            texts.append(str(part.get("text") or ""))
        elif part.get("type") == "tool":
            state = json_object(part.get("state"))
            running = running or state.get("status") in ("pending", "running")
    return "".join(texts), running
