"""A webhook receiver on 127.0.0.1 (stands in for ntfy or a chat bridge): records each POST's path and
JSON body, answers 200 (or ``status``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes.loopback import LoopbackServer, QuietJSONHandler

__all__ = ["Posted", "WebhookReceiver"]


@dataclass(frozen=True)
class Posted:
    path: str
    body: Any


class WebhookReceiver(LoopbackServer[Posted]):
    def __init__(self, *, status: int = 200) -> None:
        receiver = self

        class Handler(QuietJSONHandler):
            def do_POST(self) -> None:
                receiver._record(Posted(self.path, self.read_json()))
                self.send_json(receiver.status, {"ok": receiver.status < 400})

        self.status = status
        super().__init__(Handler, name="fake-webhook")

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        """The JSON bodies received (of ``event`` only, if given), in arrival order."""
        with self._lock:
            bodies = [p.body for p in self.requests]
        return [b for b in bodies if event is None or (isinstance(b, dict) and b.get("event") == event)]
