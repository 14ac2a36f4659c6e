"""A webhook receiver on 127.0.0.1 (stands in for ntfy or a chat bridge): records each POST's path, JSON
body and the status it answered: 200 (or ``status``), after the scripted ``answers`` (say ``[500, 500]``: a
server that fails twice, then works)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes.loopback import LoopbackServer, QuietJSONHandler

__all__ = ["Posted", "WebhookReceiver"]


@dataclass(frozen=True)
class Posted:
    path: str
    body: Any
    #: the HTTP status the receiver answered
    answered: int = 200


class WebhookReceiver(LoopbackServer[Posted]):
    def __init__(self, *, status: int = 200, answers: list[int] | None = None) -> None:
        receiver = self

        class Handler(QuietJSONHandler):
            def do_POST(self) -> None:
                body = self.read_json()
                with receiver._lock:
                    status = receiver._answers.pop(0) if receiver._answers else receiver.status
                    receiver._record(Posted(self.path, body, status))
                self.send_json(status, {"ok": status < 400})

        self.status = status
        self._answers = list(answers or [])
        super().__init__(Handler, name="fake-webhook")

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        """The JSON bodies received (of ``event`` only, if given), in arrival order."""
        with self._lock:
            bodies = [p.body for p in self.requests]
        return [b for b in bodies if event is None or (isinstance(b, dict) and b.get("event") == event)]

    def delivered(self, event: str | None = None) -> list[dict[str, Any]]:
        """:meth:`events` that were answered with success (a retried notice counts once)."""
        with self._lock:
            bodies = [p.body for p in self.requests if p.answered < 400]
        return [b for b in bodies if event is None or (isinstance(b, dict) and b.get("event") == event)]
