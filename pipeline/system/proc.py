"""The process tree under a pane, read from /proc.

Only the pane's own subtree is walked (``/proc/PID/task/*/children``), never every process on the
machine, so the cost stays with the pane, not with the machine's load.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "SHELLS",
    "Proc",
    "children",
    "cmdline",
    "cwd",
    "environ",
    "find_agent",
    "find_first",
    "foreground_busy",
    "open_files",
    "read_proc",
    "started_at",
    "subtree",
    "wait_exit",
    "woken_on_exit",
]

#: what a pane with no agent runs: a bare shell
SHELLS = frozenset({"bash", "zsh", "sh", "dash", "fish", "ksh", "tcsh", "csh", "nu", "elvish", "xonsh"})


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

    @property
    def key(self) -> tuple[int, int]:
        """(pid, start ticks): this very process, never another that got its pid later."""
        return self.pid, self.start_ticks

    def running(self) -> bool:
        """Whether this very process still runs (not exited, its pid not reused)."""
        return still_runs(self.pid, self.start_ticks)


def still_runs(pid: int, start_ticks: int) -> bool:
    """Whether the process ``pid`` that started at ``start_ticks`` still runs: not exited (a zombie has),
    and its pid not taken by another process since."""
    live = read_proc(pid)
    return live is not None and live.start_ticks == start_ticks


def read_proc(pid: int) -> Proc | None:
    """The process ``pid``, or None if it is gone (or not ours to read). A zombie is gone: it has exited
    and only waits for its parent to reap it (a pidfd wakes its waiter at that moment, when /proc still
    lists it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: it runs from the first "(" to the LAST ")"
    lpar, rpar = stat.find("("), stat.rfind(")")
    comm = stat[lpar + 1 : rpar]
    fields = stat[rpar + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
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


def find_first(pane_pid: int, claims: Callable[[Proc], bool]) -> Proc | None:
    """The first process under the pane (breadth-first) that ``claims`` says is its agent."""
    return next((p for p in subtree(pane_pid) if claims(p)), None)


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


def cmdline(pid: int) -> list[str]:
    """The argument vector of ``pid`` ([] if it is gone or not ours to read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    parts = raw.split(b"\0")
    if parts and not parts[-1]:
        parts.pop()
    return [part.decode("utf-8", "replace") for part in parts]


def environ(pid: int) -> dict[str, str]:
    """The environment ``pid`` was started with ({} if unreadable): where an agent keeps its files."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def cwd(pid: int) -> str | None:
    """The current directory of ``pid``, or None."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def open_files(pid: int) -> list[str]:
    """The paths ``pid`` holds open (its file descriptors that name files; sockets and pipes left out)."""
    out: list[str] = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/"):
            out.append(target.removesuffix(" (deleted)"))
    return out


def started_at(proc: Proc) -> float:
    """When ``proc`` started, in seconds since the epoch (never later than the truth: the start ticks are
    whole clock ticks). The boot time is the wall clock minus CLOCK_BOOTTIME (what /proc/uptime shows),
    both read back to back: ``btime`` in /proc/stat is whole seconds, and reading /proc/uptime then the
    clock could be split by a preemption under load, putting the start tens of ms late."""
    before = time.time()
    since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    boot = (before + time.time()) / 2 - since_boot
    return boot + proc.start_ticks / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def woken_on_exit(pid: int, start_ticks: int, wake: Callable[[], None], *,
                        poll_s: float) -> AsyncIterator[None]:
    """While open, ``wake()`` is called once the process (``pid`` started at ``start_ticks``) has exited:
    seen on a pidfd through the event loop, or where there are none, looked for every ``poll_s``. A
    follower that waits for its agent's file events needs no liveness timer of its own then."""
    import anyio

    async def watch() -> None:
        try:
            await wait_exit(pid, start_ticks)
        except OSError:
            while still_runs(pid, start_ticks):
                await anyio.sleep(poll_s)
        wake()

    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            yield
        except Exception as exc:  # raised as itself, not in the task group's ExceptionGroup
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def wait_exit(pid: int, start_ticks: int) -> None:
    """Return when the process (``pid`` started at ``start_ticks``) has exited — at once if it already has.
    Waits on a pidfd (Linux 5.3+) through the event loop: nothing runs meanwhile. Raises OSError where
    pidfds are not available (then the caller polls :func:`read_proc`)."""
    import anyio

    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        raise OSError("no pidfd_open here")
    try:
        fd = pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if not still_runs(pid, start_ticks):
            return  # gone, or the pid already names another process
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)
