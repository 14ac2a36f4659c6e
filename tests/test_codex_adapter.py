"""The Codex adapter in a real tmux pane, on rollouts written line by line as Codex writes them.

The pane runs a stand-in whose ``/proc/PID/comm`` is ``codex`` and whose screen is a recorded Codex
screen; the rollout lines are the recorded ones, written by the test into the pane's CODEX_HOME at the
pace a test chooses. The real CLI is in test_codex_e2e.py; this covers what it cannot stage on demand:
a half-written line, a late line after the end of a turn, an interrupt, a failed turn, the notify hook
racing the rollout, a busy rollout behind an idle-looking screen, the pane's codex going away.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.watch import FileWatcher
from pipeline.plugin.events import Completion
from pipeline.spool import HookRecord
from pipeline.system import proc
from plugins.codex import follow as follow_module
from plugins.codex.adapter import CodexAdapter
from plugins.codex.resolve import find_codex_process
from plugins.codex.turns import RolloutState
from tests.codex_standins import CodexHome, append, recorded_turns, rollout_path, uuid7
from tests.conftest import FIXTURES, TmuxServer, aquiet_for, until, wait_for
from tests.stage_kit import with_catch_up

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]

CODEX = FIXTURES / "codex"
TUI_ROLLOUT = next((CODEX / "codex_home" / "sessions").glob("*/*/*/*01a236f2-8213*.jsonl"))
ERROR_ROLLOUT = CODEX / "failed-turns" / "rollout-tui-with-error-turn.jsonl"
SCREENS = CODEX / "screens"


class Scene:
    """A tmux pane with a codex stand-in showing a recorded screen, its CODEX_HOME, and an adapter."""

    def __init__(self, server: TmuxServer, tmp: Path, screen: str | Path = "screen_done.txt", *,
                 project: str = "api", name: str = "reviewer") -> None:
        self.server, self.tmp = server, tmp
        self.home = CodexHome(tmp / "codex-home")
        self.project = tmp / project
        self.project.mkdir(exist_ok=True)
        self.bin = tmp / "bin"
        self.bin.mkdir(exist_ok=True)
        if not (self.bin / "codex").exists():
            (self.bin / "codex").symlink_to("/bin/bash")
        self.pane = self.start(screen)
        self.ctx = EngineContext(name=name, tile=Tile(pane=self.pane, agent="codex"), tmux=server.tmux)
        self.adapter = CodexAdapter(self.ctx)

    def start(self, screen: str | Path) -> str:
        script = f"cat {shlex.quote(str(SCREENS / screen))}; sleep 300; true"
        # when the agent exits, a bare shell remains in the pane (as after /quit)
        inner = f"{self.bin / 'codex'} -c {shlex.quote(script)}; exec bash --norc --noprofile"
        pane = self.server.new_pane(f"bash -c {shlex.quote(inner)}", cwd=self.project,
                                    env={"CODEX_HOME": str(self.home.root)})
        pid = self.server.pane_pid(pane)
        found = wait_for(lambda: find_codex_process(pid), what="the codex stand-in")
        self.started_at = found.started_at
        self.tid = self.home.thread(self.started_at + 1.0)  # the TUI's thread exists from startup
        self.rollout = rollout_path(self.home.root, self.tid, self.started_at + 1.0)
        return pane

    def turns(self, fixture: Path = TUI_ROLLOUT) -> list[dict]:
        return recorded_turns(fixture, self.tid, self.project, time.time())


@pytest.fixture
def scene(tmux_server: TmuxServer, tmp_path: Path) -> Scene:
    return Scene(tmux_server, tmp_path)


@asynccontextmanager
async def following(adapter: CodexAdapter,
                    watcher: FileWatcher | None = None) -> AsyncIterator[list[Completion]]:
    """``adapter.follow`` running with a shared watcher, as in the daemon; yields what it emits.
    ``watcher``: one already running, shared with other tiles' followers."""
    own = watcher is None
    watcher = watcher or FileWatcher()
    adapter.ctx.watcher = watcher
    emitted: list[Completion] = []

    async def emit(completion: Completion) -> None:
        emitted.append(completion)

    async with anyio.create_task_group() as tg:
        if own:
            tg.start_soon(watcher.run)
        tg.start_soon(adapter.follow, with_catch_up(adapter, emit))
        yield emitted
        tg.cancel_scope.cancel()




