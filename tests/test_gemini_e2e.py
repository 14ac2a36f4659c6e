"""End to end with the REAL Gemini CLI (``@google/gemini-cli`` from npm, cached) against a fake Gemini API
on 127.0.0.1 (tests/fakes/gemini_api.py), in a private tmux server, with the real pipeline:

* a hand-off each way between Gemini CLI and the real Claude Code (its fake Messages API), with Gemini's
  AfterAgent hook installed by the real ``baton hooks install --agent gemini``: the session file and the
  hook report the turn under one id, and it is handed over once; ``agent: auto`` finds Gemini CLI (a
  ``node``) by its argv; ``baton resolve`` names the session file, ``baton extract`` prints the answer;
* without hooks: a tool turn hands over only its final answer (never the model call before the tool), a
  tool waiting for approval is ``waiting`` and not the end, an interrupt is a failed turn handed to no one;
* ``baton run`` killed between the paste and its Enter: the paste shown as ``[Pasted Text: N lines]`` is
  recognised after the restart and submitted once;
* without hooks, through the real ``baton run`` and ``baton history``, the two ways the pane's session
  changes under a running daemon: the folder-trust dialog, answered as a person would (Enter on "1. Trust
  folder"), restarts the CLI as a new process with a new session and deletes the first session's file — the
  next answer is handed off once; ``/clear`` starts a new session file in the same process — the answer
  after it is handed off once, the turn before it never again, and ``baton resolve`` names the new file.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.claude_code.paste import unwrap_paste
from plugins.gemini.resolve import find_gemini
from plugins.gemini.screen import input_draft
from tests.agent_versions import resolve
from tests.fakes.claude_api import ClaudeAPI
from tests.fakes.gemini_api import SLOW_CHUNKS, TOOL_FINAL, FakeGemini
from tests.fakes.npm_agents import CLAUDE_CODE
from tests.support import real_cli
from tests.support.agents import messages, start_agent
from tests.support.cli import json_lines, start_baton, write_routes
from tests.support.crash_at_paste import LONG_TEMPLATE, crash_at_paste
from tests.support.gemini import GeminiHome, make_gemini_home
from tests.support.pipelines import make_config, running
from tests.support.polling import aquiet_for, quiet_for, until, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.anyio]

GEMINI = resolve("gemini")  # pinned, or npm latest with BATON_AGENTS=latest


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    return real_cli.npm_package(GEMINI)


@pytest.fixture
def gemini_api() -> Iterator[FakeGemini]:
    with FakeGemini() as api:
        yield api


def claude_answer(prompt: str) -> str:
    return f"Claude read {len(prompt)} characters and agrees ✓"


async def test_real_gemini_and_claude_code_hand_off_once_each_way(
        tmux_server: TmuxServer, tmp_path: Path, gemini_bin: Path, gemini_api: FakeGemini,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # the daemon's hook spool, where the hooks write
    gem = make_gemini_home(tmp_path / "g", api_url=gemini_api.url, gemini_bin=gemini_bin, state=state)
    for expected in ("added the AfterAgent hook", "already installed"):
        result = real_cli.baton("hooks", "install", "--agent", "gemini",
                                env={"GEMINI_CLI_HOME": str(gem.home)})
        assert result.returncode == 0 and expected in result.stdout, result.stdout + result.stderr
    assert gem.settings()["security"]["auth"]["selectedType"] == "gemini-api-key"
    claude_bin = real_cli.npm_package(CLAUDE_CODE)
    with ClaudeAPI(answer=claude_answer) as claude_api:
        cc, cc_pane = real_cli.launch_claude(tmux_server, tmp_path / "c", api_url=claude_api.url,
                                             claude_bin=claude_bin, version=CLAUDE_CODE[1])
        g_pane = gem.start(tmux_server)
        real_cli.wait_claude(tmux_server, cc, cc_pane)
        config = make_config({"gem": {"pane": g_pane}, "cc": {"pane": cc_pane, "agent": "claude"}},
                             [{"from": "gem", "to": "cc", "transform": "raw"},
                              {"from": "cc", "to": "gem", "transform": "raw"}], max_hops=2)
        caplog.set_level(logging.DEBUG, logger="batonpass")
        prompt = "E2E-G1: review the auth middleware"
        async with running(config, tmux_server) as pipeline:
            assert pipeline.tiles["gem"].adapter.name == "gemini"  # agent: auto, from the process tree
            await until(lambda: "gem: gemini session file" in caplog.text, 20, "the gemini tile's session")
            gem.say(tmux_server, g_pane, prompt)  # a person's prompt: hop 0
            first = gemini_api.answer(prompt)
            await until(lambda: len(gemini_api.prompts()) >= 2, 90, "Claude's answer typed into Gemini CLI")
            await until(lambda: len(real_cli.completions(caplog, "gem")) >= 2, 30, "Gemini's second turn")
            await aquiet_for(2.0, "a third hand-off (max_hops=2)")
    typed = [r.last_user_text for r in claude_api.turns]  # as Claude Code sent them (a paste wrapped)
    assert [unwrap_paste(t).strip() for t in typed] == [first], typed
    second = claude_answer(typed[0])
    assert gemini_api.prompts() == [prompt, second]
    ends = real_cli.completions(caplog, "gem")
    assert [outcome for _, outcome, _ in ends] == ["completed", "completed"]
    accepted = [r for r in caplog.records if r.msg.startswith("completion") and r.args[0] == "gem"]
    print(f"\nGemini CLI e2e: model's last chunk -> completion "
          f"{(accepted[0].created - gemini_api.finished_at[0]) * 1e3:.0f} ms (via {accepted[0].args[3]})")
    for turn, _, _ in ends:  # the file and the AfterAgent hook, one id
        assert real_cli.signals_seen(caplog, turn) == {"session file", "hook"}, (turn, caplog.text[-3000:])
    [session] = gem.session_files()
    resolved = real_cli.baton("resolve", g_pane, "-L", tmux_server.socket, "--agent", "gemini", "--json")
    steps = {s["step"]: s for s in json.loads(resolved.stdout)["steps"]}
    assert steps["transcript"]["value"] == str(session), resolved.stdout
    assert steps["session"]["value"].startswith(session.name[-14:-6])  # its first 8 characters name the file
    assert "rule: start time" in steps["transcript"]["detail"]
    extracted = real_cli.baton("extract", "--agent", "gemini", str(session))
    assert extracted.returncode == 0 and extracted.stdout == gemini_api.answer(second) + "\n"


async def test_real_gemini_tool_turns_approval_and_interrupt_without_hooks(
        tmux_server: TmuxServer, tmp_path: Path, gemini_bin: Path, gemini_api: FakeGemini,
        caplog: pytest.LogCaptureFixture) -> None:
    """No hooks: the screen confirms a final-looking answer. A tool turn hands over its last answer only;
    at the approval prompt the tile is waiting (the file looks finished there) and nothing is handed over
    until the person allows it; an interrupt is a failed turn, handed to no one."""
    gem = make_gemini_home(tmp_path, api_url=gemini_api.url, gemini_bin=gemini_bin)
    g_pane = gem.start(tmux_server)
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    config = make_config({"gem": {"pane": g_pane, "agent": "gemini"}, "t": {"pane": target, "agent": "demo"}},
                         [{"from": "gem", "to": "t", "transform": "raw"}])
    caplog.set_level(logging.DEBUG, logger="batonpass")
    async with running(config, tmux_server) as pipeline:
        await until(lambda: "gem: gemini session file" in caplog.text, 20, "the gemini tile's session")
        gem.say(tmux_server, g_pane, "TOOLTEST: run echo hello")
        await until(lambda: messages(log), 40, "the tool turn's answer in the target")
        assert messages(log) == [TOOL_FINAL]
        [first] = [r for r in caplog.records if r.msg.startswith("completion") and r.args[0] == "gem"]
        print(f"\nGemini CLI e2e, no hooks: model's last chunk -> completion "
              f"{(first.created - gemini_api.finished_at[-1]) * 1e3:.0f} ms (via {first.args[3]})")

        gem.say(tmux_server, g_pane, "TOOLASK: create approved.txt")
        ctx = pipeline.tiles["gem"].ctx
        await until(lambda: ctx.waiting_for == "permission prompt: Shell", 30, "the approval prompt, waiting")
        await aquiet_for(1.5, "a hand-off of the call before the tool")
        assert messages(log) == [TOOL_FINAL]
        assert await pipeline.tiles["gem"].adapter.target_state() == "busy"
        tmux_server.run("send-keys", "-t", g_pane, "Enter")  # 1. Allow once
        await until(lambda: len(messages(log)) == 2, 40, "the approved turn's answer")
        assert messages(log) == [TOOL_FINAL, TOOL_FINAL] and (gem.project / "approved.txt").exists()
        assert ctx.waiting_for is None

        gem.say(tmux_server, g_pane, "SLOWTEST: interrupt me")
        await until(lambda: SLOW_CHUNKS[0] + SLOW_CHUNKS[1] in tmux_server.capture(g_pane), 20,
                    "the slow answer streaming")
        tmux_server.run("send-keys", "-t", g_pane, "Escape")
        await until(lambda: any(o == "failed" for _, o, _ in real_cli.completions(caplog, "gem")), 20,
                    "the failed completion")
        await aquiet_for(1.5, "a hand-off of the interrupted turn")
    assert len(messages(log)) == 2
    outcomes = [o for _, o, _ in real_cli.completions(caplog, "gem")]
    assert outcomes == ["completed", "completed", "failed"], outcomes
    usage = await pipeline.tiles["gem"].adapter.usage()
    assert usage is not None and usage.models == ("gemini-2.5-flash",) and usage.cost_usd


def test_real_gemini_as_target_killed_between_paste_and_enter_takes_the_prompt_once(
        tmux_server: TmuxServer, tmp_path: Path, gemini_bin: Path, gemini_api: FakeGemini,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``baton run`` killed the moment the real Gemini CLI shows the hand-off as ``[Pasted Text: N lines]``
    in its input, then started again: it recognises its own paste, presses Enter once, and the session file
    holds the prompt exactly once (tests/support/crash_at_paste.py)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    gem = make_gemini_home(tmp_path, api_url=gemini_api.url, gemini_bin=gemini_bin)
    pane = gem.start(tmux_server)

    def holds_paste() -> bool:
        return (input_draft(tmux_server.capture(pane)) or "").startswith("[Pasted Text: ")

    note = crash_at_paste(tmux_server, tmp_path, {"pane": pane, "agent": "gemini"}, LONG_TEMPLATE,
                          holds_paste, gem.prompts, marker="GEMINI-1")
    assert note == "submitted a paste left by a crash"


# ---- the session changing under a running daemon, without hooks --------------------------------------

TRUST_DIALOG = "Do you trust the files in this folder?"


def delivered(route: str) -> list[dict]:
    """The hand-offs of ``route`` that ``baton history --json`` shows."""
    shown = real_cli.baton("history", "--json", "--route", route)
    assert shown.returncode == 0, shown
    return [r for r in json_lines(shown.stdout) if r.get("kind") != "action"]


@contextlib.contextmanager
def baton_run(server: TmuxServer, tmp: Path, pane: str, target: str) -> Iterator[Path]:
    """``baton run -v`` routing gem -> t (no hooks installed: the session file and the screen tell) for the
    block, which gets its log; it must still run at the block's end, and log no traceback."""
    config = write_routes(tmp, server.socket, {"gem": {"pane": pane, "agent": "gemini"},
                                               "t": {"pane": target, "agent": "demo"}},
                          [{"from": "gem", "to": "t", "transform": "raw"}])
    err = tmp / "run.err"
    daemon = start_baton("run", "-v", "-c", str(config), stderr=err)
    try:
        yield err
        assert daemon.poll() is None, err.read_text()
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
    assert "Traceback" not in err.read_text()


