"""Run-time faults end in one line and lose nothing (#31, item 7 and its "found at the same time" list).

- Absurd values for every numeric flag are refused by argparse: one line, exit status 2.
- ``baton run`` / ``baton demo`` with a state folder they cannot write, ``baton run`` on a damaged, read-only
  or locked journal: one line naming the file and the fix, exit status 1, before anything runs.
- While ``baton run`` runs, a journal that cannot be written (locked by another process, made read-only,
  its disk full) pauses delivery: nothing is typed, one log line says why; once it can be written again
  every hand-off arrives, exactly once.

The faults are real: a lock held by another SQLite connection; ``chattr +i`` (root ignores permission
bits, not the immutable flag; without root, ``chmod`` does it); a small tmpfs filled to the last byte.
Those that need root skip without it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from pipeline.cli import _parser
from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import messages, start_agent, transcript_answers
from tests.support.cli import baton
from tests.support.daemons import Daemon, wait_followed, write_config
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer

HUGE = "9" * 23
PAUSED = "delivery paused: nothing is typed until the journal can be written"
RESUMED = "can be written again; delivery resumes"


# ---- numeric flags -------------------------------------------------------------------------------------


def _options() -> Iterator[tuple[str, argparse.Action]]:
    """Every option of every ``baton`` command, with the command's name."""
    parser = _parser()
    pending = [("baton", parser)]
    while pending:
        name, p = pending.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending += [(f"{name} {sub}", sp) for sub, sp in action.choices.items()]
            elif action.option_strings and action.nargs is None and action.type is not None:
                yield name, action


def test_every_numeric_flag_has_both_bounds() -> None:
    """A flag whose default is a number refuses a huge one, a hugely negative one and nan at parse time."""
    numeric = [(cmd, a) for cmd, a in _options() if isinstance(a.default, int | float)
               and not isinstance(a.default, bool)]
    assert {a.dest for _, a in numeric} >= {"port", "handoffs", "work_s", "limit"}
    for cmd, action in numeric:
        for absurd in (HUGE, "-" + HUGE, "1e999", "nan", "9" * 5000):
            assert callable(action.type)
            with pytest.raises(argparse.ArgumentTypeError) as refused:
                action.type(absurd)
            assert "\n" not in str(refused.value) and len(str(refused.value)) < 120, (cmd, action.dest)


@pytest.mark.parametrize("args", [
    ["history", "-n", HUGE],
    ["history", "--all-hosts", "-n", HUGE],
    ["history", "-n", "9" * 5000],
    ["history", "--since", f"{HUGE}d"],
    ["history", "--since", f"{'9' * 400}s"],
    ["demo", "--handoffs", HUGE],
    ["demo", "--work-s", "1e999"],
    ["bus", "--port", HUGE],
])
def test_an_absurd_number_is_one_line_and_exit_2(args: list[str]) -> None:
    Journal(default_journal_path()).close()  # a journal to read: -n reaches SQLite if argparse lets it
    line = baton(*args).one_line_error(2, f"baton {args[0]}: error: argument ")
    assert "out of range" in line or "reaches back before 1970" in line
    assert len(line) < 200


# ---- at start: one line naming the file and the fix -------------------------------------------------------


def routes(tmp_path: Path) -> Path:
    return write_config(tmp_path / "routes.yaml", "batonpass-faults-unused",
                        {"a": {"pane": "%0", "agent": "shell"}, "b": {"pane": "%1", "agent": "shell"}},
                        [{"from": "a", "to": "b"}])


class SmallDisk:
    """A 4 MB tmpfs mounted at ``mount`` (root only: the test skips without), to fill to the last byte."""

    def __init__(self, mount: Path) -> None:
        self.mount = mount
        mount.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(mount)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")

    def fill(self) -> None:
        with (self.mount / "filler").open("wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        with pytest.raises(OSError):
            (self.mount / "one-more-byte").write_bytes(b"x")

    def free(self) -> None:
        (self.mount / "filler").unlink()

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], capture_output=True)


