"""A tmux server batonpass (or a test) started and stops leaves no socket file behind: tmux 3.3 keeps it in
/tmp/tmux-UID after ``kill-server``, one file per demo run and per test. Only a socket nobody answers on is
removed: a server started again on the same name keeps its own."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio

from pipeline.system.tmux import Tmux, remove_socket_file
from tests.support.tmux import TmuxServer


def _started(name: str) -> Tmux:
    tmux = Tmux(socket_name=name, config_file="/dev/null")
    tmux.run_sync("new-session", "-d", "-s", "s", "sleep 60")
    return tmux


def test_kill_server_removes_its_socket_file() -> None:
    tmux = _started(f"baton-test-sock-{uuid.uuid4().hex[:8]}")
    path = tmux.socket_file
    assert path.is_socket()
    assert tmux.run_sync("display-message", "-p", "#{socket_path}").strip() == str(path)  # where tmux put it
    anyio.run(tmux.kill_server)
    assert not path.exists()


def test_a_socket_a_server_answers_on_is_kept(tmp_path: Path) -> None:
    tmux = _started(f"baton-test-sock-{uuid.uuid4().hex[:8]}")
    try:
        remove_socket_file(tmux.socket_file)  # as if an earlier server's kill raced a new one's start
        assert tmux.socket_file.is_socket()
        assert tmux.run_sync("has-session", "-t", "s") == ""
    finally:
        anyio.run(tmux.kill_server)
    not_a_socket = tmp_path / "plain"
    not_a_socket.write_text("mine")
    remove_socket_file(not_a_socket)
    assert not_a_socket.read_text() == "mine"


def test_the_test_fixture_leaves_no_socket_file(tmp_path: Path) -> None:
    server = TmuxServer(tmp_path)
    server.new_pane()
    path = server.tmux.socket_file
    assert path.is_socket()
    server.kill()
    assert not path.exists()
