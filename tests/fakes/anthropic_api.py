"""A fake Anthropic Messages API on 127.0.0.1, for tests that drive the real ``anthropic`` SDK.

A :class:`~tests.fakes.loopback.LoopbackServer` on a free port. Every request is recorded
(method, path, headers, JSON body) for assertions. Each test scripts the replies: queued :class:`Reply`
objects are used in order, then :attr:`FakeAnthropicAPI.default`. A reply can carry text, an HTTP error
status and body, a delay, an empty content list, and is streamed as server-sent events when the request
asks for ``stream: true`` — so the same fake serves one-shot calls and streaming clients.

:func:`serving` starts one for a test's fixture and points ``ANTHROPIC_BASE_URL`` (and a test key in
``ANTHROPIC_API_KEY``) at it; nothing leaves the loopback interface.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.fakes.loopback import LoopbackServer, QuietJSONHandler

__all__ = ["TEST_KEY", "FakeAnthropicAPI", "RecordedRequest", "Reply", "serving"]

TEST_KEY = "sk-ant-test-0000000000000000"


@dataclass
class Reply:
    """One scripted answer. ``status`` other than 200 sends ``error`` (default: an Anthropic-shaped error
    body) instead of a message; ``empty`` sends a message with no content blocks; ``body`` (any JSON value,
    or ``bytes`` sent as they are) replaces the whole answer: an API or proxy that answers 200 with something
    that is no Messages response."""

    text: str = "OK from the fake model."
    status: int = 200
    error: dict[str, Any] | None = None
    delay_s: float = 0.0
    empty: bool = False
    stop_reason: str = "end_turn"
    headers: dict[str, str] = field(default_factory=dict)
    #: counts for the message's ``usage`` over the defaults (10 input tokens, a quarter of the text out)
    usage: dict[str, int] = field(default_factory=dict)
    body: Any = None
    #: a ``tool_use`` block instead of the text: ``{"name": ..., "input": {...}}`` (a forced tool call)
    tool: dict[str, Any] | None = None

    def error_body(self) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                529: "overloaded_error"}.get(self.status, "api_error")
        return self.error or {
            "type": "error",
            "error": {"type": kind, "message": f"fake error {self.status}"},
        }


@dataclass
class RecordedRequest:
    method: str
    path: str
    #: names lower-cased
    headers: dict[str, str]
    body: Any

    @property
    def system_text(self) -> str:
        system = (self.body or {}).get("system")
        if isinstance(system, list):
            return "".join(b.get("text", "") for b in system if isinstance(b, dict))
        return system or ""

    @property
    def user_text(self) -> str:
        """The text of the last user message."""
        for message in reversed((self.body or {}).get("messages", [])):
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                return "".join(b.get("text", "") for b in content if isinstance(b, dict))
        return ""


class FakeAnthropicAPI(LoopbackServer[RecordedRequest]):
    """The server and its script. Thread-safe: the SDK may call it from several tasks at once."""

    def __init__(self) -> None:
        super().__init__(_handler(self), name="fake-anthropic")
        self.default = Reply()
        self.in_flight = 0
        self.max_in_flight = 0
        self._replies: deque[Reply] = deque()

    def script(self, *replies: Reply) -> None:
        """Queue replies, used in order by the next requests; after them :attr:`default` answers."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def messages(self) -> list[RecordedRequest]:
        """The recorded ``POST /v1/messages`` requests."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path.split("?")[0] == "/v1/messages"]

    # ---- called from the handler threads ---------------------------------------------------------

    def _take(self, request: RecordedRequest) -> Reply:
        """Record ``request`` as in flight and hand it the next scripted reply."""
        with self._lock:
            self._record(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self._replies.popleft() if self._replies else self.default

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _handler(api: FakeAnthropicAPI) -> type[QuietJSONHandler]:
    class Handler(QuietJSONHandler):
        server_version = "fake-anthropic/1"

        def do_GET(self) -> None:
            api._take(RecordedRequest("GET", self.path, _headers(self), None))
            try:
                self._json(200, {})
            finally:
                api._done()

        def do_POST(self) -> None:
            body = self.read_json()
            if body is None and self.raw_body:
                body = self.raw_body.decode("utf-8", "replace")  # recorded as it came
            reply = api._take(RecordedRequest("POST", self.path, _headers(self), body))
            try:
                if reply.delay_s and api._stopping.wait(reply.delay_s):
                    return
                if self.route != "/v1/messages":
                    self._json(
                        404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}}
                    )
                elif reply.status != 200:
                    self._json(reply.status, reply.error_body(), reply.headers)
                elif isinstance(reply.body, bytes):
                    self._raw(reply.body)
                elif reply.body is not None:
                    self._json(200, reply.body, reply.headers)
                elif isinstance(body, dict) and body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._json(200, _message(body, reply), reply.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer
            finally:
                api._done()

        def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
            """JSON with a ``request-id`` like the real API's (the SDK puts it in its errors)."""
            self.send_json(
                status, obj, {"request-id": "req_fake_" + uuid.uuid4().hex[:16], **(headers or {})}
            )

        def _raw(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _stream(self, body: dict[str, Any], reply: Reply) -> None:
            message = _message(body, reply)
            self.start_events()
            start = dict(message, content=[], stop_reason=None, usage=dict(message["usage"], output_tokens=1))
            self.event("message_start", {"type": "message_start", "message": start})
            for i, block in enumerate(message["content"]):
                self.event("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}})
                text = block["text"]
                for j in range(0, len(text), 16):
                    self.event(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": text[j : j + 16]},
                        },
                    )
                self.event("content_block_stop", {"type": "content_block_stop", "index": i})
            self.event("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                                         "usage": {"output_tokens": message["usage"]["output_tokens"]}})
            self.event("message_stop", {"type": "message_stop"})
            self.end_events()

    return Handler


def _headers(handler: BaseHTTPRequestHandler) -> dict[str, str]:
    return {k.lower(): v for k, v in handler.headers.items()}


def _message(body: Any, reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = [] if reply.empty else [{"type": "text", "text": reply.text}]
    if reply.tool is not None:
        content = [{"type": "tool_use", "id": "toolu_fake_" + uuid.uuid4().hex[:12], **reply.tool}]
    model = body.get("model", "claude-fake") if isinstance(body, dict) else "claude-fake"
    return {"id": "msg_fake_" + uuid.uuid4().hex[:16], "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_sequence": None,
            "stop_reason": "tool_use" if reply.tool is not None else reply.stop_reason,
            "usage": {"input_tokens": 10, "output_tokens": max(1, len(reply.text) // 4),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, **reply.usage}}


@contextmanager
def serving(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropicAPI]:
    """A running fake, with ``ANTHROPIC_BASE_URL`` pointing at it and a test ``ANTHROPIC_API_KEY`` set, for
    a test module's fixture (``with serving(monkeypatch) as api: yield api``); stopped on exit.
    ``monkeypatch.delenv("ANTHROPIC_API_KEY")`` in a test gives the no-key path."""
    api = FakeAnthropicAPI().start()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    try:
        yield api
    finally:
        api.stop()
