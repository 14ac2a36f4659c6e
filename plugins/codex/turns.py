"""Codex rollout lines folded into turns (:class:`RolloutState`), read by :mod:`plugins.codex.reader`.

A rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``) is one thread's journal:
lines ``{"timestamp", "ordinal", "type", "payload"}``, read by :class:`~plugins.codex.reader.JsonlTail`;
:class:`RolloutState` folds them into turns. Every Codex shape is understood (docs/agents.md, Codex,
docs/agent-versions.md):

- 0.104+ (0.171): ``task_started`` / ``item_completed`` / ``task_complete`` / ``turn_aborted`` name each
  turn and its end;
- before ~0.104 (no task events): a turn is an ``event_msg`` ``user_message`` … ``agent_message``, ended by
  the next ``user_message``; the last one has no end on disk at all, so it stays *provisional* and the
  follower settles it when the session goes idle (:meth:`RolloutState.settle`);
- the legacy format (mid/late 2025): no envelope, a header line ``{"id", "timestamp", "instructions"}``,
  ``{"record_type": "state"}`` lines and bare Responses-API items; user ``message`` items are the prompts.

A turn with no id of its own gets ``<thread id>:<line number>`` of the line that opened it: the same on
every read of the file. Lines and events of any other type are skipped, never fatal.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.plugin.events import Outcome
from pipeline.plugin.tools import json_object
from plugins.codex.reader import message_text, parse_timestamp

__all__ = ["RolloutState", "Turn"]

#: how many finished turns a state remembers (for answers asked for late, and for ``baton resolve``)
TURN_MEMORY = 256
#: items and events that mean the model went on working after a message (a tool call, its output, more
#: reasoning): the message before them was not the turn's answer
WORK_ITEMS = frozenset(
    {
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "reasoning",
        "web_search_call",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "exec_command_begin",
        "exec_command_end",
        "patch_apply_begin",
        "patch_apply_end",
        "mcp_tool_call_begin",
        "mcp_tool_call_end",
        "web_search_begin",
        "web_search_end",
    }
)
#: user messages Codex writes itself (context, instructions, an interrupt notice): not prompts
INJECTED = ("<environment_context>", "<user_instructions>", "<turn_aborted>", "# AGENTS.md instructions",
            "<user_shell_command>")


@dataclass
class Turn:
    """One turn of a thread, as its rollout tells it."""

    turn_id: str
    started_at: float | None = None
    finished_at: float | None = None
    #: None while the turn runs
    outcome: Outcome | None = None
    #: ``task_complete.last_agent_message`` (None when absent or null)
    final_answer: str | None = None
    #: the last assistant message seen during the turn (AgentMessage item, assistant response_item,
    #: or the older agent_message event): the answer when ``final_answer`` is missing
    last_message: str | None = None
    error: str | None = None
    prompt: str | None = None
    #: opened by a prompt in a rollout without task events: its end is inferred, never written
    by_prompt: bool = False
    #: the turn's latest item is an assistant message (no tool call, output or reasoning after it)
    answered: bool = False
    #: when the turn's newest line was written (or read, for lines without a time)
    last_at: float | None = None

    @property
    def answer(self) -> str | None:
        return self.final_answer if self.final_answer is not None else self.last_message

    @property
    def answer_from(self) -> str:
        if self.final_answer is not None:
            return "task_complete.last_agent_message"
        return "the turn's last assistant message" if self.last_message is not None else "nothing"


@dataclass
class RolloutState:
    """What one rollout says so far: the thread, its turns, and whether a turn is running."""

    thread_id: str | None = None
    cwd: str | None = None
    originator: str | None = None
    source: str | None = None
    started_at: float | None = None
    turns: OrderedDict[str, Turn] = field(default_factory=OrderedDict)
    #: the running turn's id, None when idle
    open_turn: str | None = None
    #: how many turns have started (a hand-off is confirmed by this growing)
    turn_starts: int = 0
    #: the timestamp of the newest line (for telling a stale "busy" from a live one)
    last_activity: float | None = None
    lines: int = 0
    #: a task event was seen: turns here end on disk, nothing is inferred
    task_events: bool = False
    _pending: deque[Turn] = field(default_factory=lambda: deque(maxlen=TURN_MEMORY))

    @property
    def busy(self) -> bool:
        return self.open_turn is not None

    @property
    def provisional(self) -> Turn | None:
        """The open turn whose end nothing will write (older Codex): settled by :meth:`settle`."""
        turn = self.turns.get(self.open_turn) if self.open_turn else None
        return turn if turn is not None and turn.by_prompt and not self.task_events else None

    def settle(self, why: str, *, gone: bool = False) -> Turn | None:
        """End the provisional turn: the session went idle after its answer (``gone=False``: only an
        answered turn ends), or the codex process is gone (``gone=True``: an unanswered turn failed)."""
        turn = self.provisional
        if turn is None or not (turn.answered or gone):
            return None
        self._finish(turn.turn_id, turn.last_at, "completed" if turn.answered else "failed",
                     error=None if turn.answered else why)
        return turn

    def turn(self, turn_id: str) -> Turn | None:
        return self.turns.get(turn_id)

    def last_finished(self) -> Turn | None:
        return next((t for t in reversed(self.turns.values()) if t.outcome is not None), None)

    def prompts(self) -> list[str]:
        return [t.prompt for t in self.turns.values() if t.prompt]

    def take_finished(self) -> list[Turn]:
        """Turns finished since the last call, oldest first."""
        out = list(self._pending)
        self._pending.clear()
        return out

    def keep_recent_finished(self, count: int) -> None:
        """Of the turns :meth:`take_finished` will return, keep the newest ``count``: a rollout read for
        the first time is mostly history (the detector's journal decides what of the rest to catch up on)."""
        keep = list(self._pending)[-count:] if count > 0 else []
        self._pending.clear()
        self._pending.extend(keep)

    def received(self, prompt: str) -> bool:
        """Whether ``prompt`` (whitespace aside) was typed into this thread."""
        wanted = " ".join(prompt.split())
        return any(" ".join(p.split()) == wanted for p in self.prompts())

    # ---- folding lines in ----------------------------------------------------------------------------

    def feed(self, record: dict[str, Any], now: float | None = None) -> None:
        """Fold one line in. ``now``: the time for a line that carries none (legacy items), when it is
        read as it is written; None when reading what was already there."""
        self.lines += 1
        payload = record.get("payload")
        at = parse_timestamp(record.get("timestamp"))
        at = at if at is not None else now
        if at is not None:
            self.last_activity = at
        kind = record.get("type")
        if "payload" not in record:
            self._bare(record, at)  # the legacy format: a header, state lines, bare items
        elif not isinstance(payload, dict):
            return  # something new: nothing a turn depends on
        elif kind == "session_meta":
            self._meta(payload)
        elif kind == "response_item":
            self._response_item(payload)
        elif kind == "event_msg":
            self._event(payload, at, record.get("ordinal"))
        if self.open_turn is not None and at is not None and self.open_turn in self.turns:
            self.turns[self.open_turn].last_at = at

    def _bare(self, record: dict[str, Any], at: float | None) -> None:
        kind = record.get("type")
        if kind is None and "record_type" not in record and isinstance(record.get("id"), str):
            self._meta(record)  # the header: id, timestamp, instructions (cwd, git in some)
        elif kind == "message" and record.get("role") == "user":
            text = message_text(record.get("content"))
            if text is not None and not text.lstrip().startswith(INJECTED):
                self._user_prompt(text, at)
        elif kind == "message" and record.get("role") == "assistant":
            self._message(None, message_text(record.get("content")))
        elif kind in WORK_ITEMS:
            self._work()

    def _meta(self, payload: dict[str, Any]) -> None:
        self.thread_id = _str(payload.get("id")) or self.thread_id
        self.cwd = _str(payload.get("cwd")) or self.cwd
        self.originator = _str(payload.get("originator")) or self.originator
        source = payload.get("source")
        self.source = source if isinstance(source, str) else self.source
        self.started_at = parse_timestamp(payload.get("timestamp")) or self.started_at

    def _response_item(self, payload: dict[str, Any]) -> None:
        if payload.get("type") in WORK_ITEMS:
            self._work()
        if payload.get("type") != "message" or payload.get("role") != "assistant":
            return
        meta = payload.get("internal_chat_message_metadata_passthrough")
        turn_id = _str(meta.get("turn_id")) if isinstance(meta, dict) else None
        self._message(turn_id, message_text(payload.get("content")))

    def _event(self, payload: dict[str, Any], at: float | None, ordinal: Any) -> None:
        event = payload.get("type")
        turn_id = _str(payload.get("turn_id"))
        if event in ("task_started", "task_complete"):
            self.task_events = True
        if event in WORK_ITEMS:
            self._work()
            return
        on_event = _ON_EVENT.get(event) if isinstance(event, str) else None
        if on_event is not None:
            on_event(self, payload, turn_id, at, ordinal)

    def _on_task_started(self, payload: dict[str, Any], turn_id: str | None, at: float | None,
                         ordinal: Any) -> None:
        self._task_started(turn_id or self._synthetic(ordinal), at)

    def _on_item_completed(self, payload: dict[str, Any], turn_id: str | None, at: float | None,
                           ordinal: Any) -> None:
        if turn_id is not None and self._finished(turn_id):
            return  # e.g. a shell command that outlived its turn: not a new turn
        item = json_object(payload.get("item"))
        if turn_id is not None and self.open_turn is None:
            self._start(turn_id, at)
        if item.get("type") == "AgentMessage":
            self._message(turn_id, message_text(item.get("content")))
        elif item.get("type") == "UserMessage":
            self._prompt(turn_id, message_text(item.get("content")))

    def _on_user_message(self, payload: dict[str, Any], turn_id: str | None, at: float | None,
                         ordinal: Any) -> None:
        """Older Codex: the prompt opens the turn, unless it is inside a ``task_started`` one."""
        open_turn = self._current(turn_id)
        if open_turn is not None and not open_turn.by_prompt:
            self._prompt(turn_id, _str(payload.get("message")))
        else:
            self._user_prompt(_str(payload.get("message")), at, turn_id)

    def _on_agent_message(self, payload: dict[str, Any], turn_id: str | None, at: float | None,
                          ordinal: Any) -> None:
        """Older Codex's answer."""
        if self.open_turn is None and turn_id is None:
            return
        self._message(turn_id, _str(payload.get("message")))

    def _on_task_complete(self, payload: dict[str, Any], turn_id: str | None, at: float | None,
                          ordinal: Any) -> None:
        error = payload.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        self._finish(
            turn_id,
            at,
            "failed" if error else "completed",
            answer=_str(payload.get("last_agent_message")),
            error=str(message) if error else None,
            ordinal=ordinal,
        )

    def _on_turn_aborted(self, payload: dict[str, Any], turn_id: str | None, at: float | None,
                         ordinal: Any) -> None:
        self._finish(
            turn_id, at, "failed", error=str(payload.get("reason") or "aborted"), ordinal=ordinal
        )

    def _on_error(self, payload: dict[str, Any], turn_id: str | None, at: float | None,
                  ordinal: Any) -> None:
        """Older Codex: the turn ends in an error."""
        if self.open_turn is not None:
            self._finish(turn_id, at, "failed", error=str(payload.get("message") or "error"), ordinal=ordinal)

    def _user_prompt(self, text: str | None, at: float | None, turn_id: str | None = None) -> None:
        """A prompt in a rollout where prompts open turns: it ends the provisional turn before it (with
        its answer, or failed when none came), and opens the next."""
        before = self._current(None)
        if before is not None and before.by_prompt:
            self._finish(before.turn_id, before.last_at or at, "completed" if before.answered else "failed",
                         error=None if before.answered else "no answer before the next prompt (interrupted?)")
        self._start(turn_id or self._synthetic(None), at)
        turn = self.turns[self.open_turn] if self.open_turn else None
        if turn is not None:
            turn.by_prompt = True
        self._prompt(turn_id, text)

    def _task_started(self, turn_id: str, at: float | None) -> None:
        """A ``task_started``: a prompt-opened turn with nothing in it yet is this task (its id wins); one
        that has an answer ended before it."""
        before = self._current(None)
        if before is not None and before.by_prompt and turn_id not in self.turns:
            if before.last_message is None:
                del self.turns[before.turn_id]
                before.turn_id, before.by_prompt = turn_id, False
                self.turns[turn_id] = before
                self.open_turn = turn_id
                return
            self._finish(before.turn_id, before.last_at or at, "completed" if before.answered else "failed",
                         error=None if before.answered else "no answer before the next task")
        self._start(turn_id, at)

    def _work(self) -> None:
        turn = self._current(None)
        if turn is not None:
            turn.answered = False

    def _synthetic(self, ordinal: Any) -> str:
        """A stable id for a turn whose line names none (older Codex): thread and line position."""
        return f"{self.thread_id or 'rollout'}:{ordinal if isinstance(ordinal, int) else self.lines}"

    def _finished(self, turn_id: str) -> bool:
        turn = self.turns.get(turn_id)
        return turn is not None and turn.outcome is not None

    def _start(self, turn_id: str, at: float | None) -> None:
        if turn_id in self.turns:
            if self.turns[turn_id].outcome is None:
                self.open_turn = turn_id
            return
        self.turns[turn_id] = Turn(turn_id=turn_id, started_at=at)
        self.open_turn = turn_id
        self.turn_starts += 1
        while len(self.turns) > TURN_MEMORY:
            self.turns.popitem(last=False)

    def _current(self, turn_id: str | None) -> Turn | None:
        turn = self.turns.get(turn_id) if turn_id else None
        if turn is None and self.open_turn is not None:
            turn = self.turns.get(self.open_turn)
        return turn if turn is not None and turn.outcome is None else None

    def _message(self, turn_id: str | None, text: str | None) -> None:
        turn = self._current(turn_id)
        if turn is not None and text is not None:
            turn.last_message = text
            turn.answered = bool(text.strip())

    def _prompt(self, turn_id: str | None, text: str | None) -> None:
        turn = self._current(turn_id)
        if turn is not None and text is not None:
            turn.prompt = text

    def _finish(self, turn_id: str | None, at: float | None, outcome: Outcome, *, answer: str | None = None,
                error: str | None = None, ordinal: Any = None) -> None:
        if turn_id is not None and self._finished(turn_id):
            return  # the same turn reported twice (an error event, then its task_complete)
        turn = self.turns.get(turn_id) if turn_id else None
        if turn is None:
            turn = self._current(None)  # the open turn, whose start named no id (or was not seen)
            if turn is None:
                turn = Turn(turn_id=turn_id or self._synthetic(ordinal))
                self.turns[turn.turn_id] = turn
            elif turn_id is not None and turn_id != turn.turn_id:
                del self.turns[turn.turn_id]
                turn.turn_id = turn_id  # the file's own id wins over one made up at the start
                self.turns[turn_id] = turn
        turn.outcome, turn.finished_at, turn.final_answer, turn.error = outcome, at, answer, error
        if self.open_turn is not None and self.turns.get(self.open_turn) in (None, turn):
            self.open_turn = None
        self._pending.append(turn)


#: what each ``event_msg`` type does to the state (types not listed change nothing)
_ON_EVENT: dict[str, Callable[[RolloutState, dict[str, Any], str | None, float | None, Any], None]] = {
    "task_started": RolloutState._on_task_started,
    "item_completed": RolloutState._on_item_completed,
    "user_message": RolloutState._on_user_message,
    "agent_message": RolloutState._on_agent_message,
    "task_complete": RolloutState._on_task_complete,
    "turn_aborted": RolloutState._on_turn_aborted,
    "error": RolloutState._on_error,
}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
