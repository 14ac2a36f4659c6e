"""The OpenCode adapter on a generated store and a real process named ``opencode`` in a real pane: completion
through the shared watcher (each turn once, tool steps never, aborts failed), catch-up, busy from the store
during a permission prompt, start confirmation, two panes in one folder, and the screen when the schema is
unknown. The real OpenCode is in test_opencode_e2e.py; these are the cases it cannot produce on demand."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from pipeline import cli
from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.watch import FileWatcher
from pipeline.plugin.events import Completion
from pipeline.system.text import strip_ansi
from plugins.opencode.adapter import OpenCodeAdapter, input_draft
from plugins.opencode.resolve import PEERS
from tests.conftest import FIXTURES, REPO, TmuxServer, aquiet_for, until, wait_for
from tests.fakes.opencode_store import StoreWriter
from tests.fakes.standin_tui import standin_command
from tests.stage_kit import with_catch_up

SCREENS = FIXTURES / "opencode" / "screens"


def test_the_input_box_draft_is_read_from_recorded_screens() -> None:
    assert input_draft((SCREENS / "screen_startup.txt").read_text()) == ""  # the placeholder is not a draft
    done = strip_ansi((SCREENS / "screen_done.txt").read_text())
    assert input_draft(done) == ""
    assert (
        input_draft(
            done.replace("  ┃  Build · Fake Fake", "  ┃  fix the tests\n  ┃\n  ┃  Build · Fake Fake", 1)
        )
        == "fix the tests"
    )
    assert input_draft("no OpenCode here\n$ ") == ""
    # a wide pane: the sidebar's long path wraps onto the box's rows, right of the box's border
    lines = done.split("\n")
    mode = next(i for i, line in enumerate(lines) if "Build · Fake Fake" in line)
    lines[mode - 1] = lines[mode - 1][:118].ljust(118) + "/tmp/pytest-of-root/pytest-63/"
    assert input_draft("\n".join(lines)) == ""
    adapter = OpenCodeAdapter.__new__(OpenCodeAdapter)
    assert adapter.is_busy(strip_ansi((SCREENS / "screen_working.txt").read_text()))
    assert not adapter.is_busy(done)


# ---- a real process named opencode -------------------------------------------------------------------



class Scene:
    """A project folder, a data folder with the store, and OpenCode stand-ins in panes."""

    def __init__(self, server: TmuxServer, tmp: Path, schema: str | None = None) -> None:
        self.server, self.tmp = server, tmp
        self.project, self.data = tmp / "web", tmp / "data"
        self.project.mkdir()
        self.db = self.data / "opencode" / "opencode.db"
        self.writer = StoreWriter(self.db, **({"schema": schema} if schema else {}))
        self.watcher = FileWatcher()

    def env(self) -> dict[str, str]:
        return {"XDG_DATA_HOME": str(self.data), "HOME": str(self.tmp), "PYTHONPATH": str(REPO)}

    def start(self, *, shell: bool = False) -> str:
        """A pane running the stand-in (``shell``: typed into a bash, so that it can exit to a bare shell)."""
        command = standin_command(
            "opencode", prompt="┃  ", busy="⬝⬝■■  esc interrupt", answer="screen answer {n}"
        )
        if shell:
            pane = self.server.new_pane(cwd=self.project, env=self.env())
            self.server.type(pane, command)
        else:
            pane = self.server.new_pane(command, cwd=self.project, env=self.env())
        wait_for(lambda: "opencode stand-in" in self.server.capture(pane), what="the stand-in")
        time.sleep(1.1)  # sessions it makes are created after it started, as with the real OpenCode
        return pane

    def adapter(self, pane: str, name: str = "oc") -> OpenCodeAdapter:
        ctx = EngineContext(name=name, tile=Tile(pane=pane, agent="opencode"), tmux=self.server.tmux,
                          watcher=self.watcher)
        return OpenCodeAdapter(ctx)


@contextlib.asynccontextmanager
async def following(scene: Scene, *adapters: OpenCodeAdapter) -> AsyncIterator[dict[str, list[Completion]]]:
    got: dict[str, list[Completion]] = {a.ctx.name: [] for a in adapters}
    async with anyio.create_task_group() as tg:
        tg.start_soon(scene.watcher.run)
        for adapter in adapters:

            async def emit(c: Completion) -> None:
                got[c.tile].append(c)

            tg.start_soon(adapter.follow, with_catch_up(adapter, emit))
        yield got
        tg.cancel_scope.cancel()




@pytest.mark.tmux
@pytest.mark.anyio
async def test_each_turn_completes_once_from_the_store(tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    w = scene.writer
    stale = w.session(scene.project, created_ms=int(time.time() * 1000) - 60_000)
    w.turn(
        stale, "an older run's prompt", "an older run's answer"
    )  # another process's session: never reported
    pane = scene.start()
    session = w.session(scene.project)
    before = w.turn(session, "first", "finished before batonpass looked")  # reported once: catch-up
    adapter = scene.adapter(pane)
    async with following(scene, adapter) as got:
        await until(lambda: got["oc"], what="the catch-up turn")
        tool_turn = w.turn(session, "TOOLTEST", "listed:\n```\nREADME.md\n```", tool_step=True)
        await until(lambda: len(got["oc"]) == 2, what="the tool turn")
        user = w.user(session, "SLOWTEST")
        step = w.step(session, user)
        w.finish(session, step, texts=("half",), finish=None,
                 error={"name": "MessageAbortedError", "data": {"message": "Aborted"}})
        await until(lambda: len(got["oc"]) == 3, what="the aborted turn")
        w.user(session, "touch the store again")
        await aquiet_for(0.8, "a completion for a prompt with no answer yet, or a turn reported twice")
        turns = [(c.turn_id, c.outcome, c.signal) for c in got["oc"]]
        assert turns == [
            (before, "completed", "catch-up"),
            (tool_turn, "completed", "store"),
            (step, "failed", "store"),
        ]
        answer = await adapter.response(got["oc"][1])
        assert (answer.text, answer.source) == ("listed:\n```\nREADME.md\n```", "store")
        assert (await adapter.response(got["oc"][2])).note == "turn ended: MessageAbortedError: Aborted"
        latest = await adapter.last_response()  # baton status and baton preview ask this
        assert (latest.completion.turn_id, latest.completion.outcome) == (step, "failed")


@pytest.mark.tmux
@pytest.mark.anyio
async def test_an_idle_follower_reads_the_store_only_when_it_changes_and_sees_its_opencode_exit(
        tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle, with one session that can be this pane's, a follower is woken by the store's writes and its
    OpenCode's exit (a pidfd) alone: no store read every ``recheck_s`` (50 idle tiles: 10 scans and screen
    captures a second). With two candidate sessions the screen may tell which is this pane's, and the
    timer comes back."""
    monkeypatch.setattr(OpenCodeAdapter, "recheck_s", 0.1)
    scene = Scene(tmux_server, tmp_path)
    pane = scene.start(shell=True)
    session = scene.writer.session(scene.project)
    scene.writer.turn(session, "first", "an answer")
    adapter = scene.adapter(pane)
    scans: list[float] = []
    scan = adapter._scan

    async def counted(*args: object) -> bool:
        scans.append(time.monotonic())
        return await scan(*args)  # type: ignore[arg-type]

    adapter._scan = counted  # type: ignore[method-assign]
    async with following(scene, adapter) as got:
        await until(lambda: got["oc"], what="the catch-up turn")
        await until(lambda: scans, what="the first scan")
        await anyio.sleep(0.5)  # the watcher's own start wakes its subscribers once or twice
        settled = len(scans)
        await aquiet_for(0.8, "the store read again with nothing written")
        assert len(scans) == settled and not adapter._screen_decides  # 8 more on the 0.1 s timer
        scene.writer.turn(session, "second", "another answer")
        await until(lambda: len(got["oc"]) == 2, what="the second turn, from the store's write")
        scene.writer.session(scene.project)  # a second candidate: the screen may tell, on the timer
        await until(lambda: adapter._screen_decides, what="a second candidate session")
        before = len(scans)
        await until(lambda: len(scans) >= before + 3, what="reads on the timer")
        tmux_server.run("send-keys", "-t", pane, "C-c")  # the agent exits: a bare shell is left
        await until(lambda: adapter._said.startswith("no OpenCode process"), what="the exit to be seen")


