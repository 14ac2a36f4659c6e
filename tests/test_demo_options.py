"""``baton demo`` and the common options: ``-L``/``-S`` name the demo's own tmux server (a new one: a server
already running there is refused, untouched); ``-c`` is refused, since the demo routes its own agents. Before,
all three were taken and silently ignored. ``--ask``: a turn that asks a person, answered by
``baton approve``; and what each hand-off hands on, the reviewer's answer too (issue #39)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest

from pipeline.system.tmux import Tmux
from tests.support.cli import BATON, baton, baton_env
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


def test_demo_ask_shows_a_turn_that_asks_answered_by_baton_approve_and_each_hand_off_shows_its_answer(
        tmp_path: Path) -> None:
    """``baton demo --ask``: alice's first prompt holds NEEDS_APPROVAL; the demo says what she asks and the
    ``baton approve`` line that answers it; ``baton status`` on the routes.yaml it wrote says she waits and
    for what; once approved the chain goes on, and each hand-off line shows the answer handed on (the
    reviewer's too, not its template's first line ``The reviewer (bob) says:``)."""
    name = f"{SOCKET_PREFIX}demo-{uuid.uuid4().hex[:6]}"
    env = baton_env({"XDG_STATE_HOME": str(tmp_path / "state")})
    demo = subprocess.Popen([*BATON, "demo", "--ask", "-L", name, "--handoffs", "2", "--work-s", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                            text=True)
    try:
        assert demo.stdout is not None
        lines: list[str] = []
        while not any("answer it: baton approve" in line for line in lines):
            line = demo.stdout.readline()
            assert line, (lines, demo.stderr.read() if demo.stderr else "")
            lines.append(line.rstrip("\n"))
        assert "alice waits for you: alice asks to run `touch demo.txt`: allow? [y/n]" in lines, lines
        approve = shlex.split(lines[-1].split("answer it: ", 1)[1].split("  (", 1)[0])
        assert approve[:3] == ["baton", "approve", "alice"], approve
        status = baton("status", "--json", *approve[3:], env={"XDG_STATE_HOME": str(tmp_path / "state")})
        alice = next(r for r in json.loads(status.out) if r["tile"] == "alice")
        assert (alice["state"], alice["waiting_for"]) == (
            "waiting: permission prompt", "alice asks to run `touch demo.txt`: allow? [y/n]"), alice
        answered = baton(*approve[1:], env={"XDG_STATE_HOME": str(tmp_path / "state")})
        assert answered.status == 0, (answered.out, answered.err)
        out, err = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.communicate()
    lines += out.splitlines()
    assert demo.returncode == 0, (lines, err)
    assert "alice was answered" in lines, lines
    handed = [line for line in lines if line.startswith("hand-off ")]
    assert len(handed) == 2, lines
    assert handed[0].endswith(': Draft 1 by alice, answering "Plan a small feature: a --version flag f…'), \
        handed
    assert handed[1].endswith(": Review 1 by bob: I read 3 lines (32 words)."), handed
    assert not Tmux(socket_name=name).server_answers()


def test_the_reviewers_hand_off_line_shows_its_answer_not_the_templates_first_line() -> None:
    done = baton("demo", "--handoffs", "2", "--work-s", "0.1", timeout=120)
    assert done.status == 0, (done.out, done.err)
    [reviewed] = [line for line in done.out.splitlines() if line.startswith("hand-off 2: bob -> alice")]
    assert reviewed.endswith(": Review 1 by bob: I read 3 lines (32 words)."), reviewed
