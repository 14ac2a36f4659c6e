"""Claude Code's transcript (``projects/<enc>/<sessionId>.jsonl``): where a turn starts, ends, and what it said.

SPEC §5 (seen on 2.1.197): a turn starts with a ``user`` line carrying a ``promptId`` (every later user
line of the turn — tool results, the interrupt marker — carries the same one); an assistant message is
split into one line per content block sharing ``message.id``; a finished turn ends with the final
assistant line (``stop_reason: end_turn``), ``system/stop_hook_summary`` and ``system/turn_duration``,
written in one go; an interrupted one with a synthetic assistant line and a user line
``[Request interrupted by user]``. Sidechain lines (subagents), compact summaries and line types this
module does not know are skipped.

One classifier, :class:`TurnTracker`, is fed lines *forwards*. Reading the last turn of a file does not
read the file: :func:`scan_back` feeds it a window at the end of the file and doubles the window only
until the turn it needs starts inside it, so the cost follows the size of the last turn, not of the
transcript (they reach hundreds of MB). While watching, :class:`TranscriptTail` reads only the bytes
appended since last time and keeps a half-written last line until its newline arrives.

A turn is named by ``claude:<sessionId>:<promptId>`` (:func:`turn_id`): the Stop hook's stdin carries
``session_id`` and ``prompt_id`` too, and the prompt line is on disk before the hook fires, so the hook, the
session status and the transcript all name one turn alike — which is how the detector drops duplicates.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import orjson

__all__ = [
    "TailScan",
    "TranscriptTail",
    "TurnEnd",
    "TurnTracker",
    "causal_order",
    "find_turn",
    "last_finished_turn",
    "latest_key",
    "latest_turn",
    "scan_back",
    "turn_id",
]

log = logging.getLogger("batonpass")

INTERRUPT_PREFIX = "[Request interrupted by user"
SYNTHETIC_MODEL = "<synthetic>"
#: stop reasons of a model message that ends the turn (``tool_use`` does not)
FINISH_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "refusal"})
FIRST_WINDOW = 256 * 1024
#: user lines that are a local command's echo, not a prompt to the model
LOCAL_COMMAND_TAGS = ("<command-name>", "<command-message>", "<local-command-", "<bash-input>", "<bash-stdout>")

Outcome = Literal["completed", "failed"]


def turn_id(session_id: str | None, key: str | None) -> str:
    """The stable id of a turn: the same from the transcript, the session status and the Stop hook."""
    return f"claude:{session_id or '?'}:{key or '?'}"


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """A turn that ended, and its answer: the text blocks of its last assistant message with text,
    joined with newlines in order (as Claude Code joins them for its own Stop hook)."""

    key: str | None
    session_id: str | None
    outcome: Outcome
    text: str
    #: how it ended: ``turn_duration``, ``end_turn`` (no turn_duration line), ``interrupted``, ``api_error``
    reason: str
    message_id: str | None = None
    cwd: str | None = None
    timestamp: str | None = None
    #: False when the window read began inside this turn: then its answer may be incomplete
    whole: bool = True

    @property
    def turn_id(self) -> str:
        return turn_id(self.session_id, self.key)

    @property
    def ended_at(self) -> float:
        """When the turn's last line was written (its timestamp), or now if it carries none."""
        try:
            return datetime.fromisoformat(self.timestamp).timestamp() if self.timestamp else time.time()
        except ValueError:
            return time.time()


def _text_blocks(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
            and isinstance(b.get("text"), str)]