def upto(records: list[dict], kind: str, nth: int = 1) -> int:
    """The index just past the ``nth`` line whose payload type is ``kind``."""
    seen = 0
    for i, r in enumerate(records):
        if (r.get("payload") or {}).get("type") == kind:
            seen += 1
            if seen == nth:
                return i + 1
    raise AssertionError(f"no {kind} #{nth}")


async def test_a_write_to_a_neighbours_rollout_wakes_only_its_own_follower(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """Two Codex panes of one CODEX_HOME watch one sessions folder. Once each follows its rollout, a turn
    written to one does not wake the other's follower (at 50 tiles a write cost 100 followers a question
    each, on the way to every hand-off); a prompt typed into a pane makes its follower hear the others'
    writes until its own rollout shows the prompt (it may have started a new rollout), then not again."""
    left = Scene(tmux_server, tmp_path)
    right = Scene(tmux_server, tmp_path, project="web", name="writer")
    woken = {"left": 0, "right": 0}  # wake-ups by a file hint (the follower's 5 s process look aside)
    asked: dict[str, list[str]] = {"left": [], "right": []}  # what the watcher asked each follower about
    for name, scene in (("left", left), ("right", right)):
        refresh, concerns = scene.adapter._refresh, scene.adapter._concerns

        async def counted(hints: set[Path] | None = None, *, _name: str = name, _refresh=refresh,
                          **kw: bool) -> object:
            woken[_name] += bool(hints)
            return await _refresh(hints, **kw)

        def asked_about(path: Path, _name: str = name, _concerns=concerns) -> bool:
            asked[_name].append(path.name)
            return _concerns(path)

        scene.adapter._refresh = counted  # type: ignore[method-assign]
        scene.adapter._concerns = asked_about  # type: ignore[method-assign]
    lrec, rrec = left.turns(), right.turns()
    first = upto(lrec, "task_complete")
    watcher = FileWatcher()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        async with (following(left.adapter, watcher) as lemitted,
                    following(right.adapter, watcher) as remitted):
            append(right.rollout, rrec[:first])
            append(left.rollout, lrec[:first])
            await until(lambda: len(lemitted) == len(remitted) == 1, what="each pane's first turn")
            subs = {name: s.adapter._sub for name, s in (("left", left), ("right", right))}
            await until(lambda: not subs["left"].others and not subs["right"].others,
                        what="both followers to stop listening to the other's rollout")
            assert (subs["left"].claimed, subs["right"].claimed) == (str(left.rollout), str(right.rollout))
            before = dict(woken)
            asked["right"].clear()
            for record in lrec[first:]:  # the left pane's other turns, line by line
                append(left.rollout, [record])
                await anyio.sleep(0.005)
            await until(lambda: len(lemitted) == 4, what="the left pane's other turns")
            await aquiet_for(0.2, "a late hint")
            assert woken["right"] == before["right"] and woken["left"] > before["left"] + 3
            assert asked["right"] == []  # not even asked
            # a prompt typed into the right pane: it listens until its rollout has the prompt
            second = upto(rrec, "task_complete", 2)
            state = RolloutState()
            for record in rrec[:second]:
                state.feed(record)
            right.adapter.prompt_submitted(state.prompts()[-1], time.time())
            assert subs["right"].others
            append(left.rollout, lrec[:1])  # a write next door is heard now (and found not to matter)
            await until(lambda: woken["right"] == before["right"] + 1, what="the right follower to hear it")
            append(right.rollout, rrec[first:second])
            await until(lambda: len(remitted) == 2, what="the right pane's second turn")
            assert not subs["right"].others and len(lemitted) == 4
        tg.cancel_scope.cancel()


async def test_an_idle_follower_learns_its_codex_exited_without_looking_every_few_seconds(
        scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pane's codex is watched for its exit (a pidfd), not looked for again every 5 s (50 idle tiles:
    10 tmux round trips and process-tree walks a second, 1 % of a core): with that look put off for an
    hour, the exit is still seen."""
    monkeypatch.setattr(follow_module, "RESOLVED_RECHECK_S", 3600.0)
    adapter = scene.adapter
    records = scene.turns()
    async with following(adapter) as emitted:
        append(scene.rollout, records[:upto(records, "task_complete")])
        await until(lambda: len(emitted) == 1, what="the first turn")
        first = find_codex_process(scene.server.pane_pid(scene.pane))
        assert adapter._exit_watched == first.key
        for pid in [*proc.children(first.pid), first.pid]:  # a bare shell remains in the pane
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await until(lambda: adapter._process is None and adapter.rollout is None, what="the exit to be seen")
        assert adapter._exit_watched is None


async def test_a_process_is_gone_once_it_exits_not_once_its_parent_reaps_it() -> None:
    """A pidfd wakes its waiter when the process exits; /proc lists it (a zombie) until its parent reaps
    it. A follower woken then must find it gone: one that took the zombie for its agent (the pane's shell
    slow to reap under load) waited on for an exit that had come already."""
    child = subprocess.Popen(["sleep", "0.3"])
    try:
        live = proc.read_proc(child.pid)
        assert live is not None
        with anyio.fail_after(10):
            await proc.wait_exit(child.pid, live.start_ticks)
        assert Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"  # not reaped
        assert proc.read_proc(child.pid) is None
    finally:
        child.wait()


async def test_a_fresh_follower_waits_for_its_rollout_without_resolving_again_and_again(
        scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    """A codex with no prompt yet has no rollout; only a new file in the sessions folder can give it one, so
    the follower waits for that instead of running the resolution chain every 2 s (50 fresh tiles: 3 % of a
    core). A prompt typed through batonpass makes it look again on a timer until the rollout has it."""
    for name in ("UNRESOLVED_RECHECK_S", "RESOLVE_MIN_INTERVAL_S"):
        monkeypatch.setattr(follow_module, name, 0.05)
    resolutions: list[float] = []
    real = follow_module.resolve_rollout

    def counted(*args: object, **kwargs: object) -> object:
        resolutions.append(time.monotonic())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(follow_module, "resolve_rollout", counted)
    adapter = scene.adapter
    records = scene.turns()
    async with following(adapter) as emitted:
        await until(lambda: adapter._exit_watched is not None and resolutions, what="the first resolution")
        await aquiet_for(0.6, "a rollout found before there is one")
        assert adapter.rollout is None and len(resolutions) <= 2  # 12 on a 0.05 s timer
        # batonpass types a prompt: until a rollout has it, the follower looks again on the timer
        adapter.prompt_submitted("review the diff", time.time())
        before = len(resolutions)
        await until(lambda: len(resolutions) >= before + 3, what="the follower to look again")
        append(scene.rollout, records[:upto(records, "task_complete")])
        await until(lambda: len(emitted) == 1 and adapter.rollout == scene.rollout, what="the first turn")


async def test_turns_are_followed_as_they_are_written(scene: Scene) -> None:
    records = scene.turns()
    adapter = scene.adapter
    async with following(adapter) as emitted:
        await aquiet_for(0.3, "a rollout found before there is one")
        assert adapter.rollout is None and await adapter.target_state() == "ready"  # idle, no turn yet
        # the first prompt: the rollout appears, the turn starts; the screen shows nothing busy
        first_started = upto(records, "task_started")
        append(scene.rollout, records[:first_started + 3])
        await until(lambda: adapter.rollout == scene.rollout, what="the rollout to be found")
        assert await adapter.target_state() == "busy"
        # half of the task_complete line, then the rest
        end = upto(records, "task_complete")
        append(scene.rollout, records[first_started + 3:end - 1])
        line = json.dumps(records[end - 1]) + "\n"
        with open(scene.rollout, "a") as f:
            f.write(line[:40])
        await aquiet_for(0.3, "a completion from half a line")
        assert emitted == [] and await adapter.target_state() == "busy"
        with open(scene.rollout, "a") as f:
            f.write(line[40:])
        await until(lambda: len(emitted) == 1, what="the first completion")
        first = emitted[0]
        assert (first.turn_id, first.outcome, first.signal) == (
            "01a236f2-b414-76d1-8f5e-6847cefec66a",
            "completed",
            "rollout",
        )
        response = await adapter.response(first)
        assert (
            response.source == "transcript"
            and response.text == records[end - 1]["payload"]["last_agent_message"]
        )
        assert await adapter.target_state() == "ready"
        # the slow turn, the interrupted one (failed), the tool turn
        append(scene.rollout, records[end:])
        await until(lambda: len(emitted) == 4, what="three more completions")
        assert [(c.outcome, c.detail) for c in emitted[1:]] == [("completed", ""), ("failed", "interrupted"),
                                                                ("completed", "")]
        interrupted = await adapter.response(emitted[2])
        assert interrupted.source == "terminal"  # the partial text is not saved: the screen is all there is
        await aquiet_for(0.3, "a fifth completion")
        assert len(emitted) == 4
        latest = await adapter.last_response()  # baton status and baton preview ask this
        last_complete = [r for r in records if r.get("payload", {}).get("type") == "task_complete"][-1]
        assert (latest.text, latest.completion.turn_id) == (last_complete["payload"]["last_agent_message"],
                                                            emitted[3].turn_id)


async def test_a_late_line_after_task_complete_is_not_a_new_turn(scene: Scene) -> None:
    records = scene.turns(ERROR_ROLLOUT)
    late = next(i for i, r in enumerate(records) if r["ordinal"] == 75)
    async with following(scene.adapter) as emitted:
        append(scene.rollout, records[:late])
        await until(lambda: len(emitted) == 5, what="five turns")
        assert await scene.adapter.target_state() == "ready"
        append(scene.rollout, records[late:late + 1])  # the shell command outlived its turn
        await aquiet_for(0.4, "the late line taken for a new turn")
        assert len(emitted) == 5 and await scene.adapter.target_state() == "ready"
        append(scene.rollout, records[late + 1:])
        await until(lambda: len(emitted) == 6, what="the failed turn")
        failed = emitted[-1]
        assert failed.outcome == "failed" and "scripted failure" in failed.detail
        response = await scene.adapter.response(failed)
        assert response.source == "terminal"  # no answer in the rollout: the screen


async def test_the_notify_hook_is_matched_by_thread_and_shares_the_turn_id(scene: Scene) -> None:
    records = scene.turns()
    end = upto(records, "task_complete")
    notify = [json.loads(line) for line in (CODEX / "hooks" / "notify.jsonl").read_text().splitlines()]
    payload = json.loads(
        json.dumps(notify[1]["payload"]).replace("01a236f2-8213-7d41-a995-69d74a850cf0", scene.tid)
    )
    title = notify[2]["payload"]  # the TUI's title request: a thread with no rollout
    # in daemon mode the record's pane is the first pane's (the daemon's environment), not this one
    record = HookRecord(agent="codex", payload=payload, pane="%99", written_at=1.0)
    assert await scene.adapter.hook_completion(record) is None  # no rollout yet: not this tile's (yet)
    append(scene.rollout, records[:end - 1])
    hooked = await scene.adapter.hook_completion(record)  # the hook before the rollout's task_complete
    assert (hooked.tile, hooked.turn_id, hooked.signal) == ("reviewer", payload["turn-id"], "notify")
    assert hooked.text == payload["last-assistant-message"]
    assert await scene.adapter.hook_completion(HookRecord("codex", title, "%99", 1.0)) is None
    other = dict(payload, **{"thread-id": uuid7(scene.started_at + 5)})
    assert await scene.adapter.hook_completion(HookRecord("codex", other, "%1", 1.0)) is None
    # the answer is the rollout's (full text) once the line lands, within the wait for it
    async with anyio.create_task_group() as tg:
        answers = []

        async def ask() -> None:
            answers.append(await scene.adapter.response(hooked))

        tg.start_soon(ask)
        await anyio.sleep(0.2)  # shapes the scenario (the line lands after the answer is asked for)
        append(scene.rollout, records[end - 1:end])
    assert (
        answers[0].source == "transcript"
        and answers[0].text == records[end - 1]["payload"]["last_agent_message"]
    )
    # the rollout reports the same turn id: the detector keeps one of the two
    finished = scene.adapter.state.take_finished()
    assert [t.turn_id for t in finished] == [hooked.turn_id]


async def test_stop_hook_records_are_understood_too(scene: Scene) -> None:
    records = scene.turns()
    append(scene.rollout, records[: upto(records, "task_complete")])
    stop = {
        "session_id": scene.tid,
        "turn_id": "01a236f2-b414-76d1-8f5e-6847cefec66a",
        "hook_event_name": "Stop",
        "transcript_path": str(scene.rollout),
        "last_assistant_message": "done",
        "stop_hook_active": False,
    }
    completion = await scene.adapter.hook_completion(HookRecord("codex", stop, None, 1.0))
    assert completion.turn_id == stop["turn_id"] and completion.text == "done"


async def test_turn_started_is_read_from_the_rollout(scene: Scene) -> None:
    records = scene.turns()
    adapter = scene.adapter
    before = await adapter.snapshot()  # no rollout yet: the first prompt makes it
    assert not await started(adapter, before, 0.5)
    append(scene.rollout, records[: upto(records, "task_started")])
    assert await started(adapter, before)
    append(scene.rollout, records[upto(records, "task_started"): upto(records, "task_complete")])
    before = await adapter.snapshot()
    assert not await started(adapter, before, 0.5)
    assert await adapter.received("Please summarize this project SCENARIO_TEXT")
    assert not await adapter.received("never typed")
    append(scene.rollout, records[upto(records, "task_complete"): upto(records, "task_started", 2)])
    assert await started(adapter, before)


async def started(adapter: CodexAdapter, before, within: float = 3.0) -> bool:
    """``turn_started`` asked the way the dispatcher asks it: every 50 ms, up to a deadline."""
    with anyio.move_on_after(within):
        while not await adapter.turn_started(before):
            await anyio.sleep(0.05)
        return True
    return False


async def test_a_draft_a_dialog_and_no_codex(tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path, screen="screen_f2_warnings.txt")
    assert await scene.adapter.target_state() == "busy"  # a dialog over the input line: wait
    drafted = tmp_path / "screen_draft.txt"
    drafted.write_text((SCREENS / "screen_done.txt").read_text().replace(
        "\x1b[2mAsk Codex to do anything", "a draft of my own"))
    typed = Scene(tmux_server, tmp_path, screen=drafted)
    await until_state(typed.adapter, "draft")
    assert await typed.adapter.current_draft() == "a draft of my own"
    working = Scene(tmux_server, tmp_path, screen="screen_tool_running.txt")
    await until_state(working.adapter, "busy")  # as for the draft: the pane is read once its screen is drawn
    pid = find_codex_process(tmux_server.pane_pid(working.pane)).pid
    for child in [*proc.children(pid), pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)  # the agent exits: a bare shell remains, never type there
    await until_state(working.adapter, "absent")
    tmux_server.run("kill-pane", "-t", working.pane)
    await until_state(working.adapter, "gone")


async def until_state(adapter: CodexAdapter, wanted: str) -> None:
    states: list[str] = []

    async def check() -> bool:
        states.append(await adapter.target_state())
        return states[-1] == wanted

    with anyio.fail_after(10):
        while not await check():
            await anyio.sleep(0.05)


async def test_resolve_names_the_rollout_and_the_rule(scene: Scene) -> None:
    records = scene.turns()
    steps = await scene.adapter.resolve()
    assert [s.step for s in steps][-2:] == ["start time", "rollout"] and "none yet" in steps[-1].detail
    append(scene.rollout, records)
    steps = await scene.adapter.resolve()
    by_name = {s.step: s for s in steps}
    assert (
        by_name["rollout"].value == str(scene.rollout)
        and "(rule: start time + cwd)" in by_name["rollout"].detail
    )
    assert "failed" not in by_name["turn"].detail and "idle; last turn" in by_name["turn"].detail
    assert all(s.ok for s in steps)
