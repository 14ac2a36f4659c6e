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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.plugin.events import Outcome
from pipeline.plugin.tools import iso_time, json_object
from pipeline.plugin.turns import FileTurn

__all__ = ["BUSY_STATUSES", "SessionFile", "SessionState", "Turn", "prompt_text"]

#: one user turn, as far as the files tell (no end of Cline's is provisional)
Turn = FileTurn

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
        self._stamp: tuple[int, int, int] | None = None
        self._record: dict[str, Any] | None = None
        #: how many reads found a change (a look at an unchanged session is told from a changed one)
        self.fed = 0

    @property
    def messages_path(self) -> Path:
        return self.path.with_name(f"{self.path.stem}.messages.json")

    def read(self, *, final: bool = False) -> bool:
        """Read the session record (small: read at every look — ``running`` and ``pending`` are the same
        size, and two writes within a clock tick leave the same mtime) and the messages when their file
        changed; whether anything changed. A file caught half rewritten is read again at the next look
        (``final`` changes nothing: both files are whole JSON documents)."""
        record = _load(self.path)
        if record is None:
            return False
        try:
            st = os.stat(self.messages_path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = (0, 0, 0)
        if stamp != self._stamp:
            raw = _load(self.messages_path)
            if raw is None and stamp != (0, 0, 0):
                return False  # caught half written
            messages = raw.get("messages") if raw is not None else []
            self.state.messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) \
                else []
        elif record == self._record:
            return False
        self._stamp, self._record = stamp, record
        self._take(record)
        self.fed += 1
        return True

    def _take(self, record: dict[str, Any]) -> None:
        state = self.state
        state.session_id = str(record.get("session_id") or self.path.stem)
        pid = record.get("pid")
        state.pid = pid if isinstance(pid, int) else None
        state.cwd = record.get("cwd") if isinstance(record.get("cwd"), str) else None
        state.status = str(record.get("status") or "")
        state.started_at = iso_time(record.get("started_at"))
        try:
            state.written_at = os.stat(self.path).st_mtime
        except OSError:
            state.written_at = time.time()
