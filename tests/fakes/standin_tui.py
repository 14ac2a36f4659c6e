"""A stand-in for an agent TUI that cannot run here (amp) or whose process the tests need without its model
(OpenCode's process, for store tests): a real raw-mode program in a real pane, named like the agent.

It writes NAME into ``/proc/self/comm`` (so ``/proc`` shows ``amp``/``opencode`` just as for the real
binary), turns on bracketed paste, shows PROMPT, and for each message shows BUSY (the agent's busy marker)
for ``--work-s`` seconds, then prints ANSWER (``{n}`` = turn number, ``{message}`` = what it received) and
the prompt again. ``--log FILE`` appends each message as JSON, like the demo agent.

Run: ``python -m tests.fakes.standin_tui --comm amp --prompt '> ' --busy '⠋ Thinking… (Esc to cancel)'``
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import termios
import time
import tty

__all__ = ["standin_command"]

PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"


def standin_command(
    comm: str,
    *,
    prompt: str = "> ",
    busy: str = "working (esc to cancel)",
    answer: str = "Answer {n}: {message}",
    work_s: float = 0.5,
    log: str | None = None,
    below: tuple[str, ...] = (),
) -> str:
    """The shell command that runs the stand-in (for ``TmuxServer.new_pane``); ``below``: lines drawn under
    the prompt each time it shows (OpenCode's mode line and the border of its input box)."""
    cmd = [
        sys.executable,
        "-m",
        "tests.fakes.standin_tui",
        "--comm",
        comm,
        "--prompt",
        prompt,
        "--busy",
        busy,
        "--answer",
        answer,
        "--work-s",
        str(work_s),
    ]
    return shlex.join(cmd + (["--log", log] if log else []) + [f"--below={line}" for line in below])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="standin_tui")
    ap.add_argument("--comm", required=True)
    ap.add_argument("--prompt", default="> ")
    ap.add_argument("--busy", default="working (esc to cancel)")
    ap.add_argument("--answer", default="Answer {n}: {message}")
    ap.add_argument("--work-s", type=float, default=0.5)
    ap.add_argument("--log")
    ap.add_argument("--below", action="append", default=[])
    args = ap.parse_args(argv)
    if args.below:  # the prompt, the lines under it, the cursor back after the prompt
        up = len(args.below)
        args.prompt = f"{args.prompt}\r\n" + "\r\n".join(args.below) + f"\x1b[{up}A\r{args.prompt}"
    with open("/proc/self/comm", "w") as f:
        f.write(args.comm[:15])
    fd, out = sys.stdin.fileno(), sys.stdout
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    out.write(
        f"\x1b[?2004h\x1b[2J\x1b[H{args.comm} stand-in\r\n\r\n{args.prompt}"
    )  # a clean screen, like a TUI
    out.flush()
    turn, buf, pending = 0, "", b""
    try:
        while True:
            data = os.read(fd, 65536)
            if not data:
                return 0
            pending += data
            if PASTE_START in pending and PASTE_END not in pending:
                continue  # wait for the whole paste
            text = pending.replace(PASTE_START, b"").replace(PASTE_END, b"").decode("utf-8", "replace")
            pending = b""
            for ch in text:
                if ch in "\r":
                    turn += 1
                    _turn(args, turn, buf, out)
                    buf = ""
                elif ch in ("\x03", "\x04"):
                    return 0
                elif ch == "\n":
                    buf += ch
                    out.write("\r\n")
                elif ch >= " ":
                    buf += ch
                    out.write(ch)
            out.flush()
    finally:
        out.write("\x1b[?2004l\x1b[J")  # what it drew under the prompt goes with it
        out.flush()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _turn(args: argparse.Namespace, n: int, message: str, out) -> None:
    if args.log:
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": time.time(), "turn": n, "message": message}) + "\n")
    out.write("\r\n" + args.busy)
    out.flush()
    time.sleep(args.work_s)  # shapes the scenario: the agent works this long
    reply = args.answer.format(n=n, message=message)
    out.write("\r\x1b[K" + reply.replace("\n", "\r\n") + "\r\n\r\n" + args.prompt)


if __name__ == "__main__":
    sys.exit(main())
