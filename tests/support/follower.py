"""``baton history --follow`` as a person runs it: a real process, its lines read as they come, ended with
Ctrl-C."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
from typing import IO

from tests.support.cli import BATON, baton_env

__all__ = ["Follower", "ctrl_c_as_in_a_terminal"]


def ctrl_c_as_in_a_terminal() -> None:
    """SIGINT back to its default: a suite started in the background (CI, a script's ``&``) passes it on
    ignored, and a Ctrl-C typed in a terminal is what the test stands for."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Follower:
    """``baton history --follow`` running, its standard output read line by line on a thread."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([*BATON, "history", "--follow", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                     env=baton_env(env), preexec_fn=ctrl_c_as_in_a_terminal)
        self.lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()

    def _read(self, out: IO[str]) -> None:
        for line in out:
            self.lines.put(line.rstrip("\n"))

    def rest(self) -> list[str]:
        """Every line not read yet, up to the end of standard output (after :meth:`interrupt`)."""
        self.reader.join(timeout=15)
        assert not self.reader.is_alive(), "standard output still open"
        return [self.lines.get() for _ in range(self.lines.qsize())]

    def next(self, timeout: float = 15.0) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from baton history --follow within {timeout}s") from None

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C, as a person ends it: the exit status and standard error."""
        self.proc.send_signal(signal.SIGINT)
        status = self.proc.wait(timeout=15)
        assert self.proc.stderr is not None
        return status, self.proc.stderr.read()
