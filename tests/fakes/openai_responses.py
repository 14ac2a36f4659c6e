"""A fake OpenAI Responses API on 127.0.0.1, for driving the real Codex CLI offline.

Codex (with a ``[model_providers.fake]`` whose ``base_url`` points here and ``wire_api = "responses"``)
sends ``POST /v1/responses`` and reads the answer as server-sent events (``response.created`` …
``response.completed``, HTTP-chunked). A :class:`~tests.fakes.loopback.LoopbackServer` answers:

* the title request Codex makes on a thread's first turn (a ``json_schema`` text format with a ``title``
  property) → ``{"title": TITLE}``;
* anything else → the next answer queued with :meth:`FakeResponses.script`, else
:attr:`FakeResponses.default`;
  a :class:`Reply` with a ``status`` other than 200 answers with that HTTP error instead.

Every request is recorded, with the prompt it carried and the wall-clock time the last event of its
answer was sent (when the model "finished speaking": the tests measure the hand-off from there or from
the rollout). Nothing leaves the loopback interface.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from tests.fakes.loopback import LoopbackServer, QuietJSONHandler, StreamLog

__all__ = ["DEFAULT_ANSWER", "TITLE", "FakeResponses", "RecordedRequest", "Reply", "codex_config"]

TITLE = "Fake task title"
DEFAULT_ANSWER = (
    "FAKE_ANSWER_BEGIN Here is the plan.\n\n```python\ndef hello(name: str) -> str:\n"
    '    return f"hello {name}"\n```\n\n- `src/app.py`\n- `README.md`\n\nDone. FAKE_ANSWER_END'
)


@dataclass
class Reply:
    text: str = DEFAULT_ANSWER
    status: int = 200
    #: seconds between streamed chunks
    chunk_delay_s: float = 0.02
    #: instead of text: a tool call, as (tool name, arguments) — Codex 0.171 runs shell commands through
    #: ``exec_command`` with ``{"cmd": "..."}``; its output comes back in the next request
    call: tuple[str, dict[str, Any]] | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any
    prompt: str = ""
    kind: str = ""
    #: time.time() when the answer's last event was sent
    done_at: float | None = None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            c.get("text", "") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)
        )
    return ""


def _prompt(body: dict[str, Any]) -> str:
    """The last user message that is the user's (Codex also sends ``<environment_context>`` as user)."""
    for item in reversed(body.get("input") or []):
        if isinstance(item, dict) and item.get("role") == "user":
            text = _text(item.get("content"))
            if not text.lstrip().startswith("<"):
                return text
    return ""


class FakeResponses(LoopbackServer[RecordedRequest]):
    """The server and its script; thread-safe."""

    def __init__(self) -> None:
        super().__init__(_handler(self), name="fake-openai-responses")
        self.default = Reply()
        self._queue: deque[Reply] = deque()

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def script(self, *replies: Reply | str) -> None:
        with self._lock:
            self._queue.extend(Reply(r) if isinstance(r, str) else r for r in replies)

    def answers(self) -> list[RecordedRequest]:
        """The recorded requests that were turns (not titles)."""
        with self._lock:
            return [r for r in self.requests if r.kind == "answer"]

    def _next(self) -> Reply:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default


def _not_found(path: str) -> dict[str, Any]:
    return {"error": {"message": f"not found: {path}", "type": "invalid_request_error"}}


