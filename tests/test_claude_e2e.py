"""End to end with the REAL Claude Code (from npm, cached) against a fake Messages API on 127.0.0.1.

One Claude Code session in a private tmux server, with batonpass's Stop hook installed by the real
``baton hooks install --claude``; the real pipeline routes its answers to a demo agent in a second pane.
Proven here: the turn is detected and its exact answer is handed over once, although three signals
(transcript, session status, Stop hook) report it — all under the same turn id; an interrupted turn
is a ``failed`` completion and hands nothing over; ``baton resolve`` shows the chain down to the right
transcript and ``baton extract`` prints the answer exactly.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.claude_code.paste import unwrap_paste
from plugins.claude_code.screen import input_box
from tests.fakes.claude_api import ClaudeAPI
from tests.fakes.npm_agents import CLAUDE_CODE
from tests.support import claude as claude_support
from tests.support.agents import demo_agent_command, messages, read_log
from tests.support.claude import make_claude_home
from tests.support.crash_at_paste import LONG_TEMPLATE, crash_at_paste
from tests.support.pipelines import make_config, running
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.anyio]
#: the real Claude Code from npm (a fixture, shared by the files that run it)
claude_bin = claude_support.claude_bin

SLOW = "SLOWTEST"


def answer_for(prompt: str) -> str:
    first = prompt.strip().splitlines()[0] if prompt.strip() else ""
    return f"Answer to «{first}» ✓\n\n- the change is in `src/app.py`\n- 日本語 too\n"


def delay_for(prompt: str) -> float:
    return 0.3 if SLOW in prompt else 0.01


@pytest.fixture(scope="module")
def claude_api() -> ClaudeAPI:
    with ClaudeAPI(answer=answer_for, chunk_delay_s=delay_for) as api:
        yield api


def baton(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)


def signals_seen(caplog: pytest.LogCaptureFixture, turn: str) -> set[str]:
    """Every signal that reported ``turn``: the one accepted and those dropped as duplicates."""
    seen = set()
    for record in caplog.records:
        msg, args = record.msg, record.args
        if isinstance(args, tuple) and turn in args:
            if msg.startswith("completion"):
                seen.add(args[3])
            elif "already seen" in msg:
                seen.add(args[2])
    return seen


def prompt_id_of(transcript: Path, text: str) -> str | None:
    """The prompt's id, once Claude Code has written its line (under load it lands after the Stop hook
    ran)."""
    for line in transcript.read_text().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # the line being written
        if obj.get("type") == "user" and obj.get("message", {}).get("content") == text:
            return obj["promptId"]
    return None


async def test_real_claude_code_answer_is_handed_over_once(
    tmux_server: TmuxServer,
    tmp_path: Path,
    claude_bin: Path,
    claude_api: ClaudeAPI,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # the daemon's hook spool …
    home = make_claude_home(tmp_path, api_url=claude_api.url, claude_bin=claude_bin, version=CLAUDE_CODE[1],
                            extra_env={"XDG_STATE_HOME": str(state)})  # … is where the hook writes
    settings_before = {
        "model": "claude-opus-4-8",
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]},
    }
    (home.config / "settings.json").write_text(json.dumps(settings_before))
    for expected in ("added a Stop hook", "already installed"):
        result = baton("hooks", "install", "--claude", env={"CLAUDE_CONFIG_DIR": str(home.config)})
        assert result.returncode == 0 and expected in result.stdout, result.stderr
    settings = json.loads((home.config / "settings.json").read_text())
    assert settings["model"] == "claude-opus-4-8" and len(settings["hooks"]["Stop"]) == 2

    pane = tmux_server.new_pane(home.shell_command(), cwd=home.project, width=120, height=40)
    tmux_server.type(pane, "claude")
    log = tmp_path / "target.jsonl"
    target = tmux_server.new_pane(demo_agent_command(log=log))
    wait_for(lambda: home.session_files() and input_box(tmux_server.capture(pane)) == "", 60,
             what="Claude Code's input box and session file")
    wait_for(lambda: "demo❯" in tmux_server.capture(target), what="the demo agent's prompt")

    config = make_config(
        {"coder": {"pane": pane, "agent": "claude"}, "target": {"pane": target, "agent": "demo"}},
        [{"from": "coder", "to": "target", "transform": "raw"}],
    )
    caplog.set_level(logging.DEBUG, logger="batonpass")
    prompt = "E2E-1: refactor the auth middleware"
    answer = answer_for(prompt)
    async with running(config, tmux_server):
        await until(lambda: "coder: following" in caplog.text, 20, "the claude tile following its files")
        # the prompt goes in the one safe way, exactly like `baton send`
        sent = await anyio.to_thread.run_sync(lambda: baton("send", pane, "-L", tmux_server.socket, prompt))
        assert sent.returncode == 0 and "the agent started a turn" in sent.stdout, sent.stdout + sent.stderr
        await until(lambda: messages(log), 40, "the answer in the second pane")
        transcript = home.transcripts()[0]
        await until(lambda: prompt_id_of(transcript, prompt), 20, "the prompt's line in the transcript")
        turn = f"claude:{transcript.stem}:{prompt_id_of(transcript, prompt)}"
        # the transcript and the Stop hook both report the turn, under the same id
        await until(lambda: {"transcript", "hook"} <= signals_seen(caplog, turn), 20, "both signals")
        accepted = [r for r in caplog.records if r.msg.startswith("completion") and r.args[0] == "coder"]
        assert [r.args[1] for r in accepted] == [turn]
        last_byte, received = claude_api.turn_finished_at[-1], read_log(log)[0]["t"]
        print(
            "\nClaude Code e2e: model's last byte -> completion "
            f"{(accepted[0].created - last_byte) * 1e3:.0f} ms "
            f"(via {accepted[0].args[3]}) -> message in the target pane {(received - last_byte) * 1e3:.0f} ms"
        )

        # an interrupted turn: failed, nothing handed over
        tmux_server.type(pane, f"{SLOW}: interrupt me", enter=False)
        await until(lambda: (input_box(tmux_server.capture(pane)) or "").endswith("interrupt me"), 20,
                    "the typed prompt in the input box")
        # an Enter sooner than this after typing is taken as pasted (docs/agents.md, Claude Code):
        # shapes the scenario (the input)
        await anyio.sleep(ClaudeCodeAdapter.submit_delay_s)
        tmux_server.run("send-keys", "-t", pane, "Enter")
        await until(
            lambda: f"Answer to «{SLOW}" in tmux_server.capture(pane), 20, "the slow answer streaming"
        )
        tmux_server.run("send-keys", "-t", pane, "Escape")
        await until(
            lambda: any(
                "failed" in r.getMessage() and r.msg.startswith("completion") for r in caplog.records
            ),
            15,
            "the failed completion",
        )
        await aquiet_for(1.0, "a hand-off of the interrupted turn")
    assert messages(log) == [answer.strip("\n")]

    resolved = baton("resolve", pane, "-L", tmux_server.socket, "--json")
    data = json.loads(resolved.stdout)
    steps = {s["step"]: s for s in data["steps"]}
    assert data["ok"] and steps["transcript"]["value"] == str(transcript), resolved.stdout
    assert "rule: session-file" in steps["answer"]["detail"]
    extracted = baton("extract", str(transcript))
    assert extracted.returncode == 0 and extracted.stdout == answer


LAUNCHED = "I launched an agent to survey the project."
FINAL = "FINAL: the survey found one file, app.py, which prints hello ✓"


def agent_blocks(request) -> list[dict] | None:
    """The Agent scenario of the 2.1.332 recording: the parent calls Agent; the subagent answers; the parent
    says it launched it; the ``<task-notification>`` turn gives the real result."""
    last = request.last_user_message
    if "task-notification" in last:
        return [{"type": "text", "text": FINAL}]
    if "tool_result" in last:
        return [{"type": "text", "text": LAUNCHED}]
    if "SUBAGENT:" in last:
        return [{"type": "text", "text": "Subagent report: app.py prints hello."}]
    if "AGENTTEST" in last:
        return [{"type": "text", "text": "I will delegate this to a subagent."},
                {"type": "tool_use", "id": "toolu_e2e_agent_0001", "name": "Agent", "input": {
                    "description": "Survey the project", "prompt": "SUBAGENT: summarize the project files",
                    "subagent_type": "general-purpose"}}]
    return None


def turn_ends(transcript: Path) -> list[dict]:
    lines = []
    for raw in transcript.read_text().splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if obj.get("type") == "system" and obj.get("subtype") == "turn_duration":
            lines.append(obj)
    return lines


async def test_real_claude_code_background_agent_hands_on_one_prompt_the_final_answer(
        tmux_server: TmuxServer, tmp_path: Path, claude_bin: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """#18 on the real CLI: an Agent call in auto mode (its dialog accepted with Enter, the approval answered
    by ``baton approve``: Yes, with No preselected, so Down and Enter). 2.1.332 ends the parent turn while
    the subagent runs in the background; a route with ``on: any`` from that tile hands on exactly one
    prompt: the answer of the turn the agent's notification started — never "I launched an agent"."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    with ClaudeAPI(answer=answer_for, chunk_delay_s=0.01, blocks=agent_blocks) as api:
        home = make_claude_home(tmp_path, api_url=api.url, claude_bin=claude_bin, version=CLAUDE_CODE[1],
                                extra_env={"XDG_STATE_HOME": str(state)})
        result = baton("hooks", "install", "--claude", env={"CLAUDE_CONFIG_DIR": str(home.config)})
        assert result.returncode == 0, result.stderr
        pane = tmux_server.new_pane(home.shell_command(), cwd=home.project, width=120, height=40)
        tmux_server.type(pane, "claude")
        log = tmp_path / "target.jsonl"
        target = tmux_server.new_pane(demo_agent_command(log=log))
        wait_for(lambda: home.session_files() and input_box(tmux_server.capture(pane)) == "", 60,
                 what="Claude Code's input box and session file")
        wait_for(lambda: "demo❯" in tmux_server.capture(target), what="the demo agent's prompt")
        config = make_config(
            {"coder": {"pane": pane, "agent": "claude"}, "target": {"pane": target, "agent": "demo"}},
            [{"from": "coder", "to": "target", "on": "any", "transform": "raw"}],
        )
        caplog.set_level(logging.DEBUG, logger="batonpass")
        async with running(config, tmux_server):
            await until(lambda: "coder: following" in caplog.text, 20, "the claude tile following its files")
            sent = await anyio.to_thread.run_sync(lambda: baton("send", pane, "-L", tmux_server.socket,
                                                                "AGENTTEST: survey the project"))
            assert sent.returncode == 0, sent.stdout + sent.stderr
            answered: set[str] = set()
            pressed = {"at": 0.0}
            routes = tmp_path / "routes.yaml"
            routes.write_text(json.dumps({"version": 1, "tiles": {"coder": {"pane": pane,
                                                                            "agent": "claude"}}}))
            approvals: list[subprocess.CompletedProcess[str]] = []

            async def step() -> bool:
                """Accept the auto-mode dialog (Enter) and the approval (``baton approve``); a key that came
                before the dialog took input is pressed again after a while."""
                screen = tmux_server.capture(pane)
                if time.monotonic() - pressed["at"] < 2.0:
                    return bool(messages(log))
                if "Enter to stay in auto mode" in screen:
                    answered.add("dialog")
                    pressed["at"] = time.monotonic()
                    tmux_server.run("send-keys", "-t", pane, "Enter")
                elif "Do you want to proceed?" in screen:
                    answered.add("approval")
                    approvals.append(await anyio.to_thread.run_sync(lambda: baton(
                        "approve", "coder", "-c", str(routes), "-L", tmux_server.socket)))
                    pressed["at"] = time.monotonic()
                return bool(messages(log))

            try:
                await until(step, 90, "the hand-off of the agent's work")
            except AssertionError:
                transcript = home.transcripts()[0] if home.transcripts() else None
                kinds = [(o.get("type"), o.get("subtype"), str((o.get("message") or {}).get("content"))[:80])
                         for o in map(json.loads, transcript.read_text().splitlines())] if transcript else []
                raise AssertionError(
                    f"screen:\n{tmux_server.capture(pane)}\nanswered {answered}\nlines {kinds}\n"
                    f"requests: {[r.last_user_message[:120] for r in api.turns]}"
                ) from None
            await until(lambda: len(turn_ends(home.transcripts()[0])) >= 2, 20, "both turns' end lines")
            await aquiet_for(2.0, "a second hand-off (the held turn's)")
        ends = turn_ends(home.transcripts()[0])
        pending = [e.get("pendingBackgroundAgentCount", 0) for e in ends]
        print(f"\nClaude Code {CLAUDE_CODE[1]} Agent turn: dialogs answered {sorted(answered)}; "
              f"turn_duration pendingBackgroundAgentCount per turn: {pending}")
    assert messages(log) == [FINAL]
    done = [a for a in approvals if a.returncode == 0]
    assert len(done) == 1, approvals
    assert "approved the permission prompt of tile coder (claude" in done[0].stdout, done[0].stdout
    if CLAUDE_CODE[1] == "2.1.332":  # the recorded behaviour: the parent turn ended while the agent ran
        assert "(keys Down Enter)" in done[0].stdout, done[0].stdout  # No preselected
        assert pending[0] == 1 and pending[-1] == 0
    accepted = [r for r in caplog.records if r.msg.startswith("completion") and r.args[0] == "coder"]
    assert len(accepted) == 1 and accepted[0].args[4] == 0  # one completion, hop 0


