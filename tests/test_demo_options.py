"""``baton demo`` and the common options: ``-L``/``-S`` name the demo's own tmux server (a new one: a server
already running there is refused, untouched); ``-c`` is refused, since the demo routes its own agents. Before,
all three were taken and silently ignored."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from pipeline.system.tmux import Tmux
from tests.support.cli import baton
from tests.support.tmux import SOCKET_PREFIX, TmuxServer

pytestmark = [pytest.mark.tmux]

QUICK = ("--handoffs", "1", "--work-s", "0.1")


def test_demo_minus_L_starts_its_server_under_that_name_and_stops_it() -> None:
    name = f"{SOCKET_PREFIX}demo-{uuid.uuid4().hex[:6]}"
    done = baton("demo", "-L", name, *QUICK, timeout=120)
    assert done.status == 0, (done.out, done.err)
    assert f"watch them with:  tmux -L {name} attach" in done.out, done.out
    assert re.search(r"demo: 1 hand-offs? in", done.out), done.out
    server = Tmux(socket_name=name)
    assert not server.server_answers() and not server.socket_file.exists()


def test_demo_minus_S_starts_its_server_at_that_path(tmp_path: Path) -> None:
    path = tmp_path / "demo.sock"
    done = baton("demo", "-S", str(path), *QUICK, timeout=120)
    assert done.status == 0, (done.out, done.err)
    assert f"watch them with:  tmux -S {path} attach" in done.out, done.out
    assert not Tmux(socket_path=str(path)).server_answers() and not path.exists()


def test_demo_refuses_a_server_that_already_runs_and_leaves_it_alone(tmux_server: TmuxServer) -> None:
    pane = tmux_server.new_pane("sleep 600")
    refused = baton("demo", "-L", tmux_server.socket, *QUICK)
    refused.one_line_error(2, f"a tmux server already runs at -L {tmux_server.socket}", "leave -L out")
    assert refused.out == ""
    assert pane in tmux_server.run("list-panes", "-a", "-F", "#{pane_id}").split()  # untouched


def test_demo_refuses_minus_c_naming_what_uses_a_routes_file(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    routes.write_text("version: 1\n")
    baton("demo", "-c", str(routes), *QUICK).one_line_error(2, f"-c {routes} is not used", "baton run -c")
