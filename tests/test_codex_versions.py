"""Turn ends of the older Codex rollout shapes (docs/agents.md, Older Codex rollouts;
tests/fixtures/codex-old, written from those facts):
Codex before ~0.104 (no task events: a turn ends at the next prompt, the last one when the session goes idle
or codex exits) and the legacy format (no envelope). Through the real ``baton extract``, the adapter's
catch-up (``finished_turns``), its live follow, and a real ``baton run`` handing the answers on."""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.journal import Journal, default_journal_path
from plugins.codex.adapter import CodexAdapter
from plugins.codex.reader import JsonlTail, thread_id_of
from plugins.codex.resolve import find_codex_process
from plugins.codex.turns import RolloutState
from tests.support.agents import demo_agent_command, messages
from tests.support.cli import baton, start_baton
from tests.support.codex import CodexHome, append, following, older_turns, prompt_lines, rollout_path
from tests.support.paths import FIXTURES
from tests.support.polling import until, wait_for
from tests.support.tmux import TmuxServer

OLD = FIXTURES / "codex-old"
PRE_TASK = OLD / "rollout-2026-01-15T10-00-00-5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b.jsonl"
LEGACY = OLD / "rollout-2025-09-05T17-07-46-c27a914d-8e1f-4b7a-9d2c-6f3e5a1b0c9d.jsonl"
SCREENS = FIXTURES / "codex" / "screens"
PRE_TASK_TURNS = [("completed", "It serves the HTTP API: routes in `routes()`, startup in `main()`."),
                  ("completed", "All 12 tests pass."),
                  ("failed", ""),
                  ("completed", "One change: `main()` now calls `load_config()` before `serve()`.")]
LEGACY_TURNS = [("completed", "Three entries: `README.md`, `src/` and `tests/`."),
                ("completed", "It says how to run the API: `make run`, then open http://localhost:8000.")]
SHAPES = {"pre-task-event": (PRE_TASK, PRE_TASK_TURNS), "legacy": (LEGACY, LEGACY_TURNS)}


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def fold(path: Path) -> RolloutState:
    state = RolloutState(thread_id=thread_id_of(path))
    for record in JsonlTail(path).read():
        state.feed(record)
    return state


# ---- the files: baton extract, ids, unknown lines ------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_baton_extract_gives_the_last_answer(shape: str) -> None:
    path, turns = SHAPES[shape]
    result = baton("extract", "--agent", "codex", str(path))
    assert (result.status, result.out, result.err) == (0, turns[-1][1] + "\n", "")
    as_json = json.loads(baton("extract", "--agent", "codex", "--json", str(path)).out)
    assert as_json["turn_id"] == f"{thread_id_of(path)}:{prompt_lines(records(path))[-1] + 1}"
    assert as_json["outcome"] == "completed"


@pytest.mark.parametrize("shape", SHAPES)
def test_turns_end_at_the_next_prompt_with_ids_stable_across_reads(shape: str, tmp_path: Path) -> None:
    path, turns = SHAPES[shape]
    whole = fold(path)
    assert whole.provisional is not None and whole.busy  # the last turn: nothing on disk ends it
    assert whole.settle("idle") is not None
    assert [(t.outcome, t.answer or "") for t in whole.take_finished()] == [
        (o, a or "") for o, a in turns[:-1]] + [turns[-1]]
    # read again, and read as it is written (line by line, a line in two halves): the same ids
    grown = tmp_path / path.name
    grown.write_text("")
    tail, state = JsonlTail(grown), RolloutState(thread_id=thread_id_of(grown))
    for line in path.read_text().splitlines(keepends=True):
        with open(grown, "a") as f:
            f.write(line[:7])
        for record in tail.read():
            state.feed(record, time.time())
        with open(grown, "a") as f:
            f.write(line[7:])
        for record in tail.read():
            state.feed(record, time.time())
    again = fold(path)
    assert list(again.turns) == list(whole.turns) == list(state.turns)
    assert [t.prompt for t in state.turns.values()] == [t.prompt for t in whole.turns.values()]


