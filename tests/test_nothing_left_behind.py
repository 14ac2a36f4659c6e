"""A batonpass process that dies, however it dies, leaves nothing attached to the tmux server, and
``tmux kill-server`` afterwards ends the server.

The trap (tmux 3.3): the server itself reads a control client's stdin and writes its stdout. When a reply is
due after the reader died (a ``kill -9`` that lands while a command is on its way, or while tmux is busy),
the write fails, the output stays queued, and tmux never lets that client exit: the ``tmux -C`` process lives
on with parent 1, and ``kill-server`` then waits for it forever while refusing every new client ("server
exited unexpectedly"). Stopping the server (SIGSTOP) for a moment makes "tmux is busy" happen on demand.
"""

from __future__ import annotations

import os
import pty
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.support.agents import messages, start_agent
from tests.support.daemons import has_started, write_config
from tests.support.paths import REPO
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux]


def processes_of(socket: str) -> list[psutil.Process]:
    """Live processes (not zombies) whose command line names ``socket``: its server, clients, daemons."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and socket in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def describe(procs: list[psutil.Process]) -> str:
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} (parent {proc.ppid()}): {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            continue
    return "\n".join(out)


def server_pid(server: TmuxServer) -> int:
    return int(server.run("display-message", "-p", "#{pid}").strip())


def control_clients(server: TmuxServer) -> list[psutil.Process]:
    return [p for p in processes_of(server.socket) if "attach-session" in p.cmdline()]


def stop_server_and_check(server: TmuxServer) -> None:
    """``tmux kill-server`` ends the server, and nothing that names its socket is left running."""
    out = subprocess.run([*server.tmux.base, "kill-server"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    wait_for(lambda: not processes_of(server.socket), timeout=10,
             what="the server and every client of it to end")
    after = subprocess.run([*server.tmux.base, "list-sessions"], capture_output=True, text=True, timeout=10)
    assert "no server running" in after.stderr or "error connecting" in after.stderr, after.stderr


#: a process that holds a control-mode connection and dies (SIGKILL) with a command on its way
DIES_MID_COMMAND = """
import os, signal, sys
import anyio
from pipeline.system.tmux_control import ControlClient

async def main():
    control = ControlClient(sys.argv[1:])
    await control.run("display-message", "-p", "connected")
    print(control._proc.pid, flush=True)
    sys.stdin.readline()  # the test has stopped the server: what is written now waits, unread
    await control._write(b"list-panes -a\\n")
    os.kill(os.getpid(), signal.SIGKILL)

anyio.run(main)
"""


def test_a_process_killed_with_a_command_on_its_way_takes_its_control_client_with_it(
    tmux_server: TmuxServer,
) -> None:
    tmux_server.new_pane()
    server = psutil.Process(server_pid(tmux_server))
    child = subprocess.Popen([sys.executable, "-c", DIES_MID_COMMAND, *tmux_server.tmux.base],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert child.stdin is not None and child.stdout is not None
    client = psutil.Process(int(child.stdout.readline()))
    assert "attach-session" in client.cmdline()
    server.suspend()
    try:
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        server.resume()
    wait_for(lambda: not control_clients(tmux_server), timeout=10,
             what=f"the control client to end with its process:\n{describe(control_clients(tmux_server))}")
    stop_server_and_check(tmux_server)


def start_daemon(config: Path, err: Path) -> subprocess.Popen[bytes]:
    """``baton run`` in a session (and process group) of its own, as a shell starts a job; once running."""
    with err.open("w") as errs:
        daemon = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "-c", str(config)],
                                  stdout=subprocess.DEVNULL, stderr=errs, cwd=REPO, start_new_session=True)
    try:
        wait_for(lambda: has_started(err.read_text()) or daemon.poll() is not None, what="baton run")
    finally:
        if daemon.poll() is None and "running:" not in err.read_text():
            os.killpg(daemon.pid, signal.SIGKILL)
    assert daemon.poll() is None, err.read_text()
    return daemon


def test_a_daemon_killed_around_hand_offs_again_and_again_leaves_nothing_attached(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """``baton run`` (its whole process group) gets SIGKILL ten times while two demo agents hand off, some
    of the kills while tmux is busy; then the person stops tmux: the server ends and nothing is left."""
    kills = int(os.environ.get("BATON_LEFT_BEHIND_KILLS", "10"))
    rng = random.Random(int(os.environ.get("BATON_FAULT_SEED", "7")))
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a = start_agent(tmux_server, alog, "a", work_s=0.2)
    b = start_agent(tmux_server, blog, "b", work_s=0.2)
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
                          [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}], max_hops=2)
    server = psutil.Process(server_pid(tmux_server))
    for i in range(kills):
        daemon = start_daemon(config, tmp_path / f"daemon-{i}.err")
        try:
            wait_for(lambda: control_clients(tmux_server), what="the daemon's control-mode client")
            tmux_server.type(a, f"task {i}")  # a hands off to b, b back to a, until max_hops
            time.sleep(rng.uniform(0.0, 1.0))  # shapes the scenario: the kill lands mid hand-off
            busy = i % 2 == 1
            if busy:  # tmux busy when the daemon dies: the commands it wrote meanwhile wait, unread
                server.suspend()
                time.sleep(rng.uniform(0.2, 1.5))  # shapes the scenario: the daemon's next poll is written
            try:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait(timeout=10)
            finally:
                if busy:
                    server.resume()
        finally:
            if daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
        wait_for(lambda: not control_clients(tmux_server), timeout=10,
                 what=f"kill {i + 1}: the control client to end with the daemon:\n"
                      f"{describe(control_clients(tmux_server))}")
    assert any(m.startswith("task") for m in messages(blog)), "no hand-off happened between the kills"
    stop_server_and_check(tmux_server)


def test_a_board_killed_while_tmux_is_busy_leaves_nothing_attached(tmux_server: TmuxServer,
                                                                  tmp_path: Path) -> None:
    """``baton status --watch`` talks to tmux over the same control-mode connection: killed with SIGKILL
    while tmux owes it a reply, it takes its client with it. It runs in a terminal of its own (a pty), not
    in a pane of that server: there, its pane closing would end the session its client is attached to."""
    shell = tmux_server.new_pane()
    config = tmp_path / "routes.yaml"
    config.write_text(f'version: 1\ntiles:\n  sh: {{pane: "{shell}", agent: shell}}\nroutes: []\n')
    main, terminal = pty.openpty()
    board = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "-L", tmux_server.socket, "-c",
                              str(config), "status", "--watch"], stdin=terminal, stdout=terminal,
                             stderr=terminal, cwd=REPO, start_new_session=True,
                             env={**os.environ, "BATON_BOARD_LOOK_S": "0.1", "NO_COLOR": "1"})
    os.close(terminal)
    drain = threading.Thread(target=_read_until_closed, args=(main,), daemon=True)
    drain.start()
    try:
        wait_for(lambda: control_clients(tmux_server), what="the board's control-mode client")
        server = psutil.Process(server_pid(tmux_server))
        server.suspend()
        try:
            time.sleep(0.5)  # shapes the scenario: the board's next look is written and waits, unread
            board.kill()
            board.wait(timeout=10)
        finally:
            server.resume()
    finally:
        if board.poll() is None:
            board.kill()
            board.wait()
        drain.join(timeout=10)
    wait_for(lambda: not control_clients(tmux_server), timeout=10,
             what=f"the board's control client to end with it:\n{describe(control_clients(tmux_server))}")
    stop_server_and_check(tmux_server)


def _read_until_closed(fd: int) -> None:
    """Drain a pty's main side (what the board draws) so the board never blocks on its terminal."""
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
