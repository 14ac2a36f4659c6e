"""A Claude Code stand-in for the benches: a process named ``claude`` that writes its files as 2.1.x does.

It keeps ``$CLAUDE_CONFIG_DIR/sessions/<pid>.json`` (status ``idle``/``busy``) and the transcript
``projects/<enc(cwd)>/<sessionId>.jsonl`` (a ``user`` line with ``promptId`` when a turn starts; at its end,
in one write, the final ``assistant`` line with ``stop_reason: end_turn`` and ``system/turn_duration``, as
docs/agents.md, Claude Code says Claude Code does), turns on bracketed paste and shows an input box between
two rules.

Two measurement points go to ``--log`` (JSONL, ``time.time()``):
- ``answer``: right after the turn's end lines were written (the answer's last line is on disk);
- ``paste``: when the first byte of a bracketed paste (``ESC [200~``) is read from the pty — the moment a
  paste starts in this pane — with the pasted text once the paste ends.

``--auto N`` makes it a source: after an empty line (Enter), N turns of its own, one every ``--every``
seconds (±20 %, random), with no prompt needed, each answer unique (``--name`` and the turn number).
Without it, it answers what it is sent.

Run (by the benches, in a tmux pane): ``python bench/claude_standin.py --name s0 --log FILE [--auto 10]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import sys
import termios
import time
import tty
import uuid
from collections.abc import Callable
from typing import Any

PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
RULE = "─" * 40


def folder_name(cwd: str) -> str:
    """Claude Code's project folder name for short ASCII paths (what the benches use)."""
    return "".join(c if c.isalnum() and c.isascii() else "-" for c in cwd)


class Files:
    """The session file and transcript of one stand-in process."""

    def __init__(self) -> None:
        self.config = os.environ["CLAUDE_CONFIG_DIR"]
        self.session = str(uuid.uuid4())
        self.cwd = os.getcwd()
        with open("/proc/self/stat") as f:
            self.proc_start = f.read().rsplit(")", 1)[1].split()[19]
        self.started = int(time.time() * 1000)
        folder = os.path.join(self.config, "projects", folder_name(self.cwd))
        os.makedirs(folder, exist_ok=True)
        os.makedirs(os.path.join(self.config, "sessions"), mode=0o700, exist_ok=True)
        self.transcript = os.path.join(folder, f"{self.session}.jsonl")
        self.parent: str | None = None
        self.write({"type": "permission-mode", "permissionMode": "auto", "sessionId": self.session},
                   chain=False)
        self.status("idle")

    def status(self, status: str) -> None:
        path = os.path.join(self.config, "sessions", f"{os.getpid()}.json")
        now = time.time_ns() // 1_000_000
        data = {"pid": os.getpid(), "sessionId": self.session, "cwd": self.cwd, "startedAt": self.started,
                "procStart": self.proc_start, "version": "2.1.332", "kind": "interactive",
                "entrypoint": "cli", "status": status, "updatedAt": now, "statusUpdatedAt": now}
        with open(path + ".tmp", "w") as f:
            json.dump(data, f)
        os.replace(path + ".tmp", path)

    def line(self, obj: dict[str, object]) -> dict[str, object]:
        me = str(uuid.uuid4())
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        obj = {"parentUuid": self.parent, "isSidechain": False, "uuid": me, "timestamp": stamp,
               "sessionId": self.session, "cwd": self.cwd, "version": "2.1.332", **obj}
        self.parent = me
        return obj

    def write(self, *objs: dict[str, object], chain: bool = True) -> None:
        data = b"".join(json.dumps(self.line(o) if chain else o, ensure_ascii=False).encode() + b"\n"
                        for o in objs)
        with open(self.transcript, "ab") as f:
            f.write(data)

    def prompt(self, text: str) -> None:
        self.status("busy")
        self.write({"type": "user", "promptId": str(uuid.uuid4()),
                    "message": {"role": "user", "content": text}})

    def answer(self, text: str) -> float:
        """The end of a turn in one write; returns when its last line was on disk."""
        msg = f"msg_{uuid.uuid4().hex[:12]}"
        self.write({"type": "assistant", "requestId": f"req_{msg}", "message": {
                        "id": msg, "model": "claude-opus-4-8", "role": "assistant", "stop_reason": "end_turn",
                        "content": [{"type": "text", "text": text}]}},
                   {"type": "system", "subtype": "turn_duration", "durationMs": 100})
        on_disk = time.time()
        self.status("idle")
        return on_disk


