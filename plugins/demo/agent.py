"""A tiny stand-in agent for ``baton demo`` and the tests: takes a prompt, works for a moment, answers.

It behaves like the real TUIs where it matters to batonpass: it runs in raw mode, turns on bracketed
paste (so a multi-line paste is one message, submitted by Enter), shows a busy line with
``esc to interrupt`` while it works, and names itself ``baton-demo`` in ``/proc/PID/comm`` so that the
process tree tells it apart from a bare shell. Like Claude Code it keeps a transcript of its turns, one
JSONL file per process (:func:`transcript_dir`), written when a prompt arrives and when the answer is done.
``--log FILE`` appends every message it receives as JSON (for tests). A message holding ``NEEDS_APPROVAL``
first asks the person, as the real agents' permission prompts do (:data:`ASK`), and reads keys until ``y``
(it goes on) or ``n`` (it refuses the turn); each key is logged (``event: approval``). Esc while it works
interrupts the turn, and a message holding ``FAIL_TURN`` fails after a moment as a model's error would:
either way the transcript's answer record says ``"outcome": "failed"`` and nothing is handed on. The log
says when the work began and ended (``event: work`` / ``event: end``), the model's log of a real agent.

Run: ``python -m plugins.demo.agent --name alice --role writer``
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import termios
import time
import tty
import uuid
from typing import TextIO

PROMPT = "demo❯ "
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
APPROVAL = "NEEDS_APPROVAL"
#: a message holding this fails, as a turn whose model answered an error (500, overloaded) does
FAIL = "FAIL_TURN"
ESC = b"\x1b"
#: the demo agent's permission prompt, the last line of its screen until y or n answers it
ASK = "allow? [y/n]"


def answer(role: str, name: str, turn: int, message: str) -> str:
    first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "(empty)")
    words = len(message.split())
    if role == "reviewer":
        return (f"Review {turn} by {name}: I read {len(message.splitlines())} lines ({words} words).\n"
                f"- The opening \"{first[:48]}\" is clear.\n"
                f"- Next: tighten step {turn + 1} and add a test for it.")
    return (f"Draft {turn} by {name}, answering \"{first[:48]}\":\n"
            f"- step {turn}: write the change in src/app.py\n"
            f"- step {turn + 1}: run the tests with `pytest -q`")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        with open("/proc/self/comm", "w") as f:
            f.write("baton-demo")
    except OSError:
        pass
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    out = sys.stdout
    out.write("\x1b[?2004h")
    out.write(
        f"{args.name} — a batonpass demo agent ({args.role}). Type a prompt, Enter to send.\r\n\r\n{PROMPT}"
    )
    out.flush()
    session = _Session(args, out, fd)
    try:
        while True:
            data = os.read(fd, 65536)
            if not data or not session.feed(data):
                return 0
    finally:
        out.write("\x1b[?2004l")
        out.flush()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="baton-demo")
    ap.add_argument("--name", default="demo")
    ap.add_argument("--role", choices=["writer", "reviewer", "echo"], default="writer")
    ap.add_argument("--work-s", type=float, default=1.0, help="how long each turn 'works'")
    ap.add_argument("--log", help="append each received message to this JSONL file")
    ap.add_argument("--no-transcript", action="store_true",
                    help="keep no transcript (then batonpass reads this agent from its screen only)")
    return ap


class _Session:
    """The terminal's input as the agent reads it: the line being typed, whether a bracketed paste is
    open, and bytes not consumed yet (a marker or a UTF-8 character may be split across reads)."""

    def __init__(self, args: argparse.Namespace, out: TextIO, fd: int) -> None:
        self.args, self.out, self.fd = args, out, fd
        self.buf: list[str] = []
        self.turn = 0
        self.pasting = False
        self.pending = b""

    def feed(self, data: bytes) -> bool:
        """Consume what can be consumed of the input so far; False when the user quits (Ctrl-C, Ctrl-D)."""
        self.pending += data
        while self.pending:
            if self.pasting:
                if not self._paste():
                    break
                continue
            if self.pending.startswith(PASTE_START):
                self.pending, self.pasting = self.pending[len(PASTE_START):], True
                continue
            if PASTE_START.startswith(self.pending):
                break  # wait for the rest of a split start marker
            byte, self.pending = self.pending[:1], self.pending[1:]
            if not self._key(byte):
                return False
        return True

    def _paste(self) -> bool:
        """Take pasted text up to the end marker; False when more input is needed first."""
        end = self.pending.find(PASTE_END)
        if end < 0:
            keep = len(PASTE_END) - 1  # the terminator may be split across reads
            pending = self.pending
            chunk, self.pending = pending[:-keep] if len(pending) > keep else b"", pending[-keep:]
            if not chunk:
                return False
            _take(chunk, self.buf, self.out)
            return True
        _take(self.pending[:end], self.buf, self.out)
        self.pending, self.pasting = self.pending[end + len(PASTE_END):], False
        return True

    def _key(self, byte: bytes) -> bool:
        """One typed byte; False for Ctrl-C or Ctrl-D."""
        if byte in (b"\r", b"\n"):
            self._submit()
        elif byte in (b"\x03", b"\x04"):
            return False
        elif byte == b"\x7f":
            if self.buf:
                self.buf.pop()
                self.out.write("\b \b")
                self.out.flush()
        elif byte == b"\x1b":
            self.pending = self.pending.lstrip(b"[O0123456789;ABCDHF~")  # drop arrow keys and the like
        elif byte >= b" ":
            self._printable(byte)
        return True

    def _submit(self) -> None:
        """Enter: a non-empty line is a turn (input typed while it works is read after it)."""
        message = "".join(self.buf)
        self.buf.clear()
        self.out.write("\r\n")
        if message.strip():
            self.turn += 1
            self.pending += _work(self.args, self.turn, message, self.out, self.fd)
        self.out.write(PROMPT)
        self.out.flush()

    def _printable(self, byte: bytes) -> None:
        """A printable byte, possibly the start of a UTF-8 sequence: collect the whole character."""
        raw = byte
        while self.pending and 0x80 <= self.pending[0] < 0xC0:
            raw, self.pending = raw + self.pending[:1], self.pending[1:]
        text = raw.decode("utf-8", "replace")
        self.buf.append(text)
        self.out.write(text)
        self.out.flush()


def _take(chunk: bytes, buf: list[str], out: TextIO) -> None:
    text = chunk.decode("utf-8", "replace")
    buf.append(text)
    out.write(text.replace("\r\n", "\n").replace("\n", "\r\n"))
    out.flush()


def _log(args: argparse.Namespace, **record: object) -> None:
    if args.log:
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": time.time(), **record}) + "\n")


def _work(args: argparse.Namespace, turn: int, message: str, out: TextIO, fd: int) -> bytes:
    """Show the busy line for ``work_s`` seconds. Input typed meanwhile is kept for later and logged as
    ``input-while-busy``: the tests use that to prove batonpass never types into a busy agent."""
    _log(args, turn=turn, message=message)
    turn_id = uuid.uuid4().hex
    _transcript(args, type="prompt", turn_id=turn_id, text=message)
    if APPROVAL in message and not _allowed(args, turn, out, fd):
        reply = f"Refused {turn}: {args.name} was not allowed to go on."
        _transcript(args, type="answer", turn_id=turn_id, text=reply)
        out.write(reply + "\r\n\r\n")
        return b""
    _log(args, event="work", turn=turn)
    failing = FAIL in message
    end, i, early = time.monotonic() + (args.work_s / 3 if failing else args.work_s), 0, b""
    while time.monotonic() < end:
        out.write(f"\r{SPINNER[i % len(SPINNER)]} {args.name} is working… (esc to interrupt)\x1b[K")
        out.flush()
        i += 1
        if select.select([fd], [], [], 0.08)[0]:
            chunk = os.read(fd, 65536)
            if chunk == ESC:  # a lone Esc: the person interrupts (an arrow key is Esc and more)
                return _failed(args, turn, turn_id, "Interrupted by the person.", out)
            early += chunk
            _log(args, event="input-while-busy", turn=turn, data=chunk.decode("utf-8", "replace"))
    if failing:
        return _failed(args, turn, turn_id, "API Error: 500 overloaded (the model failed this turn)", out)
    out.write("\r\x1b[K")
    reply = message if args.role == "echo" else answer(args.role, args.name, turn, message)
    _transcript(args, type="answer", turn_id=turn_id, text=reply)
    _log(args, event="end", turn=turn, outcome="completed")
    out.write(reply.replace("\n", "\r\n") + "\r\n\r\n")
    return early


def _failed(args: argparse.Namespace, turn: int, turn_id: str, why: str, out: TextIO) -> bytes:
    """End the turn as failed: said on the screen and in the transcript (``outcome``)."""
    out.write(f"\r\x1b[K{why}\r\n\r\n")
    _transcript(args, type="answer", turn_id=turn_id, text=why, outcome="failed")
    _log(args, event="end", turn=turn, outcome="failed")
    return b""


def _allowed(args: argparse.Namespace, turn: int, out: TextIO, fd: int) -> bool:
    """Ask, as a permission prompt does, and read keys until y (True) or n (False)."""
    out.write(f"{args.name} asks to run `touch demo.txt`: {ASK} ")
    out.flush()
    while True:
        key = os.read(fd, 64)
        answer = {b"y": "approved", b"n": "denied"}.get(key[-1:].lower(), "")
        _log(args, event="approval", turn=turn, key=key.decode("utf-8", "replace"), answer=answer)
        if answer:
            out.write(f"{key[-1:].decode()}\r\n")
            return answer == "approved"


def transcript_dir() -> str:
    """Where demo agents keep their transcripts, one ``<pid>.jsonl`` each (like Claude Code's sessions)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.environ.get("BATON_DEMO_HOME") or os.path.join(base, "batonpass", "demo-agents")


def _transcript(args: argparse.Namespace, **record: object) -> None:
    if args.no_transcript:
        return
    folder = transcript_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"at": time.time(), **record}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    sys.exit(main())