def test_the_failed_turn_of_the_pre_task_shape_says_why() -> None:
    state = fold(PRE_TASK)
    failed = [t for t in state.turns.values() if t.outcome == "failed"]
    assert [(t.prompt, t.error) for t in failed] == [
        ("explain every module in detail", "no answer before the next prompt (interrupted?)")]


def test_unknown_and_broken_lines_are_skipped(tmp_path: Path) -> None:
    lines = records(LEGACY)
    noisy = [lines[0], "not json", [1, 2], {"record_type": "state", "extra": {"x": 1}}, {"type": "brand_new"},
             {"weird": True}, *lines[1:-1], {"type": "message", "role": "system", "content": "?"}, lines[-1]]
    path = write(tmp_path / LEGACY.name, noisy)
    assert baton("extract", "--agent", "codex", str(path)).out == LEGACY_TURNS[-1][1] + "\n"
    state = fold(path)
    assert [t.prompt for t in state.turns.values()] == ["list the files", "what does README.md say?"]


def test_baton_extract_says_why_nothing_finished(tmp_path: Path) -> None:
    pre = records(PRE_TASK)
    first_tool_call = next(i for i, r in enumerate(pre) if r["payload"].get("type") == "function_call")
    second_prompt = prompt_lines(pre)[1]
    cases = {
        # a preamble, then a tool call with no answer after it yet (the first turn is finished, so cut it off)
        "open": (
            [pre[0], *pre[second_prompt : first_tool_call + 1]],
            "the last turn is still open (no answer on disk yet)",
        ),
        "only a prompt": (
            pre[: prompt_lines(pre)[0] + 1],
            "the last turn is still open (no answer on disk yet)",
        ),
        "interrupted": (
            [
                *pre[: prompt_lines(pre)[0] + 1],
                {
                    "timestamp": pre[5]["timestamp"],
                    "type": "event_msg",
                    "payload": {"type": "turn_aborted", "reason": "interrupted"},
                },
            ],
            "failed: interrupted; it left no answer",
        ),
        "legacy header only": (records(LEGACY)[:4], "holds no turn: no prompt was written to it"),
        "not a rollout": (["hello", "world"], "holds no turn: it has no JSON lines"),
    }
    for name, (lines, why) in cases.items():
        path = write(tmp_path / f"{name.replace(' ', '-')}.jsonl", lines)
        result = baton("extract", "--agent", "codex", str(path))
        assert result.status == 1 and result.out == "", (name, result)
        result.one_line_error(1, why, str(path))


# ---- the adapter: catch-up, live follow, codex exiting -------------------------------------------------


class OldCodex:
    """A pane running a codex stand-in that holds its rollout open, as Codex did before the shared daemon."""

    def __init__(self, server: TmuxServer, tmp: Path, screen: str = "screen_done.txt") -> None:
        self.server, self.home, self.project = server, CodexHome(tmp / "codex-home"), tmp / "api"
        self.project.mkdir()
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "codex").symlink_to("/bin/bash")
        at = time.time()
        self.tid = self.home.thread(at)
        self.rollout = rollout_path(self.home.root, self.tid, at)
        self.rollout.parent.mkdir(parents=True)
        script = (
            f"exec 3>>{shlex.quote(str(self.rollout))}; cat {shlex.quote(str(SCREENS / screen))}; "
            "sleep 300; true"
        )
        inner = f"{bin_dir / 'codex'} -c {shlex.quote(script)}; exec bash --norc --noprofile"
        self.pane = server.new_pane(f"bash -c {shlex.quote(inner)}", cwd=self.project,
                                    env={"CODEX_HOME": str(self.home.root)})
        self.pid = server.pane_pid(self.pane)
        wait_for(lambda: self.rollout.exists() and find_codex_process(self.pid), what="the codex stand-in")
        self.ctx = EngineContext(name="old", tile=Tile(pane=self.pane, agent="codex"), tmux=server.tmux)
        self.adapter = CodexAdapter(self.ctx)

    def lines(self, fixture: Path, start: float | None = None) -> list[dict]:
        return older_turns(fixture, self.tid, self.project, start if start is not None else time.time())

    def exit(self) -> None:
        os.kill(find_codex_process(self.pid).pid, signal.SIGKILL)




