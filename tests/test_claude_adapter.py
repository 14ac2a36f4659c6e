"""The Claude Code adapter's signals, answers and target states, with a real watcher on real files.

The pane runs a copy of ``sleep`` named ``claude`` under a shell; the test writes the session file and
transcript lines as Claude Code 2.1.197 does (timings and order from docs/agents.md, Claude Code), and checks
what the adapter reports. The real CLI is exercised in test_claude_e2e.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.watch import FileWatcher
from pipeline.plugin.events import Completion
from pipeline.views.tile_status import tile_status
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.claude_code.hooks import install_stop_hook
from plugins.claude_code.screen import input_box, screen_answer
from tests.support.agents import messages, start_agent
from tests.support.claude import SCREENS, Scene, text
from tests.support.paths import FIXTURES
from tests.support.pipelines import REGISTRIES, make_config, running, watches
from tests.support.polling import aquiet_for, until
from tests.support.stages import with_catch_up
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]


@asynccontextmanager
async def following(scene: Scene) -> AsyncIterator[list[Completion]]:
    watcher = FileWatcher()
    scene.ctx.watcher = watcher
    emitted: list[Completion] = []

    async def emit(completion: Completion) -> None:
        emitted.append(completion)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        tg.start_soon(scene.adapter.follow, with_catch_up(scene.adapter, emit, first_run=True))
        await until(lambda: scene.adapter._resolution is not None and scene.adapter._resolution.session, 10,
                    "the adapter following the session file")
        await until(lambda: watches(watcher, *scene.folders()), what="the watcher on its new folders")
        yield emitted
        tg.cancel_scope.cancel()


async def test_one_turn_gets_one_id_from_transcript_status_and_hook(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    async with following(scene) as emitted:
        tx = scene.transcript()
        scene.status("busy")
        key = tx.prompt("refactor it")
        tx.assistant("msg_1", text("Refactored ✓"))
        tx.end()
        scene.status("idle")
        await until(lambda: emitted, 10, "the completion")
        await aquiet_for(0.5, "a completion under another turn id")
        hooked = await scene.adapter.hook_completion(scene.hook(key, "Refactored ✓"))
    turn = f"claude:{scene.session_id}:{key}"
    assert {c.turn_id for c in emitted} == {turn} and hooked.turn_id == turn
    assert all(c.outcome == "completed" for c in emitted) and hooked.text == "Refactored ✓"
    response = await scene.adapter.response(emitted[0])
    assert response.text == "Refactored ✓" and response.source == "transcript"
    latest = await scene.adapter.last_response()  # baton status and baton preview ask this
    assert (latest.text, latest.completion.turn_id) == ("Refactored ✓", turn)


async def test_waiting_on_a_permission_prompt_is_not_a_completion(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    async with following(scene) as emitted:
        tx = scene.transcript()
        scene.status("busy")
        key = tx.prompt("PERMTEST")
        tx.assistant(
            "msg_t",
            text("I will create a file."),
            {"type": "tool_use", "id": "t", "name": "Bash", "input": {}},
            stop="tool_use",
        )
        scene.status("waiting", waitingFor="permission prompt")
        assert await scene.adapter.target_state() == "busy"
        await aquiet_for(2.0, "a completion while the permission prompt waits (longer than the idle grace)")
        assert emitted == []
        scene.status("busy")
        tx.write(tx.line({"type": "user", "promptId": key, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}}))
        tx.assistant("msg_f", text("Created."))
        tx.end()
        scene.status("idle")
        await until(lambda: emitted, 10, "the completion")
    assert {(c.turn_id, c.outcome) for c in emitted} == {(f"claude:{scene.session_id}:{key}", "completed")}
    assert (await scene.adapter.response(emitted[0])).text == "Created."


async def test_esc_before_any_text_is_a_failed_turn_and_a_local_command_no_turn(tmux_server: TmuxServer,
                                                                                tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    async with following(scene) as emitted:
        tx = scene.transcript()
        scene.status("busy")
        key = tx.prompt("SLOWTEST: interrupt me")  # Claude Code writes nothing more when Esc comes this early
        scene.status("idle")
        await until(lambda: emitted, 10, "the failed completion")
        assert [(c.turn_id, c.outcome, c.signal) for c in emitted] == [
            (f"claude:{scene.session_id}:{key}", "failed", "status")
        ]
        scene.status("busy")
        tx.write(
            tx.line(
                {
                    "type": "user",
                    "isMeta": True,
                    "promptId": "cmd",
                    "message": {"role": "user", "content": "<local-command-caveat>"},
                }
            ),
            tx.line(
                {
                    "type": "user",
                    "promptId": "cmd",
                    "message": {"role": "user", "content": "<command-name>/compact</command-name>"},
                }
            ),
        )
        scene.status("idle")
        await aquiet_for(2.0, "a turn for the local command")
    assert len(emitted) == 1


async def test_after_clear_the_new_transcript_is_followed(tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    scene.transcript().turn("before clear", "old answer")
    async with following(scene) as emitted:
        scene.session_id = str(uuid.uuid4())  # 2.1.197 names the new session in the session file
        scene.status("idle")
        tx = scene.transcript()
        key = tx.turn("after clear", "new answer")
        await until(lambda: emitted, 10, "the completion from the new transcript")
    assert [c.turn_id for c in emitted] == [f"claude:{scene.session_id}:{key}"]
    assert (await scene.adapter.response(emitted[0])).text == "new answer"


async def test_the_hook_may_come_first_the_answer_still_comes_from_the_transcript(tmux_server: TmuxServer,
                                                                                 tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("busy")
    tx = scene.transcript()
    key = tx.prompt("quick")
    hooked = await scene.adapter.hook_completion(scene.hook(key, "hook text, trimmed"))
    answers: list[str] = []

    async def answer() -> None:
        answers.append((await scene.adapter.response(hooked)).text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        await anyio.sleep(0.3)  # shapes the scenario: the Stop hook fires before the line is on disk
        tx.assistant("m", text("hook text, trimmed\n"))
        tx.end()
    assert answers == ["hook text, trimmed\n"]


async def test_hook_records_are_matched_by_pane_then_session(tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    tx = scene.transcript()
    key = tx.turn("x", "y")
    adapter = scene.adapter
    assert await adapter.hook_completion(scene.hook(key, "y", pane="%999")) is None
    assert await adapter.hook_completion(scene.hook(key, "y", event="SubagentStop")) is None
    assert (await adapter.hook_completion(scene.hook(key, "y", pane=None))).turn_id.endswith(key)
    no_prompt_id = await adapter.hook_completion(
        scene.hook(None, "y")
    )  # older versions: key from the transcript
    assert no_prompt_id.turn_id == f"claude:{scene.session_id}:{key}"
    other = scene.hook(key, "y", pane=None)
    other.payload["session_id"] = str(uuid.uuid4())
    assert await adapter.hook_completion(other) is None


async def test_without_session_file_or_transcript_the_screen_answers_and_says_why(tmux_server: TmuxServer,
                                                                                 tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path, screen=str(SCREENS / "screen_done.txt"))
    await until(lambda: "Brewed" in tmux_server.capture(scene.pane), 5, "the recorded screen")
    response = await scene.adapter.response(Completion("coder", f"claude:{uuid.uuid4()}:k"))
    assert response.source == "terminal" and "shows no end of turn" in response.note
    assert response.text.startswith("I refactored the auth middleware") and response.text.endswith(
        "- tests/test_auth.py"
    )
    scene.adapter.startup_grace_s = 0.0
    assert "following the screen" in scene.adapter._why_not_files(await scene.adapter._resolve())


async def test_target_states(tmux_server: TmuxServer, tmp_path: Path) -> None:
    draft_screen = tmp_path / "draft.txt"
    draft_screen.write_text(
        (SCREENS / "screen_done.txt").read_text().replace("❯\u00a0", "❯\u00a0half-typed idea")
    )
    scene = Scene(tmux_server, tmp_path, screen=str(draft_screen))
    await until(lambda: "half-typed" in tmux_server.capture(scene.pane), 5, "the screen")
    for status, expected in (("busy", "busy"), ("waiting", "busy"), ("shell", "busy"), ("idle", "draft")):
        scene.status(status)
        assert await scene.adapter.target_state() == expected, status
    bare = ClaudeCodeAdapter(
        EngineContext(name="t", tile=Tile(pane=tmux_server.new_pane()), tmux=tmux_server.tmux)
    )
    assert await bare.target_state() == "absent"


def test_screens_input_box_and_answer() -> None:
    assert input_box((SCREENS / "screen_done.txt").read_text()) == ""
    assert input_box((SCREENS / "screen_permission_prompt.txt").read_text()) is None  # a dialog, not the box
    assert screen_answer((SCREENS / "screen_tool_done.txt").read_text()).startswith(
        "The command printed hello."
    )


def test_hooks_install_merges_is_idempotent_and_never_breaks_settings(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "model": "opus",
                "hooks": {
                    "Stop": [{"hooks": [{"type": "command", "command": "mine"}]}],
                    "PreToolUse": [{"matcher": "*", "hooks": []}],
                },
            }
        )
    )
    command = f"{sys.executable} -m pipeline.spool claude"
    assert "added" in install_stop_hook(settings, command)
    assert "already installed" in install_stop_hook(settings, command)
    assert "updated" in install_stop_hook(settings, "/other/python -m pipeline.spool claude")
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and "PreToolUse" in data["hooks"]
    assert [h["command"] for e in data["hooks"]["Stop"] for h in e["hooks"]] == [
        "mine",
        "/other/python -m pipeline.spool claude",
    ]
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="nothing was changed"):
        install_stop_hook(broken, command)
    assert broken.read_text() == "{not json"
    fresh = tmp_path / "new" / "settings.json"
    install_stop_hook(fresh, command)
    assert fresh.stat().st_mode & 0o777 == 0o600


def test_the_hook_returns_at_once_and_never_fails_the_turn(tmp_path: Path) -> None:
    """With no daemon, with junk on stdin, with an unwritable state folder: exit 0, fast."""
    unwritable = tmp_path / "ro"
    unwritable.mkdir(mode=0o500)
    for stdin, state in (
        ('{"session_id": "s", "prompt_id": "p"}', tmp_path / "state"),
        ("not json", tmp_path / "state"),
        ("{}", unwritable / "sub"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "pipeline.spool", "claude"],
            input=stdin,
            text=True,
            capture_output=True,
            env={"XDG_STATE_HOME": str(state), "TMUX_PANE": "%7"},
            timeout=10,
        )
        assert result.returncode == 0
    [record] = [
        json.loads(p.read_text()) for p in (tmp_path / "state" / "batonpass" / "spool").glob("*.json")
    ]
    assert record["pane"] == "%7" and record["payload"]["prompt_id"] == "p"


# ---- 2.1.332: background agents (docs/agents.md; tests/fixtures/claude-code-2.1.332 lines 44–62) ----


def agent_turn(scene: Scene, prompt: str) -> str:
    """The parent turn as 2.1.332 writes it: an Agent call whose result is "Async agent launched", the
    answer "I launched…", end lines with ``pendingBackgroundAgentCount: 1`` — and the session stays busy."""
    tx = scene.transcript()
    scene.status("busy")
    key = tx.prompt(prompt)
    tx.assistant(
        "msg_p1",
        text("I will delegate this to a subagent."),
        {"type": "tool_use", "id": "toolu_a", "name": "Agent", "input": {"prompt": "survey"}},
        stop="tool_use",
    )
    tx.write(
        tx.line(
            {
                "type": "user",
                "promptId": key,
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_a",
                            "content": [text("Async agent launched successfully.")],
                        }
                    ],
                },
            }
        )
    )
    tx.assistant("msg_p2", text("I launched an agent to survey the project."))
    tx.write(
        tx.line({"type": "system", "subtype": "stop_hook_summary"}),
        tx.line(
            {
                "type": "system",
                "subtype": "turn_duration",
                "durationMs": 900,
                "pendingBackgroundAgentCount": 1,
            }
        ),
    )
    return key


async def test_a_turn_with_a_background_agent_running_is_held_until_the_notification_turn_ends(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    async with following(scene) as emitted:
        parent = agent_turn(scene, "AGENTTEST: survey the project")
        running = scene.hook(parent, "I launched an agent to survey the project.")
        running.payload["background_tasks"] = [{"id": "a1", "type": "subagent", "status": "running"}]
        assert await scene.adapter.hook_completion(running) is None
        steps = {s.step: s for s in await scene.adapter.resolve()}
        assert steps["activity"].detail == "working: 1 background agent"
        config = make_config({"coder": {"pane": scene.pane, "agent": "claude"}}, [])
        [row] = await tile_status(config, REGISTRIES, tmux_server.tmux)  # what `baton status` prints
        assert row["state"] == "working: 1 background agent"
        assert await scene.adapter.target_state() == "busy"
        await aquiet_for(2.0, "a completion of the held turn")
        assert emitted == []  # the held turn: no completion, so no route (not even on: any) and no hop
        tx = scene.transcript()
        notified = str(uuid.uuid4())
        tx.write(
            tx.line(
                {
                    "type": "user",
                    "promptId": notified,
                    "turnOrigin": "task_notification",
                    "message": {"role": "user", "content": "<task-notification>\n<task-id>a1</task-id>\n"},
                }
            )
        )
        tx.assistant("msg_n", text("The survey is done: 3 modules, 12 tests."))
        tx.end()
        scene.status("idle")
        await until(lambda: emitted, 10, "the completion of the work")
        await aquiet_for(1.0, "a second completion")
    assert [(c.turn_id, c.outcome) for c in emitted] == [
        (f"claude:{scene.session_id}:{notified}", "completed")
    ]
    assert (await scene.adapter.response(emitted[0])).text == "The survey is done: 3 modules, 12 tests."


async def test_a_held_turn_with_no_turn_after_it_completes_once_the_session_is_idle(tmux_server: TmuxServer,
                                                                                    tmp_path: Path) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.adapter.held_grace_s = 0.5
    scene.status("idle")
    async with following(scene) as emitted:
        parent = agent_turn(scene, "AGENTTEST: quick")
        await aquiet_for(1.0, "the held turn reported before the session file says idle again")
        assert emitted == []
        scene.status("idle")  # the agents finished and no notification turn came
        await until(lambda: emitted, 10, "the held turn as the completion")
    assert [(c.turn_id, c.detail) for c in emitted] == [
        (f"claude:{scene.session_id}:{parent}", "background agents finished")
    ]
    assert (await scene.adapter.response(emitted[0])).text == "I launched an agent to survey the project."


async def test_waiting_for_a_person_comes_from_the_session_file(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("waiting", waitingFor="dialog open")
    assert {s.step: s.detail for s in await scene.adapter.resolve()}["activity"] == "waiting (dialog open)"
    scene.status("idle")
    assert "activity" not in {s.step for s in await scene.adapter.resolve()}


async def test_received_finds_a_pasted_prompt_inside_its_wrapper(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    prompt = "The reviewer says:\n\nline 2\nline 3\nline 4\n\nFix what it asks for."
    # no transcript yet: the session file's session has had no prompt (Claude Code makes it with the first)
    assert await scene.adapter.received(prompt) is False
    scene.transcript().turn("something else", "ok")
    assert await scene.adapter.received(prompt) is False
    scene.transcript().prompt(f'\n\n<pasted_content id="00d6">\n{prompt}\n</pasted_content id="00d6">\n')
    assert await scene.adapter.received(prompt) is True


RECORDED_332 = (
    FIXTURES
    / "claude-code-2.1.332"
    / "home/.claude/projects/-home-dev-my-app/291eb835-bf54-495e-8cdf-44a5fdbe4c06.jsonl"
)


async def test_the_recorded_background_agent_lines_replayed_live_hand_on_one_prompt(
    tmux_server: TmuxServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The stand-in replays 2.1.332's own lines (the recording's Agent turn, lines 44–62, its session renamed)
    with the session file as it was (busy through the background agent, idle at the end), into a running
    pipeline whose route takes ``on: any``: exactly one prompt reaches the target, the notification turn's
    answer — the parent turn's "launched" answer fires nothing."""
    scene = Scene(tmux_server, tmp_path)
    recorded = RECORDED_332.read_text().splitlines()
    old_session = json.loads(recorded[43])["sessionId"]

    def replay(first: int, last: int) -> None:
        with scene.transcript().path.open("a") as f:
            for line in recorded[first - 1:last]:
                f.write(line.replace(old_session, scene.session_id) + "\n")

    scene.status("idle")
    replay(1, 43)  # the turns before: history
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log)
    config = make_config(
        {"coder": {"pane": scene.pane, "agent": "claude"}, "target": {"pane": target, "agent": "demo"}},
        [{"from": "coder", "to": "target", "on": "any", "transform": "raw"}],
    )
    caplog.set_level("DEBUG", logger="batonpass")
    async with running(config, tmux_server) as pipeline:
        await until(lambda: "coder: following" in caplog.text, 20, "the claude tile following its files")
        await until(lambda: watches(pipeline.tiles["coder"].ctx.watcher, *scene.folders()),
                    what="the watcher restarted on the tile's folders")
        pipeline.hops.expect("coder", 2)  # as if a hand-off at hop 2 had started the Agent turn
        scene.status("busy")
        replay(44, 54)  # the parent turn ends, pendingBackgroundAgentCount 1; the session stays busy
        await aquiet_for(2.0, "a hand-off of the held turn")
        assert messages(log) == []
        replay(55, 62)  # the <task-notification> turn, and its end
        scene.status("idle")
        await until(lambda: messages(log), 20, "the hand-off")
        await aquiet_for(ClaudeCodeAdapter.held_grace_s + 1.0, "a second hand-off (the held turn's)")
    final = json.loads(recorded[59])["message"]["content"][0]["text"]
    assert messages(log) == [final.strip("\n")]
    completions = [r for r in caplog.records if r.msg.startswith("completion") and r.args[0] == "coder"]
    # one completion, carrying the hop of the hand-off that started the work: the held turn used none
    assert [(r.args[1], r.args[4]) for r in completions] == [
        (f"claude:{scene.session_id}:efc988bd-77f6-4d9f-bd70-c32489edf99d", 2)]


