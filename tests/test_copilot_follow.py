"""The Copilot adapter on a real pane: a process named like the native binary (a copy of ``sleep`` called
``copilot``) with the lock file Copilot writes, and the recorded events written into its session as Copilot
writes them — in batches. The agentStop hook, which names no turn, arrives before the batch that ends the
turn and still names it as the events do (one turn id, so the detector keeps one); a notification or another
pane's hook is no completion; the catch-up and the answer come from the events."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.plugin import HookRecord
from pipeline.system import proc
from plugins.copilot.adapter import CopilotAdapter
from tests.support.paths import FIXTURES
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]

SESSION = "6be1aeb7-efc7-4bc0-9fb1-1d7745c1b872"
LINES = (FIXTURES / "copilot-1.0.102" / "events" / "session1_final.jsonl").read_text().splitlines(True)
HOOKS = [json.loads(line) for line in
         (FIXTURES / "copilot-1.0.102" / "hooks" / "hooks.jsonl").read_text().splitlines()]


def first_turn_end() -> int:
    """The line after the first turn's closing ``assistant.turn_end``."""
    return next(i for i, line in enumerate(LINES) if '"assistant.turn_end"' in line) + 1


class Scene:
    def __init__(self, server: TmuxServer, tmp: Path) -> None:
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        shutil.copy(shutil.which("sleep") or "/bin/sleep", bin_dir / "copilot")
        self.home = tmp / "home" / ".copilot"
        self.pane = server.new_pane("bash --norc --noprofile -c 'copilot 300 & wait'", cwd=tmp,
                                    env={"PATH": f"{bin_dir}:/usr/bin:/bin", "COPILOT_HOME": str(self.home)})
        shell = server.pane_pid(self.pane)
        pid = wait_for(lambda: proc.find_agent(shell, {"copilot"}), what="the copilot stand-in").pid
        self.session = self.home / "session-state" / SESSION
        self.session.mkdir(parents=True)
        (self.session / f"inuse.{pid}.lock").write_text(str(pid))
        self.events = self.session / "events.jsonl"
        ctx = EngineContext(name="cp", tile=Tile(pane=self.pane, agent="copilot"), tmux=server.tmux)
        self.adapter = CopilotAdapter(ctx)

    def write(self, lines: list[str]) -> None:
        with self.events.open("a") as f:
            f.write("".join(lines))

    def hook(self, kind: str, n: int = 0, pane: str | None = "same") -> HookRecord:
        payload = [h for h in HOOKS if h["hook_arg"] == kind][n]["stdin"]
        return HookRecord("copilot", payload, self.pane if pane == "same" else pane, time.time())


