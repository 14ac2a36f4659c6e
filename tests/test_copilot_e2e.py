"""End to end with the REAL GitHub Copilot CLI (``@github/copilot`` from npm, cached) against a fake
OpenAI-compatible server on 127.0.0.1 (tests/fakes/openai_chat.py), next to the real Claude Code against the
fake Messages API, with the real pipeline:

* a hand-off each way: Copilot's answer to Claude Code, Claude Code's answer back to Copilot (``agent:
  auto`` finds Copilot by its process tree), each exact and once, although the events file and the
  ``agentStop`` hook (installed by ``baton hooks install --agent copilot``) both report Copilot's turns;
* a tool turn: the model call that asked for the tool is not the end, the final answer is handed over;
* an interrupt (Ctrl+C): a failed completion, nothing handed over; an approval: ``waiting`` with what for;
* ``baton resolve`` shows the chain to the session's lock file, ``baton extract`` prints the answer;
* ``baton run`` killed between its paste and the Enter: Copilot takes the prompt once after the restart.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from pipeline.plugin.events import Prompt
from pipeline.views.tile_status import tile_status
from plugins.claude_code.paste import normalized
from plugins.copilot.screen import approval_prompt, input_draft
from tests.agent_versions import resolve
from tests.fakes.claude_api import ClaudeAPI
from tests.fakes.npm_agents import CLAUDE_CODE, NpmInstallError, install
from tests.fakes.openai_chat import FakeChat
from tests.support.agents import messages, start_agent
from tests.support.claude import make_claude_home
from tests.support.copilot import CopilotHome, make_copilot_home
from tests.support.crash_at_paste import LONG_TEMPLATE, crash_at_paste
from tests.support.pipelines import REGISTRIES, make_config, running
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

COPILOT = resolve("copilot")  # pinned, or npm latest with BATON_AGENTS=latest
ANSWER = "COPILOT-ANSWER: the helper is in `src/app.py` ✓\n\n- it greets\n- 日本語 too"


def claude_answer(prompt: str) -> str:
    text = normalized(prompt)
    first = text.splitlines()[0] if text else ""
    return f"CLAUDE-ANSWER to «{first}»"


def claude_prompts(api: ClaudeAPI) -> list[str]:
    """The prompts Claude Code sent its model, unwrapped from its paste wrapper, each once."""
    return list(dict.fromkeys(normalized(r.last_user_text) for r in api.turns))


def installed(package: str, version: str) -> Path:
    try:
        return install(package, version)
    except NpmInstallError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"cannot install {package}@{version} from npm: {exc}")
        pytest.skip(f"cannot install {package}@{version} from npm (not in CI, so skipped): {exc}")


@pytest.fixture(scope="module")
def copilot_bin() -> Path:
    return installed(*COPILOT)


@pytest.fixture(scope="module")
def fake_chat() -> FakeChat:
    with FakeChat() as chat:
        yield chat


def baton(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)


def start_copilot(server: TmuxServer, home: CopilotHome) -> str:
    pane = server.new_pane(home.shell_command(), cwd=home.project, width=160, height=45)
    server.type(pane, "copilot")
    wait_for(lambda: input_draft(server.capture(pane)) == "", 90, what="Copilot's input")
    return pane


async def press_until(server: TmuxServer, pane: str, key: str, done: Callable[[], bool], what: str) -> None:
    """Press ``key`` until ``done()``: a dialog drawn a moment before it takes keys drops the first press."""
    for _ in range(5):
        server.run("send-keys", "-t", pane, key)
        try:
            await until(done, 3, what)
            return
        except AssertionError:
            continue
    raise AssertionError(f"{key} five times, and still not {what}")


def signals_seen(caplog: pytest.LogCaptureFixture, turn: str) -> set[str]:
    """Every signal that reported ``turn``: the one accepted and those dropped as duplicates."""
    seen = set()
    for record in caplog.records:
        args = record.args
        if isinstance(args, tuple) and turn in args:
            seen.add(args[3] if record.msg.startswith("completion") else args[2])
    return seen


def accepted(caplog: pytest.LogCaptureFixture, tile: str) -> list[tuple]:
    return [r.args for r in caplog.records if r.msg.startswith("completion") and r.args[0] == tile]


@pytest.mark.anyio
async def test_real_copilot_hands_off_both_ways_with_claude_code(
    tmux_server: TmuxServer, tmp_path: Path, copilot_bin: Path, fake_chat: FakeChat,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # the daemon's hook spool is where the hook writes
    cp = make_copilot_home(tmp_path / "cp", api_url=fake_chat.url, copilot_bin=copilot_bin,
                           version=COPILOT[1], extra_env={"XDG_STATE_HOME": str(state)})
    for expected in ("agentStop and notification hooks run", "already installed"):
        result = baton("hooks", "install", "--agent", "copilot", env={"COPILOT_HOME": str(cp.copilot)})
        assert result.returncode == 0 and expected in result.stdout, result.stdout + result.stderr
    claude_bin = installed(*CLAUDE_CODE)
    with ClaudeAPI(answer=claude_answer) as claude_api:
        cl = make_claude_home(tmp_path / "cl", api_url=claude_api.url, claude_bin=claude_bin,
                              version=CLAUDE_CODE[1])
        cl_pane = tmux_server.new_pane(cl.shell_command(), cwd=cl.project, width=120, height=40)
        tmux_server.type(cl_pane, "claude")
        cp_pane = start_copilot(tmux_server, cp)
        wait_for(lambda: cl.session_files(), 60, what="Claude Code's session file")
        config = make_config(
            {"cp": {"pane": cp_pane, "agent": "auto"}, "cl": {"pane": cl_pane, "agent": "claude"}},
            [{"from": "cp", "to": "cl", "transform": "raw"}, {"from": "cl", "to": "cp", "transform": "raw"}],
            max_hops=2)  # one hand-off each way
        caplog.set_level(logging.DEBUG, logger="batonpass")
        fake_chat.script(ANSWER, "COPILOT-SECOND: thanks, noted.")
        async with running(config, tmux_server) as pipeline:
            assert pipeline.tiles["cp"].adapter.name == "copilot"  # agent: auto, from the process tree
            await pipeline.submit(Prompt(route="seed", source="test", target="cp", turn_id="seed-1", hop=0,
                                         text="E2E-1: explain app.py"))
            back = claude_answer(ANSWER)
            await until(lambda: any(r.last_user_text.endswith(back) for r in fake_chat.requests), 90,
                        "Claude Code's answer reaching Copilot's model as a prompt")
            assert [m for m in claude_prompts(claude_api) if "COPILOT-ANSWER" in m] == [ANSWER]
            await until(lambda: len(accepted(caplog, "cp")) == 2, 30, "Copilot's second turn")
            first = accepted(caplog, "cp")[0][1]
            await until(lambda: {"events", "hook"} <= signals_seen(caplog, first), 20, "both signals")
            done = next(r.created for r in caplog.records
                        if r.msg.startswith("completion") and r.args[1] == first)
            last_chunk = next(r.t_last_chunk for r in fake_chat.turns() if r.text == ANSWER) or done
            print(f"\nCopilot e2e: model's last chunk -> completion {(done - last_chunk) * 1e3:.0f} ms")

            # a tool turn: its first model call (asking for bash) is not the end; the final answer is
            await pipeline.submit(Prompt(route="seed", source="test", target="cp", turn_id="seed-2", hop=1,
                                         text="TOOLTEST: list the files"))
            await until(lambda: any("TOOL_FINAL_BEGIN" in m for m in claude_prompts(claude_api)), 60,
                        "the tool turn's final answer in Claude Code")
            [handed] = [m for m in claude_prompts(claude_api) if "TOOL_FINAL_BEGIN" in m]
            assert "FAKE_TOOL_OK" in handed and handed.endswith("TOOL_FINAL_END")
            events = cp.events_files()[0]
            extracted = await anyio.to_thread.run_sync(lambda: baton("extract", "--agent", "copilot",
                                                                     str(events)))
            assert extracted.returncode == 0 and extracted.stdout.rstrip("\n") == handed, extracted.stderr
            usage = await pipeline.tiles["cp"].adapter.usage()
            assert usage is not None and usage.input > 0 and usage.models == ("fake",)

            # an approval: waiting, with what for; then the person allows it
            await pipeline.submit(Prompt(route="seed", source="test", target="cp", turn_id="seed-3", hop=2,
                                         text="TOOLASK: touch a file"))
            ctx = pipeline.tiles["cp"].ctx
            await until(lambda: (ctx.waiting_for or "").startswith("permission prompt"), 30, "waiting")
            assert "touch approved.txt" in (ctx.waiting_for or "")
            # the events file says it waits a moment before the box is drawn; what it asks is read off the box
            await until(lambda: approval_prompt(tmux_server.capture(cp_pane)), 20, "the approval box")
            rows = await tile_status(config, REGISTRIES, tmux_server.tmux)
            row = next(r for r in rows if r["tile"] == "cp")
            assert row["state"].startswith("waiting: permission prompt: touch approved.txt"), row
            assert (row["waiting_for"] or "").startswith("Do you want to run this command?\n"), row
            assert "touch approved.txt" in row["waiting_for"], row
            assert row["transcript"] == str(cp.events_files()[0]) and row["session"] == events.parent.name
            await press_until(tmux_server, cp_pane, "Enter",
                              lambda: approval_prompt(tmux_server.capture(cp_pane)) is None, "answered")
            await until(lambda: len(accepted(caplog, "cp")) == 4, 30, "the approved turn's end")
            assert ctx.waiting_for is None and (cp.project / "approved.txt").exists()

            # an interrupt: a failed completion, nothing handed over
            adapter = pipeline.tiles["cp"].adapter

            async def ready() -> bool:  # not while the agentStop hook runs: a prompt typed then is queued
                return await adapter.target_state() == "ready"

            await until(ready, 20, "Copilot ready")
            tmux_server.type(cp_pane, "SLOWTEST: interrupt me")
            # Ctrl+C while the answer streams (before the first token, Esc Esc edits the prompt)
            await until(lambda: "esc esc interrupt" in tmux_server.capture(cp_pane) and cp.state().busy, 20,
                        "the slow answer")
            tmux_server.run("send-keys", "-t", cp_pane, "C-c")
            await until(lambda: len(accepted(caplog, "cp")) == 5, 20, "the interrupted turn's end")
            assert accepted(caplog, "cp")[-1][2] == "failed", tmux_server.capture(cp_pane)
            await aquiet_for(1.0, "a hand-off of the interrupted turn")
        assert len([m for m in claude_prompts(claude_api) if "COPILOT" in m or "TOOL_FINAL" in m]) == 2

    resolved = baton("resolve", cp_pane, "-L", tmux_server.socket, "--json")
    steps = {s["step"]: s for s in json.loads(resolved.stdout)["steps"]}
    assert steps["lock file"]["value"] == str(events.parent), resolved.stdout
    assert steps["process"]["ok"] and "MainThread" in steps["process"]["detail"]


def test_real_copilot_as_target_killed_between_paste_and_enter_takes_the_prompt_once(
        tmux_server: TmuxServer, tmp_path: Path, copilot_bin: Path, fake_chat: FakeChat,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``baton run`` killed the moment the real Copilot shows the hand-off as ``[Paste #1 - N lines]`` in its
    input, then started again: it recognises its own paste, presses Enter once, and events.jsonl holds the
    prompt exactly once (tests/support/crash_at_paste.py)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cp = make_copilot_home(tmp_path, api_url=fake_chat.url, copilot_bin=copilot_bin, version=COPILOT[1])
    pane = start_copilot(tmux_server, cp)

    def holds_paste() -> bool:
        return (input_draft(tmux_server.capture(pane)) or "").startswith("[Paste #")

    note = crash_at_paste(tmux_server, tmp_path, {"pane": pane, "agent": "copilot"}, LONG_TEMPLATE,
                          holds_paste, cp.prompts, marker="COPILOT-1")
    assert note == "submitted a paste left by a crash"


def _records(events: Path) -> list[dict]:
    """The whole lines of a Copilot events file (one being written is skipped)."""
    out = []
    for line in events.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _shut_down(events: Path) -> bool:
    return any(r.get("type") == "session.shutdown" for r in _records(events))


def _answers_written(cp: CopilotHome) -> list[str]:
    """Every answer Copilot wrote, in the order its sessions started: what must be handed off, each once."""
    by_start = sorted(cp.events_files(), key=lambda f: str((_records(f) or [{}])[0].get("timestamp", "")))
    return [str(r["data"]["content"]) for f in by_start for r in _records(f)
            if r.get("type") == "assistant.message" and str(r["data"].get("content")).startswith("CLEAR-")]


def _anywhere_in(events: Path, start: str) -> bool:
    return any(str(r.get("data", {}).get("content", "")).startswith(start) for r in _records(events))


def _anywhere(cp: CopilotHome, prompt: str) -> bool:
    return any(_anywhere_in(f, prompt) for f in cp.events_files())


async def _fate(cp: CopilotHome, prompt: str, cleared: Path) -> str:
    """What Copilot did with ``prompt`` typed right after ``/clear``: "settled" (a session wrote it and then
    an answer, an abort or its shutdown), or "dropped" (the cleared session shut down and for 5 s no session
    wrote the prompt at all: the input was cleared under it — Copilot's own loss, seen in 1 run of 12)."""
    nowhere_since = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _settled(cp, prompt):
            return "settled"
        if _shut_down(cleared) and not _anywhere(cp, prompt):
            nowhere_since = nowhere_since or time.monotonic()
            if time.monotonic() - nowhere_since >= 5:
                return "dropped"
        else:
            nowhere_since = None
        await anyio.sleep(0.1)  # shapes the scenario: how often the files are looked at
    raise AssertionError(f"Copilot neither took nor dropped {prompt!r} in 60 s")


def _settled(cp: CopilotHome, prompt: str) -> bool:
    """Copilot is done with ``prompt``: after it, its session wrote an answer, an abort or its shutdown."""
    for f in cp.events_files():
        kinds = [r.get("type") for r in _records(f)]
        texts = [str(r.get("data", {}).get("content", "")) for r in _records(f)]
        if prompt in texts:
            after = kinds[texts.index(prompt) + 1:]
            return any(k in ("assistant.message", "abort", "session.shutdown") for k in after)
    return False


@pytest.mark.anyio
async def test_real_copilot_clear_mid_session_each_answer_is_handed_off_once(
        tmux_server: TmuxServer, tmp_path: Path, copilot_bin: Path, fake_chat: FakeChat,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A person types ``/clear`` in a running Copilot (no hooks). Copilot moves its lock to a new session
    folder at once; a prompt sent right after it goes to the new session, or is still taken by the OLD one
    — which answers it and then writes ``session.shutdown``, or is cut by that shutdown (Copilot's own loss:
    no answer anywhere). The next prompt, once the old session has shut down, goes to the new session.
    Whatever the order, every answer Copilot wrote is handed off once, and only those."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cp = make_copilot_home(tmp_path / "cp", api_url=fake_chat.url, copilot_bin=copilot_bin,
                           version=COPILOT[1])
    cp_pane = start_copilot(tmux_server, cp)
    blog = tmp_path / "b.jsonl"
    b = start_agent(tmux_server, blog, "b", work_s=0.05)
    config = make_config({"cp": {"pane": cp_pane, "agent": "copilot"}, "b": {"pane": b, "agent": "demo"}},
                         [{"from": "cp", "to": "b", "transform": "raw"}])
    fake_chat.script("CLEAR-A: one", "CLEAR-B: two", "CLEAR-C: three")

    def handed_off_as_written() -> bool:
        return messages(blog) == _answers_written(cp)

    def free() -> bool:
        return input_draft(tmux_server.capture(cp_pane)) == ""

    async with running(config, tmux_server):
        tmux_server.type(cp_pane, "CLEAR-1: the first question")
        await until(lambda: len(messages(blog)) == 1 and handed_off_as_written(), 90, "the first hand-off")
        [first] = cp.events_files()
        await until(free, 30, "Copilot's input free")
        tmux_server.type(cp_pane, "/clear", enter=False)
        await anyio.sleep(0.5)  # shapes the scenario: a person's pause before Enter (the command menu opens)
        tmux_server.run("send-keys", "-t", cp_pane, "Enter")
        await until(free, 30, "the input after /clear")
        tmux_server.type(cp_pane, "CLEAR-2: at once after /clear")
        fate = await _fate(cp, "CLEAR-2: at once after /clear", first)
        print(f"\nCopilot /clear: the prompt typed right after it was {fate}"
              + (f" in {'the cleared' if _anywhere_in(first, 'CLEAR-2') else 'the new'} session"
                 if fate == "settled" else ""))
        await until(handed_off_as_written, 60, "what Copilot answered to CLEAR-2 (if anything) handed off")
        await until(lambda: _shut_down(first), 30, "the cleared session shut down")
        await until(free, 30, "Copilot's input free")
        tmux_server.type(cp_pane, "CLEAR-3: in the new session")
        await until(lambda: _settled(cp, "CLEAR-3: in the new session"), 60, "Copilot done with CLEAR-3")
        await until(handed_off_as_written, 60, "the answer in the new session handed off")
        await aquiet_for(2.0, "a repeated hand-off")
    assert handed_off_as_written() and len(messages(blog)) >= 2, (messages(blog), _answers_written(cp))
    third = [f for f in cp.events_files() if "CLEAR-3" in f.read_text(encoding="utf-8")]
    assert third != [first], "the prompt after the clear went to the cleared session"
