"""``baton send`` is the dispatcher's delivery, with the same checks (#31 item 4), and ``send``/``resolve``
take a tile's name (#34 item 10) — through the real ``baton`` command, into real tmux panes.

A pane that belongs to a tile of routes.yaml (by the tile's name, or by a pane target that is the tile's
pane) is expected to run that tile's agent; a pane without an agent of the kind expected — a bare shell,
where the text would run as a command — is refused with nothing typed, with or without ``--agent``. Only
``--force`` types into whatever runs there. A refused send is proven by a marker file the command would
have created: it is not there."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from pipeline.engine.actions import Action, perform
from tests.support.agents import messages, start_agent, transcript_answers
from tests.support.cli import BATON, baton, baton_env, json_lines
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer

pytestmark = pytest.mark.tmux


def write_routes(folder: Path, socket: str, tiles: dict) -> Path:
    config = folder / "routes.yaml"
    config.write_text(json.dumps({"version": 1, "tmux": {"socket_name": socket}, "tiles": tiles,
                                  "routes": []}))
    return config


def shell_ready(tmux_server: TmuxServer) -> str:
    pane = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(pane), what="the shell's prompt")
    return pane


def history(*args: str) -> list[dict]:
    result = baton("history", "--json", *args)
    assert result.status == 0, result
    return json_lines(result.out)


def handoffs(*args: str) -> list[dict]:
    """The hand-offs ``baton history`` lists (an action's line has ``kind: action``)."""
    return [r for r in history(*args) if "kind" not in r]


# ---- a pane without the agent expected is refused: nothing typed ----------------------------------------


@pytest.mark.parametrize(("declared", "agent", "by_tile_name"), [
    (True, [], False), (True, ["--agent", "claude"], False),
    (True, [], True), (True, ["--agent", "claude"], True),
    (False, [], False), (False, ["--agent", "claude"], False),
], ids=["tile-pane", "tile-pane-agent-flag", "tile-name", "tile-name-agent-flag", "bare-pane",
        "bare-pane-agent-flag"])
def test_send_into_a_bare_shell_is_refused_and_types_nothing(tmux_server: TmuxServer, tmp_path: Path,
                                                            declared: bool, agent: list[str],
                                                            by_tile_name: bool) -> None:
    shell = shell_ready(tmux_server)
    if declared:
        write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": shell, "agent": "claude"}})
    marker = tmp_path / "typed-and-run"
    before = tmux_server.capture(shell)
    result = baton("send", "rev" if by_tile_name else shell, f"touch {marker}", *agent,
                   "-L", tmux_server.socket, cwd=tmp_path)
    line = result.one_line_error(1, "not typing into", shell, "bash", "nothing was typed")
    assert ("no claude agent runs there" in line) if declared or agent else ("no agent runs there" in line)
    quiet_for(0.5, "a command typed into the shell would have run by now")
    assert not marker.exists()
    assert tmux_server.capture(shell) == before


def test_force_types_into_whatever_runs_there(tmux_server: TmuxServer, tmp_path: Path) -> None:
    shell = shell_ready(tmux_server)
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": shell, "agent": "claude"}})
    marker = tmp_path / "typed-and-run"
    result = baton("send", "rev", f"touch {marker}", "--force", cwd=tmp_path)
    assert result.status == 0, result
    wait_for(marker.exists, what="the shell running the forced text")
    help_text = baton("send", "--help").out
    assert "--force" in help_text and "whatever program runs in the pane" in " ".join(help_text.split())


def test_a_shell_tile_is_typed_into_as_the_dispatcher_does(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """A tile that declares ``agent: shell`` is a shell the routes type commands into: so does send."""
    shell = shell_ready(tmux_server)
    write_routes(tmp_path, tmux_server.socket, {"tests": {"pane": shell, "agent": "shell"}})
    marker = tmp_path / "typed-and-run"
    assert baton("send", "tests", f"touch {marker}", cwd=tmp_path).status == 0
    wait_for(marker.exists, what="the shell tile running the text")


def test_a_shell_tiles_turn_is_its_command_confirmed_when_it_starts(tmux_server: TmuxServer,
                                                                   tmp_path: Path) -> None:
    """#39 item 13: a shell's turn is the command; a command over before anyone looks (``echo``) started
    all the same: the send is ``delivered``, not ``typed; the agent did not show a new turn yet``."""
    shell = shell_ready(tmux_server)
    write_routes(tmp_path, tmux_server.socket, {"tests": {"pane": shell, "agent": "shell"}})
    result = baton("send", "tests", "echo hi-from-send", cwd=tmp_path)
    assert result.status == 0 and result.out.rstrip().endswith("the agent started a turn"), result
    wait_for(lambda: "\nhi-from-send" in tmux_server.capture(shell), what="the shell running the command")
    assert [r["state"] for r in handoffs("--route", "send")] == ["delivered"]


def test_agent_flag_that_contradicts_the_tile_is_one_line_exit_2(tmux_server: TmuxServer,
                                                                 tmp_path: Path) -> None:
    shell = shell_ready(tmux_server)
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": shell, "agent": "claude"}})
    marker = tmp_path / "typed-and-run"
    baton("send", shell, f"touch {marker}", "--agent", "shell", cwd=tmp_path).one_line_error(
        2, "--agent shell", "tile rev", "claude")
    assert not marker.exists()


# ---- a tile's name, into a demo agent ---------------------------------------------------------------------


def test_send_by_tile_name_reaches_the_agent_and_is_journaled(tmux_server: TmuxServer,
                                                              tmp_path: Path) -> None:
    log = tmp_path / "rev.jsonl"
    pane = start_agent(tmux_server, log, "rev")
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": pane, "agent": "demo"}})
    result = baton("send", "rev", "please review tokens.py", cwd=tmp_path)
    assert result.status == 0, result
    assert f"to {pane} (demo, tile rev)" in result.out, result.out
    wait_for(lambda: messages(log) == ["please review tokens.py"], what="the demo agent getting the text")
    rows = handoffs("--route", "send")
    assert [(r["source"], r["target"], r["state"], r["prompt"], r["pane"]) for r in rows] == [
        ("send", "rev", "delivered", "please review tokens.py", pane)], rows
    table = baton("history", "--tile", "rev")
    assert table.status == 0 and " send " in table.out and "delivered" in table.out, table


def test_a_cli_send_is_journaled_as_the_pages_send_is(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """#39 item 11: ``baton send`` journals its action, then its hand-off, as the web page's Send
    (:func:`perform`) does; a refused send of either is its action ``refused``, no hand-off (item 7)."""
    log = tmp_path / "rev.jsonl"
    pane = start_agent(tmux_server, log, "rev", work_s=0.1)
    config = write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": pane, "agent": "demo"}})

    def page_send(text: str) -> bool:
        action = Action("send", "rev", text, origin="web 127.0.0.1")
        return anyio.run(lambda: perform(action, config_path=config)).ok

    assert baton("send", "rev", "from the cli", cwd=tmp_path).status == 0
    wait_for(lambda: tmux_server.capture(pane).count("from the cli") == 2, what="the echo answered")
    assert page_send("from the page")
    wait_for(lambda: tmux_server.capture(pane).count("from the page") == 2, what="the echo answered")
    tmux_server.type(pane, "half a thought", enter=False)
    wait_for(lambda: "demo❯ half a thought" in tmux_server.capture(pane), what="the person's draft")
    baton("send", "rev", "not now", cwd=tmp_path).one_line_error(1, "draft", "nothing was typed")
    assert not page_send("not now either")
    assert messages(log) == ["from the cli", "from the page"]
    # in time order (each hand-off, then its action's outcome); refused actions only with --refused
    rows = history("--route", "send", "--refused")
    assert [(r.get("kind"), r["state"], r.get("origin"), r["target"]) for r in rows] == [
        (None, "delivered", None, "rev"), ("action", "done", "cli", "rev"),
        (None, "delivered", None, "rev"), ("action", "done", "web 127.0.0.1", "rev"),
        ("action", "refused", "cli", "rev"), ("action", "refused", "web 127.0.0.1", "rev"),
    ], rows
    assert rows[1]["note"].startswith(f"rev from cli: sent 12 chars to {pane}"), rows[1]
    assert all("holds a draft" in r["note"] for r in rows[4:]), rows[4:]
    assert [r["state"] for r in history("--route", "send")] == ["delivered", "done", "delivered", "done"]


def test_send_by_pane_finds_the_tile_it_belongs_to(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """``%N`` of a tile declared ``title:NAME``: the same pane, so the tile's agent is the one expected."""
    log = tmp_path / "rev.jsonl"
    pane = start_agent(tmux_server, log, "rev")
    tmux_server.run("select-pane", "-t", pane, "-T", "reviewer")
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": "title:reviewer", "agent": "demo"}})
    result = baton("send", pane, "hello", cwd=tmp_path)
    assert result.status == 0 and "tile rev" in result.out, result
    wait_for(lambda: messages(log) == ["hello"], what="the demo agent getting the text")
    # the tile's agent, not another: a claude tile on this pane refuses it
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": "title:reviewer", "agent": "claude"}})
    baton("send", pane, "again", cwd=tmp_path).one_line_error(1, "no claude agent runs there", "a demo agent")
    quiet_for(0.5, "a second message would have reached the agent by now")
    assert messages(log) == ["hello"]


def test_an_unknown_name_says_it_is_neither_tile_nor_pane(tmux_server: TmuxServer, tmp_path: Path) -> None:
    shell_ready(tmux_server)
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": "%0", "agent": "claude"}})
    for command in (["send", "revu", "hi"], ["resolve", "revu"]):
        baton(*command, cwd=tmp_path).one_line_error(1, "no tile 'revu' in", "tiles: rev", "no pane revu")


def test_a_draft_is_not_typed_over(tmux_server: TmuxServer, tmp_path: Path) -> None:
    log = tmp_path / "rev.jsonl"
    pane = start_agent(tmux_server, log, "rev")
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": pane, "agent": "demo"}})
    tmux_server.type(pane, "half a thought", enter=False)
    wait_for(lambda: "demo❯ half a thought" in tmux_server.capture(pane), what="the person's draft")
    baton("send", "rev", "hello", cwd=tmp_path).one_line_error(1, "tile rev", "draft", "nothing was typed",
                                                               "--wait")
    assert "demo❯ half a thought" in tmux_server.capture(pane) and messages(log) == []
    # a refusal, not a failed hand-off (#39 item 7): the action says refused and why; nothing was handed off
    rows = history("--tile", "rev", "--refused")
    assert [(r.get("kind"), r["route"], r["state"]) for r in rows] == [("action", "send", "refused")], rows
    assert "holds a draft" in rows[0]["note"] and "nothing was typed" in rows[0]["note"], rows


def test_wait_types_once_the_draft_is_cleared(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """``--wait``: the dispatcher's wait for a draft to go, then the same one way of typing."""
    log = tmp_path / "rev.jsonl"
    pane = start_agent(tmux_server, log, "rev")
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": pane, "agent": "demo"}})
    tmux_server.type(pane, "ab", enter=False)
    wait_for(lambda: "demo❯ ab" in tmux_server.capture(pane), what="the person's draft")
    send = subprocess.Popen([*BATON, "send", "rev", "hello", "--wait", "60"], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=baton_env(None))
    try:
        wait_for(lambda: _control_clients(tmux_server), what="baton send looking at the pane")
        assert messages(log) == []  # the draft is there: it waits
        tmux_server.run("send-keys", "-t", pane, "BSpace", "BSpace")
        out, err = send.communicate(timeout=30)
    finally:
        if send.poll() is None:
            send.kill()
            send.wait()
    assert send.returncode == 0 and "the agent started a turn" in out, (out, err)
    wait_for(lambda: messages(log) == ["hello"], what="the text, typed once the draft was gone")


def test_a_tile_whose_pane_is_gone_says_so(tmux_server: TmuxServer, tmp_path: Path) -> None:
    shell_ready(tmux_server)
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": "%99", "agent": "demo"}})
    baton("send", "rev", "hello", cwd=tmp_path).one_line_error(1, "baton send: tile rev: ", "%99")


# ---- resolve takes a tile's name ---------------------------------------------------------------------------


def test_resolve_takes_a_tile_name(tmux_server: TmuxServer, tmp_path: Path) -> None:
    pane = start_agent(tmux_server, tmp_path / "rev.jsonl", "rev")
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": pane, "agent": "demo"}})
    tmux_server.type(pane, "all DONE")  # a finished turn: its transcript is there to resolve
    wait_for(lambda: transcript_answers(tmp_path / "state"), what="the demo agent's answer")
    result = baton("resolve", "rev", "--json", cwd=tmp_path)
    assert result.status == 0, result
    data = json.loads(result.out)
    assert (data["tile"], data["pane"], data["agent"], data["ok"]) == ("rev", pane, "demo", True), data
    assert data["steps"][0]["value"]["pane_id"] == pane
    text = baton("resolve", "rev", cwd=tmp_path)
    assert text.status == 0 and text.out.startswith(f"{pane}: agent demo (tile rev)"), text


# ---- Ctrl-C says whether anything was typed -------------------------------------------------------------


def _interrupt(args: list[str], cwd: Path, ready: object) -> subprocess.CompletedProcess[str]:
    """``baton ARGS`` interrupted with SIGINT, as a terminal's Ctrl-C sends it, once ``ready()`` holds."""
    proc = subprocess.Popen([*BATON, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, env=baton_env(None),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_for(ready, what="baton send to get that far")  # type: ignore[arg-type]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _control_clients(tmux_server: TmuxServer) -> bool:
    return "1" in tmux_server.run("list-clients", "-F", "#{client_control_mode}").split()


def test_ctrl_c_while_waiting_says_nothing_was_typed(tmux_server: TmuxServer, tmp_path: Path) -> None:
    log = tmp_path / "rev.jsonl"
    pane = start_agent(tmux_server, log, "rev")
    write_routes(tmp_path, tmux_server.socket, {"rev": {"pane": pane, "agent": "demo"}})
    tmux_server.type(pane, "half a thought", enter=False)
    wait_for(lambda: "demo❯ half a thought" in tmux_server.capture(pane), what="the person's draft")
    done = _interrupt(["send", "rev", "hello", "--wait", "60"], tmp_path,
                      lambda: _control_clients(tmux_server))
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 130 and len(lines) == 1, (done.returncode, done.stderr)
    assert "interrupted" in lines[0] and "nothing was typed" in lines[0] and "Traceback" not in done.stderr
    assert "demo❯ half a thought" in tmux_server.capture(pane) and messages(log) == []


def test_ctrl_c_after_the_enter_says_it_was_typed(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """A program that shows nothing of what it reads (no echo): the typed line reaches its file, no turn
    shows, and a Ctrl-C while send waits for one says the text was typed and submitted."""
    got = tmp_path / "got.txt"
    pane = tmux_server.new_pane(f"bash --norc --noprofile -c 'stty -echo; exec cat > {got}'")
    wait_for(got.exists, what="cat to start")
    done = _interrupt(["send", pane, "hello there", "--force", "-L", tmux_server.socket], tmp_path,
                      lambda: "hello there" in got.read_text())
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 130 and len(lines) == 1, (done.returncode, done.stderr)
    assert "interrupted" in lines[0] and "typed" in lines[0] and "submitted" in lines[0], lines
    assert "nothing was typed" not in lines[0]
    assert [r["state"] for r in handoffs("--route", "send")] == ["unconfirmed"]
