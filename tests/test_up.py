"""`baton up` creates the panes of tiles with a command, once; addresses never fall back to another pane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.system.tmux import PaneGone
from tests.support.cli import baton, write_routes
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = pytest.mark.tmux


def test_up_creates_missing_panes_once(tmux_server: TmuxServer, tmp_path: Path) -> None:
    config = tmp_path / "routes.yaml"
    agent = f"{sys.executable} -m plugins.demo.agent --no-transcript --name"
    config.write_text(json.dumps({"version": 1, "tmux": {"socket_name": tmux_server.socket}, "tiles": {
        "a": {"pane": "work:0.0", "agent": "demo", "command": f"{agent} a", "cwd": str(tmp_path)},
        "b": {"pane": "work:0.1", "agent": "demo", "command": f"{agent} b"},
        "tests": {"pane": "title:tests", "agent": "shell", "command": "bash --norc"},
        "fixed": {"pane": "%7", "agent": "shell", "command": "bash"},
        "manual": {"pane": "title:mine", "agent": "shell"}}}))

    def up() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "up", "-c", str(config)], capture_output=True, text=True
        )

    first = up()
    assert first.returncode == 1  # %7 cannot be created
    lines = {line.split()[0]: line.split()[1] for line in first.stdout.splitlines()}
    assert lines == {"a": "created", "b": "created", "tests": "created", "manual": "no"}
    assert first.stderr.split()[:2] == ["fixed", "error"], first.stderr  # said once, on standard error
    panes = tmux_server.run(
        "list-panes", "-a", "-F", "#{session_name}:#{window_index}.#{pane_index} #{pane_title}"
    )
    assert sorted(panes.split("\n")[:-1]) == ["batonpass:0.0 tests", "work:0.0 a", "work:0.1 b"]
    wait_for(lambda: "demo❯" in tmux_server.capture("work:0.1"), what="agent b started")
    second = up()
    assert [line.split()[1] for line in second.stdout.splitlines()] == ["exists", "exists", "exists", "no"]
    assert second.stderr.split()[:2] == ["fixed", "error"], second.stderr


@pytest.mark.anyio
async def test_a_missing_pane_index_is_not_the_active_pane(tmux_server: TmuxServer) -> None:
    tmux_server.new_pane()
    tmux = tmux_server.tmux
    assert (await tmux.resolve("s1:0.0")).pane_id
    for target in ("s1:0.1", "s1:5.0", "nosuch:0.0", "%99"):
        with pytest.raises(PaneGone):
            await tmux.resolve(target)


def test_status_shows_agent_transcript_state_and_last_answer(tmux_server: TmuxServer, tmp_path: Path) -> None:
    from tests.support.agents import demo_agent_command

    pane = tmux_server.new_pane(demo_agent_command("a", role="writer", work_s=0.1))
    wait_for(lambda: "demo❯" in tmux_server.capture(pane))
    tmux_server.type(pane, "plan the release")
    wait_for(lambda: tmux_server.capture(pane).count("demo❯") >= 2, what="the answer")
    config = tmp_path / "routes.yaml"
    config.write_text(json.dumps({"version": 1, "tmux": {"socket_name": tmux_server.socket}, "tiles": {
        "a": {"pane": pane}, "gone": {"pane": "s9:0.0", "agent": "claude"}}}))
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "status", "--json", "-c", str(config)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    a, gone = json.loads(out.stdout)
    assert (a["agent"], a["pane_id"], a["state"]) == (
        "demo",
        pane,
        "idle",
    )  # agent: auto found the demo agent
    assert a["agent_pid"] and a["transcript"].endswith(f"{a['agent_pid']}.jsonl")
    assert a["last_response"].startswith('Draft 1 by a, answering "plan the release"')
    assert gone["state"] == "gone" and "s9:0.0" in gone["error"]


# ---- the second newcomer trial (issue #34, item 1) --------------------------------------------------------


def _panes(tmux_server: TmuxServer) -> list[str]:
    """``%N session:window.pane title`` of every pane of the test's server, as tmux numbers them now."""
    shown = "#{pane_id} #{session_name}:#{window_index}.#{pane_index} #{pane_title}"
    out = tmux_server.run("list-panes", "-a", "-F", shown, check=False)
    return sorted(out.splitlines())


def test_up_refuses_a_pane_address_tmux_would_number_otherwise(tmux_server: TmuxServer,
                                                               tmp_path: Path) -> None:
    """``work:0.3`` in a window of one pane is refused with the address to write instead — not created as
    work:0.1 and called created — and again on every further ``up`` (no pane is ever added for it)."""
    config = write_routes(tmp_path, tmux_server.socket, {
        "a": {"pane": "work:0.0", "agent": "shell", "command": "bash --norc"},
        "b": {"pane": "work:0.3", "agent": "shell", "command": "bash --norc"},
        "fixed": {"pane": "%7", "agent": "shell", "command": "bash --norc"}})
    for _ in range(2):
        result = baton("up", "-c", str(config))
        assert result.status == 1 and "Traceback" not in result.err, result
        assert [line.split(None, 2) for line in result.error_lines] == [
            ["b", "error", "cannot create work:0.3: tmux numbers a new pane there work:0.1; name the tile's "
             "pane work:0.1, or title:b (up creates that and finds it again)"],
            ["fixed", "error", "cannot create pane %7: tmux chooses pane ids; name the tile's pane "
             "session:window.pane, or title:fixed (up creates that and finds it again)"]], result.err
        assert [line.split()[:2] for line in result.out.splitlines()] == [["a", result.out.split()[1]]]
        assert len(_panes(tmux_server)) == 1, _panes(tmux_server)
    assert _panes(tmux_server)[0].split()[1:] == ["work:0.0", "a"]


