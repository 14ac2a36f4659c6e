"""A fake Anthropic Messages API on 127.0.0.1 that the real Claude Code talks to in the end-to-end tests.

Claude Code 2.1.197 sends ``HEAD /`` (a connectivity check), ``POST /v1/messages?beta=true`` with
``stream: true`` and tools for the turn itself, side calls without tools (the session title), and
sometimes ``/v1/messages/count_tokens``. The turn gets the next scripted answer, streamed as SSE in
small chunks like the real API; side calls get a short title. Every request is recorded so a test can
see what Claude Code asked.

    with ClaudeAPI(answers=["Hello."]) as api:
        env["ANTHROPIC_BASE_URL"] = api.url

``blocks`` scripts a turn's whole reply instead — text and ``tool_use`` blocks (an ``Agent`` call, say),
streamed
as the real API streams them (``input_json_delta`` for a tool's input; ``stop_reason`` ``tool_use``) — as a
function of the request; it returns None to leave a request to ``answers``/``answer``.

A turn whose prompt holds :data:`OVERLOADED` is answered ``529 overloaded_error``, as the real API answers
when it is overloaded. Every turn's :class:`~tests.fakes.loopback.StreamLog` is in ``streams``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.loopback import LoopbackServer, QuietJSONHandler, StreamLog

__all__ = ["OVERLOADED", "ClaudeAPI", "RecordedRequest"]

#: a prompt holding this is answered 529 overloaded_error
OVERLOADED = "OVERLOADED_TEST"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any] | None
    at: float

    @property
    def is_turn(self) -> bool:
        """A main-loop call (it offers tools), not a side call such as the title."""
        return bool(self.body and self.body.get("tools"))

    @property
    def last_user_message(self) -> str:
        """The last user message as JSON text (tool results, notifications and reminders included)."""
        for message in reversed((self.body or {}).get("messages") or []):
            if message.get("role") == "user":
                return json.dumps(message.get("content"), ensure_ascii=False)
        return ""

    @property
    def last_user_text(self) -> str:
        """What the user typed last: the last user message's text, without Claude Code's
        ``<system-reminder>`` blocks."""
        for message in reversed((self.body or {}).get("messages") or []):
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                return "\n".join(
                    b.get("text", "")
                    for b in content or []
                    if isinstance(b, dict)
                    and b.get("type") == "text"
                    and not b.get("text", "").startswith("<system-reminder>")
                )
        return ""


class ClaudeAPI(LoopbackServer[RecordedRequest]):
    """The server. ``answers`` are given to the turns in order (the last one repeats); ``answer`` may
    instead be a function of the prompt text. ``chunk_delay_s`` spaces the streamed text deltas (a
    function of the prompt text, to make some turns slow enough to interrupt)."""

    def __init__(self, answers: list[str] | None = None, *, answer: Callable[[str], str] | None = None,
                 chunk_delay_s: float | Callable[[str], float] = 0.02, chunk_chars: int = 16,
                 blocks: Callable[[RecordedRequest], list[dict[str, Any]] | None] | None = None) -> None:
        super().__init__(_handler(self), name="fake-claude-api")
        self.answers = list(answers or ["Done."])
        self.answer = answer
        self.blocks = blocks
        self.chunk_delay_s, self.chunk_chars = chunk_delay_s, chunk_chars
        #: wall-clock time the last byte of each turn's stream was sent, in order
        self.turn_finished_at: list[float] = []
        self._turns = 0

    @property
    def turns(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.is_turn]

    def _next_answer(self, prompt: str) -> str:
        with self._lock:
            n, self._turns = self._turns, self._turns + 1
        if self.answer is not None:
            return self.answer(prompt)
        return self.answers[min(n, len(self.answers) - 1)]


def _handler(api: ClaudeAPI) -> type[QuietJSONHandler]:
    class Handler(QuietJSONHandler):
        def do_HEAD(self) -> None:
            api._record(RecordedRequest("HEAD", self.path, None, time.time()))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            api._record(RecordedRequest("GET", self.path, None, time.time()))
            self.send_json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None}
                           if self.path.startswith("/v1/models") else {})

        def do_POST(self) -> None:
            body = self.read_json(empty={})
            request = api._record(RecordedRequest("POST", self.path, body, time.time()))
            input_tokens = max(1, len(self.raw_body) // 4)
            if self.route == "/v1/messages/count_tokens":
                return self.send_json(200, {"input_tokens": input_tokens})
            if self.route != "/v1/messages" or not isinstance(body, dict):
                return self.send_json(200, {})
            if request.is_turn and OVERLOADED in request.last_user_text:
                api._stream_log().end(529)
                return self.send_json(529, {"type": "error", "error": {"type": "overloaded_error",
                                                                        "message": "Overloaded"}})
            scripted = api.blocks(request) if api.blocks is not None and request.is_turn else None
            if scripted is not None:
                blocks = scripted
            elif request.is_turn:
                blocks = [{"type": "text", "text": api._next_answer(request.last_user_text)}]
            else:
                wants_json = "json" in json.dumps(body.get("system", "")).lower()
                blocks = [
                    {
                        "type": "text",
                        "text": '{"title": "Fake session", "isNewTopic": true}'
                        if wants_json
                        else "Fake session",
                    }
                ]
            stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
            message = {"id": f"msg_fake_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
                       "model": body.get("model", "claude-fake"), "content": [], "stop_reason": None,
                       "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                                                        "cache_creation_input_tokens": 0,
                                                        "cache_read_input_tokens": 0}}
            if not body.get("stream"):
                message.update(content=blocks, stop_reason=stop)
                return self.send_json(200, message)
            delay = api.chunk_delay_s
            if callable(delay):
                delay = delay(request.last_user_text)
            log = api._stream_log() if request.is_turn else StreamLog(time.time())
            self._stream(message, blocks, stop, delay if request.is_turn else 0.0, request.is_turn, log)

        def _stream(self, message: dict[str, Any], blocks: list[dict[str, Any]], stop: str, delay: float,
                    is_turn: bool, log: StreamLog) -> None:
            self.start_events()
            n = api.chunk_chars
            try:
                self.event("message_start", {"type": "message_start", "message": message})
                for index, block in enumerate(blocks):
                    if block.get("type") == "tool_use":
                        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                        raw = json.dumps(block.get("input", {}))
                        deltas = [
                            {"type": "input_json_delta", "partial_json": raw[i : i + n]}
                            for i in range(0, len(raw), n)
                        ]
                    else:
                        start, text = {"type": "text", "text": ""}, block.get("text", "")
                        deltas = [
                            {"type": "text_delta", "text": text[i : i + n]} for i in range(0, len(text), n)
                        ]
                    self.event("content_block_start", {"type": "content_block_start", "index": index,
                                                       "content_block": start})
                    for delta in deltas:
                        time.sleep(delay)  # shapes the scenario: the model streams at this pace
                        self.event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                           "delta": delta})
                        log.chunk()
                    self.event("content_block_stop", {"type": "content_block_stop", "index": index})
                chars = sum(len(json.dumps(b)) for b in blocks)
                self.event("message_delta", {"type": "message_delta", "delta": {
                    "stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": chars // 4}})
                self.event("message_stop", {"type": "message_stop"})
                self.end_events()
                log.end()
                if is_turn:
                    with api._lock:
                        api.turn_finished_at.append(time.time())
            except (BrokenPipeError, ConnectionResetError):
                log.end(499)  # the client went away (an interrupted turn)

    return Handler
