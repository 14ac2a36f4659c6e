"""The process tree under a pane, read from /proc.

Only the pane's own subtree is walked (``/proc/PID/task/*/children``), never every process on the
machine, so the cost stays with the pane, not with the machine's load.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Proc", "children", "find_agent", "foreground_busy", "read_proc", "subtree"]


@dataclass(frozen=True, slots=True)
class Proc:
    pid: int
    ppid: int
    comm: str
    exe: str
    #: field 22 of /proc/PID/stat, in clock ticks since boot: tells a reused PID apart
    start_ticks: int
    pgrp: int
    tpgid: int

    @property
    def exe_name(self) -> str:
        return os.path.basename(self.exe)


def read_proc(pid: int) -> Proc | None:
    """The process ``pid``, or None if it is gone (or not ours to read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: it runs from the first "(" to the LAST ")"
    lpar, rpar = stat.find("("), stat.rfind(")")
    comm = stat[lpar + 1 : rpar]
    fields = stat[rpar + 2 :].split()
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    return Proc(pid=pid, ppid=int(fields[1]), comm=comm, exe=exe.removesuffix(" (deleted)"),
                start_ticks=int(fields[19]), pgrp=int(fields[2]), tpgid=int(fields[5]))


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (all its threads' children)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return out


def subtree(pid: int) -> Iterator[Proc]:
    """Breadth-first: ``pid`` itself, then its descendants."""
    queue, seen = deque([pid]), set()
    while queue:
        current = queue.popleft()
        if current in seen:
            continue
        seen.add(current)
        proc = read_proc(current)
        if proc is None:
            continue
        yield proc
        queue.extend(children(current))


def find_agent(pane_pid: int, names: frozenset[str] | set[str]) -> Proc | None:
    """The first process under the pane whose comm (or exe basename) is one of ``names``.

    argv[0] is never consulted: ``exec -a claude sleep`` must not pass for Claude Code.
    """
    for proc in subtree(pane_pid):
        if proc.comm in names or proc.exe_name in names:
            return proc
    return None


def foreground_busy(shell_pid: int) -> bool | None:
    """Whether the shell in a pane has handed the terminal to a foreground job. None if it is gone."""
    proc = read_proc(shell_pid)
    if proc is None:
        return None
    return proc.tpgid not in (proc.pgrp, -1)
