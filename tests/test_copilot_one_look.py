"""One look of the board reads one Copilot screen: ``target_state`` and ``resolve`` (the row's state and its
``waiting`` activity) agree even when the screen changes between them.

Found by tests/test_copilot_states.py under load (a look took ~1 s): the folder-trust dialog closed between
the two reads, so the row was busy for the dialog and had no dialog for its activity — ``working``, a state
Copilot 1.0.102 never passes through there (the dialog closes straight to the idle input). The pane here shows
the recorded screens (tests/fixtures/copilot-1.0.102/screens), beside a process named like the binary."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.system import proc
from plugins.copilot.adapter import CopilotAdapter
from tests.support.paths import FIXTURES
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]

SCREENS = FIXTURES / "copilot-1.0.102" / "screens"


async def test_a_dialog_that_closes_during_a_look_is_what_the_whole_look_saw(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(shutil.which("sleep") or "/bin/sleep", bin_dir / "copilot")
    trust, idle = SCREENS / "screen_01_first_run_folder_trust.txt", SCREENS / "screen_02_idle_start.txt"
    pane = tmux_server.new_pane(
        f"bash --norc --noprofile -c 'copilot 300 & cat {trust}; read; clear; cat {idle}; wait'",
        cwd=tmp_path, height=45,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "COPILOT_HOME": str(tmp_path / "home" / ".copilot")})
    wait_for(lambda: proc.find_agent(tmux_server.pane_pid(pane), {"copilot"}), what="the copilot stand-in")
    wait_for(lambda: "Do you trust the files" in tmux_server.capture(pane), what="the dialog")
    adapter = CopilotAdapter(EngineContext(name="cp", tile=Tile(pane=pane, agent="copilot"),
                                           tmux=tmux_server.tmux))

    assert await adapter.target_state() == "busy"  # the dialog: never typed into
    tmux_server.run("send-keys", "-t", pane, "Enter")  # "1. Yes": the dialog closes to the idle input
    wait_for(lambda: "Do you trust the files" not in tmux_server.capture(pane), what="the dialog closed")
    activity = [s for s in await adapter.resolve() if s.step == "activity"]

    assert [s.detail for s in activity] == ["waiting (dialog open)"]  # not busy with no dialog: "working"
    assert await adapter.target_state() == "ready"  # the next look: idle
    assert not [s for s in await adapter.resolve() if s.step == "activity"]
