"""A full-screen text display for a live view, in plain ANSI (any terminal, over SSH): the alternate
screen, no cursor, keys read one at a time, and everything put back on the way out — whatever the way out.

Each :meth:`FullScreen.draw` writes only the lines that changed since the last frame, each placed by an
absolute cursor move on a cleared line, so nothing ever scrolls or wraps, and a frame costs a few
hundred bytes over a slow link. Lines must already fit the width (the caller cuts them).
"""

from __future__ import annotations

import os
import shutil
import termios
import tty
from typing import Any, TextIO

__all__ = ["FullScreen"]


class FullScreen:
    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin, self.stdout = stdin, stdout
        self.fd = stdin.fileno()
        self._saved: list[Any] | None = None
        self._frame: list[str] = []

    def size(self) -> tuple[int, int]:
        """(columns, lines) of the terminal."""
        try:
            size = os.get_terminal_size(self.stdout.fileno())
        except OSError:
            size = shutil.get_terminal_size()
        return size.columns, size.lines

    def __enter__(self) -> FullScreen:
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)  # keys arrive one by one, unechoed; Ctrl-C still sends SIGINT
        self.stdout.write("\x1b[?1049h\x1b[?25l\x1b[?7l\x1b[H\x1b[2J")  # alternate screen, no cursor, no wrap
        self.stdout.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stdout.write("\x1b[0m\x1b[?7h\x1b[?25h\x1b[?1049l")
            self.stdout.flush()
        except OSError:
            pass  # the terminal hung up: nothing left to put back
        finally:
            if self._saved is not None:
                try:
                    termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
                except termios.error:
                    pass

    def read_keys(self) -> str:
        """What was typed (call when standard input is readable)."""
        try:
            return os.read(self.fd, 64).decode("utf-8", "replace")
        except OSError:
            return ""

    def invalidate(self) -> None:
        """Draw every line again next time (after a resize)."""
        self._frame = []
        self.stdout.write("\x1b[2J")

    def draw(self, lines: list[str]) -> None:
        out = []
        for i, line in enumerate(lines):
            if i < len(self._frame) and self._frame[i] == line:
                continue
            out.append(f"\x1b[{i + 1};1H\x1b[2K{line}\x1b[0m")
        if len(lines) < len(self._frame):
            out.append(f"\x1b[{len(lines) + 1};1H\x1b[J")
        self._frame = list(lines)
        if out:
            self.stdout.write("".join(out))
            self.stdout.flush()
