"""The HTTP plumbing every fake model server in ``tests/fakes/`` shares, so each fake file holds only its
own scenario (what it answers, and in which wire shape).

:class:`LoopbackServer` owns a ``ThreadingHTTPServer`` on 127.0.0.1 (a free port unless told) serving from
a daemon thread, the ``start``/``stop``/context-manager lifecycle, and a lock-protected request record.
:class:`QuietJSONHandler` is the request-handler side: HTTP/1.1 keep-alive, no access log on stderr,
reading a JSON body, a JSON reply, and server-sent events — written as HTTP chunked transfer (the
Anthropic and OpenAI Responses shape the real CLIs expect) or, for clients that read to end of stream,
as plain ``data:`` lines on a connection that closes after them.

Nothing here leaves the loopback interface.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

__all__ = ["LoopbackServer", "QuietJSONHandler", "StreamLog"]

R = TypeVar("R")


@dataclass
class StreamLog:
    """One model request as the model lived it (time.time()): received, its first and last chunk, or the
    error it was answered with — the truth of "the agent is working" (tests/support/state_proof.py)."""

    received: float
    first_chunk: float | None = None
    ended: float | None = None
    status: int = 200

    def chunk(self) -> None:
        now = time.time()
        self.first_chunk = self.first_chunk or now

    def end(self, status: int = 200) -> None:
        self.ended, self.status = time.time(), status


class LoopbackServer(Generic[R]):
    """A threaded HTTP server on 127.0.0.1 that a test starts and stops (or uses as a context manager).

    ``requests`` is the record of what clients sent, in arrival order; handler threads add to it with
    :meth:`_record`. ``_lock`` is re-entrant so a subclass can record and update its own counters or
    script under one acquisition. ``_stopping`` is set by :meth:`stop`, so a handler waiting through a
    scripted delay (``self._stopping.wait(s)``) wakes instead of holding the test up.
    """

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, name: str, port: int = 0) -> None:
        self.requests: list[R] = []
        #: every model request's :class:`StreamLog`, in arrival order (the fakes that keep one)
        self.streams: list[StreamLog] = []
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        # a handler stuck on a client that never reads must not keep the test process alive
        self._server.daemon_threads = True
        # a short poll interval: stop() waits for the serving loop to notice the shutdown
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=name, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, no trailing slash (a subclass may add the API's path prefix)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _stream_log(self) -> StreamLog:
        """A new :class:`StreamLog`, received now."""
        log = StreamLog(time.time())
        with self._lock:
            self.streams.append(log)
        return log

    def _record(self, request: R) -> R:
        """Add ``request`` to :attr:`requests` (from a handler thread) and give it back."""
        with self._lock:
            self.requests.append(request)
        return request


class QuietJSONHandler(BaseHTTPRequestHandler):
    """A request handler that speaks JSON and server-sent events, the way model APIs do.

    HTTP/1.1 so clients keep their connection between calls, as they do with the real APIs; every reply
    therefore says its length, is chunked, or closes the connection.
    """

    protocol_version = "HTTP/1.1"
    #: the bytes :meth:`read_json` read, for a fake that records or measures the raw body
    raw_body: bytes = b""
    _chunked = True

    def log_message(self, format: str, *args: Any) -> None:  # no access log on stderr
        pass

    @property
    def route(self) -> str:
        """The request path without its query string (Claude Code adds ``?beta=true``)."""
        return self.path.split("?", 1)[0]

    def read_json(self, *, empty: Any = None) -> Any:
        """The request's JSON body: ``empty`` when there is none, None when it is not JSON (the bytes stay
        in :attr:`raw_body`). Always reads the whole body, so a keep-alive connection stays in step."""
        self.raw_body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.raw_body:
            return empty
        try:
            return json.loads(self.raw_body)
        except ValueError:
            return None

    def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        """A complete JSON reply with a Content-Length (so the connection can be reused)."""
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_events(self, *, chunked: bool = True) -> None:
        """Begin a 200 ``text/event-stream`` reply. Chunked keeps the connection for the next call; with
        ``chunked=False`` the stream has no framing, so its end is the end of the connection."""
        self._chunked = chunked
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()

    def event(self, name: str | None, data: Any) -> None:
        """Send one event now: an ``event: NAME`` line unless ``name`` is None, then ``data:`` — ``data``
        as JSON, or as it is when it is a str (OpenAI's ``[DONE]``)."""
        text = data if isinstance(data, str) else json.dumps(data)
        payload = (f"event: {name}\n" if name is not None else "") + f"data: {text}\n\n"
        raw = payload.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw) if self._chunked else raw)
        self.wfile.flush()

    def end_events(self) -> None:
        """End the stream: the zero-length chunk when chunked (the connection then serves the next call)."""
        if self._chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
