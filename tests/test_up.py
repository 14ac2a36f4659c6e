"""`baton up` creates the panes of tiles with a command, once; addresses never fall back to another pane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.system.tmux import PaneGone
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
    assert lines == {"a": "created", "b": "created", "tests": "created", "fixed": "error", "manual": "no"}
    panes = tmux_server.run(
        "list-panes", "-a", "-F", "#{session_name}:#{window_index}.#{pane_index} #{pane_title}"
    )
    assert sorted(panes.split("\n")[:-1]) == ["batonpass:0.0 tests", "work:0.0 a", "work:0.1 b"]
    wait_for(lambda: "demo❯" in tmux_server.capture("work:0.1"), what="agent b started")
    second = up()
    assert [line.split()[1] for line in second.stdout.splitlines()] == [
        "exists",
        "exists",
        "exists",
        "error",
        "no",
    ]


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
        "ready",
    )  # agent: auto found the demo agent
    assert a["agent_pid"] and a["transcript"].endswith(f"{a['agent_pid']}.jsonl")
    assert a["last_response"].startswith('Draft 1 by a, answering "plan the release"')
    assert gone["state"] == "gone" and "s9:0.0" in gone["error"]