def _handler(fake: FakeResponses) -> type[QuietJSONHandler]:
    class Handler(QuietJSONHandler):
        def do_GET(self) -> None:
            fake._record(RecordedRequest("GET", self.path, None))
            if self.route.endswith("/models"):
                self.send_json(
                    200,
                    {"object": "list", "data": [{"id": "gpt-fake", "object": "model", "owned_by": "fake"}]},
                )
            else:
                self.send_json(404, _not_found(self.path))

        def do_POST(self) -> None:
            body = self.read_json(empty={})
            if not self.route.endswith("/responses") or not isinstance(body, dict):
                fake._record(RecordedRequest("POST", self.path, body))
                self.send_json(404, _not_found(self.path))
                return
            fmt = (body.get("text") or {}).get("format") or {}
            is_title = "title" in ((fmt.get("schema") or {}).get("properties") or {})
            request = fake._record(RecordedRequest("POST", self.path, body, prompt=_prompt(body),
                                                   kind="title" if is_title else "answer"))
            reply = Reply(json.dumps({"title": TITLE}), chunk_delay_s=0) if is_title else fake._next()
            log = StreamLog(time.time()) if is_title else fake._stream_log()
            if reply.status != 200:
                log.end(reply.status)
                self.send_json(
                    reply.status,
                    {
                        "error": {
                            "message": f"fake server: scripted {reply.status}",
                            "type": "invalid_request_error",
                            "code": "fake_failure",
                        }
                    },
                )
                request.done_at = time.time()
                return
            try:
                if reply.call is not None:
                    self._stream_call(body.get("model") or "gpt-fake", reply.call)
                else:
                    self._stream(body.get("model") or "gpt-fake", reply, log)
            except (BrokenPipeError, ConnectionResetError):
                log.end(499)  # the client went away (an interrupted turn)
                return
            log.end()
            request.done_at = time.time()

        def _stream_call(self, model: str, call: tuple[str, dict[str, Any]]) -> None:
            """One ``function_call`` output item, the way the Responses API streams a tool call."""
            self.start_events()
            seq = iter(range(1_000_000))
            resp_id = f"resp_{uuid.uuid4().hex[:24]}"
            base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model,
                    "output": [], "status": "in_progress"}
            name, arguments = call
            args = json.dumps(arguments)
            item = {"id": f"fc_{uuid.uuid4().hex[:24]}", "type": "function_call", "status": "in_progress",
                    "call_id": f"call_{uuid.uuid4().hex[:24]}", "name": name, "arguments": ""}

            def send(event: dict[str, Any]) -> None:
                event["sequence_number"] = next(seq)
                self.event(event["type"], event)

            send({"type": "response.created", "response": dict(base)})
            send({"type": "response.in_progress", "response": dict(base)})
            send({"type": "response.output_item.added", "output_index": 0, "item": dict(item)})
            send({"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0,
                  "delta": args})
            send({"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": 0,
                  "arguments": args})
            done_item = dict(item, status="completed", arguments=args)
            send({"type": "response.output_item.done", "output_index": 0, "item": done_item})
            done = dict(base, status="completed", output=[done_item], usage={
                "input_tokens": 1000, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
                "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1020})
            send({"type": "response.completed", "response": done})
            self.end_events()

        def _stream(self, model: str, reply: Reply, log: StreamLog) -> None:
            self.start_events()
            seq = iter(range(1_000_000))
            resp_id, msg_id = f"resp_{uuid.uuid4().hex[:24]}", f"msg_{uuid.uuid4().hex[:24]}"
            base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model,
                    "output": [], "status": "in_progress"}

            def send(event: dict[str, Any]) -> None:
                event["sequence_number"] = next(seq)
                self.event(event["type"], event)

            send({"type": "response.created", "response": dict(base)})
            send({"type": "response.in_progress", "response": dict(base)})
            send(
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {
                        "id": msg_id,
                        "type": "message",
                        "status": "in_progress",
                        "role": "assistant",
                        "content": [],
                    },
                }
            )
            send(
                {
                    "type": "response.content_part.added",
                    "item_id": msg_id,
                    "output_index": 0,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                }
            )
            step = max(1, len(reply.text) // 5)
            for i in range(0, len(reply.text), step):
                send({"type": "response.output_text.delta", "item_id": msg_id, "output_index": 0,
                      "content_index": 0, "delta": reply.text[i:i + step]})
                log.chunk()
                time.sleep(reply.chunk_delay_s)  # shapes the scenario: the model streams at this pace
            part = {"type": "output_text", "text": reply.text, "annotations": []}
            send(
                {
                    "type": "response.output_text.done",
                    "item_id": msg_id,
                    "output_index": 0,
                    "content_index": 0,
                    "text": reply.text,
                }
            )
            send(
                {
                    "type": "response.content_part.done",
                    "item_id": msg_id,
                    "output_index": 0,
                    "content_index": 0,
                    "part": part,
                }
            )
            item = {
                "id": msg_id,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
            send({"type": "response.output_item.done", "output_index": 0, "item": item})
            done = dict(base, status="completed", output=[item], usage={
                "input_tokens": 1000, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 50,
                "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1050})
            send({"type": "response.completed", "response": done})
            self.end_events()

    return Handler


def codex_config(base_url: str, *, trusted: tuple[str, ...] = (), notify: list[str] | None = None,
                 approval_policy: str = "never", sandbox_mode: str = "danger-full-access") -> str:
    """A ``config.toml`` that makes Codex start offline with no login, update or trust dialog, talking
    to ``base_url`` (each key keeps the real CLI offline: no login, update check or telemetry).
    ``approval_policy = "untrusted"`` makes it ask before running any command it does not know as safe."""
    from plugins.codex.hooks import toml_array

    lines = [
        'model_provider = "fake"',
        'model = "gpt-fake"',
        f'approval_policy = "{approval_policy}"',
        f'sandbox_mode = "{sandbox_mode}"',
        "check_for_update_on_startup = false",
    ]
    if notify:
        lines.append(f"notify = {toml_array(notify)}")
    lines += [
        "",
        "[model_providers.fake]",
        'name = "fake"',
        f'base_url = "{base_url}"',
        'wire_api = "responses"',
        'env_key = "FAKE_KEY"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        "[analytics]",
        "enabled = false",
    ]
    for path in trusted:
        lines += ["", f"[projects.{json.dumps(str(path))}]", 'trust_level = "trusted"']
    return "\n".join(lines) + "\n"