PASTES = {  # name -> text typed as one bracketed paste, the way the dispatcher types a hand-off
    "1 line": "PASTE-A: one short line",
    "3 lines": "PASTE-B: line one\nline two\nline three",
    "4 lines": "PASTE-C: line one\nline two\nline three\nline four",
    "800 chars": "PASTE-D: " + "x" * 791,
    "801 chars": "PASTE-E: " + "x" * 792,
}


def user_contents(transcript: Path) -> list[str]:
    out = []
    for raw in transcript.read_text().splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        content = (obj.get("message") or {}).get("content") if obj.get("type") == "user" else None
        if isinstance(content, str):
            out.append(content)
    return out


async def test_real_claude_code_wraps_long_or_multiline_pastes_and_received_sees_through_it(
        tmux_server: TmuxServer, tmp_path: Path, claude_bin: Path, claude_api: ClaudeAPI) -> None:
    """When does 2.1.332 wrap a paste in ``<pasted_content>``? Found here: when it has 4 lines or more, or
    more
    than 800 characters (so a typical hand-off is wrapped; a one-line template instruction is wrapped with the
    answer it frames, inside the same paste). Whatever a version does,
    ``received()`` finds every pasted prompt in the transcript (the wrapper removed)."""
    home = make_claude_home(tmp_path, api_url=claude_api.url, claude_bin=claude_bin, version=CLAUDE_CODE[1])
    pane = tmux_server.new_pane(home.shell_command(), cwd=home.project, width=120, height=40)
    tmux_server.type(pane, "claude")
    wait_for(lambda: home.session_files() and input_box(tmux_server.capture(pane)) == "", 60,
             what="Claude Code's input box and session file")
    adapter = ClaudeCodeAdapter(
        EngineContext(name="coder", tile=Tile(pane=pane, agent="claude"), tmux=tmux_server.tmux)
    )
    wrapped = {}
    for name, text in PASTES.items():
        sent = await anyio.to_thread.run_sync(lambda t=text: baton("send", pane, "-L", tmux_server.socket, t))
        assert sent.returncode == 0, sent.stdout + sent.stderr
        marker = text.split(":")[0]
        await until(  # the first prompt may be typed before the transcript exists: a look finds none yet
            lambda m=marker: any(m in c for t in home.transcripts()[:1] for c in user_contents(t)), 30,
            f"{name} on disk"
        )
        [content] = [c for c in user_contents(home.transcripts()[0]) if marker in c]
        wrapped[name] = "<pasted_content" in content
        assert await adapter.received(text) is True, (name, content[:200])
        await until(lambda: input_box(tmux_server.capture(pane)) == "" and
                    json.loads(home.session_files()[0].read_text()).get("status") == "idle", 30, "idle again")
    print(f"\nClaude Code {CLAUDE_CODE[1]} wraps a paste: {wrapped}")
    if CLAUDE_CODE[1] == "2.1.332":
        assert wrapped == {
            "1 line": False,
            "3 lines": False,
            "4 lines": True,
            "800 chars": False,
            "801 chars": True,
        }
    assert await adapter.received("PASTE-Z: never typed") is False


