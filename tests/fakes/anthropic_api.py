"""A fake Anthropic Messages API on 127.0.0.1, for tests that drive the real ``anthropic`` SDK.

A stdlib ``ThreadingHTTPServer`` in a background thread, on a free port. Every request is recorded
(method, path, headers, JSON body) for assertions. Each test scripts the replies: queued :class:`Reply`
objects are used in order, then :attr:`FakeAnthropicAPI.default`. A reply can carry text, an HTTP error
status and body, a delay, an empty content list, and is streamed as server-sent events when the request
asks for ``stream: true`` — so the same fake serves one-shot calls and streaming clients.

:func:`serving` starts one for a test's fixture and points ``ANTHROPIC_BASE_URL`` (and a test key in
``ANTHROPIC_API_KEY``) at it; nothing leaves the loopback interface.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["TEST_KEY", "FakeAnthropicAPI", "RecordedRequest", "Reply", "serving"]

TEST_KEY = "sk-ant-test-0000000000000000"


@dataclass
class Reply:
    """One scripted answer. ``status`` other than 200 sends ``error`` (default: an Anthropic-shaped error
    body) instead of a message; ``empty`` sends a message with no content blocks."""

    text: str = "OK from the fake model."
    status: int = 200
    error: dict[str, Any] | None = None
    delay_s: float = 0.0
    empty: bool = False
    stop_reason: str = "end_turn"
    headers: dict[str, str] = field(default_factory=dict)

    def error_body(self) -> dict[str, Any]:
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                529: "overloaded_error"}.get(self.status, "api_error")
        return self.error or {"type": "error", "error": {"type": kind, "message": f"fake error {self.status}"}}


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


class FakeAnthropicAPI:
    """The server and its script. Thread-safe: the SDK may call it from several tasks at once."""

    def __init__(self) -> None:
        self.default = Reply()
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        # a short poll interval: stop() waits for the serving loop to notice the shutdown
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-anthropic", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies, used in order by the next requests; after them :attr:`default` answers."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def messages(self) -> list[RecordedRequest]:
        """The recorded ``POST /v1/messages`` requests."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path.split("?")[0] == "/v1/messages"]

    def start(self) -> FakeAnthropicAPI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping through a scripted delay
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # ---- called from the handler threads ---------------------------------------------------------

    def _record(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self._replies.popleft() if self._replies else self.default

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _handler(api: FakeAnthropicAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "fake-anthropic/1"

        def log_message(self, format: str, *args: Any) -> None:  # no access log on stderr
            pass

        def do_GET(self) -> None:
            api._record(RecordedRequest("GET", self.path, _headers(self), None))
            try:
                self._json(200, {})
            finally:
                api._done()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            reply = api._record(RecordedRequest("POST", self.path, _headers(self), body))
            try:
                if reply.delay_s and api._stopping.wait(reply.delay_s):
                    return
                if self.path.split("?")[0] != "/v1/messages":
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                elif reply.status != 200:
                    self._json(reply.status, reply.error_body(), reply.headers)
                elif isinstance(body, dict) and body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._json(200, _message(body, reply), reply.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer
            finally:
                api._done()

        def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:16])
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _stream(self, body: dict[str, Any], reply: Reply) -> None:
            message = _message(body, reply)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            start = dict(message, content=[], stop_reason=None, usage=dict(message["usage"], output_tokens=1))
            self._event("message_start", {"type": "message_start", "message": start})
            for i, block in enumerate(message["content"]):
                self._event("content_block_start", {"type": "content_block_start", "index": i,
                                                    "content_block": {"type": "text", "text": ""}})
                text = block["text"]
                for j in range(0, len(text), 16):
                    self._event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                        "delta": {"type": "text_delta", "text": text[j:j + 16]}})
                self._event("content_block_stop", {"type": "content_block_stop", "index": i})
            self._event("message_delta", {"type": "message_delta",
                                          "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                                          "usage": {"output_tokens": message["usage"]["output_tokens"]}})
            self._event("message_stop", {"type": "message_stop"})
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _event(self, name: str, data: dict[str, Any]) -> None:
            payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.wfile.flush()

    return Handler


def _headers(handler: BaseHTTPRequestHandler) -> dict[str, str]:
    return {k.lower(): v for k, v in handler.headers.items()}


def _message(body: Any, reply: Reply) -> dict[str, Any]:
    content = [] if reply.empty else [{"type": "text", "text": reply.text}]
    model = body.get("model", "claude-fake") if isinstance(body, dict) else "claude-fake"
    return {"id": "msg_fake_" + uuid.uuid4().hex[:16], "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": reply.stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": max(1, len(reply.text) // 4),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


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
