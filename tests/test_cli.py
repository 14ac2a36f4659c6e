"""The `baton` command end to end: the demo, and `baton run` stopping cleanly on signals."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.system.tmux import Tmux
from tests.support.agents import demo_agent_command, messages
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = pytest.mark.tmux


def test_demo_shows_handoffs_and_leaves_nothing_running(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "demo", "--handoffs", "3", "--work-s", "0.5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    handoffs = re.findall(r"^hand-off (\d+): (\w+) -> (\w+) \(delivered", result.stdout, re.M)
    assert handoffs == [("1", "alice", "bob"), ("2", "bob", "alice"), ("3", "alice", "bob")]
    socket = re.search(r"tmux -L (\S+) attach", result.stdout).group(1)
    assert "--keep leaves it running" in result.stdout  # the attach hint says the server goes with the demo
    alive = subprocess.run(["tmux", "-L", socket, "has-session"], capture_output=True)
    assert alive.returncode != 0, "the demo left its tmux server running"
    assert not Tmux(socket_name=socket).socket_file.exists(), "the demo left its tmux socket file"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_run_stops_cleanly_on_signal(tmux_server: TmuxServer, tmp_path: Path, signum: int) -> None:
    log = tmp_path / "target.jsonl"
    shell = tmux_server.new_pane()
    target = tmux_server.new_pane(demo_agent_command(log=log, work_s=0.1))
    wait_for(lambda: "$" in tmux_server.capture(shell) and "demo❯" in tmux_server.capture(target))
    config = tmp_path / "routes.yaml"
    config.write_text(f"version: 1\ntmux: {{socket_name: {tmux_server.socket}}}\ntiles:\n"
                      f"  sh: {{pane: '{shell}', agent: shell}}\n  agent: {{pane: '{target}', agent: demo}}\n"
                      "routes:\n  - {from: sh, to: agent}\n")
    errfile = tmp_path / "daemon.err"
    with errfile.open("w") as errs:
        daemon = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "-v", "run", "-c", str(config)],
                                  stdout=subprocess.DEVNULL, stderr=errs, text=True)
    try:
        wait_for(
            lambda: daemon.poll() is not None or "running:" in errfile.read_text(), what="the daemon to start"
        )
        wait_for(lambda: "sh: shell prompt" in errfile.read_text(), what="the shell tile to learn its prompt")
        tmux_server.type(shell, "echo handed over")
        wait_for(lambda: messages(log), what="the hand-off through baton run")
        daemon.send_signal(signum)
        daemon.wait(timeout=10)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    err = errfile.read_text()
    assert daemon.returncode == 0, err
    assert messages(log) == ["handed over"]
    assert "stopping on " + signal.Signals(signum).name in err
    assert "Traceback" not in err


def test_check_subcommand_on_repo_example() -> None:
    repo = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "check"], cwd=repo, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