async def test_without_a_session_file_an_old_style_answer_ends_after_the_transcript_stays_quiet(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    """Versions before the session file (1.0.x) write ``stop_reason: null`` on the final message and often no
    ``turn_duration``: an answer with no tool call ends the turn once nothing more is written for
    ``quiet_s``; a tool call that follows the text in time keeps the turn open."""
    scene = Scene(tmux_server, tmp_path)
    scene.adapter.quiet_s = 0.8
    tx = scene.transcript()
    tx.turn("history", "old answer")
    watcher = FileWatcher()
    scene.ctx.watcher = watcher
    emitted: list[Completion] = []

    async def emit(completion: Completion) -> None:
        emitted.append(completion)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        tg.start_soon(scene.adapter.follow, with_catch_up(scene.adapter, emit, first_run=True))
        await until(
            lambda: scene.adapter._resolution is not None and scene.adapter._resolution.transcript,
            10,
            "the adapter following the transcript",
        )
        await until(lambda: watches(watcher, *scene.folders()), what="the watcher on its new folders")
        key = tx.prompt("explain it")
        tx.assistant("m1", text("Let me look."), stop=None)
        tx.assistant("m1", {"type": "tool_use", "id": "t", "name": "Bash", "input": {}}, stop=None)
        await aquiet_for(1.5, "a completion while the last message calls a tool (longer than quiet_s)")
        assert emitted == []  # the last message calls a tool: not an answer
        tx.write(tx.line({"type": "user", "promptId": key, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}}))
        tx.assistant("m2", text("It adds two numbers."), stop=None)
        await until(lambda: emitted, 10, "the completion after the quiet")
        tg.cancel_scope.cancel()
    assert [(c.turn_id, c.detail) for c in emitted] == [(f"claude:{scene.session_id}:{key}", "quiet")]
    assert (await scene.adapter.response(emitted[0])).text == "It adds two numbers."
