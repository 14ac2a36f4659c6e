"""A Codex stand-in for the benches: a process named ``codex`` writing its rollout as 0.171 does
(docs/agents.md, Codex).

Like ``codex --no-daemon`` it holds its own rollout open (so the pane's rollout is found by its open file,
the first rule of :mod:`plugins.codex.resolve`):
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<start>-<uuidv7>.jsonl``,
``session_meta`` first (written at start, as for a resumed thread, so every tile is followed before the first
turn; with ``CODEX_STANDIN_FRESH=1`` only at the first prompt, as a new TUI thread), then per turn
``task_started`` and the ``UserMessage`` item, and at its end, in one write, the
``AgentMessage`` item and ``task_complete`` with ``last_agent_message``. The screen shows Codex's input line
(``›`` with the dim placeholder) and ``• Working (… esc to interrupt)`` while a turn runs.

The terminal loop, the measurement points (``answer``/``paste`` in ``--log``) and ``--auto`` are
``bench/claude_standin.py``'s.

Run (by the benches, in a tmux pane): ``python bench/codex_standin.py --name s0 --log FILE [--auto 10]``
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_standin import Screen, run  # noqa: E402


def uuid7(at: float) -> str:
    digits = f"{int(at * 1000):012x}7{secrets.token_hex(10)[:19]}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Rollout:
    """The rollout of one stand-in process, held open for the life of the process."""

    def __init__(self) -> None:
        self.file: Any = None
        self.turn = ""
        self.ordinal = 0
        if not os.environ.get("CODEX_STANDIN_FRESH"):
            self.open()

    def open(self) -> None:
        home = Path(os.environ["CODEX_HOME"])
        now = time.time()
        self.thread = uuid7(now)
        local = datetime.fromtimestamp(now)
        folder = home / "sessions" / f"{local:%Y}" / f"{local:%m}" / f"{local:%d}"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"rollout-{local:%Y-%m-%dT%H-%M-%S}-{self.thread}.jsonl"
        self.file = open(folder / name, "ab")  # noqa: SIM115 - held open for the life of the process
        self.write({"type": "session_meta", "payload": {"id": self.thread, "timestamp": iso(now),
                                                         "cwd": os.getcwd(), "originator": "codex-tui",
                                                         "source": "cli"}})

    def write(self, *records: dict[str, object]) -> None:
        lines = []
        for record in records:
            self.ordinal += 1
            stamped = {"timestamp": iso(time.time()), "ordinal": self.ordinal, **record}
            lines.append(json.dumps(stamped) + "\n")
        self.file.write("".join(lines).encode())
        self.file.flush()

    def prompt(self, text: str) -> None:
        if self.file is None:
            self.open()
        self.turn = f"turn-{secrets.token_hex(6)}"
        self.write({"type": "event_msg", "payload": {"type": "task_started", "turn_id": self.turn}},
                   {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": self.turn, "item": {
                       "type": "UserMessage", "content": [{"type": "text", "text": text}]}}})

    def answer(self, text: str) -> float:
        """The end of a turn in one write; returns when its last line was on disk."""
        self.write({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": self.turn, "item": {
                        "type": "AgentMessage", "content": [{"type": "text", "text": text}]}}},
                   {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": self.turn,
                                                     "last_agent_message": text, "duration_ms": 100}})
        return time.time()


class CodexScreen(Screen):
    comm = "codex"
    title = "Codex stand-in"
    box = "\r\n\r\n› \x1b[2mAsk Codex to do anything\x1b[0m\r\x1b[2C"
    working = "\r\x1b[K• Working (0s • esc to interrupt)"  # over the input line, gone with the answer

    def answered(self, answer: str) -> str:
        return f"\r\x1b[K• {answer}\r\n\r\n─ Worked for 1s ─\r\n{self.box}"


if __name__ == "__main__":
    sys.exit(run(Rollout, CodexScreen()))
