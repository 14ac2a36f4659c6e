"""A newcomer's first day again (#15, after #17's sweep): each command run as a new user runs it — no
routes.yaml, outside tmux, no tmux server, a pane where the agent is not running, empty input, a terminal
narrower than 80 columns for the board — and what each of them said that was unclear or wrong. Everything
through the real command, as a person runs it."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from pipeline.plugin.usage import SessionUsage
from pipeline.system.tmux import Tmux, remove_socket_file
from pipeline.views.board import Board, columns, render
from tests.support.cli import (
    BATON,
    baton,
    baton_env,
    baton_read_by_head,
    json_lines,
    shell_ready,
    start_baton,
    write_routes,
)
from tests.support.daemons import has_started
from tests.support.journal import add_handoff
from tests.support.paths import REPO
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

#: what a first-day user runs first
COMMANDS = ["status", "plugins", "check", "up", "demo", "resolve", "extract", "preview", "send", "history",
            "run", "bus", "hooks install", "approve", "deny", "retry", "hold", "resume"]


# ---- without a routes.yaml ------------------------------------------------------------------------------


def test_without_a_routes_yaml_each_command_says_where_it_looked_and_the_ways_on(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    for command in (["status"], ["status", "--watch"], ["status", "--json"], ["check"], ["up"], ["run"],
                    ["preview", "a->b"]):
        result = baton(*command, cwd=tmp_path, env=env)
        line = result.one_line_error(1, f"no routes.yaml in {tmp_path}", "-c FILE", "baton demo")
        assert line.startswith(f"baton {command[0]}: ") and "No such file" not in line, line
    verdict = json.loads(baton("check", "--json", cwd=tmp_path, env=env).out)
    assert verdict["ok"] is False and "no routes.yaml in" in verdict["problems"][0]["message"]
    # a file named with -c is named back as it was (FILE:LINE:COL)
    named = baton("-c", "nope.yaml", "status", cwd=tmp_path, env=env)
    assert named.status == 1 and "nope.yaml:1:1: error: cannot read" in named.err


def test_a_tab_in_routes_yaml_and_a_config_without_tiles_are_named(tmp_path: Path) -> None:
    config = tmp_path / "routes.yaml"
    config.write_text('version: 1\ntiles:\n\ta: {pane: "%1", agent: shell}\n')
    result = baton("check", cwd=tmp_path)
    assert result.status == 1, result.err
    assert "routes.yaml:3:1: error: invalid YAML: a tab character: YAML indents with spaces" in result.err
    config.write_text("version: 1\ntiles: {}\n")
    empty = baton("status", cwd=tmp_path)
    assert empty.status == 0 and "routes.yaml names no tiles" in empty.err, empty.err


def test_a_host_with_none_of_the_tiles_is_named_with_the_hosts_routes_yaml_has(tmp_path: Path) -> None:
    """``--host lapto`` (a typo), or a machine whose name routes.yaml does not use: an empty table, or
    nothing at all, said nothing about why."""
    socket = f"baton-newcomer-hosts-{os.getpid()}"
    write_routes(tmp_path, socket, {"coder": {"pane": "%1", "agent": "shell", "host": "laptop"},
                                    "tests": {"pane": "%2", "agent": "shell", "host": "server"}})
    where = "none of the 2 tiles of routes.yaml is on host 'lapto': they are on laptop, server"
    status = baton("status", "--host", "lapto", cwd=tmp_path)
    status.one_line_error(0, f"baton status: {where}; name one with --host NAME")
    here = baton("status", cwd=tmp_path)
    here.one_line_error(0, "is on this machine (host '", "they are on laptop, server")
    baton("up", "--host", "lapto", cwd=tmp_path).one_line_error(0, f"baton up: nothing to bring up: {where}")
    err = tmp_path / "run.err"
    daemon = start_baton("run", "--host", "lapto", stderr=err, cwd=tmp_path)
    try:
        wait_for(lambda: has_started(err.read_text()), what="the daemon to start")
        assert f"baton run: {where}" in err.read_text(), err.read_text()
    finally:
        daemon.terminate()
        daemon.wait(10)
    # the tiles of the host named are there, as before
    rows = json.loads(baton("status", "--host", "laptop", "--json", cwd=tmp_path).out)
    assert [row["tile"] for row in rows] == ["coder"]


# ---- --help ends with examples -----------------------------------------------------------------------------


def test_every_commands_help_ends_with_examples_within_80_columns() -> None:
    for command in ["", *COMMANDS]:
        result = baton(*command.split(), "--help", env={"COLUMNS": "80"})
        assert result.status == 0, (command, result.err)
        examples = result.out.split("\nexamples:\n", 1)
        assert len(examples) == 2 and f"baton {command}".rstrip() in examples[1], (command, result.out)
        assert all(columns(line) <= 80 for line in result.out.splitlines()), (command, result.out)


# ---- no tmux server, a pane without its agent --------------------------------------------------------------


def test_no_tmux_server_is_said_once_with_what_to_do_and_never_started(tmp_path: Path) -> None:
    socket = f"baton-newcomer-none-{os.getpid()}"
    config = write_routes(tmp_path, socket, {"coder": {"pane": "%0", "agent": "claude"},
                                             "tests": {"pane": "work:0.1", "agent": "shell"}},
                          [{"from": "coder", "to": "tests"}])
    result = baton("-c", str(config), "status")
    result.one_line_error(3, "none of the 2 tiles can be looked at: no tmux server is running at", "-L NAME")
    assert "error" not in result.out  # not once per tile as well
    # send and resolve read a routes.yaml only for its server: what it says about its routes is not theirs
    (tmp_path / "here").mkdir()
    write_routes(tmp_path / "here", socket, {"coder": {"pane": "%0", "agent": "claude"},
                                             "tests": {"pane": "%1", "agent": "shell"}},
                 [{"from": "coder", "to": "tests", "transform": {"type": "ai-routing"}}])
    for command in (["resolve", "%0"], ["send", "%0", "hi"]):
        baton(*command, cwd=tmp_path / "here", env={"ANTHROPIC_API_KEY": ""}).one_line_error(
            1, "no tmux server is running at", "start tmux")
    # baton run says why the tiles are gone: not "no such pane" when there is no server at all
    err = tmp_path / "run.err"
    daemon = start_baton("run", "-c", str(config), stderr=err)
    try:
        wait_for(lambda: has_started(err.read_text()), what="the daemon to start")
        assert "tile coder: pane %0 is gone (no tmux server is running: start tmux, or `baton up`" \
            in err.read_text(), err.read_text()
    finally:
        daemon.terminate()
        daemon.wait(10)
    # looking starts no server (tmux's control mode would start one, for a moment, and race the look)
    assert subprocess.run(["tmux", "-L", socket, "list-sessions"], capture_output=True).returncode != 0


@pytest.mark.tmux
def test_a_tile_whose_agent_is_not_running_has_no_last_answer(tmux_server: TmuxServer,
                                                               tmp_path: Path) -> None:
    shell = shell_ready(tmux_server)
    tmux_server.type(shell, "echo this shell output is no answer")
    wait_for(lambda: "\nthis shell output" in tmux_server.capture(shell), what="the echo")
    other = shell_ready(tmux_server)
    config = write_routes(tmp_path, tmux_server.socket, {"coder": {"pane": shell, "agent": "claude"},
                                                          "tests": {"pane": other, "agent": "shell"}},
                          [{"from": "coder", "to": "tests"}])
    rows = json.loads(baton("-c", str(config), "status", "--json").out)
    assert (rows[0]["state"], rows[0]["last_response"]) == ("absent: bare shell", None), rows[0]
    baton("-c", str(config), "preview", "coder->tests").one_line_error(
        1, "no claude runs in its pane (it shows a bare bash)", "--input FILE")


@pytest.mark.tmux
def test_up_with_an_agent_not_installed_leaves_the_other_tiles_their_panes(tmux_server: TmuxServer,
                                                                           tmp_path: Path) -> None:
    tiles = {"coder": {"pane": "work:0.0", "agent": "claude", "command": "no-such-agent-cli --go"},
             "tests": {"pane": "work:0.1", "agent": "shell", "command": "bash --norc --noprofile"}}
    config = write_routes(tmp_path, tmux_server.socket, tiles, [{"from": "coder", "to": "tests"}])
    first = baton("up", "-c", str(config))
    line = first.one_line_error(1, "coder  exited   %0 (work:0.0): command 'no-such-agent-cli --go' exited",
                                "its pane stays, dead", "run baton up again")
    assert "tests" in first.out and "created" in first.out, first.out
    created = first.out.split("created", 1)[1].split()[0]
    # removing coder's dead pane would have made tests' pane work:0.0, and work:0.1 nobody's
    rows = {r["tile"]: r for r in json.loads(baton("-c", str(config), "status", "--json").out)}
    assert (rows["tests"]["pane_id"], rows["tests"]["state"]) == (created, "idle"), (line, rows)
    assert rows["coder"]["state"] == "gone" and "exited" in rows["coder"]["error"] \
        and "baton up starts it again" in rows["coder"]["error"], rows["coder"]
    tiles["coder"]["command"] = "sleep 300"
    config = write_routes(tmp_path, tmux_server.socket, tiles, [{"from": "coder", "to": "tests"}])
    again = baton("up", "-c", str(config))
    assert again.status == 0, again
    assert [ln.split()[1] for ln in again.out.splitlines()] == ["restarted", "exists"], again


# ---- empty input, a file that is not a transcript ----------------------------------------------------------


def test_empty_text_and_a_file_that_is_no_transcript_are_named(tmp_path: Path) -> None:
    baton("send", "%0", "-", input="").one_line_error(1, "standard input is empty: nothing to type")
    baton("send", "%0", "  ").one_line_error(1, "the text is empty: nothing to type")
    config = tmp_path / "routes.yaml"
    config.write_text("version: 1\ntiles: {}\n")
    baton("extract", str(config)).one_line_error(1, "not JSON", "is it a Claude Code transcript?",
                                                 "--agent NAME")


# ---- the board in a narrow terminal ---------------------------------------------------------------------


def test_in_a_narrow_terminal_the_state_keeps_its_words_and_a_gone_tile_says_why() -> None:
    now = time.time()
    board = Board([("coder", "claude"), ("reviewer", "codex"), ("ghost", "claude")], "routes.yaml")
    board.update({"tile": "coder", "state": "waiting (permission prompt)"}, now=now)
    board.update({"tile": "reviewer", "state": "busy"}, now=now)
    board.update({"tile": "ghost", "state": "gone", "error": "can't find pane %9 on tmux -L agents"}, now=now)
    board.views["coder"].usage = SessionUsage(1000, 200, cost_usd=0.5)
    wide = render(board, 80, 24, now)
    assert wide[1].split() == ["TILE", "AGENT", "STATE", "QUEUED", "TOKENS", "COST"] and "$0.50" in wide[2]
    assert "└ (can't find pane %9 on tmux -L agents)" in wide[7]
    for width, heads in ((60, ["QUEUED", "TOKENS"]), (50, []), (44, [])):
        lines = render(board, width, 24, now)
        assert lines[1].split() == ["TILE", "AGENT", "STATE", *heads], (width, lines[1])
        assert "waiting: permission prompt" in lines[2] and all(columns(line) <= width for line in lines)


@pytest.mark.tmux
def test_the_board_in_a_50_column_pane_resized_then_quit(tmux_server: TmuxServer, tmp_path: Path) -> None:
    shell = shell_ready(tmux_server)
    config = write_routes(tmp_path, tmux_server.socket, {"tests": {"pane": shell, "agent": "shell"},
                                                          "ghost": {"pane": "%999", "agent": "claude"}},
                          [{"from": "tests", "to": "ghost"}])
    board = [sys.executable, "-m", "pipeline.cli", "-c", str(config), "status", "--watch"]
    script = shlex.join(board) + "; echo EXIT=$?; sleep 60"
    pane = tmux_server.new_pane(f"bash --norc --noprofile -c {shlex.quote(script)}", cwd=REPO, width=50,
                                height=12, env={"NO_COLOR": "1"})

    def screen() -> list[str]:
        return tmux_server.run("capture-pane", "-p", "-t", pane).splitlines()

    wait_for(lambda: any("└ (can't find pane %999" in line for line in screen()), 20,
             what="why ghost is gone")
    assert all(columns(line) <= 50 for line in screen()) and "idle" in "\n".join(screen())
    tmux_server.run("resize-window", "-t", pane, "-x", "36", "-y", "10")
    wait_for(lambda: screen() and all(columns(line) <= 36 for line in screen()) and
             any(line.startswith("tests ") for line in screen()), 10, what="the board redrawn at 36 columns")
    tmux_server.run("send-keys", "-t", pane, "q")
    wait_for(lambda: any("EXIT=0" in line for line in screen()), 10, what="q quitting the narrow board")
    assert not any("Traceback" in line for line in screen())


# ---- a value that starts with - ------------------------------------------------------------------------


def test_since_takes_a_duration_or_a_time_and_nothing_else() -> None:
    """``--since 5m`` is five minutes ago; a signed duration (``-2h``: argparse would take it for an option)
    and one that reaches back before 1970 are refused in one line, exit 2, not read as something else."""
    journal = Journal(default_journal_path())
    add_handoff(journal, "a->b", "a", "b", "old", "delivered", ago_s=3600)
    add_handoff(journal, "a->b", "a", "b", "new", "delivered", ago_s=60)
    for since in (["--since", "5m"], ["--since", "0.05h"], ["-n", "5", "--since", "5m", "--json"]):
        result = baton("history", "--json", *since)
        assert result.status == 0 and result.err == "", (since, result)
        assert [row["turn_id"] for row in json_lines(result.out)] == ["new"], since
    for since in (["--since", "-2h"], ["--since=-2h"], ["--since", "+2h"]):
        baton("history", *since).one_line_error(
            2, f"baton history: error: argument --since: {since[-1].split('=')[-1]} is not a duration: a "
            "duration counts back from now by itself; write 2h; see baton history -h")
    for absurd in ("999999999999999999999999d", "99999999d"):
        baton("history", "--since", absurd).one_line_error(
            2, "argument --since: ", "reaches back before 1970 (no journal is that old): give a shorter one")
    baton("history", "--since", "-yesterday").one_line_error(
        2, "argument --since: '-yesterday' reads as an option, not as its value", "write --since=-yesterday")


@pytest.mark.parametrize(("args", "needles"), [
    (["history", "--tile", "-x"], ["baton history: error: argument --tile: '-x' reads as an option",
                                   "write --tile=-x"]),
    (["history", "--route"], ["argument --route: expected a value after it"]),
    (["-L"], ["baton: error: argument -L: expected a value after it"]),
    (["send", "%0", "-hello"], ["'-hello' reads as options, not as a value",
                                "goes after --, as in -- -hello"]),
    (["send", "%0", "-v"], ["required: text", "as in -- -v"]),
    (["preview", "-x"], ["required: route", "as in -- -x"]),
    (["history", "--jsn"], ["baton history: error: unrecognized arguments: --jsn (did you mean --json?)",
                            "see baton history -h"]),
    (["status", "extra"], ["baton status: error: unrecognized arguments: extra", "see baton status -h"]),
    (["history", "--json=yes"], ["argument --json takes no value (--json=yes)"]),
    (["demo", "--work-s", "-1e3"], ["argument --work-s: -1e3 is out of range"]),
    (["history", "-n", "-5"], ["argument -n/--limit: -5 is out of range"]),
])
def test_a_value_taken_for_an_option_is_named_with_the_way_to_write_it(args: list[str],
                                                                        needles: list[str]) -> None:
    baton(*args).one_line_error(2, *needles)


@pytest.mark.tmux
def test_text_that_starts_with_a_dash_is_sent_after_double_dash(tmux_server: TmuxServer) -> None:
    """The way the error above names works: ``baton send %N -- -hello``."""
    shell = shell_ready(tmux_server)
    result = baton("send", "-L", tmux_server.socket, "--agent", "shell", shell, "--", "-hello")
    assert result.status == 0, result
    wait_for(lambda: "-hello: command not found" in tmux_server.capture(shell), what="bash running -hello")


# ---- Ctrl-C in the demo --------------------------------------------------------------------------------


@pytest.mark.tmux
@pytest.mark.parametrize(("signum", "presses", "keep"), [
    (signal.SIGINT, 1, False), (signal.SIGINT, 2, False), (signal.SIGINT, 1, True),
    (signal.SIGTERM, 1, False)])
def test_ctrl_c_stops_the_demo_saying_how_far_it_got_and_what_it_leaves(signum: signal.Signals, presses: int,
                                                                        keep: bool) -> None:
    """Ctrl-C, as a terminal sends it: to the demo's whole process group (the tmux commands it runs too);
    twice as an impatient person does; or a ``kill``. One line says what stopped and what is left, exit
    status 128 + the signal (130 for Ctrl-C)."""
    demo = subprocess.Popen([*BATON, "demo", "--handoffs", "30", "--work-s", "0.2", *(["--keep"] * keep)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, env=baton_env(None), start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    socket = ""
    try:
        assert demo.stdout is not None
        first = demo.stdout.readline()
        socket = re.search(r"tmux -L (\S+) attach", first).group(1)  # type: ignore[union-attr]
        while not demo.stdout.readline().startswith("hand-off 1:"):
            pass
        for _ in range(presses):
            os.killpg(demo.pid, signum) if signum == signal.SIGINT else demo.send_signal(signum)
        status = demo.wait(timeout=30)
        out, err = demo.communicate()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        alive = bool(socket) and subprocess.run(["tmux", "-L", socket, "has-session"],
                                                capture_output=True).returncode == 0
        if alive and keep:
            subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
        if keep and socket:  # the test stopped the kept server: its socket file is the test's to remove
            remove_socket_file(Tmux(socket_name=socket).socket_file)
    assert status == 128 + signum and err == "", (status, out, err)
    last = out.strip().splitlines()[-1]
    by = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    stopped = re.fullmatch(rf"demo: stopped by {by} after (\d+) of 30 hand-offs; (.*)", last)
    assert stopped and 1 <= int(stopped.group(1)) < 30, out
    assert alive == keep
    if keep:
        assert stopped.group(2) == (f"its tmux server is left running (--keep): watch it with  tmux -L "
                                    f"{socket} attach  and stop it with  tmux -L {socket} kill-server")
    else:
        assert stopped.group(2) == f"its tmux server (tmux -L {socket}) is stopped and its files are removed"


@pytest.mark.tmux
def test_the_demo_piped_into_head_ends_when_head_has_its_lines() -> None:
    """``baton demo | head -3``: a closed standard output was an adapter failing (a log line), restarted
    every second, until the demo's own 90 s time-out; now the demo ends there, and cleans up."""
    status, (first, _), err = baton_read_by_head("demo", "--handoffs", "30", "--work-s", "0.2", lines=2)
    socket = re.search(rb"tmux -L (\S+) attach", first).group(1)  # type: ignore[union-attr]
    assert status == 0
    assert err == b""
    assert subprocess.run(["tmux", "-L", socket.decode(), "has-session"], capture_output=True).returncode != 0
