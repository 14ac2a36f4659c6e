"""Which rollout is a pane's: the resolution chain on real processes and real files.

A stand-in for the Codex TUI is a real process whose ``/proc/PID/comm`` is ``codex`` (bash started
through a symlink of that name), with its own CODEX_HOME and cwd, holding files open where a test needs
it. The rollouts, lock files and ``state_5.sqlite`` are written the way Codex 0.171 writes them
(docs/agents.md, Codex).
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.system import proc
from plugins.codex.resolve import find_codex_process, resolve_rollout
from tests.support.codex import CodexHome, StandIns
from tests.support.polling import wait_for


@pytest.fixture
def codex(tmp_path: Path) -> Iterator[tuple[StandIns, CodexHome, Path]]:
    stand_ins = StandIns(tmp_path)
    project = tmp_path / "api"
    project.mkdir()
    try:
        yield stand_ins, CodexHome(tmp_path / "codex-home"), project
    finally:
        stand_ins.stop()


def started(pane_pid: int) -> float:
    found = find_codex_process(pane_pid)
    assert found is not None
    return found.started_at


def step(resolution, name: str) -> str:
    return next(s.detail for s in resolution.steps if s.step == name)


def test_the_process_is_the_pane_codex_with_its_own_home_and_cwd(codex) -> None:
    stand_ins, home, project = codex
    pane = stand_ins.pane("sleep 300", cwd=project, home=home.root)
    found = find_codex_process(pane)
    assert found.proc.comm == "codex" and found.codex_home == home.root and found.cwd == str(project)
    assert abs(found.started_at - time.time()) < 5
    res = resolve_rollout(pane)
    assert res.rollout is None and "none yet" in step(res, "rollout")
    assert all(s.ok for s in res.steps)


def test_no_codex_in_the_pane(codex) -> None:
    _, _, project = codex
    p = subprocess.Popen(["sleep", "30"], cwd=project)
    try:
        res = resolve_rollout(p.pid)
        assert res.process is None and not res.steps[0].ok
    finally:
        p.kill()
        p.wait()


def test_open_fd_decides(codex) -> None:
    stand_ins, home, project = codex
    rollout = home.rollout(time.time() - 100, project)
    other = home.rollout(time.time(), project)  # would win on start time: the fd must decide
    pane = stand_ins.pane(f'exec 3<"{rollout}"; sleep 300', cwd=project, home=home.root)
    # the stand-in is named codex before its script opens the file
    wait_for(lambda: any(str(rollout) in proc.open_files(p.pid) for p in proc.subtree(pane)), what="the fd")
    res = resolve_rollout(pane)
    assert (res.rollout, res.rule) == (rollout, "open fd") and other != rollout


def test_the_shared_daemons_open_rollouts_are_not_the_panes(codex) -> None:
    """The first pane's TUI starts the app-server daemon as its child; it holds every pane's rollout."""
    stand_ins, home, project = codex
    neighbour = home.rollout(time.time() - 50, project)
    (project / "app-server").write_text(f'exec 3<"{neighbour}"; sleep 300\n')
    pane = stand_ins.pane(
        f"{stand_ins.bin / 'codex'} app-server --listen unix:// --managed-daemon & sleep 300",
        cwd=project,
        home=home.root,
    )
    wait_for(
        lambda: any(str(neighbour) in proc.open_files(p.pid) for p in proc.subtree(pane)),
        what="the daemon's fd",
    )
    mine = home.rollout(started(pane) + 1.0, project)
    res = resolve_rollout(pane)
    assert (res.rollout, res.rule) == (mine, "start time + cwd")
    assert "no: pid" in step(res, "open fd")


def test_start_time_and_cwd(codex) -> None:
    stand_ins, home, project = codex
    elsewhere = project.parent / "web"
    elsewhere.mkdir()
    pane = stand_ins.pane("sleep 300", cwd=project, home=home.root)
    t0 = started(pane)
    home.rollout(t0 - 60, project)  # an older pane's
    home.rollout(t0 + 0.5, elsewhere)  # started alongside, in another project
    home.rollout(t0 + 0.6, project, originator="codex_exec")  # a `codex exec` run meanwhile
    mine = home.rollout(t0 + 1.2, project)
    home.rollout(t0 + 9, project)  # a pane started later in the same folder
    res = resolve_rollout(pane)
    assert (res.rollout, res.rule) == (mine, "start time + cwd")
    assert "+1.2s after the process" in step(res, "start time")


def test_a_pane_with_no_prompt_yet_does_not_take_a_neighbours_rollout(codex) -> None:
    stand_ins, home, project = codex
    pane = stand_ins.pane("sleep 300", cwd=project, home=home.root)
    t0 = started(pane)
    home.thread(t0 + 1.0)  # this TUI's thread: a lock file from startup, no rollout before the first prompt
    home.rollout(t0 + 6, project)  # the pane started 5 s later already had a prompt
    res = resolve_rollout(pane)
    assert res.rollout is None and res.rule == "none yet"
    assert "has no rollout yet" in step(res, "start time")


def test_two_panes_started_together_are_told_apart_by_the_last_prompt(codex) -> None:
    stand_ins, home, project = codex
    pane = stand_ins.pane("sleep 300", cwd=project, home=home.root)
    t0 = started(pane)
    a = home.rollout(t0 + 1.0, project, prompts=("review the parser",))
    b = home.rollout(t0 + 1.4, project, prompts=("write the tests",))
    res = resolve_rollout(pane)
    assert res.rollout is None and res.rule == "ambiguous"
    assert resolve_rollout(pane, "write   the tests\n").rollout == b  # whitespace aside
    assert resolve_rollout(pane, "review the parser").rule == "last prompt"
    assert resolve_rollout(pane, "review the parser").rollout == a


def test_a_new_thread_in_the_same_tui_is_found_by_the_prompt_typed_into_it(codex) -> None:
    stand_ins, home, project = codex
    pane = stand_ins.pane("sleep 300", cwd=project, home=home.root)
    t0 = started(pane)
    first = home.rollout(t0 + 1.0, project, prompts=("one",))
    sent = time.time()
    newer = home.rollout(t0 + 40, project, prompts=("two",), prompt_at=sent + 0.1)  # after /new
    assert resolve_rollout(pane).rollout == first
    res = resolve_rollout(pane, "two", sent)
    assert (res.rollout, res.rule) == (newer, "last prompt")
    assert resolve_rollout(pane, "one", sent).rollout == first  # typed long ago: start time decides


def test_resume_argument(codex) -> None:
    stand_ins, home, project = codex
    old = home.rollout(time.time() - 3 * 86400, project)
    tid = old.name[-42:-6]
    (project / "resume").write_text("sleep 300\n")
    pane = stand_ins.pane("", cwd=project, home=home.root, args=("resume", tid))
    res = resolve_rollout(pane)
    assert (res.rollout, res.rule) == (old, "resume argument")


def test_state_sqlite_is_read_read_only_and_may_be_absent_locked_or_broken(codex) -> None:
    stand_ins, home, project = codex
    pane = stand_ins.pane("sleep 300", cwd=project, home=home.root)
    t0 = started(pane)
    mine = home.rollout(t0 + 1.0, project)
    tid = mine.name[-42:-6]
    db = home.sqlite([(tid, mine, t0 + 1.0, str(project))], journal="delete")
    before = db.read_bytes()
    res = resolve_rollout(pane)
    assert res.rollout == mine and "state_5.sqlite: 1 threads" in step(res, "threads")
    assert db.read_bytes() == before and not Path(f"{db}-journal").exists()

    locker = sqlite3.connect(db)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        res = resolve_rollout(pane)
        assert res.rollout == mine and "not usable" in step(res, "threads")
    finally:
        locker.rollback()
        locker.close()

    db.write_bytes(b"this is not a database" * 100)
    res = resolve_rollout(pane)
    assert res.rollout == mine and "not usable" in step(res, "threads")
    db.unlink()
    assert "absent" in step(resolve_rollout(pane), "threads")


def test_sqlite_alone_finds_a_rollout_in_an_unexpected_folder(codex) -> None:
    """state_5.sqlite names the rollout path; the folder scan is only one of the sources."""
    stand_ins, home, project = codex
    pane = stand_ins.pane("sleep 300", cwd=project, home=home.root)
    t0 = started(pane)
    elsewhere = home.root / "archived"
    elsewhere.mkdir()
    moved = home.rollout(t0 + 1.0, project)
    moved = moved.rename(elsewhere / moved.name)
    home.sqlite([(moved.name[-42:-6], moved, t0 + 1.0, str(project))])
    assert resolve_rollout(pane).rollout == moved
