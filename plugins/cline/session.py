"""Cline's session files, read whole whenever they change: the session (``<id>.json``: ``pid``, ``cwd``,
``status``, ``messages_path``) and its messages (``<id>.messages.json``), folded into user turns.

``~/.cline/data/sessions/<id>/<id>.json`` is made at the session's first prompt (the id, ``<ms>_<5 chars>``,
is the time its process started the session) and rewritten as the session goes: ``status`` is ``running``
while a turn runs, ``pending`` while a tool waits for approval, ``idle`` between turns, ``completed`` once
its process exited. The messages file is rewritten after each model call and at the turn's end, a moment
before ``status`` goes back to ``idle`` (docs/agent-versions.md, Cline).

A typed prompt is a ``user`` message whose text is wrapped ``<user_input mode="act">…</user_input>`` (a
paste's line ends stored as ``\\r``); tool results are ``user`` messages of ``tool_result`` parts. Tools are
native calls: an ``assistant`` message without a ``tool_use`` part ends the turn (its text is the answer);
one whose id starts ``error_`` (``metadata.displayRole: "error"``) ends it failed. An interrupt (Esc)
leaves the prompt with no answer after it and the status ``idle``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.plugin.events import Outcome
from pipeline.plugin.tools import iso_time, json_object

__all__ = ["BUSY_STATUSES", "SessionFile", "SessionState", "Turn", "prompt_text"]

#: the statuses of a session whose turn runs (``pending``: a tool waits for approval)
BUSY_STATUSES = ("running", "pending")
_WRAPPED = re.compile(r"^<user_input(?: [^>]*)?>(.*)</user_input>$", re.S)


def prompt_text(message: dict[str, Any]) -> str | None:
    """What a person typed, of a ``user`` message: its text unwrapped, line ends as ``\\n``; None for a tool
    result or a message Cline wrote itself."""
    parts = message.get("content")
    if message.get("role") != "user" or not isinstance(parts, list):
        return None
    if any(isinstance(p, dict) and p.get("type") == "tool_result" for p in parts):
        return None
    text = "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
    m = _WRAPPED.match(text.strip())
    return m.group(1).replace("\r\n", "\n").replace("\r", "\n") if m else None


def _answer(message: dict[str, Any]) -> tuple[Outcome, str, str] | None:
    """How an ``assistant`` message ends its turn: ``(outcome, answer, detail)``, or None when it calls a
    tool (the turn goes on)."""
    parts = message.get("content")
    parts = parts if isinstance(parts, list) else []
    if any(isinstance(p, dict) and p.get("type") == "tool_use" for p in parts):
        return None
    text = "".join(p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
                   and isinstance(p.get("text"), str))
    if str(message.get("id", "")).startswith("error_") or \
            json_object(message.get("metadata")).get("displayRole") == "error":
        return "failed", "", f"error: {' '.join(text.split())[:200]}"
    return "completed", text, ""


@dataclass
class Turn:
    """One user turn, as far as the files tell."""

    turn_id: str
    prompt: str
    started_at: float
    #: None while open; ``completed`` or ``failed`` once the files show an end
    outcome: Outcome | None = None
    answer: str | None = None
    ended_at: float | None = None
    detail: str = ""


@dataclass
class SessionState:
    """One session: its record and its messages, as last read."""

    session_id: str | None = None
    pid: int | None = None
    cwd: str | None = None
    status: str = ""
    started_at: float | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: when the session record was last written (epoch seconds): an interrupt's time
    written_at: float = 0.0

    @property
    def busy(self) -> bool:
        return self.status in BUSY_STATUSES

    def turns(self) -> list[Turn]:
        """Every user turn, oldest first; one followed by another prompt is over whatever it shows."""
        turns: list[Turn] = []
        for message in self.messages:
            prompt = prompt_text(message)
            if prompt is not None:
                if turns and turns[-1].outcome is None:
                    _end(turns[-1], "failed", None, _ts(message), "no answer before the next prompt")
                turns.append(Turn(turn_id=f"cline:{self.session_id or '?'}:{message.get('id')}",
                                  prompt=prompt, started_at=_ts(message) or 0.0))
            elif turns and turns[-1].outcome is None and message.get("role") == "assistant":
                end = _answer(message)
                if end is not None:
                    _end(turns[-1], end[0], end[1] if end[0] == "completed" else None, _ts(message), end[2])
        if turns and turns[-1].outcome is None and self.status and not self.busy:
            _end(turns[-1], "failed", None, self.written_at or None, "interrupted")
        return turns


def _ts(message: dict[str, Any]) -> float | None:
    ts = message.get("ts")
    return ts / 1000.0 if isinstance(ts, int | float) and not isinstance(ts, bool) else None


def _end(turn: Turn, outcome: Outcome, answer: str | None, at: float | None, detail: str) -> None:
    turn.outcome, turn.answer, turn.ended_at, turn.detail = outcome, answer, at or turn.started_at, detail


def _load(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class SessionFile:
    """A session's two files, read again whenever either changed (both are rewritten whole)."""

    def __init__(self, path: Path) -> None:
        #: the session record, ``<id>.json``
        self.path = Path(path)
        self.state = SessionState(session_id=self.path.stem)
        self._stamp: tuple[int, int, int, int] | None = None

    @property
    def messages_path(self) -> Path:
        return self.path.with_name(f"{self.path.stem}.messages.json")

    def _stamps(self) -> tuple[int, int, int, int]:
        out = []
        for p in (self.path, self.messages_path):
            try:
                st = os.stat(p)
                out += [st.st_mtime_ns, st.st_size]
            except OSError:
                out += [0, 0]
        return out[0], out[1], out[2], out[3]

    def read(self) -> bool:
        """Read both files if either changed since the last read; whether anything changed. A file caught
        half rewritten is read again at the next look."""
        stamp = self._stamps()
        if stamp == self._stamp:
            return False
        record = _load(self.path)
        if record is None:
            return False
        raw = _load(self.messages_path)
        messages = raw.get("messages") if raw is not None else []
        if raw is None and os.path.exists(self.messages_path):
            return False  # caught half written
        self._stamp = stamp
        state = self.state
        state.session_id = str(record.get("session_id") or self.path.stem)
        pid = record.get("pid")
        state.pid = pid if isinstance(pid, int) else None
        state.cwd = record.get("cwd") if isinstance(record.get("cwd"), str) else None
        state.status = str(record.get("status") or "")
        state.started_at = iso_time(record.get("started_at"))
        state.written_at = stamp[0] / 1e9
        state.messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
        return True
