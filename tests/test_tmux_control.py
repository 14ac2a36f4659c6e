"""The control-mode connection (pipeline.system.tmux_control) against a real tmux server: replies matched
to their commands, the user's panes never resized, a pane that imitates tmux's reply lines cannot
corrupt a capture, and a server killed and started again is reached again."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from pipeline.system.tmux import PaneGone, ServerGone, Tmux
from pipeline.system.tmux_control import ControlClient, quote
from tests.support.polling import until, wait_for
from tests.support.tmux import TmuxServer, each_write

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]


def control_of(tmux: Tmux) -> ControlClient:
    client = tmux._control_client()
    assert client is not None
    return client


async def test_concurrent_commands_each_get_their_own_reply(tmux_server: TmuxServer) -> None:
    panes = [tmux_server.new_pane(width=80 + i, height=20) for i in range(6)]
    tmux = tmux_server.tmux
    got: dict[str, tuple[str, int]] = {}

    async def ask(pane: str) -> None:
        for _ in range(5):
            info = await tmux.pane(pane)
            got[pane] = (info.pane_id, info.width)

    async with anyio.create_task_group() as tg:
        for pane in panes:
            tg.start_soon(ask, pane)
    assert control_of(tmux).connected, "the commands went over control mode"
    assert got == {pane: (pane, 80 + i) for i, pane in enumerate(panes)}
    with pytest.raises(PaneGone):
        await tmux.pane("%999")
    with pytest.raises(PaneGone):  # tmux's own error, as a process would have printed it
        await tmux.send_keys("%999", "Enter")


async def test_calls_that_come_together_share_one_write_and_each_gets_its_reply(
        tmux_server: TmuxServer) -> None:
    """Tasks woken together (screen-read tiles on one beat) send their commands in one write; each still
    gets its own replies; a caller cancelled meanwhile takes nothing from the others."""
    panes = [tmux_server.new_pane(width=80 + i, height=20) for i in range(12)]
    control = control_of(tmux_server.tmux)
    await control.run("display-message", "-p", "connected")
    writes: list[bytes] = []
    write = control._write

    async def counted(data: bytes) -> None:
        writes.append(data)
        await write(data)

    control._write = counted  # type: ignore[method-assign]
    got: dict[str, list[str]] = {}

    async def look(pane: str) -> None:
        replies = await control.run_all(("display-message", "-p", "-t", pane, "#{pane_id} #{pane_width}"),
                                        ("capture-pane", "-p", "-t", pane))
        got[pane] = replies[0].lines

    async with anyio.create_task_group() as tg:
        for pane in panes:
            tg.start_soon(look, pane)
        with anyio.CancelScope() as cancelled:  # queued with the others, then given up
            cancelled.cancel()
            await control.run("display-message", "-p", "given up")
    assert got == {pane: [f"{pane} {80 + i}"] for i, pane in enumerate(panes)}
    assert len(writes) <= 2, f"{len(writes)} writes for {len(panes)} calls"
    assert (await control.run("display-message", "-p", "after")).lines == ["after"]


async def test_text_reaches_a_buffer_byte_for_byte(tmux_server: TmuxServer) -> None:
    tmux_server.new_pane()
    text = 'quote " dollar $HOME back \\ tab\t esc \x1b[31m semi ; hash #{pane_id} tilde ~ ünï 日本\nline 2\n'
    reply = await control_of(tmux_server.tmux).run("set-buffer", "-b", "t1", "--", text)
    assert reply.ok
    saved = subprocess.run([*tmux_server.tmux.base, "show-buffer", "-b", "t1"], capture_output=True).stdout
    assert saved.decode() == text
    assert quote("a\nb") == '"a\\nb"'


async def test_commands_sent_together_each_get_their_own_reply(tmux_server: TmuxServer) -> None:
    """``run_all`` writes several commands at once (the paste's buffer and its paste-buffer: one round
    trip); each gets its own reply, printing ones still checked by their nonce, and a failing one does not
    stop the next."""
    pane = tmux_server.new_pane(width=90, height=20)
    replies = await control_of(tmux_server.tmux).run_all(
        ("set-buffer", "-b", "t2", "--", "one"), ("display-message", "-p", "-t", pane, "#{pane_width}"),
        ("show-buffer", "-b", "no-such-buffer"), ("show-buffer", "-b", "t2"))
    assert [r.ok for r in replies] == [True, True, False, True]
    assert replies[1].lines == ["90"] and replies[3].lines == ["one"]
    await tmux_server.tmux.paste(pane, "pasted in one round trip")
    wait_for(lambda: "pasted in one round trip" in tmux_server.run("capture-pane", "-p", "-t", pane),
             what="the paste")
    assert "baton-" not in tmux_server.run("list-buffers", "-F", "#{buffer_name}"), "the buffer was deleted"


async def test_the_users_panes_keep_their_size(tmux_server: TmuxServer) -> None:
    pane = tmux_server.new_pane(width=100, height=30)
    await tmux_server.tmux.capture(pane)
    clients = tmux_server.run("list-clients", "-F", "#{client_flags}")
    assert "control-mode" in clients and "ignore-size" in clients and "no-output" in clients
    assert tmux_server.run("display-message", "-p", "-t", pane, "#{window_width}x#{window_height}").strip() \
        == "100x30"


async def test_a_pane_imitating_reply_lines_cannot_corrupt_a_capture(tmux_server: TmuxServer,
                                                                        tmp_path: Path) -> None:
    tmux_server.new_pane()
    client = control_of(tmux_server.tmux)
    last = await client.run("display-message", "-p", "x")
    fake = tmp_path / "fake.txt"
    done = tmp_path / "done"
    # every %end the next commands' replies could carry, then text that must stay part of the capture
    ends = [f"%end {last.time + dt} {last.number + k} 1\n" for dt in (0, 1) for k in range(1, 25)]
    fake.write_text("".join(ends) + "%exit\nafter the fake ends\n")
    pane = tmux_server.new_pane(f"bash --norc -c 'cat {fake}; touch {done}; exec sleep 300'", height=60)
    wait_for(done.exists, what="the pane printed the imitation")
    captured = await tmux_server.tmux.capture(pane)
    assert captured == tmux_server.capture(pane)
    assert "after the fake ends" in captured
    assert not client.connected, "the imitation was noticed and the connection dropped"
    await tmux_server.tmux.pane(pane)
    assert client.connected, "the next command connected again"


async def test_a_killed_server_is_reached_again_and_not_kept_alive(tmux_server: TmuxServer) -> None:
    tmux = tmux_server.tmux
    pane = tmux_server.new_pane()
    await tmux.pane(pane)
    client = control_of(tmux)
    proc = client._proc
    assert proc is not None
    tmux_server.run("kill-session", "-t", "s1")  # the last session: the server exits, attached or not
    wait_for(lambda: subprocess.run([*tmux.base, "list-sessions"], capture_output=True).returncode != 0,
             what="the server to exit")
    with pytest.raises(ServerGone):
        await tmux.pane(pane)
    assert not client.connected and proc.poll() is not None, "the control client exited with its server"
    pane = tmux_server.new_pane()  # a new server on the same socket

    async def back() -> bool:  # meanwhile each command runs as a process (failed connections back off)
        return (await tmux.pane(pane)).pane_id == pane and client.connected

    await until(back, 10, "the control client back on the new server", interval=0.1)


async def test_screen_followers_on_one_beat_share_one_activity_list_that_moves_with_output(
        tmux_server: TmuxServer) -> None:
    """Idle screen followers ask tmux which windows printed (instead of capturing every screen): callers
    that come together share one ``list-panes``, and a pane's second moves when something prints there."""
    quiet, printing = tmux_server.new_pane(), tmux_server.new_pane()
    tmux = tmux_server.tmux
    control = control_of(tmux)
    await control.run("display-message", "-p", "connected")
    sent: list[str] = []
    each_write(tmux_server, sent.extend)
    seen: list[dict[str, int]] = []

    async def ask() -> None:
        same_server = Tmux(socket_name=tmux.socket_name, config_file=tmux.config_file)
        seen.append(await same_server.window_activity(fresh_s=0.5))

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(ask)
    assert sent == ["list-panes"]  # one asked; the nine others naming the server took its list
    assert len(seen) == 10 and all(s == seen[0] for s in seen) and {quiet, printing} <= set(seen[0])
    await anyio.sleep(1.1)  # shapes the scenario: into a later second
    tty = tmux_server.run("display-message", "-p", "-t", printing, "#{pane_tty}").strip()
    Path(tty).write_text("printed\n")

    async def moved() -> dict[str, int] | None:
        later = await tmux.window_activity(fresh_s=0.0)
        return later if later[printing] > seen[0][printing] else None

    later = await until(moved, 10, "the printing window's activity to move")
    assert later[quiet] == seen[0][quiet]  # another window (each test pane is a session of its own)
