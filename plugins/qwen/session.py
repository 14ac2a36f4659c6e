"""Qwen Code's session file, read as it grows: its turns, their answers and the tokens they used.

``~/.qwen/projects/<cwd, every non-alphanumeric as ->/chats/<sessionId>.jsonl`` (docs/agent-versions.md,
Qwen Code), one record a line, each ``{"uuid", "parentUuid", "sessionId", "timestamp", "type", "provenance",
…}``: a typed (or pasted) prompt is ``type: user``, ``provenance: real_user``, ``message: {"role": "user",
"parts": [{"text"}]}``; a model reply ``type: assistant`` with ``message.parts`` of ``text`` and
``functionCall`` parts and ``usageMetadata`` (Gemini-style token counts); a tool's result ``type:
tool_result``; ``type: system`` records carry snapshots and ``ui_telemetry`` events
(``qwen-code.api_response`` before each reply, ``qwen-code.api_error``).

A turn begins at a prompt and ends at a reply without function calls: completed when the API answered it
(an ``api_response`` event before it, or its ``usageMetadata``), else it is the partial answer an interrupt
(Esc) left, written without usage. A turn whose last record is an ``api_error`` has failed unless it goes
on (a retry): that end is *provisional*, taken once the screen shows it idle. Follow-up suggestions are
requested and shown without a record here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.plugin.session_file import FollowedFile
from pipeline.plugin.tools import iso_time
from pipeline.plugin.turns import FileTurn
from pipeline.plugin.usage import SessionUsage, count_of

__all__ = ["SessionFile", "SessionState", "Turn", "prompt_text", "reply_text"]

RESPONSE = "qwen-code.api_response"
ERROR = "qwen-code.api_error"


@dataclass
class Turn(FileTurn):
    """One user turn of a session; ``provisional``: an API error a retry may yet follow (taken once the
    screen is idle)."""

    #: Qwen's id of the turn (``<session>########N``, in its hooks), once a record after the prompt names it
    prompt_id: str | None = None


def prompt_text(record: dict[str, Any]) -> str | None:
    """The text of a prompt a person (or batonpass) typed, or None for any other record."""
    if record.get("type") != "user" or record.get("provenance") != "real_user":
        return None
    parts = (record.get("message") or {}).get("parts") if isinstance(record.get("message"), dict) else None
    texts = [p["text"] for p in parts or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "".join(texts) if texts else None


def reply_text(record: dict[str, Any]) -> tuple[str, bool]:
    """A model reply's text, and whether it calls a function (then the turn goes on)."""
    message = record.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    parts = [p for p in parts or [] if isinstance(p, dict)]
    text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))
    return text, any("functionCall" in p for p in parts)


def _event(record: dict[str, Any]) -> dict[str, Any]:
    payload = record.get("systemPayload") if record.get("subtype") == "ui_telemetry" else None
    event = payload.get("uiEvent") if isinstance(payload, dict) else None
    return event if isinstance(event, dict) else {}


@dataclass
class SessionState:
    session_id: str | None = None
    cwd: str | None = None
    version: str | None = None
    records: int = 0
    turns: list[Turn] = field(default_factory=list)
    #: tokens per model: input (less cached), output (with thoughts), cached
    tokens: dict[str, list[int]] = field(default_factory=dict)
    #: an api_response event came since the last reply or tool result
    _answered: bool = False

    def feed(self, record: dict[str, Any]) -> None:
        self.records += 1
        self.session_id = self.session_id or _str(record.get("sessionId"))
        self.cwd = self.cwd or _str(record.get("cwd"))
        self.version = _str(record.get("version")) or self.version
        at = iso_time(record.get("timestamp")) or 0.0
        prompt = prompt_text(record)
        if prompt is not None:
            turn_id = f"qwen:{self.session_id or '?'}:{record.get('uuid')}"
            self.turns.append(Turn(turn_id=turn_id, prompt=prompt, started_at=at))
            self._answered = False
            return
        turn = self.turns[-1] if self.turns else None
        kind = record.get("type")
        if turn is not None and turn.prompt_id is None:
            turn.prompt_id = _prompt_id(record)
        if kind == "assistant":
            self._count(record)
            self._reply(turn, record, at)
        elif kind == "tool_result":
            self._answered = False
            if turn is not None:
                turn.outcome, turn.provisional = None, False
        else:
            self._system(turn, _event(record), at)

    def _reply(self, turn: Turn | None, record: dict[str, Any], at: float) -> None:
        text, calls = reply_text(record)
        answered, self._answered = self._answered or "usageMetadata" in record, False
        if turn is None or calls:
            if turn is not None:
                turn.outcome, turn.provisional = None, False
            return
        turn.answer, turn.ended_at, turn.provisional = text, at, False
        turn.outcome, turn.detail = ("completed", "") if answered else ("failed", "interrupted")

    def _system(self, turn: Turn | None, event: dict[str, Any], at: float) -> None:
        name = event.get("event.name")
        if name == RESPONSE:
            self._answered = True
        elif name == ERROR and turn is not None and turn.outcome is None:
            turn.outcome, turn.ended_at, turn.provisional = "failed", at, True
            turn.detail = f"error: {event.get('error') or event.get('error_type') or 'API error'}"

    def _count(self, record: dict[str, Any]) -> None:
        usage = record.get("usageMetadata")
        if not isinstance(usage, dict):
            return
        cached = count_of(usage.get("cachedContentTokenCount"))
        sums = self.tokens.setdefault(_str(record.get("model")) or "", [0, 0, 0])
        sums[0] += max(count_of(usage.get("promptTokenCount")) - cached, 0)
        sums[1] += count_of(usage.get("candidatesTokenCount")) + count_of(usage.get("thoughtsTokenCount"))
        sums[2] += cached

    def usage(self) -> SessionUsage | None:
        """The session's tokens (no cost: Qwen Code runs whatever model its endpoint serves, at its price)."""
        if not self.tokens:
            return None
        inp, out, read = (sum(s[i] for s in self.tokens.values()) for i in range(3))
        return SessionUsage(inp, out, read, 0, cost_usd=None, models=tuple(m for m in self.tokens if m))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _prompt_id(record: dict[str, Any]) -> str | None:
    """The turn's prompt id a record names (a file-history snapshot's ``promptId``, an event's
    ``prompt_id``)."""
    payload = record.get("systemPayload")
    if not isinstance(payload, dict):
        return None
    snaps = payload.get("snapshots")
    if isinstance(snaps, list) and snaps and isinstance(snaps[0], dict):
        return _str(snaps[0].get("promptId"))
    event = payload.get("uiEvent")
    return _str(event.get("prompt_id")) if isinstance(event, dict) else None


class SessionFile(FollowedFile[SessionState]):
    """A session file and its state, read incrementally; a file replaced or cut short is read again."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, SessionState)
