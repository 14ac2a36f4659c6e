"""Which pane's Cline a session is, when a hub daemon runs the sessions of several TUIs: read from Cline's
log (tests/fixtures/cline-3.0.65/hub, recorded from three real TUIs sharing one hub: A in the project, B in
the same folder, C in another; B's and C's sessions run by the hub, their records naming the hub's pid)."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipeline.plugin.tools import iso_time, proc
from plugins.cline.launches import LaunchLog, log_path
from plugins.cline.resolve import ClineProcess, resolve_session
from tests.support.paths import FIXTURES

HUB = FIXTURES / "cline-3.0.65" / "hub"
PROJECT, OTHER = "/tmp/clexp/hub/cl/proj/my-app", "/tmp/clexp/hub/cl/proj/other"
#: the TUIs of the recording: pid, when its log says it started, its folder, the session it started
TUIS = {"a": (3042, "2026-12-07T05:22:19.900Z", PROJECT, "1796620941336_umdvk"),
        "b": (5265, "2026-12-07T05:22:32.428Z", PROJECT, "1796620954797_wavgv"),
        "c": (8954, "2026-12-07T05:22:42.247Z", OTHER, "1796620963791_fxx58")}
HUB_PID = 4142


def tui(name: str, data: Path = HUB) -> ClineProcess:
    """The recorded TUI ``name``, as if it still ran (nothing of it is read from /proc)."""
    pid, started, cwd, _ = TUIS[name]
    at = iso_time(started)
    assert at is not None
    fake = proc.Proc(pid=pid, ppid=1, comm="cline", exe="/x/cline", start_ticks=0, pgrp=pid, tpgid=pid)
    return ClineProcess(proc=fake, argv=("cline",), cwd=cwd, data_dir=data, data_from="test",
                        sessions_dir=data / "sessions", started_at=at, log_file=data / "logs" / "cline.log")


def test_the_log_names_the_sessions_each_process_started_whoever_runs_them() -> None:
    log = LaunchLog(HUB / "logs" / "cline.log")
    for pid, started, _, session in TUIS.values():
        at = iso_time(started)
        assert at is not None
        assert log.sessions_of(pid, at) == [session]
        assert log.sessions_of(pid, at + 3600) == []  # a reused pid's older lines are not its
    assert log.sessions_of(HUB_PID, 0) == []  # the hub daemon starts none itself
    assert log.started_by_others(3042) == {TUIS["b"][3], TUIS["c"][3]}
    assert LaunchLog(HUB / "nowhere.log").sessions_of(3042, 0) is None


def test_the_log_is_read_on_as_it_grows_and_again_when_it_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "cline.log"
    lines = (HUB / "logs" / "cline.log").read_bytes().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if b"1796620954797_wavgv" in ln and b"session.started" in ln)
    path.write_bytes(b"".join(lines[:cut]) + lines[cut][:50])  # B's line half written
    log = LaunchLog(path)
    assert log.sessions_of(5265, 0) == []
    with open(path, "ab") as f:
        f.write(lines[cut][50:] + b"".join(lines[cut + 1:]))
    assert log.sessions_of(5265, 0) == ["1796620954797_wavgv"]
    path.unlink()
    path.write_bytes(lines[0])  # rotated: a new file
    assert log.sessions_of(5265, 0) == []


def test_each_tui_sharing_the_hub_resolves_the_session_it_started() -> None:
    for name, (_, _, _, session) in TUIS.items():
        res = resolve_session(0, process=tui(name))
        assert res.session is not None and res.session.parent.name == session, (name, res.steps)
        assert res.rule == "log"


def test_a_tui_whose_first_prompt_is_still_to_come_takes_no_other_panes_session(tmp_path: Path) -> None:
    """B prompted first, A (started before B, in the same folder) not yet: A's session folder does not exist
    yet, and B's — run by the hub, so its record names no TUI — is B's, not A's (before the log was read,
    the newest session since A started in A's folder was taken for A's)."""
    data = tmp_path / "data"
    shutil.copytree(HUB, data)
    shutil.rmtree(data / "sessions" / TUIS["a"][3])
    res = resolve_session(0, process=tui("a", data))
    assert res.session is None, res.steps
    assert resolve_session(0, process=tui("b", data)).session == \
        data / "sessions" / TUIS["b"][3] / f"{TUIS['b'][3]}.json"


def test_without_a_log_the_sessions_another_process_started_are_still_told_by_time(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(HUB, data)
    (data / "logs" / "cline.log").unlink()  # CLINE_LOG_ENABLED=0
    res = resolve_session(0, process=tui("c", data))
    assert res.session is not None and res.session.parent.name == TUIS["c"][3] and res.rule == "start time"


def test_the_log_is_where_cline_writes_it() -> None:
    data = Path("/h/.cline/data")
    assert log_path(data, {}) == data / "logs" / "cline.log"
    assert log_path(data, {"CLINE_LOG_PATH": "/var/log/c.log"}) == Path("/var/log/c.log")