def age(path: Path, seconds: float) -> None:
    at = time.time() - seconds
    os.utime(path, (at, at))


@pytest.mark.tmux
@pytest.mark.anyio
async def test_catch_up_settles_the_last_turn_only_once_the_rollout_is_quiet(tmux_server: TmuxServer,
                                                                             tmp_path: Path) -> None:
    old = OldCodex(tmux_server, tmp_path)
    append(old.rollout, old.lines(PRE_TASK, time.time() - 120))
    ends = await old.adapter.finished_turns(0)
    assert [(e.outcome, e.text) for e in ends] == PRE_TASK_TURNS[:3]  # just written: the last is still open
    age(old.rollout, 30)
    fresh = CodexAdapter(old.ctx)
    ends = await fresh.finished_turns(0)
    assert [(e.outcome, e.text) for e in ends] == PRE_TASK_TURNS
    assert ends[2].detail == "no answer before the next prompt (interrupted?)" and ends[-1].cwd == str(
        old.project
    )
    assert [e.turn_id for e in ends] == list(fold(old.rollout).turns)  # the ids a file read gives
    later = await CodexAdapter(old.ctx).finished_turns(ends[1].ended_at + 0.001)
    assert [e.turn_id for e in later] == [e.turn_id for e in ends[2:]]


@pytest.mark.tmux
@pytest.mark.anyio
async def test_catch_up_of_a_legacy_rollout_takes_no_old_history_for_news(tmux_server: TmuxServer,
                                                                         tmp_path: Path) -> None:
    old = OldCodex(tmux_server, tmp_path)
    append(
        old.rollout, old.lines(LEGACY, time.time() - 86400)
    )  # a session begun yesterday, answered just now
    age(old.rollout, 20)
    ends = await old.adapter.finished_turns(time.time() - 60)
    assert [(e.outcome, e.text) for e in ends] == LEGACY_TURNS[1:]
    assert abs(ends[0].ended_at - (time.time() - 20)) < 5  # dated by the file's last write
    everything = await old.adapter.finished_turns(0)
    assert [(e.outcome, e.text) for e in everything] == LEGACY_TURNS


@pytest.mark.tmux
@pytest.mark.anyio
@pytest.mark.parametrize("shape", SHAPES)
async def test_live_turns_end_at_the_next_prompt_and_when_the_session_goes_idle(
        shape: str, tmux_server: TmuxServer, tmp_path: Path) -> None:
    fixture, turns = SHAPES[shape]
    old = OldCodex(tmux_server, tmp_path)
    lines = old.lines(fixture)
    prompts = prompt_lines(lines)
    async with following(old.adapter) as emitted:
        await until(lambda: old.adapter.rollout == old.rollout, what="the rollout held open")
        append(old.rollout, lines[:prompts[1]])  # the first turn, answered; nothing on disk ends it
        await until(lambda: old.adapter.state is not None and old.adapter.state.busy, what="the turn")
        assert await old.adapter.target_state() == "busy"
        await until(lambda: len(emitted) == 1, what="the first turn, once the session is idle")
        first = emitted[0]
        assert first.outcome == "completed" and first.signal == "rollout"
        response = await old.adapter.response(first)
        assert (response.text, response.source) == (turns[0][1], "transcript")
        assert await old.adapter.target_state() == "ready"
        append(old.rollout, lines[prompts[1]:])  # the rest: each prompt ends the turn before it
        await until(lambda: len(emitted) == len(turns), what="every turn")
        assert [c.outcome for c in emitted] == [o for o, _ in turns]
        assert [c.turn_id for c in emitted] == list(fold(old.rollout).turns)
        assert len({c.turn_id for c in emitted}) == len(turns)
        last = await old.adapter.response(emitted[-1])
        assert last.text == turns[-1][1]


