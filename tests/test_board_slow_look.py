"""The live board's slow look (``TileFeed.stale``, every 2 s for what no file tells): from one ``list-panes``,
the panes' process trees and the tiles' files, it looks again only at the tiles where something moved — a
still pane is not looked at (nor captured) again, yet a dialog printed on a screen, an agent that exited
and a pane that died or closed are each seen on the very next slow look.

Real tmux panes: OpenCode stand-ins (a process named ``opencode``, a copy of ``sleep``, under a shell that
draws OpenCode's recorded screens, moving on when the test writes to a FIFO) with no store, so the screen is
all that tells their state. The slow look is called step by step, not on its timer.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from pipeline.engine.tiles import build_tiles
from pipeline.system import proc
from pipeline.views.live_board import TileFeed
from tests.support.paths import FIXTURES
from tests.support.pipelines import REGISTRIES, make_config
from tests.support.polling import until, wait_for
from tests.support.tmux import TmuxServer, each_write

SCREENS = FIXTURES / "opencode" / "screens"


def stand_in(server: TmuxServer, tmp: Path, name: str, then: str) -> tuple[str, Path]:
    """A pane showing OpenCode's idle screen, the cursor left at the top (the agent's pid in ``$a``); once
    a line is written to the FIFO returned, the shell runs ``then``. Nothing in the pane polls: a still
    pane's process tree stays the same."""
    home = tmp / name
    (home / "bin").mkdir(parents=True)
    shutil.copy(shutil.which("sleep") or "/bin/sleep", home / "bin" / "opencode")
    go = home / "go"
    os.mkfifo(go)
    idle = shlex.quote(str(SCREENS / "screen_done.txt"))
    script = (f"opencode 600 & a=$!; disown; printf '\\033[H\\033[2J'; cat {idle}; printf '\\033[H'; "
              f"read -r _ < {shlex.quote(str(go))}; {then}")
    pane = server.new_pane(f"bash --norc --noprofile -c {shlex.quote(script)}", cwd=home, height=50,
                           env={"PATH": f"{home / 'bin'}:/usr/bin:/bin", "HOME": str(home),
                                "XDG_DATA_HOME": str(home / "data")})
    wait_for(lambda: proc.find_agent(server.pane_pid(pane), {"opencode"}), what=f"{name}'s stand-in")
    return pane, go


def go(fifo: Path) -> None:
    with fifo.open("w") as f:
        f.write("go\n")


@pytest.mark.tmux
@pytest.mark.anyio
async def test_the_slow_look_skips_still_panes_and_sees_a_dialog_an_exit_and_a_death_at_once(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    dialog = shlex.quote(str(SCREENS / "screen_permission_prompt.txt"))
    wait = f"read -r _ < {shlex.quote(str(tmp_path))}/never"  # blocks for good, printing nothing
    os.mkfifo(tmp_path / "never")
    scenes = {"still": stand_in(tmux_server, tmp_path, "still", wait),
              "asker": stand_in(tmux_server, tmp_path, "asker",
                                f"cat {dialog}; printf '\\033[H'; {wait}"),
              # quitter: its agent exits quietly (nothing printed); ender: its pane's command exits too
              "quitter": stand_in(tmux_server, tmp_path, "quitter", f"kill $a; {wait}"),
              "ender": stand_in(tmux_server, tmp_path, "ender", "kill $a; exit 3")}
    panes = {name: pane for name, (pane, _) in scenes.items()}
    tmux_server.run("set-option", "-w", "-t", panes["ender"], "remain-on-exit", "on")
    config = make_config({name: {"pane": pane, "agent": "opencode"} for name, pane in panes.items()}, [])
    feed = TileFeed(config, await build_tiles(config, REGISTRIES.agents, tmux_server.tmux), lambda: None)
    feed.look_all_s = 3600.0  # only what moved is looked at

    def kind(name: str) -> str:
        return feed.board.views[name].kind

    async def slow_look() -> set[str]:
        due, seen = await feed.stale()
        await feed.refresh(due, seen)
        return due

    async def nothing_due() -> bool:
        return not await slow_look()

    await feed.refresh(set(panes))
    assert {name: kind(name) for name in panes} == dict.fromkeys(panes, "idle")
    # once no screen printed since its last look (tmux counts whole seconds), no tile is looked at again
    await until(nothing_due, 15, "every tile still")
    looked: dict[str, float] = dict(feed.looked)
    writes: list[list[str]] = []
    each_write(tmux_server, writes.append)
    assert await slow_look() == set() and feed.looked == looked
    assert writes == [["list-panes"]]  # no capture, no lookup: one list of every pane

    # a permission prompt drawn over the screen, the cursor back where it was: only tmux's note of the
    # window's last output says the screen moved
    go(scenes["asker"][1])
    await until(lambda: "Permission required" in tmux_server.capture(panes["asker"]), what="the dialog")
    writes.clear()
    assert await slow_look() == {"asker"}
    assert "display-message" not in sum(writes, [])  # its look took its pane from the list
    assert (kind("asker"), feed.board.views["asker"].words) == ("waiting", "permission prompt")

    go(scenes["quitter"][1])  # its agent exits, printing nothing: its pane's process tree says so
    await until(lambda: proc.find_agent(tmux_server.pane_pid(panes["quitter"]), {"opencode"}) is None,
                what="the agent gone")
    assert "quitter" in await slow_look() and kind("quitter") == "absent"

    go(scenes["ender"][1])  # the pane's command exits: the pane stays, dead (remain-on-exit)
    await until(lambda: tmux_server.run("display-message", "-p", "-t", panes["ender"], "#{pane_dead}")
                .strip() == "1", what="the pane dead")
    assert "ender" in await slow_look() and kind("ender") == "gone"
    # tmux may list the pane dead a moment before it has its exit status: either wording says it exited
    assert "exited" in feed.board.views["ender"].answer

    assert feed.looked["still"] == looked["still"]  # never looked at again meanwhile
    tmux_server.run("kill-pane", "-t", panes["still"])  # closed: not listed any more
    assert "still" in await slow_look() and kind("still") == "gone"