def test_real_claude_code_as_target_killed_between_paste_and_enter_takes_the_prompt_once(
        tmux_server: TmuxServer, tmp_path: Path, claude_bin: Path, claude_api: ClaudeAPI,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``baton run`` killed the moment the real Claude Code shows the hand-off as ``[Pasted text #1 +N
    lines]`` in its input, then started again: it recognises its own paste, presses Enter once, and the
    prompt is in the transcript exactly once (tests/support/crash_at_paste.py)."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    home = make_claude_home(tmp_path, api_url=claude_api.url, claude_bin=claude_bin, version=CLAUDE_CODE[1])
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home.config))  # where the daemon finds its files
    pane = tmux_server.new_pane(home.shell_command(), cwd=home.project, width=120, height=40)
    tmux_server.type(pane, "claude")
    wait_for(lambda: home.session_files() and input_box(tmux_server.capture(pane)) == "", 60,
             what="Claude Code's input box and session file")

    def holds_paste() -> bool:
        return (input_box(tmux_server.capture(pane)) or "").startswith("[Pasted text #")

    def prompts() -> list[str]:
        return [unwrap_paste(c) for t in home.transcripts() for c in user_contents(t)]

    note = crash_at_paste(tmux_server, tmp_path, {"pane": pane, "agent": "claude"}, LONG_TEMPLATE,
                          holds_paste, prompts, marker="CLAUDE-1")
    assert note == "submitted a paste left by a crash"
