"""Claude Code's transcript lines, classified into turns: where a turn starts, what proves it ended, its
answer.

Fed lines *forwards* by :class:`TurnTracker` (the readers in :mod:`plugins.claude_code.reader` choose which
lines). A turn starts with a main-chain ``user`` prompt line; its key is the line's ``promptId`` (2.x: every
later user line of the turn — tool results, the interrupt marker — carries the same one), or the line's
``uuid`` where there is none (1.0.x). An assistant message is split into one line per content block sharing
``message.id``; the answer is the text blocks of the turn's last assistant message with text, in order.

What proves that a turn ended, by version (docs/agents.md, Claude Code and its versions):

- ``system/turn_duration`` — 2.1.x after every turn; 1.0.98…2.1.39 only after turns longer than ~30 s.
- the final message's ``stop_reason`` (``end_turn``…) — 2.1.x; older versions write ``null`` on nearly every
  line, so there a message with text and no tool call is *taken as* the final one, to be confirmed by:
- the next main-chain user line (a typed or injected prompt such as ``<task-notification>``, or a local
  command's ``<command-name>`` line), which ends an answered turn;
- ``system/stop_hook_summary`` after the answer (a blocking Stop hook continues the turn through a meta
  "Stop hook feedback" line; the assistant line that follows un-answers it again);
- live, the session going idle, or (no session file: versions before it) the transcript staying quiet —
  the adapter's rules, through :meth:`TurnTracker.pending_end`.

An interrupt (``[Request interrupted by user…``) or an API error ends a turn as ``failed``.

**Background agents** (docs/agents.md, Claude Code 2.1.332): a turn whose ``turn_duration`` has
``pendingBackgroundAgentCount`` > 0 ended while subagents still run; its answer is "I launched an agent…". It
is *held*, not reported: the work goes on in the turns the agents' ``<task-notification>`` lines start, and
the first later turn that ends with none pending is the tile's completion (its answer is the real one). A held
turn fires no route — not even ``on: any`` — and uses no hop (no completion is reported for it).
:meth:`TurnTracker.release_held` gives it up when the session goes idle with no notification turn (the adapter
waits a few seconds first).

A turn is named by ``claude:<sessionId>:<key>`` (:func:`turn_id`): the Stop hook's stdin carries
``session_id`` and ``prompt_id`` too, so hook, session status and transcript name one turn alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

import orjson

from plugins.claude_code.paste import unwrap_paste

__all__ = ["LOCAL_COMMAND_TAGS", "TurnEnd", "TurnTracker", "causal_order", "turn_id"]

INTERRUPT_PREFIX = "[Request interrupted by user"
SYNTHETIC_MODEL = "<synthetic>"
#: stop reasons of a model message that ends the turn (``tool_use`` does not)
FINISH_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "refusal"})
#: user lines that are a local command's echo, not a prompt to the model
LOCAL_COMMAND_TAGS = (
    "<command-name>",
    "<command-message>",
    "<local-command-",
    "<bash-input>",
    "<bash-stdout>",
)

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
    #: what proved the end: ``turn_duration``, ``end_turn`` (the final message, no turn_duration yet),
    #: ``final text`` (older versions: a message with text, no tool call and nothing after it),
    #: ``next prompt``, ``local command``, ``stop_hook_summary``, ``idle``, ``quiet``, ``interrupted``,
    #: ``api_error``, ``background agents finished``
    reason: str
    message_id: str | None = None
    cwd: str | None = None
    timestamp: str | None = None
    #: False when the window read began inside this turn: then its answer may be incomplete
    whole: bool = True
    #: background agents still running when this turn ended (> 0: a held turn, not a completion)
    background: int = 0
    #: the key of the turn that launched the background agents, when this turn ends that work
    held_key: str | None = None

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


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


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
        #: the turn looks finished (see the module doc): ``proof`` says why; confirmed by what comes next
        self.answered = False
        self.proof = ""
        #: the turn was started by a prompt the user typed (not a local command such as /clear or !ls)
        self.typed = False
        #: the prompt text of the current turn (a bracketed paste's wrapper removed)
        self.prompt = ""
        #: the current turn's prompt line's ``timestamp`` (ISO 8601), when it has one: when the turn began
        self.prompt_at: str | None = None
        #: keys of the turns whose prompt line was read, in order, and their prompt texts
        self.started: list[str] = []
        self.prompts: list[str] = []
        #: main-chain lines read (0: a subagent-only file, or nothing yet)
        self.main_lines = 0
        #: subagent (sidechain) lines read
        self.side_lines = 0
        #: the last turn that ended with background agents still running, until a later turn ends the work
        self.held: TurnEnd | None = None
        self.bad_lines = 0
        self._msg_id: str | None = None
        self._msg_texts: list[str] = []
        self._msg_tool = False
        self._answer_id: str | None = None
        self._answer_texts: list[str] = []
        self._answer_error = False

    # ---- feeding ---------------------------------------------------------------------------------

    def feed_line(self, raw: bytes) -> list[TurnEnd]:
        """One line as bytes; a line that is not JSON (a torn write, corruption) is counted and skipped."""
        return self.feed_lines([raw])

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
            self.side_lines += 1
            return []
        kind = obj.get("type")
        if kind in ("user", "assistant", "system"):
            self.main_lines += 1
        if kind == "user":
            return self._user(obj)
        if kind == "assistant":
            self._assistant(obj)
        elif kind == "system" and obj.get("subtype") == "turn_duration":
            return self._end(
                "completed", "turn_duration", obj, background=_count(obj.get("pendingBackgroundAgentCount"))
            )
        elif kind == "system" and obj.get("subtype") == "stop_hook_summary":
            if self.open and self._answer_texts and not self._msg_tool and self.proof in ("", "final text"):
                self.answered, self.proof = True, "stop_hook_summary"
        return []

    def _user(self, obj: dict[str, Any]) -> list[TurnEnd]:
        if obj.get("isCompactSummary") or obj.get("isVisibleInTranscriptOnly"):
            return []
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        tool_results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(content, list) else []
        texts = _text_blocks(content) + [
            b["content"] for b in tool_results if isinstance(b.get("content"), str)
        ]
        if any(t.startswith(INTERRUPT_PREFIX) for t in texts):
            return self._end("failed", "interrupted", obj)
        if tool_results:
            return []
        key = obj.get("promptId") or (None if obj.get("isMeta") else obj.get("uuid"))
        if not isinstance(key, str) or key == self.key:
            return []
        command = any(t.lstrip().startswith(LOCAL_COMMAND_TAGS) for t in texts)
        ended = self._end("completed", "local command" if command else "next prompt", obj) \
            if self.open and self.answered else []
        self.key, self.open, self.whole, self.answered, self.proof = key, True, True, False, ""
        self.typed = not obj.get("isMeta") and not command
        self.prompt = unwrap_paste("\n".join(texts))
        self.prompt_at = obj["timestamp"] if isinstance(obj.get("timestamp"), str) else None
        self.session_id = obj.get("sessionId") or self.session_id
        self.cwd = obj.get("cwd") or self.cwd
        self.started.append(key)
        self.prompts.append(self.prompt)
        self._msg_id, self._msg_texts, self._msg_tool = None, [], False
        self._answer_id, self._answer_texts, self._answer_error = None, [], False
        return ended

    def _assistant(self, obj: dict[str, Any]) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            return
        msg_id = message.get("id") or obj.get("uuid")
        if msg_id != self._msg_id:
            self._msg_id, self._msg_texts, self._msg_tool = msg_id, [], False
        content = message.get("content")
        self._msg_texts.extend(_text_blocks(content))
        self._msg_tool = self._msg_tool or (isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_use" for b in content))
        error = obj.get("isApiErrorMessage") is True
        if self._msg_texts:
            self._answer_id, self._answer_texts, self._answer_error = msg_id, list(self._msg_texts), error
        synthetic = message.get("model") == SYNTHETIC_MODEL
        stop = message.get("stop_reason")
        if error:
            self.answered, self.proof = True, "api_error"
        elif stop in FINISH_REASONS and not synthetic:
            self.answered, self.proof = True, str(stop)
        elif stop is None and self._msg_texts and not self._msg_tool and not synthetic \
                and obj.get("isAbortedMidStream") is not True:
            # 1.0.98…2.1.39 write null on final messages too: text and no tool call is taken as final
            self.answered, self.proof = True, "final text"
        else:
            self.answered, self.proof = False, ""
        self.session_id = self.session_id or obj.get("sessionId")

    def _make_end(self, outcome: Outcome, reason: str, obj: dict[str, Any], background: int = 0) -> TurnEnd:
        if self._answer_error and outcome == "completed":
            outcome, reason = "failed", "api_error"
        return TurnEnd(key=self.key, session_id=self.session_id or obj.get("sessionId"), outcome=outcome,
                       text="\n".join(self._answer_texts), reason=reason, message_id=self._answer_id,
                       cwd=self.cwd or obj.get("cwd"), timestamp=obj.get("timestamp"), whole=self.whole,
                       background=background)

    def _end(self, outcome: Outcome, reason: str, obj: dict[str, Any], background: int = 0) -> list[TurnEnd]:
        if not self.open:
            return []
        end = self._make_end(outcome, reason, obj, background)
        self.open = self.answered = False
        return self._settle(end)

    def _settle(self, end: TurnEnd) -> list[TurnEnd]:
        """Hold a turn that left background agents running; report the one that ends their work."""
        if end.background > 0 and end.outcome == "completed":
            self.held = replace(end, held_key=self.held.held_key if self.held else end.key)
            return []
        if self.held is not None:
            end, self.held = replace(end, held_key=self.held.held_key), None
        return [end]

    # ---- state -----------------------------------------------------------------------------------

    @property
    def state(self) -> Literal["running", "answered", "background", "ended"]:
        """``running``: the turn goes on; ``answered``: its final message is on disk but not yet the
        ``turn_duration`` line; ``background``: the last turn ended with background agents running;
        ``ended``: no turn runs."""
        if not self.open:
            return "background" if self.held is not None else "ended"
        return "answered" if self.answered else "running"

    @property
    def background(self) -> int:
        """Background agents the held turn left running (0 when none is held)."""
        return self.held.background if self.held is not None else 0

    def pending_end(self, reason: str | None = None) -> TurnEnd | None:
        """The end of a turn whose final message is on disk without its ``turn_duration`` line (older
        versions often write none; live, it follows within milliseconds). The tracker is not changed."""
        if not (self.open and self.answered):
            return None
        end = self._make_end("completed", reason or self.proof or "end_turn", {})
        return replace(end, held_key=self.held.held_key) if self.held is not None else end

    def close_silent(self) -> TurnEnd | None:
        """End a typed turn that the session reports over although the transcript shows no end: Claude
        Code writes nothing when Esc comes before the first streamed text. Outcome ``failed``."""
        if not (self.open and self.whole and self.typed):
            return None
        return self._end("failed", "no-end-written", {})[0]

    def close_answered(self, reason: str | None = None) -> TurnEnd | None:
        """End such a turn for good (the session said idle): it will not be reported again."""
        end = self.pending_end(reason)
        if end is not None:
            self.open = self.answered = False
            self.held = None
        return end

    def release_held(self) -> TurnEnd | None:
        """The held turn, as the completion of its work: the session went idle and no turn followed it
        (the agents finished without a notification turn). None if nothing is held."""
        end, self.held = self.held, None
        if end is None or self.open:
            self.held = end
            return None
        return replace(end, background=0, reason="background agents finished")

    @property
    def started_at(self) -> float | None:
        """When the current turn's prompt was written (epoch seconds), or None: no prompt line read, or
        one without a readable timestamp."""
        if not self.whole or self.prompt_at is None:
            return None
        try:
            return datetime.fromisoformat(self.prompt_at).timestamp()
        except ValueError:
            return None

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