async def test_the_hook_before_the_batch_that_ends_the_turn_names_the_turn_the_events_name(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    end = first_turn_end()
    scene.write(LINES[:end - 2])  # the prompt, the model call started: the answer and its end not yet
    got = []

    async def ask() -> None:
        got.append(await scene.adapter.hook_completion(scene.hook("agentStop")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await anyio.sleep(0.3)  # shapes the scenario: Copilot flushes its batch after the hook started
        scene.write(LINES[end - 2:end])
    [completion] = got
    [turn] = await scene.adapter.finished_turns(0.0)
    assert completion is not None and completion.signal == "hook"
    assert completion.turn_id == turn.turn_id and turn.turn_id.startswith(f"copilot:{SESSION}:")
    response = await scene.adapter.response(completion)
    assert response is not None and response.text.startswith("## Summary") and response.source == "transcript"


async def test_a_notification_and_another_panes_hook_are_no_completion(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.write(LINES[:first_turn_end()])
    assert await scene.adapter.hook_completion(scene.hook("notification")) is None
    assert await scene.adapter.hook_completion(scene.hook("agentStop", pane="%999")) is None
    assert await scene.adapter.hook_completion(scene.hook("userPromptSubmitted")) is None
    mine = await scene.adapter.hook_completion(scene.hook("agentStop", pane=None))  # matched by session
    assert mine is not None and mine.turn_id.startswith(f"copilot:{SESSION}:")


async def test_resolve_and_the_board_follow_the_lock_file_to_the_events(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.write(LINES)
    steps = {s.step: s for s in await scene.adapter.resolve()}
    assert steps["lock file"].value == str(scene.session) and steps["transcript"].value == str(scene.events)
    assert steps["turn"].detail.startswith("idle; last turn")
    usage = await scene.adapter.usage()
    assert usage is not None and usage.input > 0
    last = await scene.adapter.last_response()
    assert last is not None and last.text.startswith("Slow answer part one")
    assert await scene.adapter.received("TOOLTEST: run echo hello in the shell.") is True
    assert await scene.adapter.received("never typed") is False


async def clear_then_old_session_writes(scene: Scene, lines: list[str]) -> list:
    """Follow the scene's session; move its lock to a new session folder (``/clear``) and wait for the
    follower to switch; then the OLD session writes ``lines`` and its shutdown. Returns what was emitted."""
    got: list = []

    async def emit(completion) -> None:
        got.append(completion)

    async with anyio.create_task_group() as tg:
        tg.start_soon(scene.adapter.follow, emit)
        await wait_until_followed(scene)
        lock = next(scene.session.glob("inuse.*.lock"))
        new = scene.home / "session-state" / "0d6f4f9e-2b31-4c59-9a07-1f8c3b1e2d40"
        new.mkdir()
        lock.rename(new / lock.name)  # /clear: the lock is in the new session's folder now
        await anyio.to_thread.run_sync(lambda: wait_for(
            lambda: scene.adapter.events_path is None or scene.adapter.events_path.parent == new,
            what="the follower on the new session"))
        scene.write(lines)
        scene.write(['{"type":"session.shutdown","data":{},"timestamp":"2026-12-06T11:43:05.089Z"}\n'])
        await anyio.to_thread.run_sync(lambda: wait_for(lambda: got, what="the old session's turn"))
        await anyio.sleep(1.0)  # shapes the scenario: time for a second report of it, if there were one
        tg.cancel_scope.cancel()
    return got


async def test_a_turn_the_old_session_takes_after_clear_moved_the_lock_is_still_reported(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """``/clear`` moves Copilot's lock to a new session folder at once, yet a prompt sent right after it may
    still be taken by the old session, which writes that turn's end and then ``session.shutdown`` (seen on
    the real 1.0.102: tests/test_copilot_e2e.py). The follower reads the old file on until that turn ended."""
    scene = Scene(tmux_server, tmp_path)
    end = first_turn_end()
    scene.write(LINES[:end - 2])  # the old session: its turn runs
    [completion] = await clear_then_old_session_writes(scene, LINES[end - 2:end])  # the turn ends there
    assert completion.outcome == "completed" and completion.turn_id.startswith(f"copilot:{SESSION}:")
    response = await scene.adapter.response(completion)
    assert response is not None and response.text.startswith("## Summary")


async def test_a_prompt_the_old_session_takes_after_the_switch_is_reported_too(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """The lock moved (``/clear``) and the follower switched while the old session was idle; the old session
    then takes the next prompt anyway (seen on the real 1.0.102): its turn is reported, once."""
    scene = Scene(tmux_server, tmp_path)
    end = first_turn_end()
    second_end = next(i for i, line in enumerate(LINES) if i >= end and '"assistant.turn_end"' in line) + 1
    scene.write(LINES[:end])  # the first turn, finished before the daemon looked
    # the old session takes the next prompt and answers it
    [completion] = await clear_then_old_session_writes(scene, LINES[end:second_end])
    response = await scene.adapter.response(completion)
    assert response is not None and response.source == "transcript" and response.text.startswith("## Summary")


async def wait_until_followed(scene: Scene) -> None:
    await anyio.to_thread.run_sync(lambda: wait_for(lambda: scene.adapter.events_path == scene.events,
                                                    what="the follower on the first session"))