@pytest.mark.tmux
@pytest.mark.anyio
async def test_busy_from_the_store_and_start_confirmed_by_the_new_user_message(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    w = scene.writer
    pane = scene.start(shell=True)
    adapter = scene.adapter(pane)
    session = w.session(scene.project)
    user = w.user(session, "read /etc/hostname")
    step = w.step(session, user, tool="running")  # a permission prompt: nothing on screen says busy
    assert await adapter.target_state() == "busy"
    w.finish(session, step, finish="tool-calls")
    final = w.step(session, user)
    w.finish(session, final, texts=("done",))
    assert await adapter.target_state() == "ready"
    before = await adapter.snapshot()
    adapter.prompt_submitted("the prompt batonpass typed", time.time())
    w.user(session, "something a person typed meanwhile")
    assert not await adapter.turn_started(before)
    w.user(session, "the prompt batonpass typed")
    assert await adapter.turn_started(before)
    tmux_server.run("send-keys", "-t", pane, "C-c")  # the agent exits: a bare shell is left
    await until(lambda: tmux_server.capture(pane).rstrip().endswith("$"), what="the bare shell")
    assert await adapter.target_state() == "absent"


@pytest.mark.tmux
@pytest.mark.anyio
async def test_two_panes_in_one_folder_get_their_own_turns(tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    w = scene.writer
    pane_a = scene.start()
    session_a = w.session(scene.project)  # made before b started: a's
    w.user(session_a, "a person's prompt in a")
    time.sleep(0.5)  # b starts after a's first prompt (closer than SLACK_MS would be ambiguous)
    pane_b = scene.start()
    a, b = scene.adapter(pane_a, "a"), scene.adapter(pane_b, "b")
    async with following(scene, a, b) as got:
        await until(lambda: any({"a", "b"} <= claims.keys() for claims in PEERS.values()),
                    what="both tiles following the store (each sees the other as its peer)")
        b.prompt_submitted("review the parser", time.time())  # as the dispatcher tells it
        session_b = w.session(scene.project)
        turn_b = w.turn(session_b, "review the parser", "looks fine")
        await until(lambda: got["b"], what="b's turn")
        turn_a = w.turn(session_a, "and now the lexer", "lexer done")
        await until(lambda: got["a"], what="a's turn")
        await aquiet_for(0.8, "a turn reported to the wrong tile")
        assert [c.turn_id for c in got["b"]] == [turn_b]
        assert [c.turn_id for c in got["a"]] == [turn_a]
    assert (a._session, b._session) == (session_a, session_b)


@pytest.mark.tmux
@pytest.mark.anyio
async def test_an_unknown_schema_is_reported_once_and_the_screen_takes_over(
        tmux_server: TmuxServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    scene = Scene(tmux_server, tmp_path, schema="CREATE TABLE session (id TEXT, directory TEXT);")
    pane = scene.start()
    adapter = scene.adapter(pane)
    OpenCodeAdapter._reported.clear()
    with caplog.at_level(logging.INFO, logger="batonpass"):
        async with following(scene, adapter) as got:
            await until(lambda: adapter._mark is not None, what="the screen follower's first look")
            tmux_server.type(pane, "hello")
            await until(lambda: got["oc"], timeout=20, what="a completion from the screen")
            assert got["oc"][0].signal == "screen"
            assert "screen answer 1" in (await adapter.response(got["oc"][0])).text
            assert await adapter.target_state() == "ready"
    warnings = [r for r in caplog.records if "does not look like OpenCode" in r.getMessage()]
    assert len(warnings) == 1 and "reading OpenCode from its screen" in warnings[0].getMessage()


@pytest.mark.tmux
def test_baton_resolve_names_the_session(tmux_server: TmuxServer, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    scene = Scene(tmux_server, tmp_path)
    pane = scene.start()
    session = scene.writer.session(scene.project)
    turn = scene.writer.turn(session, "q", "the answer")
    assert cli.main(["resolve", pane, "-L", tmux_server.socket, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    steps = {s["step"]: s for s in out["steps"]}
    assert out["agent"] == "opencode"
    assert steps["store"]["value"] == str(scene.db)
    assert steps["session"]["value"]["session_id"] == session and steps["session"]["value"]["rule"] == "start"
    assert steps["answer"]["value"] == turn
