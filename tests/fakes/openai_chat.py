"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for driving the real OpenCode offline.

OpenCode (with a provider ``"npm": "@ai-sdk/openai-compatible"`` whose ``baseURL`` points here) sends
``POST /v1/chat/completions``, streamed as server-sent events, plus one title request (no tools, a system
prompt about titles) on a session's first turn. A :class:`~tests.fakes.loopback.LoopbackServer` answers
them; nothing leaves the loopback interface. Unlike the other fakes, its streams are plain ``data:`` lines
without chunked framing, so the connection closes after ``data: [DONE]``.

What it answers, from the last user message:

* a title request → :data:`TITLE`;
* ``TOOLTEST`` in the prompt and a ``bash`` tool offered → a streamed ``bash`` tool call; once the tool
  result is in the history → a final text quoting it (so a turn has a ``tool-calls`` step, then ``stop``);
  ``TOOLASK`` → the same with a command that writes a file (agents ask a person before running it); the
  shell tool is ``bash``, Qwen Code's ``run_shell_command`` or Cline's ``run_commands``;
* ``ASKTEST`` in the prompt and Cline's ``ask_question`` tool offered → a call of it asking :data:`QUESTION`
  with :data:`OPTIONS` (Cline waits for a person's choice); the choice comes back as its tool result;
* ``SLOWTEST`` in the prompt → the same, streamed at :data:`SLOW_CHUNK_S` a word (to interrupt a turn);
* Qwen Code's follow-up suggestion request (``[SUGGESTION MODE…``) → :attr:`FakeChat.suggestion` (a short
  next prompt; Qwen shows it in its input box), never a queued answer;
* :data:`OVERLOADED` in the prompt → ``503`` "overloaded" (as OpenAI-compatible servers answer then), or
  the error of :attr:`FakeChat.fail_status`;
* anything else → the answer queued with :meth:`FakeChat.script`, else :attr:`FakeChat.default` — or, after
  :meth:`FakeChat.fail_next`, HTTP 500 (a server error agents retry) — or the status it was given, 400
  one they do not — for that many such prompts first.

