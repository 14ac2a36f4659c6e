"""Every mistake a person can make on the command line ends in one line saying what is wrong — never a
traceback, never a hang, never a prompt typed into a pane nobody named (#17, the CLI part of #16)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from pipeline.cmdline.options import MAX_INPUT_BYTES
from pipeline.system.tmux import PaneGone
from tests.support.cli import baton
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer


def routes(tmp_path: Path, tiles: dict, routes: list | None = None, **top) -> Path:
    path = tmp_path / "routes.yaml"
    path.write_text(json.dumps({"version": 1, **top, "tiles": tiles, "routes": routes or []}))
    return path


# ---- a blank pane target is refused at every layer ---------------------------------------------------


@pytest.mark.parametrize("pane", ["", "   ", "title:", "title:  "])
def test_check_refuses_an_empty_pane(tmp_path: Path, pane: str) -> None:
    config = routes(tmp_path, {"a": {"pane": pane, "agent": "shell"}})
    result = baton("check", "-c", str(config))
    assert result.status == 1 and "tiles.a.pane: the pane is empty" in result.err, result.err


@pytest.mark.parametrize("command", [["send", "{p}", "echo x"], ["resolve", "{p}"]])
@pytest.mark.parametrize("pane", ["", " ", "\t"])
def test_send_and_resolve_refuse_an_empty_pane_before_tmux(tmux_server: TmuxServer, command: list[str],
                                                           pane: str) -> None:
    shell = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(shell))
    before = tmux_server.capture(shell)
    args = [a.replace("{p}", pane) for a in command]
    line = baton(*args, "-L", tmux_server.socket).one_line_error(2, "the pane is empty")
    named = "pane" if command[0] == "send" else "TILE|PANE"
    assert line.startswith(f"baton {command[0]}: error: argument {named}:")
    assert tmux_server.capture(shell) == before  # nothing typed into the current pane


def test_preview_refuses_an_empty_route(tmp_path: Path) -> None:
    config = routes(tmp_path, {"a": {"pane": "%1", "agent": "shell"}, "b": {"pane": "%2", "agent": "shell"}},
                    [{"from": "a", "to": "b"}])
    baton("preview", " ", "-c", str(config)).one_line_error(2, "the route is empty")


@pytest.mark.parametrize("target", ["", " "])
def test_the_tmux_client_refuses_a_blank_target_whoever_asks(tmux_server: TmuxServer, target: str) -> None:
    shell = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(shell))
    before = tmux_server.capture(shell)
    with pytest.raises(PaneGone, match="empty pane target"):
        tmux_server.run("send-keys", "-t", target, "-l", "echo typed")
    assert tmux_server.capture(shell) == before


# ---- tracebacks that are now one line ------------------------------------------------------------------


def test_up_names_a_command_that_exits_at_once(tmux_server: TmuxServer, tmp_path: Path) -> None:
    shell = tmux_server.new_pane()
    config = routes(tmp_path, {"a": {"pane": shell, "agent": "shell"},
                               "b": {"pane": "work:0.0", "agent": "shell", "command": "no-such-agent-cli"}},
                    tmux={"socket_name": tmux_server.socket})
    result = baton("up", "-c", str(config))
    line = result.one_line_error(1)
    assert line.split(None, 2)[:2] == ["b", "exited"], line
    # the status, and what the command printed (a shell's "not found" stands for the status tmux 3.3 may lose)
    assert line.split(None, 2)[2].startswith("command 'no-such-agent-cli' exited (status 127): "), line
    assert result.out == f"a  no command  {shell} (s1:0.0) already there; nothing to start (no `command:`)\n"
    panes = tmux_server.run("list-panes", "-a", "-F", "#{pane_id} #{pane_dead}").split()
    assert panes == [shell, "0"]  # the dead pane is not left behind


@pytest.mark.parametrize("command", [["resolve", "%0"], ["send", "%0", "hi"]])
def test_an_unknown_agent_is_one_line(tmux_server: TmuxServer, command: list[str]) -> None:
    tmux_server.new_pane()
    baton(*command, "--agent", "bogus", "-L", tmux_server.socket).one_line_error(
        1, f"baton {command[0]}: unknown agent 'bogus'; known: ", "claude")


@pytest.mark.parametrize("args,needle", [
    (["demo", "--handoffs", "-1"], "argument --handoffs: -1 is out of range"),
    (["demo", "--handoffs", "many"], "'many' is not a whole number"),
    (["demo", "--work-s", "-1"], "argument --work-s: -1 is out of range"),
    (["demo", "--work-s", "nan"], "argument --work-s: nan is out of range"),
    (["history", "-n", "-1"], "argument -n/--limit: -1 is out of range (1 to 1000000)"),
    (["history", "-n", "0"], "argument -n/--limit: 0 is out of range"),
    (["status", "-L", ""], "the socket name is empty"),
    (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
])
def test_bad_values_are_refused_by_argparse_in_one_line(args: list[str], needle: str) -> None:
    line = baton(*args).one_line_error(2, needle)
    assert line.endswith(" -h")  # where the usage is


@pytest.mark.parametrize("command", [["demo"], ["up"], ["status"], ["run"], ["send", "%0", "hi"],
                                     ["resolve", "%0"], ["preview", "a->b", "--input", "-"]])
def test_tmux_missing_from_path_is_one_line(tmp_path: Path, command: list[str]) -> None:
    routes(tmp_path, {"a": {"pane": "s:0.0", "agent": "shell", "command": "bash"},
                       "b": {"pane": "%3", "agent": "shell"}}, [{"from": "a", "to": "b"}])
    empty = tmp_path / "bin"
    empty.mkdir()
    result = baton(*command, cwd=tmp_path, input="an answer", env={"PATH": str(empty)}, timeout=60)
    if command[0] == "status":  # every tile unreachable the same way: said once (not once per tile), exit 3
        assert result.status == 3 and "tmux is not installed" not in result.out
        result.one_line_error(3, "none of the 2 tiles can be looked at: tmux is not installed")
    elif command[0] == "preview":  # the answer was given: preview needs no pane
        assert result.status == 0 and result.out == "an answer\n", result.err
    else:
        result.one_line_error(1, "tmux is not installed (no `tmux` on PATH)")


# ---- extract: clear words, never a hang ----------------------------------------------------------------


def test_extract_names_a_missing_file(tmp_path: Path) -> None:
    line = baton("extract", str(tmp_path / "nope.jsonl")).one_line_error(1)
    assert line == f"baton extract: {tmp_path / 'nope.jsonl'}: no such file"


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode", "copilot"])
def test_extract_refuses_a_folder(tmp_path: Path, agent: str) -> None:
    baton("extract", str(tmp_path), "--agent", agent).one_line_error(1, "is a folder")


def test_extract_refuses_a_fifo_instead_of_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    baton("extract", str(fifo), timeout=30).one_line_error(1, "is not a regular file")


def test_extract_an_unknown_agent_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text("{}\n")
    baton("extract", str(tmp_path / "t.jsonl"), "--agent", "bogus").one_line_error(1, "unknown agent 'bogus'")


def test_extract_an_opencode_file_that_is_no_store(tmp_path: Path) -> None:
    junk = tmp_path / "opencode.db"
    junk.write_bytes(b"not sqlite at all\n" * 100)
    result = baton("extract", str(junk), "--agent", "opencode")
    assert result.status == 1 and "Traceback" not in result.err and str(junk) in result.err


def test_extract_a_copilot_file_that_is_no_events_file(tmp_path: Path) -> None:
    junk = tmp_path / "events.jsonl"
    junk.write_bytes(b"\x00\xff not json\n[1, 2]\n" * 100)
    baton("extract", str(junk), "--agent", "copilot").one_line_error(1, "holds no prompt")


# ---- input size -------------------------------------------------------------------------------------------


def test_send_refuses_input_over_8_mb_and_types_nothing(tmux_server: TmuxServer) -> None:
    shell = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(shell))
    before = tmux_server.capture(shell)
    result = baton("send", shell, "-", "-L", tmux_server.socket, input=b"x" * (MAX_INPUT_BYTES + 1))
    result.one_line_error(1, "standard input is over 8 MB", "nothing was typed")
    assert tmux_server.capture(shell) == before


def test_preview_refuses_an_input_file_over_8_mb(tmp_path: Path) -> None:
    config = routes(tmp_path, {"a": {"pane": "%1", "agent": "shell"}, "b": {"pane": "%2", "agent": "shell"}},
                    [{"from": "a", "to": "b"}])
    big = tmp_path / "big.txt"
    with big.open("wb") as f:
        f.truncate(MAX_INPUT_BYTES + 1)
    baton("preview", "a->b", "-c", str(config), "--input", str(big)).one_line_error(1, "is over 8 MB")
    ok = baton("preview", "a->b", "-c", str(config), "--input", "-", input="y" * 1000)
    assert (ok.status, ok.out) == (0, "y" * 1000 + "\n"), ok.err


# ---- routes.yaml values the CLI used to take --------------------------------------------------------------


@pytest.mark.parametrize(
    "setting", ["give_up_s: true", "catch_up_s: '300'", "max_hops: 2.5", "give_up_s: .nan", "max_per_hour: 0"]
)
def test_settings_numbers_are_strict(tmp_path: Path, setting: str) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(f"version: 1\ntiles:\n  a: {{pane: '%1'}}\nsettings:\n  {setting}\n")
    result = baton("check", "-c", str(path))
    assert result.status == 1 and f"{path}:5:" in result.err and "settings." in result.err, result.err


def test_a_list_of_known_tiles_is_capped(tmp_path: Path) -> None:
    tiles = {f"tile{i:04}": {"pane": f"%{i}", "agent": "shell"} for i in range(2000)}
    config = routes(tmp_path, tiles, [{"from": "nosuch", "to": "tile0001"}])
    result = baton("check", "-c", str(config))
    assert result.status == 1
    [line] = [ln for ln in result.err.splitlines() if "nosuch" in ln]
    assert len(line) < 400 and "(1990 more)" in line, line


#: run as `python -c`: the ``baton`` script's own start, with the CLI's import held at one of its modules
#: until a signal comes (so the Ctrl-C lands mid-import on every machine, not on a lucky timing)
HELD_IMPORT = """
import sys, time
class Hold:
    def find_spec(self, name, path=None, target=None):
        if name == "pipeline.cmdline.examples":
            print("loading", flush=True)
            time.sleep(60)
        return None
sys.meta_path.insert(0, Hold())
from pipeline.launch import main
sys.exit(main())
"""


def test_ctrl_c_while_baton_is_still_loading_exits_130_without_a_traceback() -> None:
    """Importing the CLI takes a noticeable moment; a Ctrl-C then printed a traceback (14 times out of 20
    Ctrl-Cs sent 20–210 ms after `baton --help` started, before the ``baton`` script pointed at
    :mod:`pipeline.launch`)."""
    [script] = [e for e in entry_points(group="console_scripts") if e.name == "baton"]
    assert script.value == "pipeline.launch:main"
    # as from a person's shell: Ctrl-C at its default (this test process may ignore it, and an ignored
    # SIGINT is inherited: the in-process demo tests leave it ignored, as `baton demo` does on its way out)
    proc = subprocess.Popen([sys.executable, "-c", HELD_IMPORT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "loading\n"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err, err