def followed(err: Path, session: Path) -> bool:
    """The daemon follows ``session`` (its log names each session file it switches to)."""
    text = err.read_text()
    return f"gem: gemini session file {session} " in text


def hand_off(server: TmuxServer, gem: GeminiHome, pane: str, api: FakeGemini, log: Path, prompt: str,
             before: list[str]) -> str:
    """A person's prompt in the Gemini pane; its answer reaches the target once. Returns the answer."""
    gem.say(server, pane, prompt)
    answer = api.answer(prompt)
    wait_for(lambda: messages(log) == [*before, answer], 60, what=f"the answer to {prompt!r} in the target")
    return answer


def test_real_gemini_trust_restart_under_a_running_daemon_hands_the_next_answer_off_once(
        tmux_server: TmuxServer, tmp_path: Path, gemini_bin: Path, gemini_api: FakeGemini) -> None:
    gem = make_gemini_home(tmp_path / "g", api_url=gemini_api.url, gemini_bin=gemini_bin, trusted=False)
    pane = gem.launch(tmux_server)
    wait_for(lambda: TRUST_DIALOG in tmux_server.capture(pane) and gem.session_files(), 60,
             what="the trust dialog and the first session file")
    [first] = gem.session_files()
    shell = tmux_server.pane_pid(pane)
    before = find_gemini(shell)
    assert before is not None and before.relaunched
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    with baton_run(tmux_server, tmp_path, pane, target) as err:
        wait_for(lambda: followed(err, first), 30, what="the daemon following the first session")
        assert "● 1. Trust folder (my-app)" in tmux_server.capture(pane)
        tmux_server.run("send-keys", "-t", pane, "Enter")  # the highlighted choice, as a person would
        wait_for(lambda: not first.exists() and gem.session_files()
                 and input_draft(tmux_server.capture(pane)) == "", 60,
                 what="the restart into a new session, at its input box")
        after = find_gemini(shell)
        assert after is not None and after.relaunched and after.proc != before.proc
        [second] = gem.session_files()
        answer = hand_off(tmux_server, gem, pane, gemini_api, log, "E2E-T1: after the trust restart", [])
        assert followed(err, second), err.read_text()
        quiet_for(2.0, "a second hand-off")
        assert len(messages(log)) == 1
    rows = delivered("gem->t")
    assert [(r["state"], r["prompt"], r["hop"]) for r in rows] == [("delivered", answer, 1)], rows
    assert json.loads(second.read_text().splitlines()[0])["sessionId"] in rows[0]["turn_id"]