Every request is recorded; every streamed reply records the wall-clock time of its last chunk, which is
when the model finished speaking (the tests measure from there, or from the store, to the hand-off). Every
request but a title or a suggestion (side requests, not the agent's turn) also gets a
:class:`~tests.fakes.loopback.StreamLog` in :attr:`FakeChat.streams` (499 when the client goes: an
interrupted turn), the truth of "the agent is working" for tests/support/state_proof.py.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.loopback import LoopbackServer, QuietJSONHandler, StreamLog

__all__ = ["OPTIONS", "OVERLOADED", "QUESTION", "SUGGESTION", "TITLE", "FakeChat", "RecordedChat",
           "opencode_config"]

TITLE = "Fake session title"
#: what Qwen Code's follow-up suggestion request gets by default: a next prompt its filters let through
SUGGESTION = "run the tests"
SUGGESTION_MODE = "[SUGGESTION MODE"
SHELL_TOOLS = ("bash", "run_shell_command", "run_commands")
SLOW_CHUNK_S = 0.5
#: what an ``ASKTEST`` prompt makes the model ask through Cline's ``ask_question``, and the choices offered
QUESTION = "Which database should the service use?"
OPTIONS = ("PostgreSQL", "SQLite", "MySQL")
#: a prompt holding this is answered with an error, :attr:`FakeChat.fail_status` (503 overloaded)
OVERLOADED = "OVERLOADED_TEST"
#: the error bodies by status (Qwen Code 0.24.4 retries a 503 for minutes: tests/test_qwen_states.py)
FAILURES = {503: {"message": "The server is overloaded", "type": "server_error", "code": "overloaded"},
            400: {"message": "Invalid request", "type": "invalid_request_error", "code": "invalid_request"}}
DEFAULT_ANSWER = ("FAKE_ANSWER_BEGIN\nHere is the function:\n\n```python\ndef hello():\n"
                  "    print(\"hello from the fake model\")\n```\n\nFAKE_ANSWER_END")


@dataclass
class RecordedChat:
    """One chat request, and (for streamed replies) when its last chunk went out."""

    body: dict[str, Any]
    kind: str = ""
    text: str = ""
    t_received: float = field(default_factory=time.time)
    t_last_chunk: float | None = None

    @property
    def last_user_text(self) -> str:
        return _last_user(self.body)


class FakeChat(LoopbackServer[RecordedChat]):
    """The server. ``with FakeChat() as chat: chat.url`` → ``http://127.0.0.1:PORT/v1``."""

    def __init__(self, *, chunk_delay_s: float = 0.02, port: int = 0) -> None:
        super().__init__(_handler(self), name="fake-openai-chat", port=port)
        self.chunk_delay_s = chunk_delay_s
        self.default = DEFAULT_ANSWER
        self.suggestion = SUGGESTION
        #: the status an :data:`OVERLOADED` prompt is answered with (a key of :data:`FAILURES`)
        self.fail_status = 503
        self._answers: deque[str] = deque()
        self._failures = 0
        self._failure_status = 500

    @property
    def url(self) -> str:
        """The OpenAI-style base URL, with ``/v1`` (what OpenCode's ``baseURL`` takes)."""
        return f"{super().url}/v1"

    def script(self, *answers: str) -> None:
        """Queue answers for the next prompts (title requests and tool steps do not use them)."""
        with self._lock:
            self._answers.extend(answers)

    def fail_next(self, count: int = 1, status: int = 500) -> None:
        """Answer the next ``count`` prompts with HTTP ``status`` (500: a server error an agent may retry;
        400: a bad request it does not)."""
        with self._lock:
            self._failures, self._failure_status = self._failures + count, status

    def turns(self) -> list[RecordedChat]:
        """Replies that answered a prompt with text (not titles, not tool calls)."""
        with self._lock:
            return [r for r in self.requests if r.kind in ("answer", "tool-final")]

    def _choose(self, record: RecordedChat) -> tuple[str, Any]:
        body = record.body
        messages = body.get("messages") or []
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        system = "\n".join(_text_of(m.get("content")) for m in messages if m.get("role") == "system")
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        tool_results = [m for m in messages[last_user + 1:] if m.get("role") == "tool"]
        if not tools and "title" in system.lower():
            return "title", TITLE
        if tool_results:
            out = _text_of(tool_results[-1].get("content")).strip()
            return "tool-final", f"TOOL_FINAL_BEGIN\nThe tool said:\n{out[:400]}\nTOOL_FINAL_END"
        if SUGGESTION_MODE in record.last_user_text:
            return "suggestion", self.suggestion
        shell = next((name for name in SHELL_TOOLS if name in tools), None)
        if "TOOLTEST" in record.last_user_text and shell:
            return "tool", _shell_call(shell, "ls -1 && echo FAKE_TOOL_OK", "List files")
        if "ASKTEST" in record.last_user_text and "ask_question" in tools:
            return "tool", {"name": "ask_question",
                            "arguments": json.dumps({"question": QUESTION, "options": list(OPTIONS)})}
        if "TOOLASK" in record.last_user_text and shell:  # a command agents ask before running
            return "tool", _shell_call(shell, "touch approved.txt && echo FAKE_TOOL_OK", "Touch a file")
        with self._lock:
            if self._failures:
                self._failures -= 1
                return "error", None
            return "answer", self._answers.popleft() if self._answers else self.default


def _shell_call(tool: str, command: str, what: str) -> dict[str, str]:
    """A call of the shell tool offered; Cline's ``run_commands`` takes a list of commands."""
    if tool == "run_commands":
        return {"name": tool, "arguments": json.dumps({"commands": [command]})}
    return {"name": tool, "arguments": json.dumps({"command": command, "description": what})}


def _last_user(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _handler(chat: FakeChat) -> type[QuietJSONHandler]:
    class Handler(QuietJSONHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self.send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            else:
                self.send_json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = self.read_json(empty={})
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self.send_json(404, {"error": {"message": "not found"}})
                return
            if not isinstance(body, dict):
                self.send_json(400, {"error": {"message": "body is not JSON"}})
                return
            record = RecordedChat(body=body)
            kind, payload = chat._choose(record)
            record.kind, record.text = kind, payload if isinstance(payload, str) else ""
            chat._record(record)
            if kind == "answer" and OVERLOADED in record.last_user_text:
                status = chat.fail_status
                chat._stream_log().end(status)
                self.send_json(status, {"error": FAILURES[status]})
                return
            # side requests are no turn of the agent's
            log = StreamLog(time.time()) if kind in ("title", "suggestion") else chat._stream_log()
            if kind == "error":
                status = chat._failure_status
                error = {"message": f"fake: scripted HTTP {status}",
                         "type": "server_error" if status >= 500 else "invalid_request_error"}
                self.send_json(status, {"error": error})
                log.end(status)
                return
            try:
                if body.get("stream"):
                    self._stream(body, kind, payload, log)
                    record.t_last_chunk = time.time()
                else:
                    self.send_json(200, _completion(body, kind, payload))
            except (BrokenPipeError, ConnectionResetError):
                log.end(499)  # the client went away (an interrupted turn)
                return
            log.end()

        def _stream(self, body: dict[str, Any], kind: str, payload: Any, log: StreamLog) -> None:
            self.start_events(chunked=False)
            cid, model = "chatcmpl-" + uuid.uuid4().hex[:12], body.get("model", "fake-model")

            def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None) -> None:
                log.chunk()
                obj: dict[str, Any] = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                if usage is not None:
                    obj["choices"], obj["usage"] = [], usage
                self.event(None, obj)

            chunk({"role": "assistant", "content": ""})
            if kind == "tool":
                call = {"index": 0, "id": "call_" + uuid.uuid4().hex[:8], "type": "function",
                        "function": {"name": payload["name"], "arguments": payload["arguments"]}}
                chunk({"tool_calls": [call]})
                finish = "tool_calls"
            else:
                words = payload.split(" ")
                delay = SLOW_CHUNK_S if "SLOWTEST" in _last_user(body) else chat.chunk_delay_s
                for i, word in enumerate(words):
                    time.sleep(delay)  # shapes the scenario: the model streams at this pace
                    chunk({"content": word + (" " if i < len(words) - 1 else "")})
                finish = "stop"
            chunk({}, finish=finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                chunk(None, usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})
            self.event(None, "[DONE]")
            self.end_events()

    return Handler


def _completion(body: dict[str, Any], kind: str, payload: Any) -> dict[str, Any]:
    if kind == "tool":
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_" + uuid.uuid4().hex[:8], "type": "function", "function": payload}]}
    else:
        message = {"role": "assistant", "content": payload}
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if kind == "tool" else "stop"}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def opencode_config(base_url: str) -> dict[str, Any]:
    """``$XDG_CONFIG_HOME/opencode/opencode.json`` pointing OpenCode at this server (docs/agents.md, OpenCode:
    offline)."""
    return {"$schema": "https://opencode.ai/config.json",
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                  "options": {"baseURL": base_url, "apiKey": "sk-fake"},
                                  "models": {"fake-model": {"name": "Fake"}}}},
            "model": "fake/fake-model"}