class TurnTracker:
    """Turn state, fed transcript lines in file order. :meth:`feed` returns the turns that ended.

    A tracker that does not start at the top of the file assumes it starts inside a turn (``key`` None,
    ``whole`` False), so that a read beginning mid-file reports that turn's end as incomplete instead of
    inventing its start.
    """

    def __init__(self, *, at_start: bool = False) -> None:
        self.key: str | None = None
        self.session_id: str | None = None
        self.cwd: str | None = None
        #: a turn is running (started and not ended); unknown mid-file, so assumed
        self.open = not at_start
        #: the current turn's prompt line was read
        self.whole = False
        #: the last model message finished the turn (end_turn) but no turn_duration line followed yet
        self.answered = False
        #: the turn was started by a prompt the user typed (not a local command such as /clear or !ls)
        self.typed = False
        #: keys of the turns whose prompt line was read, in order
        self.started: list[str] = []
        self.bad_lines = 0
        self._msg_id: str | None = None
        self._msg_texts: list[str] = []
        self._answer_id: str | None = None
        self._answer_texts: list[str] = []
        self._answer_error = False

    # ---- feeding ---------------------------------------------------------------------------------

    def feed_line(self, raw: bytes) -> list[TurnEnd]:
        """One line as bytes; a line that is not JSON (a torn write, corruption) is counted and skipped."""
        if not raw.strip():
            return []
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self.bad_lines += 1
            return []
        return self.feed(obj) if isinstance(obj, dict) else []

    def feed_lines(self, raws: list[bytes]) -> list[TurnEnd]:
        """Lines read together (one read of appended bytes, or a window): parsed, put in causal order
        (see :func:`causal_order`), fed in turn."""
        objs = []
        for raw in raws:
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                self.bad_lines += 1
                continue
            if isinstance(obj, dict):
                objs.append(obj)
        ends: list[TurnEnd] = []
        for obj in causal_order(objs):
            ends.extend(self.feed(obj))
        return ends

    def feed(self, obj: dict[str, Any]) -> list[TurnEnd]:
        if obj.get("isSidechain") is True:
            return []
        kind = obj.get("type")
        if kind == "user":
            return self._user(obj)
        if kind == "assistant":
            self._assistant(obj)
        elif kind == "system" and obj.get("subtype") == "turn_duration":
            return self._end("completed", "turn_duration", obj)
        return []

    def _user(self, obj: dict[str, Any]) -> list[TurnEnd]:
        if obj.get("isCompactSummary") or obj.get("isVisibleInTranscriptOnly"):
            return []
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        tool_results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(content, list) else []
        texts = _text_blocks(content) + [b["content"] for b in tool_results if isinstance(b.get("content"), str)]
        if any(t.startswith(INTERRUPT_PREFIX) for t in texts):
            return self._end("failed", "interrupted", obj)
        if tool_results:
            return []
        key = obj.get("promptId") or (None if obj.get("isMeta") else obj.get("uuid"))
        if not isinstance(key, str) or key == self.key:
            return []
        ended = self._end("completed", "end_turn", obj) if self.open and self.answered else []
        self.key, self.open, self.whole, self.answered = key, True, True, False
        self.typed = not obj.get("isMeta") and not any(t.lstrip().startswith(LOCAL_COMMAND_TAGS) for t in texts)
        self.session_id = obj.get("sessionId") or self.session_id
        self.cwd = obj.get("cwd") or self.cwd
        self.started.append(key)
        self._msg_id, self._msg_texts = None, []
        self._answer_id, self._answer_texts, self._answer_error = None, [], False
        return ended

    def _assistant(self, obj: dict[str, Any]) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            return
        msg_id = message.get("id") or obj.get("uuid")
        if msg_id != self._msg_id:
            self._msg_id, self._msg_texts = msg_id, []
        self._msg_texts.extend(_text_blocks(message.get("content")))
        error = obj.get("isApiErrorMessage") is True
        if self._msg_texts:
            self._answer_id, self._answer_texts, self._answer_error = msg_id, list(self._msg_texts), error
        synthetic = message.get("model") == SYNTHETIC_MODEL
        self.answered = error or (message.get("stop_reason") in FINISH_REASONS and not synthetic)
        self.session_id = self.session_id or obj.get("sessionId")

    def _make_end(self, outcome: Outcome, reason: str, obj: dict[str, Any]) -> TurnEnd:
        if self._answer_error and outcome == "completed":
            outcome, reason = "failed", "api_error"
        return TurnEnd(key=self.key, session_id=self.session_id or obj.get("sessionId"), outcome=outcome,
                       text="\n".join(self._answer_texts), reason=reason, message_id=self._answer_id,
                       cwd=self.cwd or obj.get("cwd"), timestamp=obj.get("timestamp"), whole=self.whole)

    def _end(self, outcome: Outcome, reason: str, obj: dict[str, Any]) -> list[TurnEnd]:
        if not self.open:
            return []
        end = self._make_end(outcome, reason, obj)
        self.open = self.answered = False
        return [end]

    # ---- state -----------------------------------------------------------------------------------

    @property
    def state(self) -> Literal["running", "answered", "ended"]:
        """``running``: the turn goes on; ``answered``: its final message is on disk but not yet the
        ``turn_duration`` line; ``ended``: no turn runs."""
        if not self.open:
            return "ended"
        return "answered" if self.answered else "running"

    def pending_end(self) -> TurnEnd | None:
        """The end of a turn whose final message is on disk without its ``turn_duration`` line (older
        versions write none; live, it follows within milliseconds). The tracker is not changed."""
        return self._make_end("completed", "end_turn", {}) if self.open and self.answered else None

    def close_silent(self) -> TurnEnd | None:
        """End a typed turn that the session reports over although the transcript shows no end: Claude
        Code writes nothing when Esc comes before the first streamed text. Outcome ``failed``."""
        if not (self.open and self.whole and self.typed):
            return None
        return self._end("failed", "no-end-written", {})[0]

    def close_answered(self) -> TurnEnd | None:
        """End such a turn for good (the session said idle): it will not be reported again."""
        end = self.pending_end()
        if end is not None:
            self.open = self.answered = False
        return end

    @property
    def answer_so_far(self) -> str:
        return "\n".join(self._answer_texts)


