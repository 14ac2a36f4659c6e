"""A fake Gemini API (Generative Language v1beta) on 127.0.0.1, for driving the real Gemini CLI offline.

Gemini CLI with ``GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT`` (no ``/v1beta``: its SDK adds it) and any
``GEMINI_API_KEY`` sends one ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` per model call,
plus ``:generateContent`` helper calls (a session summary when a new process starts, routing) that get a
short JSON or text answer. Modelled on the recording's server (tests/fixtures/gemini-cli-0.61.0/README.md).

What it answers, from the latest user text in ``contents``:

* ``TOOLTEST`` → a ``run_shell_command`` call of ``echo hello`` (auto-approved by Gemini CLI's default
  policy); once its ``functionResponse`` is in the history → :data:`TOOL_FINAL`;
* ``TOOLASK`` → the same with ``touch approved.txt && echo hello``, which Gemini CLI asks a person about;
* ``SLOWTEST`` → :data:`SLOW_CHUNKS`, one every :data:`SLOW_CHUNK_S` (to interrupt a turn; with
  ``TOOLASK``, the answer after the tool);
* :data:`OVERLOADED` → ``503 UNAVAILABLE`` "The model is overloaded", as the real API answers then (or
  the error of :attr:`FakeGemini.fail_status`);
* anything else → :attr:`FakeGemini.answer` of the prompt.

Every stream records when its last chunk went out (``finished_at``), and its
:class:`~tests.fakes.loopback.StreamLog` is in ``streams``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.fakes.loopback import LoopbackServer, QuietJSONHandler

__all__ = ["OVERLOADED", "SLOW_CHUNKS", "TOOL_FINAL", "FakeGemini", "gemini_home"]

TOOL_FINAL = "The command ran and printed `hello`. TOOLTEST finished."
SLOW_CHUNKS = ["Slow ", "answer ", "part ", "one, ", "part ", "two, ", "part ", "three, ", "almost ",
               "done. SLOWTEST finished."]
SLOW_CHUNK_S = 0.5
MODEL = "gemini-2.5-flash"
#: a prompt holding this is answered with an error, :attr:`FakeGemini.fail_status` (503 "The model is
#: overloaded", as the real API answers then)
OVERLOADED = "OVERLOADED_TEST"
#: the error bodies by status: Gemini CLI 0.61.0 retries a 5xx without end (tests/test_gemini_states.py)
FAILURES = {503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
            500: ("INTERNAL", "An internal error has occurred. Please retry or report."),
            400: ("INVALID_ARGUMENT", "Request contains an invalid argument.")}


def default_answer(prompt: str) -> str:
    first = prompt.strip().splitlines()[0] if prompt.strip() else ""
    return f"Gemini's answer to «{first[:60]}» ✓\n\n- the change is in `src/app.py`\n- 日本語 too"


def last_user_text(contents: list[Any]) -> str:
    for content in reversed(contents or []):
        if not isinstance(content, dict) or content.get("role", "user") != "user":
            continue
        for part in reversed(content.get("parts") or []):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                return part["text"]
    return ""


def _after_tool(contents: list[Any]) -> bool:
    last = contents[-1] if contents and isinstance(contents[-1], dict) else {}
    return any(isinstance(p, dict) and "functionResponse" in p for p in last.get("parts") or [])


def _chunk(parts: list[dict[str, Any]], finish: bool = False, output: int = 20) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL}
    if finish:
        candidate["finishReason"] = "STOP"
        out["usageMetadata"] = {"promptTokenCount": 100, "candidatesTokenCount": output,
                                "totalTokenCount": 100 + output}
    return out


class FakeGemini(LoopbackServer[dict]):
    """The server: ``with FakeGemini() as api: api.url``. Requests are kept as their JSON bodies (with
    ``_path``)."""

    def __init__(self, answer: Callable[[str], str] = default_answer) -> None:
        super().__init__(_Handler, name="fake-gemini", port=0)
        self._server.fake = self  # type: ignore[attr-defined]
        self.answer = answer
        self.finished_at: list[float] = []
        #: the status an :data:`OVERLOADED` prompt is answered with (a key of :data:`FAILURES`)
        self.fail_status = 503

    def prompts(self) -> list[str]:
        """The prompts the model was called with (not the calls after a tool ran), in order."""
        with self._lock:
            return [last_user_text(r.get("contents") or []) for r in self.requests
                    if r.get("_path", "").endswith(":streamGenerateContent")
                    and not _after_tool(r.get("contents") or [])]


class _Handler(QuietJSONHandler):
    @property
    def fake(self) -> FakeGemini:
        return self.server.fake  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self.send_json(200, {"models": [{"name": f"models/{MODEL}", "displayName": "fake"}]})

    def do_POST(self) -> None:
        body = self.read_json(empty={}) or {}
        body["_path"] = self.route
        self.fake._record(body)
        if self.route.endswith(":countTokens"):
            return self.send_json(200, {"totalTokens": 100})
        if self.route.endswith(":generateContent"):
            config = body.get("generationConfig") or {}
            wants_json = config.get("responseMimeType") == "application/json" \
                or config.get("responseJsonSchema")
            text = json.dumps({"reasoning": "fake", "model_choice": "flash", "next_speaker": "user",
                               "title": "Fake session", "summary": "fake"}) if wants_json else "Fake summary."
            return self.send_json(200, _chunk([{"text": text}], finish=True))
        if self.route.endswith(":streamGenerateContent"):
            return self._stream(body.get("contents") or [])
        self.send_json(404, {"error": {"code": 404, "message": "unknown path"}})

    def _stream(self, contents: list[Any]) -> None:
        text = last_user_text(contents)
        log = self.fake._stream_log()
        if OVERLOADED in text:
            status = self.fake.fail_status
            log.end(status)
            return self.send_json(status, {"error": {"code": status, "message": FAILURES[status][1],
                                                     "status": FAILURES[status][0]}})
        self.start_events(chunked=False)
        try:
            tool = "TOOLTEST" in text or "TOOLASK" in text
            if tool and not _after_tool(contents):
                command = "touch approved.txt && echo hello" if "TOOLASK" in text else "echo hello"
                self.event(None, _chunk([{"text": "I will run a command.\n"}]))
                self.event(None, _chunk([{"functionCall": {"name": "run_shell_command", "args": {
                    "command": command, "description": "Print hello"}}}], finish=True, output=10))
            elif tool and "SLOWTEST" not in text:
                self.event(None, _chunk([{"text": TOOL_FINAL}], finish=True))
            elif "SLOWTEST" in text:  # after the tool too, with TOOLASK
                for i, piece in enumerate(SLOW_CHUNKS):
                    self.event(None, _chunk([{"text": piece}], finish=i == len(SLOW_CHUNKS) - 1))
                    log.chunk()
                    if self.fake._stopping.wait(SLOW_CHUNK_S):
                        return
            else:
                answer = self.fake.answer(text)
                half = len(answer) // 2
                self.event(None, _chunk([{"text": answer[:half]}]))
                log.chunk()
                self.event(None, _chunk([{"text": answer[half:]}], finish=True))
            self.fake.finished_at.append(time.time())
            self.end_events()
            log.end()
        except (BrokenPipeError, ConnectionResetError):
            log.end(499)  # the client went away (an interrupted turn)


def gemini_home(home: Any, project: Any, *, api_url: str,
                settings: dict[str, Any] | None = None) -> dict[str, str]:
    """Prepare ``home`` so Gemini CLI starts straight into its input box in ``project`` (the folder trusted,
    the API-key auth chosen, no usage statistics) and return the environment it runs with."""
    gemini = home / ".gemini"
    gemini.mkdir(parents=True, exist_ok=True)
    (gemini / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    base = {"model": {"name": MODEL}, "privacy": {"usageStatisticsEnabled": False},
            "security": {"auth": {"selectedType": "gemini-api-key"}}}
    (gemini / "settings.json").write_text(json.dumps({**base, **(settings or {})}, indent=2))
    return {"HOME": str(home), "GEMINI_CLI_HOME": str(home), "GEMINI_API_KEY": "fake-key",
            "GOOGLE_GEMINI_BASE_URL": api_url}
