"""End to end with the REAL Cline CLI (``cline`` from npm, cached: a compiled binary) against the fake
OpenAI chat server on 127.0.0.1 (tests/fakes/openai_chat.py), in a private tmux server, with the real
pipeline:

* a hand-off each way between Cline and the real Claude Code, with Cline's TaskComplete hook installed by
  the real ``baton hooks install --agent cline``: the session files and the hook report the turn under one
  id, handed over once; ``agent: auto`` finds Cline (never its hub daemon); ``baton resolve`` names the
  session, ``baton extract`` prints the answer;
* without hooks: a tool turn hands over only its final answer, a tool waiting for approval is ``waiting``
  until ``baton approve`` allows it once, an interrupt is a failed turn handed to no one;
* without auth, Cline's provider picker: the tile is ``waiting`` and takes no hand-off;
* ``baton run`` killed between the paste and its Enter: the paste shown as ``[… Pasted +N lines]`` is
  recognised after the restart and submitted once.

Every test ends the hub daemon its Cline started (it outlives the pane and the tmux server).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.claude_code.paste import unwrap_paste
from tests.agent_versions import resolve
from tests.fakes.claude_api import ClaudeAPI
from tests.fakes.npm_agents import CLAUDE_CODE
from tests.fakes.openai_chat import FakeChat
from tests.support.agents import messages, start_agent
from tests.support.cli import write_routes
from tests.support.cline import ClineHome, make_cline_home
from tests.support.crash_at_paste import LONG_TEMPLATE, crash_at_paste
from tests.support.pipelines import make_config, running
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.real_cli import (
    baton,
    claude_answer,
    completions,
    launch_claude,
    npm_package,
    signals_seen,
    wait_claude,
)
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.anyio]

CLINE = resolve("cline")  # pinned, or npm latest with BATON_AGENTS=latest


@pytest.fixture(scope="module")
def cline_bin() -> Path:
    return npm_package(CLINE)


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with FakeChat() as server:
        yield server


@pytest.fixture
def cline(tmp_path: Path, cline_bin: Path, chat: FakeChat, tmux_server: TmuxServer) -> Iterator[ClineHome]:
    home = make_cline_home(tmp_path / "cl", api_url=chat.url, cline_bin=cline_bin, state=tmp_path / "state")
    try:
        yield home
    finally:
        tmux_server.kill()  # the TUI first (it would start the hub again), then its hub
        home.end()


def prompts_sent(chat: FakeChat) -> list[str]:
    """What the model was asked by a person (or batonpass), unwrapped: not tool steps."""
    return [r.last_user_text for r in chat.requests if r.kind == "answer"]


async def test_real_cline_and_claude_code_hand_off_once_each_way(
        tmux_server: TmuxServer, tmp_path: Path, cline: ClineHome, chat: FakeChat,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the daemon's hook spool
    for expected in ("added the TaskComplete hook", "already installed"):
        result = baton("hooks", "install", "--agent", "cline", env={"HOME": str(cline.home)})
        assert result.returncode == 0 and expected in result.stdout, result.stdout + result.stderr
    claude_bin = npm_package(CLAUDE_CODE)
    chat.script("CLINE-ANSWER-1: the middleware looks right", "CLINE-ANSWER-2: thanks, done")
    with ClaudeAPI(answer=claude_answer) as claude_api:
        cc, cc_pane = launch_claude(tmux_server, tmp_path / "c", api_url=claude_api.url,
                                    claude_bin=claude_bin, version=CLAUDE_CODE[1])
        cl_pane = cline.start(tmux_server)
        wait_claude(tmux_server, cc, cc_pane)
        config = make_config({"cl": {"pane": cl_pane}, "cc": {"pane": cc_pane, "agent": "claude"}},
                             [{"from": "cl", "to": "cc", "transform": "raw"},
                              {"from": "cc", "to": "cl", "transform": "raw"}], max_hops=2)
        caplog.set_level(logging.DEBUG, logger="batonpass")
        prompt = "E2E-C1: review the auth middleware"
        async with running(config, tmux_server) as pipeline:
            assert pipeline.tiles["cl"].adapter.name == "cline"  # agent: auto, from the process tree
            cline.say(tmux_server, cl_pane, prompt)  # a person's prompt: hop 0
            await until(lambda: len(prompts_sent(chat)) >= 2, 90, "Claude's answer typed into Cline")
            await until(lambda: len(completions(caplog, "cl")) >= 2, 30, "Cline's second turn")
            await aquiet_for(2.0, "a third hand-off (max_hops=2)")
            assert cline.hubs(), "the TUI started no hub daemon"
    typed = [r.last_user_text for r in claude_api.turns]
    assert [unwrap_paste(t).strip() for t in typed] == ["CLINE-ANSWER-1: the middleware looks right"], typed
    assert [p.strip() for p in cline.prompts()] == [prompt, claude_answer(typed[0])]
    ends = completions(caplog, "cl")
    assert [outcome for _, outcome, _ in ends] == ["completed", "completed"]
    for turn, _, _ in ends:  # the files and the TaskComplete hook, one id
        assert signals_seen(caplog, turn) == {"session file", "hook"}, (turn, caplog.text[-3000:])
    [record] = cline.session_files()
    resolved = baton("resolve", cl_pane, "-L", tmux_server.socket, "--agent", "cline", "--json")
    steps = {s["step"]: s for s in json.loads(resolved.stdout)["steps"]}
    assert steps["transcript"]["value"] == str(record), resolved.stdout
    assert steps["process"]["value"] not in cline.hubs()  # the TUI, never its hub daemon
    extracted = baton("extract", str(record))  # recognised as Cline's without --agent
    assert extracted.returncode == 0 and extracted.stdout == "CLINE-ANSWER-2: thanks, done\n", extracted


async def test_real_cline_tool_turns_approve_and_interrupt_without_hooks(
        tmux_server: TmuxServer, tmp_path: Path, cline: ClineHome, chat: FakeChat,
        caplog: pytest.LogCaptureFixture) -> None:
    """A tool turn hands over its last answer only; at the permission prompt (auto-approve turned off with
    Shift+Tab) the tile is waiting and nothing is handed over until ``baton approve`` allows it once; an
    interrupt (Esc) is a failed turn."""
    cl_pane = cline.start(tmux_server)
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    tiles = {"cl": {"pane": cl_pane, "agent": "cline"}, "t": {"pane": target, "agent": "demo"}}
    routes = [{"from": "cl", "to": "t", "transform": "raw"}]
    routes_file = write_routes(tmp_path, tmux_server.socket, tiles, routes)
    caplog.set_level(logging.DEBUG, logger="batonpass")
    async with running(make_config(tiles, routes), tmux_server) as pipeline:
        cline.say(tmux_server, cl_pane, "TOOLTEST: list the files")
        await until(lambda: messages(log), 40, "the tool turn's answer in the target")
        [final] = messages(log)
        assert final.startswith("TOOL_FINAL_BEGIN") and "FAKE_TOOL_OK" in final

        tmux_server.run("send-keys", "-t", cl_pane, "BTab")
        await until(lambda: "Auto-approve all disabled" in tmux_server.capture(cl_pane), 10, "approvals on")
        cline.say(tmux_server, cl_pane, "TOOLASK: create approved.txt")
        ctx = pipeline.tiles["cl"].ctx
        try:
            await until(lambda: (ctx.waiting_for or "").startswith("permission prompt"), 30,
                        "the permission prompt, waiting")
        except AssertionError as exc:  # what Cline showed and wrote, to tell why
            records = [p.read_text()[:400] for p in cline.session_files()]
            shown = tmux_server.capture(cl_pane)
            raise AssertionError(f"{exc}\n{shown}\n{records}\n{caplog.text[-3000:]}") from exc
        await aquiet_for(1.5, "a hand-off of the call before the tool")
        assert len(messages(log)) == 1
        assert await pipeline.tiles["cl"].adapter.target_state() == "busy"
        approved = baton("approve", "cl", "-c", str(routes_file))
        assert approved.returncode == 0, approved.stdout + approved.stderr
        await until(lambda: len(messages(log)) == 2, 40, "the approved turn's answer")
        assert (cline.project / "approved.txt").exists()
        await until(lambda: ctx.waiting_for is None, 10, "no longer waiting")

        cline.say(tmux_server, cl_pane, "SLOWTEST: interrupt me")
        await until(lambda: "Here is" in tmux_server.capture(cl_pane), 20, "the slow answer streaming")
        tmux_server.run("send-keys", "-t", cl_pane, "Escape")
        await until(lambda: any(o == "failed" for _, o, _ in completions(caplog, "cl")), 20,
                    "the failed completion")
        await aquiet_for(1.5, "a hand-off of the interrupted turn")
    assert len(messages(log)) == 2
    assert [o for _, o, _ in completions(caplog, "cl")] == ["completed", "completed", "failed"]
    usage = await pipeline.tiles["cl"].adapter.usage()
    assert usage is not None and usage.models == ("fake-model",) and usage.input > 0


async def test_real_cline_without_auth_is_waiting_at_its_provider_picker(
        tmux_server: TmuxServer, tmp_path: Path, cline_bin: Path, chat: FakeChat) -> None:
    """Never signed in, the TUI opens its provider picker: the board says waiting (what for), and the tile
    is busy to a hand-off (typing would pick a provider)."""
    home = make_cline_home(tmp_path / "na", api_url=chat.url, cline_bin=cline_bin, auth=False)
    try:
        pane = tmux_server.new_pane(home.shell_command(), cwd=home.project, width=120, height=40)
        tmux_server.type(pane, "cline")
        wait_for(lambda: "Connect a model provider" in tmux_server.capture(pane), 60, what="the picker")
        target = start_agent(tmux_server, tmp_path / "target.jsonl", "target")
        config = make_config({"cl": {"pane": pane, "agent": "cline"}, "t": {"pane": target, "agent": "demo"}},
                             [{"from": "t", "to": "cl", "transform": "raw"}])
        async with running(config, tmux_server) as pipeline:
            ctx = pipeline.tiles["cl"].ctx
            await until(lambda: (ctx.waiting_for or "").startswith("provider picker"), 20,
                        "the provider picker, waiting")
            assert await pipeline.tiles["cl"].adapter.target_state() == "busy"
    finally:
        tmux_server.kill()
        home.end()


def test_real_cline_as_target_killed_between_paste_and_enter_takes_the_prompt_once(
        tmux_server: TmuxServer, tmp_path: Path, cline: ClineHome, monkeypatch: pytest.MonkeyPatch) -> None:
    """``baton run`` killed the moment the real Cline shows the hand-off as ``[… Pasted +14 lines]`` in its
    input, then started again: it recognises its own paste, presses Enter once, and the session holds the
    prompt exactly once (tests/support/crash_at_paste.py)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(cline.home))
    pane = cline.start(tmux_server)

    def holds_paste() -> bool:
        return "Pasted +" in (cline.draft(tmux_server, pane) or "")

    note = crash_at_paste(tmux_server, tmp_path, {"pane": pane, "agent": "cline"}, LONG_TEMPLATE,
                          holds_paste, cline.prompts, marker="CLINE-1")
    assert note == "submitted a paste left by a crash"