def _chattr(flag: str, *paths: Path) -> bool:
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True)
    return done.returncode == 0


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """``paths`` made read-only in a way that holds for this user: the immutable flag for root (which
    ignores permission bits), the permission bits for anyone else."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or not _chattr("+i", *paths):
            pytest.skip("root, and no chattr +i on this file system: nothing makes a file read-only for root")
        try:
            yield
        finally:
            _chattr("-i", *paths)
        return
    modes = {p: p.stat().st_mode for p in paths}
    for p in paths:
        p.chmod(0o500 if p.is_dir() else 0o400)
    try:
        yield
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


@pytest.mark.parametrize("command", ["run", "demo"])
def test_a_state_folder_that_cannot_be_written_is_one_line(tmp_path: Path, command: str) -> None:
    parent = tmp_path / "locked-away"
    parent.mkdir()
    state = parent / "state"
    args = ["run", "-c", str(routes(tmp_path))] if command == "run" else ["demo"]
    with read_only(parent):
        result = baton(*args, env={"XDG_STATE_HOME": str(state)})
    result.one_line_error(1, f"baton {command}: cannot write {state}", "XDG_STATE_HOME")
    assert "Traceback" not in result.out


def test_a_state_folder_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a folder")
    result = baton("run", "-c", str(routes(tmp_path)), env={"XDG_STATE_HOME": str(tmp_path / "state")})
    result.one_line_error(1, "baton run: cannot write", "Not a directory")


def test_a_full_state_folder_is_one_line(tmp_path: Path) -> None:
    disk = SmallDisk(tmp_path / "small-disk")
    try:
        (disk.mount / "batonpass").mkdir()
        disk.fill()
        for command in (["run", "-c", str(routes(tmp_path))], ["demo"]):
            result = baton(*command, env={"XDG_STATE_HOME": str(disk.mount)})
            result.one_line_error(1, f"baton {command[0]}: no room to write {disk.mount / 'batonpass'}",
                                  "free space on its disk")
    finally:
        disk.unmount()


def test_a_damaged_journal_is_one_line_that_says_to_move_it_aside(tmp_path: Path) -> None:
    path = default_journal_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"these bytes are no SQLite database " * 200)
    baton("run", "-c", str(routes(tmp_path))).one_line_error(
        1, f"baton run: the journal {path} is damaged (file is not a database): move it aside (mv {path} ")
    assert path.read_bytes().startswith(b"these bytes")  # left as it was


def test_a_read_only_journal_is_one_line(tmp_path: Path) -> None:
    path = default_journal_path()
    Journal(path).close()
    with read_only(path):
        result = baton("run", "-c", str(routes(tmp_path)))
    result.one_line_error(1, f"baton run: cannot write {path} (attempt to write a readonly database): ",
                          "make it and its folder writable")


def test_a_locked_journal_is_one_line(tmp_path: Path) -> None:
    path = default_journal_path()
    Journal(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another program, mid-write
    try:
        result = baton("run", "-c", str(routes(tmp_path)))
    finally:
        holder.close()
    result.one_line_error(1, f"baton run: the journal {path} is locked by another process", "fuser")


# ---- in process: the journal's own pause -------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_write_refused_by_a_lock_is_said_once_and_waited_out(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="batonpass")
    journal = Journal(tmp_path / "journal.sqlite3")
    holder = sqlite3.connect(journal.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    mark = journal.mark_followed
    assert not journal.try_write(lambda: mark(["a"], 1.0))
    assert not journal.try_write(lambda: mark(["a"], 2.0))
    assert caplog.text.count(PAUSED) == 1 and "is locked by another process" in caplog.text

    async def release() -> None:
        await anyio.sleep(0.3)  # shapes the scenario: the lock is held a moment into the wait
        holder.execute("ROLLBACK")

    async with anyio.create_task_group() as tg:
        tg.start_soon(release)
        await journal.until_done(lambda: mark(["a"], 3.0))
    assert journal.followed_until("a") == 3.0
    assert caplog.text.count(PAUSED) == 1 and caplog.text.count(RESUMED) == 1
    holder.close()


# ---- while running: delivery pauses and resumes, nothing lost or doubled ---------------------------------


class Fault:
    """Makes the journal at ``path`` unwritable and writable again, for a daemon that has it open."""

    def __init__(self, path: Path, tmp: Path) -> None:
        self.path, self.tmp = path, tmp

    def prepare(self) -> None:
        """Before the daemon starts."""
        Journal(self.path).close()

    def on(self) -> None:
        raise NotImplementedError

    def off(self) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        """After the daemon stopped."""


class Locked(Fault):
    def on(self) -> None:
        self.holder = sqlite3.connect(self.path, isolation_level=None)
        self.holder.execute("BEGIN IMMEDIATE")

    def off(self) -> None:
        self.holder.execute("ROLLBACK")
        self.holder.close()


class ReadOnly(Fault):
    """The immutable flag on the journal and its write-ahead log (where every commit goes first)."""

    def prepare(self) -> None:
        super().prepare()
        if os.geteuid() != 0 or shutil.which("chattr") is None:
            pytest.skip("needs root and chattr: permission bits do not stop a file already open for writing")

    def on(self) -> None:
        wal = self.path.with_name(self.path.name + "-wal")
        assert wal.exists()
        if not _chattr("+i", self.path, wal):
            pytest.skip("chattr +i is not supported here")

    def off(self) -> None:
        _chattr("-i", self.path, self.path.with_name(self.path.name + "-wal"))

    def cleanup(self) -> None:
        self.off()


class DiskFull(Fault):
    """The journal on a small tmpfs of its own (linked from the state folder), filled to the last byte."""

    def prepare(self) -> None:
        self.disk = SmallDisk(self.tmp / "small-disk")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.symlink_to(self.disk.mount / "journal.sqlite3")
        super().prepare()

    def on(self) -> None:
        self.disk.fill()

    def off(self) -> None:
        self.disk.free()

    def cleanup(self) -> None:
        self.disk.unmount()


FAULTS = {"locked": Locked, "read-only": ReadOnly, "disk-full": DiskFull}


def busy(server: TmuxServer, pane: str) -> bool:
    return "esc to interrupt" in server.capture(pane)


@pytest.mark.tmux
@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_a_journal_that_cannot_be_written_pauses_delivery_and_loses_nothing(
        tmux_server: TmuxServer, tmp_path: Path, private_state: Path, daemon_factory, kind: str) -> None:
    fault = FAULTS[kind](default_journal_path(), tmp_path)
    fault.prepare()
    daemon: Daemon | None = None
    try:
        alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        a = start_agent(tmux_server, alog, "a", role="writer", work_s=0.2)
        b = start_agent(tmux_server, blog, "b", work_s=4.0)  # long turns: a hand-off waits for it
        config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                              {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
                              [{"name": "ab", "from": "a", "to": "b",
                                "transform": {"type": "template", "template": "from a: {response}"}}])
        daemon = daemon_factory(config)
        daemon.start()
        wait_followed(daemon, "a")

        def answered(n: int) -> bool:
            return len([t for t in transcript_answers(private_state) if t.startswith("Draft")]) >= n

        tmux_server.type(a, "task 0")
        wait_for(lambda: len(messages(blog)) == 1 and busy(tmux_server, b), what="b to work on hand-off 1")
        tmux_server.type(a, "task 1")  # its hand-off is journaled and queued: b is busy
        wait_for(lambda: [h.state for h in Journal(default_journal_path()).history()] == ["delivered",
                 "transformed"], what="hand-off 2 to wait for b")
        fault.on()
        assert busy(tmux_server, b), "b finished before the fault was on: make its turns longer"
        wait_for(lambda: answered(2) and "demo❯" in tmux_server.capture(a).rstrip().split("\n")[-1],
                 what="a to be ready")
        tmux_server.type(a, "task 2")  # a turn that ends while the journal cannot be written
        wait_for(lambda: answered(3) and not busy(tmux_server, b), timeout=30, what="b to be ready")
        quiet_for(2.0, "a hand-off typed while the journal cannot be written")
        assert len(messages(blog)) == 1, daemon.stderr()
        log = daemon.stderr()
        assert log.count(PAUSED) == 1, log
        assert "Traceback" not in log and daemon.proc is not None and daemon.proc.poll() is None

        fault.off()
        wait_for(lambda: len(messages(blog)) == 3, timeout=60, what="the held hand-offs to arrive")
        quiet_for(1.5, "a hand-off typed twice")
        assert daemon.stop() == 0
        drafts = [t for t in transcript_answers(private_state) if t.startswith("Draft")]
        got = collections.Counter(messages(blog))
        assert got == collections.Counter(f"from a: {d}" for d in drafts), daemon.stderr()
        assert [h.state for h in Journal(default_journal_path()).history()] == ["delivered"] * 3
        log = daemon.stderr()
        assert log.count(PAUSED) == 1 and log.count(RESUMED) == 1, log
    finally:
        if daemon is not None and daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()
        fault.cleanup()