def test_real_gemini_clear_without_hooks_hands_off_the_next_answer_once_and_never_the_earlier(
        tmux_server: TmuxServer, tmp_path: Path, gemini_bin: Path, gemini_api: FakeGemini) -> None:
    gem = make_gemini_home(tmp_path / "g", api_url=gemini_api.url, gemini_bin=gemini_bin)
    pane = gem.start(tmux_server)
    [first] = gem.session_files()
    shell = tmux_server.pane_pid(pane)
    worker = find_gemini(shell)
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    with baton_run(tmux_server, tmp_path, pane, target) as err:
        wait_for(lambda: followed(err, first), 30, what="the daemon following the session")
        one = hand_off(tmux_server, gem, pane, gemini_api, log, "E2E-C1: before the clear", [])
        wait_for(lambda: input_draft(tmux_server.capture(pane)) == "", 30, what="the idle input box")
        kept = first.read_bytes()
        gem.say(tmux_server, pane, "/clear")
        wait_for(lambda: len(gem.session_files()) == 2 and input_draft(tmux_server.capture(pane)) == "", 30,
                 what="/clear's new session file")
        [second] = [p for p in gem.session_files() if p != first]
        now = find_gemini(shell)
        assert worker is not None and now is not None and now.proc == worker.proc  # /clear restarts nothing
        two = hand_off(tmux_server, gem, pane, gemini_api, log, "E2E-C2: after the clear", [one])
        assert followed(err, second), err.read_text()
        assert first.read_bytes() == kept  # the cleared session's file is left as it was
        resolved = real_cli.baton("resolve", pane, "-L", tmux_server.socket, "--agent", "gemini", "--json")
        steps = {s["step"]: s for s in json.loads(resolved.stdout)["steps"]}
        assert steps["transcript"]["value"] == str(second), resolved.stdout
        quiet_for(2.0, "a third hand-off")
        assert len(messages(log)) == 2
    rows = delivered("gem->t")
    assert [(r["state"], r["prompt"]) for r in rows] == [("delivered", one), ("delivered", two)], rows
    sessions = [json.loads(p.read_text().splitlines()[0])["sessionId"] for p in (first, second)]
    assert [s in r["turn_id"] for r, s in zip(rows, sessions, strict=True)] == [True, True], rows