def causal_order(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``objs`` with every line after its parent (``parentUuid``) when both are in the list, otherwise in
    file order. Seen on 2.1.197: when the session title is generated before the transcript exists, the
    file is created in one write whose lines are out of order — the assistant answer before its prompt."""
    index = {o["uuid"]: i for i, o in enumerate(objs) if isinstance(o.get("uuid"), str)}
    placed = [False] * len(objs)
    out: list[dict[str, Any]] = []
    for i in range(len(objs)):
        chain: list[int] = []
        in_chain: set[int] = set()
        j: int | None = i
        while j is not None and not placed[j] and j not in in_chain:
            chain.append(j)
            in_chain.add(j)
            parent = objs[j].get("parentUuid")
            j = index.get(parent) if isinstance(parent, str) else None
        for k in reversed(chain):
            placed[k] = True
            out.append(objs[k])
    return out


# ---- reading the end of a file ---------------------------------------------------------------------


@dataclass
class TailScan:
    """What a window at the end of a transcript showed."""

    tracker: TurnTracker
    ends: list[TurnEnd] = field(default_factory=list)
    #: the window reached the start of the file
    from_start: bool = False
    #: offset just past the last complete line (where an incremental reader goes on)
    end_offset: int = 0
    window: int = 0


def scan_back(path: str | os.PathLike[str], enough: Callable[[TailScan], bool],
              first_window: int = FIRST_WINDOW) -> TailScan:
    """Feed a window at the end of ``path`` through a fresh tracker, doubling the window until
    ``enough(scan)`` holds or the whole file was read. A half-written last line is left out. Lines of any
    length work: a window that holds no line start grows until it does."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        window = max(first_window, 1)
        while True:
            start = max(0, size - window)
            f.seek(start)
            data = f.read(size - start)
            if start > 0:
                cut = data.find(b"\n")
                if cut < 0:  # inside one long line: look further back
                    window *= 2
                    continue
                data, start = data[cut + 1:], start + cut + 1
            last_nl = data.rfind(b"\n")
            complete = data[: last_nl + 1] if last_nl >= 0 else b""
            scan = TailScan(TurnTracker(at_start=start == 0), from_start=start == 0, end_offset=start + len(complete), window=window)
            scan.ends.extend(scan.tracker.feed_lines(complete.split(b"\n")))
            if scan.from_start or enough(scan):
                return scan
            window *= 2


def _with_open_end(scan: TailScan) -> list[TurnEnd]:
    """The scan's ends, plus the turn whose final message is on disk without its ``turn_duration``."""
    pending = scan.tracker.pending_end()
    return scan.ends + ([pending] if pending else [])


def last_finished_turn(path: str | os.PathLike[str]) -> TurnEnd | None:
    """The last turn that completed (not interrupted, not failed), or None. For ``baton extract``."""

    def found(scan: TailScan) -> bool:
        return any(e.outcome == "completed" and e.whole for e in _with_open_end(scan))

    scan = scan_back(path, found)
    done = [e for e in _with_open_end(scan) if e.outcome == "completed" and (e.whole or scan.from_start)]
    return done[-1] if done else None


def find_turn(path: str | os.PathLike[str], key: str) -> tuple[TurnEnd | None, bool]:
    """The end of the turn ``key`` if it is on disk, and whether that turn's start was found at all."""
    scan = scan_back(path, lambda s: key in s.tracker.started)
    ends = [e for e in scan.ends if e.key == key]
    return (ends[-1] if ends else None), key in scan.tracker.started


def latest_turn(path: str | os.PathLike[str]) -> TurnTracker:
    """The tracker after the last turn's start: its ``key``, ``session_id`` and ``state``."""
    return scan_back(path, lambda s: s.tracker.whole).tracker


def latest_key(path: str | os.PathLike[str] | None) -> str | None:
    """The key of the last turn started in ``path`` (None if none, or no file)."""
    try:
        return latest_turn(path).key if path else None
    except OSError:
        return None


class TranscriptTail:
    """Follows one transcript: :meth:`read_new` returns the turns that ended in the bytes appended since
    the last call. After :meth:`prime` it starts at the current end of the file (what is there is
    history); with ``from_start`` (a transcript that appeared while following) at its first line."""

    def __init__(self, path: str | os.PathLike[str], *, from_start: bool = False) -> None:
        self.path = Path(path)
        self.tracker = TurnTracker(at_start=True)
        self.offset = 0
        self._partial = b""
        self._inode: int | None = None
        #: read the file from its first line (it is new), not from where :meth:`prime` would start
        self._awaiting_creation = from_start
        self.history: list[TurnEnd] = []

    def prime(self) -> bool:
        """Read the current turn's state from the end of the file. False if the file does not exist (yet:
        Claude Code creates it on the first prompt; then :meth:`read_new` reads it from the start)."""
        try:
            scan = scan_back(self.path, lambda s: s.tracker.whole)
            self._inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            self._inode, self._awaiting_creation = None, True
            return False
        self.tracker, self.offset, self._partial, self.history = scan.tracker, scan.end_offset, b"", scan.ends
        self._awaiting_creation = False
        return True

    def read_new(self) -> list[TurnEnd]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        if self._inode is None and self._awaiting_creation:
            self._inode, self._awaiting_creation = st.st_ino, False
            self.tracker, self.offset, self._partial = TurnTracker(at_start=True), 0, b""
        elif self._inode is None or st.st_ino != self._inode or st.st_size < self.offset:
            log.debug("transcript %s was replaced or truncated; reading its end again", self.path)
            self.prime()
            return []
        if st.st_size == self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(st.st_size - self.offset)
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # no newline yet: wait for the rest
        return self.tracker.feed_lines(lines)