@pytest.mark.tmux
@pytest.mark.anyio
async def test_codex_exiting_ends_the_open_turn(tmux_server: TmuxServer, tmp_path: Path) -> None:
    old = OldCodex(tmux_server, tmp_path)
    lines = old.lines(PRE_TASK)
    prompts = prompt_lines(lines)
    async with following(old.adapter) as emitted:
        await until(lambda: old.adapter.rollout == old.rollout, what="the rollout held open")
        append(old.rollout, lines[:prompts[0] + 3])  # a prompt, no answer yet
        await until(lambda: old.adapter.state is not None and old.adapter.state.busy, what="the turn")
        old.exit()
        await until(lambda: len(emitted) == 1, what="the turn, ended by codex exiting")
        assert emitted[0].outcome == "failed" and "codex process exited" in emitted[0].detail


@pytest.mark.tmux
@pytest.mark.anyio
async def test_an_unanswered_turn_long_quiet_with_an_idle_screen_takes_hand_offs(tmux_server: TmuxServer,
                                                                                tmp_path: Path) -> None:
    """An interrupt wrote nothing in those versions: the open turn's end shows only at the next prompt. A
    minute of quiet with no busy marker on screen lets hand-offs in (typing the next prompt ends it)."""
    old = OldCodex(tmux_server, tmp_path)
    lines = old.lines(PRE_TASK, time.time() - 300)
    append(old.rollout, lines[:prompt_lines(lines)[0] + 3])  # a prompt, nothing after it
    assert await old.adapter.target_state() == "busy"  # just written: running
    age(old.rollout, 120)
    assert await CodexAdapter(old.ctx).target_state() == "ready"


# ---- baton run: the answers handed on, each once ----------------------------------------------------


@pytest.mark.tmux
@pytest.mark.parametrize("shape", SHAPES)
def test_baton_run_hands_each_older_codex_answer_on_once(
    shape: str, tmux_server: TmuxServer, tmp_path: Path
) -> None:
    fixture, turns = SHAPES[shape]
    old = OldCodex(tmux_server, tmp_path)
    log = tmp_path / "target.jsonl"
    target = tmux_server.new_pane(demo_agent_command("target", work_s=0.2, log=log))
    wait_for(lambda: "demo❯" in tmux_server.capture(target), what="the target agent")
    config = tmp_path / "routes.yaml"
    config.write_text(json.dumps({
        "version": 1, "tmux": {"socket_name": tmux_server.socket},
        "tiles": {"old": {"pane": old.pane, "agent": "codex"}, "target": {"pane": target, "agent": "demo"}},
        "routes": [{"from": "old", "to": "target"}], "settings": {"catch_up_s": 120}}))
    err = tmp_path / "run.err"
    daemon = start_baton("-v", "run", "-c", str(config), stderr=err)
    try:
        wait_for(
            lambda: (
                Journal(default_journal_path()).followed_until("old") is not None or daemon.poll() is not None
            ),
            what="baton run following the codex tile",
        )
        assert daemon.poll() is None, err.read_text()
        lines = old.lines(fixture)
        prompts = prompt_lines(lines)
        append(old.rollout, lines[:prompts[1]])
        answers = [a for o, a in turns if o == "completed"]

        def handed_on(count: int, what: str) -> None:
            try:
                wait_for(lambda: len(messages(log)) >= count, timeout=60, what=what)
            except AssertionError as exc:
                got, said = messages(log), err.read_text()
                raise AssertionError(f"{exc}; the target got {got}; baton run said:\n{said}") from None
            assert messages(log) == answers[:count], err.read_text()

        handed_on(1, "the first answer handed on")
        append(old.rollout, lines[prompts[1]:])
        handed_on(len(answers), "every answer handed on")
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
    assert messages(log) == answers