def test_up_prints_each_pane_where_it_is_once_every_pane_is_made(tmux_server: TmuxServer,
                                                                 tmp_path: Path) -> None:
    """Splitting renumbers the panes after the one split: the addresses printed are read after the last
    split, the panes land at the addresses the tiles name (whatever their order in routes.yaml), and each
    tile's pane is found again by the next ``up``."""
    tmux_server.run("new-session", "-d", "-s", "work", "-x", "160", "-y", "40", "bash --norc")
    config = write_routes(tmp_path, tmux_server.socket, {
        "c": {"pane": "work:0.2", "agent": "shell", "command": "bash --norc"},
        "b": {"pane": "work:0.1", "agent": "shell", "command": "bash --norc"},
        "t": {"pane": "title:t", "agent": "shell", "command": "bash --norc"}})
    first = baton("up", "-c", str(config))
    assert first.status == 0 and first.err == "", first
    now = {line.split()[1]: line.split()[0] for line in _panes(tmux_server)}
    printed = [line.split()[:4] for line in first.out.splitlines()]
    assert printed == [["c", "created", now["work:0.2"], "(work:0.2)"],
                       ["b", "created", now["work:0.1"], "(work:0.1)"],
                       ["t", "created", now["batonpass:0.0"], "(batonpass:0.0)"]], (first.out, now)
    again = baton("up", "-c", str(config))
    assert [line.split()[:4] for line in again.out.splitlines()] == [
        [tile, "exists", *rest] for tile, _, *rest in printed], again
    assert len(_panes(tmux_server)) == 4


def test_up_reports_a_missing_folder_and_commands_that_exit_once_each(tmux_server: TmuxServer,
                                                                      tmp_path: Path) -> None:
    """A ``cwd`` that is no folder is refused (tmux would start the command elsewhere); a command that ends
    within a second is ``exited`` with the last line it printed, and a command not found is status 127
    whichever its name; each failure is one line of standard error, not a row and a line again. A relative
    ``cwd`` is routes.yaml's folder's."""
    (tmp_path / "sub").mkdir()
    config = write_routes(tmp_path, tmux_server.socket, {
        "here": {"pane": "title:here", "agent": "shell", "command": "bash --norc", "cwd": "sub"},
        "nowhere": {"pane": "title:nowhere", "agent": "shell", "command": "bash", "cwd": "/nonexistent/dir"},
        "brief": {"pane": "title:brief", "agent": "shell",
                  "command": "sleep 0.8; echo 'cannot reach the model'; exit 3"},  # shapes the scenario
        "claude": {"pane": "title:claude", "agent": "claude", "command": "no-such-claude"},
        "codex": {"pane": "title:codex", "agent": "codex", "command": "no-such-codex --yolo"},
        "tests": {"pane": "title:tests", "agent": "shell"}})
    result = baton("up", "-c", str(config))
    assert result.status == 1 and "Traceback" not in result.err, result
    rows = {line.split()[0]: line for line in result.error_lines}
    assert list(rows) == ["nowhere", "brief", "claude", "codex"], result.err
    assert rows["nowhere"].split(None, 2)[1:] == [
        "error",
        "cwd /nonexistent/dir is no such folder: fix the tile's `cwd:` or make the folder; nothing started"]
    assert rows["brief"].split()[1] == "exited", rows["brief"]
    assert rows["brief"].partition(" exited")[2].endswith(
        ": cannot reach the model; its pane stays, dead, so that the panes after it keep their places: "
        "fix the command and run baton up again"), rows["brief"]
    for tile in ("claude", "codex"):
        assert f"command 'no-such-{tile}" in rows[tile] and "exited (status 127): " in rows[tile], rows[tile]
    assert result.out.splitlines()[0].split()[:2] == ["here", "created"], result.out
    assert result.out.splitlines()[1].split(None, 2) == [
        "tests", "no", "command  its pane title:tests does not exist, and up starts nothing without a "
        "`command:`: make a pane titled tests (tmux select-pane -T tests) yourself, or give the tile a "
        "command"]
    assert not any(line.endswith(" nowhere") for line in _panes(tmux_server)), _panes(tmux_server)
    here = tmux_server.run("list-panes", "-a", "-F", "#{pane_title} #{pane_current_path}").splitlines()
    assert f"here {tmp_path / 'sub'}" in here, here
