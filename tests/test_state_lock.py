"""One `baton run` per journal: a second daemon on the same state folder is refused, whatever its host.

Two daemons on one journal race for the same turn ends, and with tiles on several hosts the target host's
daemon would take the source's record of a hand-off for its own and drop the message as a duplicate. The
lock dies with its process (SIGKILL included), so a crash never blocks the restart; so does its tmux
control-mode client, which would otherwise be left attached to the server.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.agents import demo_agent_command
from tests.support.daemons import write_config
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux]


def second_run(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "-c", str(config), *extra],
                          capture_output=True, text=True, timeout=60)


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_second_daemon_on_the_same_state_folder_is_refused_and_a_killed_one_leaves_no_lock(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory
) -> None:
    pane = tmux_server.new_pane(demo_agent_command("a", log=tmp_path / "a.jsonl"))
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": pane, "agent": "demo"}}, [])
    first = daemon_factory(config)
    first.start()
    first.wait_running()

    for extra in ([], ["--host", "elsewhere"]):
        out = second_run(config, *extra)
        assert out.returncode == 1, out.stderr
        assert f"baton run (pid {first.proc.pid}" in out.stderr
        assert "its own folder: XDG_STATE_HOME=" in out.stderr
        assert "Traceback" not in out.stderr
    assert first.proc.poll() is None  # the first one is untouched

    attached = [c for c in psutil.Process(first.proc.pid).children() if "attach-session" in c.cmdline()]
    assert attached, "the daemon talks to tmux over a control-mode client"
    first.kill()  # SIGKILL: no clean-up ran
    # nor does its control-mode client outlive it (it would keep `tmux kill-server` from ending)
    wait_for(lambda: not any(alive(c) for c in attached), what="the killed daemon's client to end with it")
    again = daemon_factory(config)
    again.start()
    again.wait_running()
    assert again.stop() == 0

    # a dry run keeps its journal in memory and takes no lock
    third = daemon_factory(config)
    third.start()
    third.wait_running()
    dry = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "--dry-run", "-c", str(config)],
                           stderr=subprocess.PIPE, text=True)
    try:
        assert dry.stderr is not None
        for line in dry.stderr:
            if "running:" in line:
                break
        assert dry.poll() is None
    finally:
        dry.terminate()
        dry.wait(timeout=10)
    assert third.stop() == 0
