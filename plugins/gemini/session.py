"""Gemini CLI's session file, read as it grows: its messages (the last line per id wins) and its turns.

``~/.gemini/tmp/<slug>/chats/session-<YYYY-MM-DDTHH-MM>-<first 8 of id>.jsonl`` (docs/agent-versions.md,
Gemini CLI): a metadata line, messages ``{"id", "timestamp", "type": user|gemini|info|error|warning,
"content", …}``, and ``{"$set": {…}}`` updates, one of which (``messages``) writes the whole list again.
A ``gemini`` message that calls a tool is written first without ``toolCalls`` and again, with them, once
the tool finished; tool results are ``user`` messages of ``functionResponse`` parts.

A user turn begins at a ``user`` message with a ``text`` part. It ends at a ``gemini`` message without
``toolCalls`` (the answer is its ``content``), at ``info`` "Request cancelled." (interrupted) or at an
``error`` (failed). The first kind is only *provisional*: while a tool waits for approval or runs, the file
looks exactly like that (the hook or the screen decides, :mod:`plugins.gemini.follow`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.plugin.session_file import FollowedFile
from pipeline.plugin.tools import iso_time as parse_time
from pipeline.plugin.tools import json_object
from pipeline.plugin.turns import FileTurn

__all__ = ["CANCELLED", "SessionFile", "SessionState", "Turn", "parse_time", "prompt_text"]

#: what Gemini CLI writes (an ``info`` message) when a turn is interrupted by Esc or Ctrl+C
CANCELLED = "Request cancelled."
#: the first user message Gemini CLI writes itself: context, not a prompt
CONTEXT_PREFIX = "<session_context>"


def prompt_text(message: dict[str, Any]) -> str | None:
    """The typed text of a ``user`` message, or None when it is a tool result or Gemini's own context."""
    content = message.get("content")
    if isinstance(content, str):
        parts: list[Any] = [{"text": content}]
    elif isinstance(content, list):
        parts = content
    else:
        return None
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    if not texts or any(isinstance(p, dict) and "functionResponse" in p for p in parts):
        return None
    text = "".join(texts)
    return None if text.startswith(CONTEXT_PREFIX) else text


@dataclass
class Turn(FileTurn):
    """One user turn of a session; ``provisional``: a final-looking answer the hook or screen must confirm."""

    model_calls: int = 0
    tool_calls: int = 0


@dataclass
class SessionState:
    """The messages of one session file (fed line by line) and the turns they make."""

    session_id: str | None = None
    started_at: float | None = None
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    lines: int = 0
    #: bumped by every line: a look at an unchanged state can be told from a look at a changed one
    version: int = 0
    _turns: tuple[int, list[Turn]] | None = field(default=None, init=False, repr=False, compare=False)

    def feed(self, record: dict[str, Any]) -> None:
        self.lines += 1
        self.version += 1
        if "$set" in record:
            update = json_object(record["$set"])
            # the model's history written whole (at startup, after an interrupt): messages of another shape
            # (parts, no ``info``) with the ids of those written one by one; only ids never seen are taken
            history = update.get("messages")
            for item in history if isinstance(history, list) else []:
                message = json_object(item)
                if message.get("id") not in self.messages:
                    self._put(message)
            return
        if "sessionId" in record and "type" not in record:
            self.session_id = str(record["sessionId"])
            self.started_at = parse_time(record.get("startTime"))
            return
        self._put(record)

    def _put(self, message: dict[str, Any]) -> None:
        key = message.get("id")
        if not isinstance(key, str) or not isinstance(message.get("type"), str):
            return
        if key not in self.messages:
            self.order.append(key)
        self.messages[key] = message

    def turns(self) -> list[Turn]:
        """Every user turn, oldest first; a turn followed by another prompt is over whatever it shows.
        Worked out again only after new lines (every look asks)."""
        if self._turns is None or self._turns[0] != self.version:
            self._turns = (self.version, self._read_turns())
        return self._turns[1]

    def _read_turns(self) -> list[Turn]:
        turns: list[Turn] = []
        last: dict[str, Any] | None = None
        for key in self.order:
            message = self.messages[key]
            kind = message["type"]
            prompt = prompt_text(message) if kind == "user" else None
            if prompt is not None:
                if turns:
                    _close(turns[-1], last, final=False)
                turns.append(Turn(turn_id=f"gemini:{self.session_id or '?'}:{key}", prompt=prompt,
                                  started_at=parse_time(message.get("timestamp")) or 0.0))
                last = None
            elif turns and kind in ("user", "gemini", "info", "error"):
                last = message
                if kind == "gemini":
                    turns[-1].model_calls += 1
                    turns[-1].tool_calls += len(message.get("toolCalls") or [])
        if turns:
            _close(turns[-1], last, final=True)
        return turns

    def prompts(self) -> list[str]:
        return [t.prompt for t in self.turns()]


def message_text(content: object) -> str:
    """A message's text: the string, or the ``text`` parts of a parts list."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _calls(content: object) -> bool:
    """Whether a parts list calls a function (the model's history shape of a tool call)."""
    return isinstance(content, list) and any(isinstance(p, dict) and "functionCall" in p for p in content)


def _close(turn: Turn, last: dict[str, Any] | None, *, final: bool) -> None:
    """Say how ``turn`` ended from its ``last`` message; ``final``: no later prompt followed it."""
    kind = last.get("type") if last is not None else None
    content = last.get("content") if last is not None else None
    at = parse_time(last.get("timestamp")) if last is not None else None
    if kind == "gemini" and not last.get("toolCalls") and not _calls(content):  # type: ignore[union-attr]
        turn.outcome, turn.answer, turn.ended_at = "completed", message_text(content), at
        turn.provisional = final
    elif kind == "info" and content == CANCELLED:
        turn.outcome, turn.ended_at, turn.detail = "failed", at, "interrupted"
    elif kind == "error":
        turn.outcome, turn.ended_at, turn.detail = "failed", at, f"error: {content}"
    elif not final:
        turn.outcome, turn.ended_at = "failed", at or turn.started_at
        turn.detail = "no answer before the next prompt"


class SessionFile(FollowedFile[SessionState]):
    """A session file and its state, read incrementally; a file replaced or cut short is read again."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, SessionState)