class Screen:
    """What the stand-in draws: Claude Code's input box between two rules, its busy line, its answer."""

    comm = "claude"
    title = "Claude Code stand-in"
    box = f"\r\n{RULE}\r\n❯ "
    working = "\r\n✢ Working… (esc to interrupt)\r\n"

    def answered(self, answer: str) -> str:
        return f"\r\x1b[K● {answer}\r\n✻ Worked for 1s\r\n{self.box}"


def main() -> int:
    return run(Files, Screen())


def run(make_files: Callable[[], Any], screen: Screen) -> int:
    """The terminal loop shared by the stand-ins: ``make_files()`` gives the agent's files (``prompt``,
    ``answer``), ``screen`` what it draws."""
    ap = argparse.ArgumentParser(prog=screen.comm)
    ap.add_argument("--name", default=screen.comm)
    ap.add_argument("--log", required=True)
    ap.add_argument("--work-s", type=float, default=0.05)
    ap.add_argument("--auto", type=int, default=0, help="answer this many turns on its own (a source)")
    ap.add_argument("--every", type=float, default=0.6)
    args = ap.parse_args()
    with open("/proc/self/comm", "w") as f:
        f.write(screen.comm)
    files = make_files()
    log = open(args.log, "a", encoding="utf-8")  # noqa: SIM115 - for the life of the process

    def record(**r: object) -> None:
        log.write(json.dumps(r) + "\n")
        log.flush()

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    out = sys.stdout
    out.write(f"\x1b[?2004h {screen.title} ({args.name})\r\n{screen.box}")
    out.flush()

    def turn(text: str, answer: str) -> None:
        files.prompt(text)
        out.write(screen.working)
        out.flush()
        time.sleep(args.work_s)
        record(event="answer", text=answer, t=files.answer(answer))
        out.write(screen.answered(answer))
        out.flush()

    buf, pending, pasting, started = bytearray(), b"", False, 0.0
    auto_left, next_auto = args.auto, 0.0  # the automatic turns start after an empty line (Enter)
    try:
        while True:
            timeout = max(next_auto - time.monotonic(), 0.0) if auto_left and next_auto else None
            if not select.select([fd], [], [], timeout)[0]:
                turn(f"task {args.auto - auto_left} for {args.name}",
                     f"answer {args.auto - auto_left + 1} of {args.auto} from {args.name}")
                auto_left -= 1
                next_auto = time.monotonic() + random.uniform(0.8, 1.2) * args.every
                continue
            data = os.read(fd, 65536)
            now = time.time()
            if not data:
                return 0
            pending += data
            while pending:
                if pasting:
                    end = pending.find(PASTE_END)
                    if end < 0:
                        break
                    buf += pending[:end]
                    pending, pasting = pending[end + len(PASTE_END):], False
                    record(event="paste", text=buf.decode("utf-8", "replace"), t=started)
                    continue
                if pending.startswith(PASTE_START):
                    pending, pasting, started = pending[len(PASTE_START):], True, now
                    continue
                if PASTE_START.startswith(pending):
                    break
                byte, pending = pending[:1], pending[1:]
                if byte in (b"\r", b"\n"):
                    text = buf.decode("utf-8", "replace")
                    buf.clear()
                    if text.strip():
                        turn(text, f"echo: {text[:200]}")
                    elif auto_left and not next_auto:
                        next_auto = time.monotonic() + random.uniform(0.0, 1.0) * args.every
                elif byte in (b"\x03", b"\x04"):
                    return 0
                else:
                    buf += byte
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    sys.exit(main())
