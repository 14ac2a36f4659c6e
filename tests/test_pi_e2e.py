"""End to end with the REAL pi (``@earendil-works/pi-coding-agent`` from npm, cached, on Node 22 from npm)
against a fake OpenAI chat-completions server on 127.0.0.1 (tests/fakes/openai_chat.py), in a private tmux
server, with the real pipeline:

* a hand-off each way between pi and the real Claude Code (its fake Messages API), with pi's extension
  hook installed by the real ``baton hooks install --agent pi``: pi 1.6.0 loads it, the session file and the
  hook report the turn under one id, and it is handed over once; ``agent: auto`` finds pi (a ``node``
  titled ``pi``); ``baton resolve`` names the session file, ``baton extract`` prints the answer;
* the project-trust dialog at start is ``waiting`` and answered by ``baton approve`` (trust for this
  session only); a tool turn hands over only its final answer; an interrupt is a failed turn handed to no
  one; the session's usage and cost come from pi's own records;
* ``baton run`` killed between the paste and its Enter: the paste shown as ``[paste #1 +14 lines]`` is
  recognised after the restart and submitted once;
* the old package, ``@mariozechner/pi-coding-agent`` 0.73.1: its session file is followed and its answer
  handed off once, its extension hook loads, and it asks no trust question;
* a model call answered with HTTP 500 that pi retries by itself: the final answer handed on once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.claude_code.paste import unwrap_paste
from plugins.pi.screen import input_draft
from tests.agent_versions import PI_PREVIOUS, resolve
from tests.fakes.claude_api import ClaudeAPI
from tests.fakes.npm_agents import CLAUDE_CODE, node_22
from tests.fakes.openai_chat import DEFAULT_ANSWER, SLOW_CHUNK_S, FakeChat
from tests.support import real_cli
from tests.support.agents import messages, start_agent
from tests.support.cli import write_routes
from tests.support.crash_at_paste import LONG_TEMPLATE, crash_at_paste
from tests.support.pi import make_pi_home
from tests.support.pipelines import make_config, running
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.anyio]

PI = resolve("pi")  # pinned, or npm latest with BATON_AGENTS=latest
TOOL_FINAL_START = "TOOL_FINAL_BEGIN"


@pytest.fixture(scope="module")
def node() -> Path:
    return real_cli.installed("Node 22", node_22)


@pytest.fixture(scope="module")
def pi_bin(node: Path) -> Path:
    return real_cli.npm_package(PI, node)


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with FakeChat() as api:
        yield api


async def test_real_pi_and_claude_code_hand_off_once_each_way_with_the_extension_hook(
        tmux_server: TmuxServer, tmp_path: Path, pi_bin: Path, node: Path, chat: FakeChat,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # the daemon's hook spool, where the hook writes
    pi = make_pi_home(tmp_path / "p", api_url=chat.url, pi_bin=pi_bin, node=node, state=state)
    for expected in ("added the batonpass extension", "already installed"):
        result = real_cli.baton("hooks", "install", "--agent", "pi",
                                env={"PI_CODING_AGENT_DIR": str(pi.agent)})
        assert result.returncode == 0 and expected in result.stdout, result.stdout + result.stderr
    assert (pi.agent / "extensions" / "batonpass.ts").exists()
    claude_bin = real_cli.npm_package(CLAUDE_CODE)
    with ClaudeAPI(answer=real_cli.claude_answer) as claude_api:
        cc, cc_pane = real_cli.launch_claude(tmux_server, tmp_path / "c", api_url=claude_api.url,
                                             claude_bin=claude_bin, version=CLAUDE_CODE[1])
        p_pane = pi.start(tmux_server)
        real_cli.wait_claude(tmux_server, cc, cc_pane)
        config = make_config({"pi": {"pane": p_pane}, "cc": {"pane": cc_pane, "agent": "claude"}},
                             [{"from": "pi", "to": "cc", "transform": "raw"},
                              {"from": "cc", "to": "pi", "transform": "raw"}], max_hops=2)
        caplog.set_level(logging.DEBUG, logger="batonpass")
        prompt = "E2E-PI1: review the auth middleware"
        async with running(config, tmux_server) as pipeline:
            assert pipeline.tiles["pi"].adapter.name == "pi"  # agent: auto, from the process tree
            pi.say(tmux_server, p_pane, prompt)  # a person's prompt: hop 0
            await until(lambda: len(chat.turns()) >= 2, 90, "Claude's answer typed into pi")
            await until(lambda: len(real_cli.completions(caplog, "pi")) >= 2, 30, "pi's second turn")
            await aquiet_for(2.0, "a third hand-off (max_hops=2)")
    typed = [r.last_user_text for r in claude_api.turns]
    assert [unwrap_paste(t).strip() for t in typed] == [DEFAULT_ANSWER], typed
    assert pi.prompts() == [prompt, real_cli.claude_answer(typed[0])]
    ends = real_cli.completions(caplog, "pi")
    assert [outcome for _, outcome, _ in ends] == ["completed", "completed"]
    accepted = [r for r in caplog.records if r.msg.startswith("completion") and r.args[0] == "pi"]
    print(f"\npi e2e: model's last chunk -> completion "
          f"{(accepted[0].created - chat.turns()[0].t_last_chunk) * 1e3:.0f} ms (via {accepted[0].args[3]})")
    for turn, _, _ in ends:  # the file and the extension hook, one id
        assert real_cli.signals_seen(caplog, turn) == {"session file", "hook"}, (turn, caplog.text[-3000:])
    [session] = pi.session_files()
    resolved = real_cli.baton("resolve", p_pane, "-L", tmux_server.socket, "--agent", "pi", "--json")
    steps = {s["step"]: s for s in json.loads(resolved.stdout)["steps"]}
    assert steps["transcript"]["value"] == str(session), resolved.stdout
    assert "rule: " in steps["transcript"]["detail"]
    extracted = real_cli.baton("extract", str(session))  # recognised as pi's without --agent
    assert extracted.returncode == 0 and extracted.stdout == DEFAULT_ANSWER + "\n", extracted


async def test_real_pi_trust_dialog_approved_tool_turn_and_interrupt(
        tmux_server: TmuxServer, tmp_path: Path, pi_bin: Path, node: Path, chat: FakeChat,
        caplog: pytest.LogCaptureFixture) -> None:
    """No hooks. The trust dialog at start is ``waiting`` and ``baton approve`` trusts the folder for
    this session only; a tool turn hands over its last answer only; an interrupt is a failed turn."""
    pi = make_pi_home(tmp_path, api_url=chat.url, pi_bin=pi_bin, node=node, trust_dialog=True)
    p_pane = pi.launch(tmux_server)
    wait_for(lambda: "Trust project folder?" in tmux_server.capture(p_pane), 60, what="the trust dialog")
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    tiles = {"pi": {"pane": p_pane, "agent": "pi"}, "t": {"pane": target, "agent": "demo"}}
    routes = [{"from": "pi", "to": "t", "transform": "raw"}]
    config = make_config(tiles, routes)
    caplog.set_level(logging.DEBUG, logger="batonpass")
    async with running(config, tmux_server) as pipeline:
        ctx, adapter = pipeline.tiles["pi"].ctx, pipeline.tiles["pi"].adapter
        await until(lambda: ctx.waiting_for == "project trust dialog", 20, "the trust dialog, waiting")
        assert await adapter.target_state() == "busy"
        (tmp_path / "cli").mkdir()
        routes_file = write_routes(tmp_path / "cli", tmux_server.socket, tiles, routes)
        approved = real_cli.baton("approve", "pi", "-c", str(routes_file))
        assert approved.returncode == 0, approved.stdout + approved.stderr
        await until(lambda: input_draft(tmux_server.capture(p_pane)) == "", 30, "pi's input box")
        assert not (pi.agent / "trust.json").exists()  # trusted for this session only

        pi.say(tmux_server, p_pane, "TOOLTEST: run ls")
        await until(lambda: messages(log), 40, "the tool turn's answer in the target")
        [answer] = messages(log)
        assert answer.startswith(TOOL_FINAL_START) and "FAKE_TOOL_OK" in answer, answer
        await until(lambda: ctx.waiting_for is None, 10, "no dialog any more")

        pi.say(tmux_server, p_pane, "SLOWTEST: interrupt me")
        await until(lambda: adapter.is_busy(tmux_server.capture(p_pane)), 20, "the busy line")
        await until(lambda: "Here is" in tmux_server.capture(p_pane), 10 + 10 * SLOW_CHUNK_S, "streaming")
        tmux_server.run("send-keys", "-t", p_pane, "Escape")
        await until(lambda: any(o == "failed" for _, o, _ in real_cli.completions(caplog, "pi")), 20,
                    "the failed completion")
        await aquiet_for(1.5, "a hand-off of the interrupted turn")
        usage = await adapter.usage()
    assert len(messages(log)) == 1
    assert [o for _, o, _ in real_cli.completions(caplog, "pi")] == ["completed", "failed"]
    assert usage is not None and usage.models == ("fake-model",) and usage.cost_usd and usage.input > 0


def test_real_pi_as_target_killed_between_paste_and_enter_takes_the_prompt_once(
        tmux_server: TmuxServer, tmp_path: Path, pi_bin: Path, node: Path, chat: FakeChat,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``baton run`` killed the moment the real pi shows the hand-off as ``[paste #1 +14 lines]`` in its
    input, then started again: it recognises its own paste, presses Enter once, and the session file holds
    the prompt exactly once (tests/support/crash_at_paste.py)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    pi = make_pi_home(tmp_path, api_url=chat.url, pi_bin=pi_bin, node=node)
    pane = pi.start(tmux_server)

    def holds_paste() -> bool:
        return (input_draft(tmux_server.capture(pane)) or "").startswith("[paste #")

    note = crash_at_paste(tmux_server, tmp_path, {"pane": pane, "agent": "pi"}, LONG_TEMPLATE,
                          holds_paste, pi.prompts, marker="PI-1")
    assert note == "submitted a paste left by a crash"


async def test_real_pi_0_73_1_session_file_is_followed_and_handed_off_once(
        tmux_server: TmuxServer, tmp_path: Path, chat: FakeChat, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The old package, on the machine's Node: its session file (no system messages, the busy line above
    the input box) is followed like 1.x's; it loads the extension hook ``baton hooks install --agent pi``
    writes (its ``agent_end`` reports the turn under the file's id); and in a folder with ``.pi/`` settings it
    asks no trust question (1.x does) — it starts straight into its input box."""
    old = real_cli.npm_package(PI_PREVIOUS)
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # the daemon's hook spool, where the hook writes
    pi = make_pi_home(tmp_path, api_url=chat.url, pi_bin=old, state=state, trust_dialog=True)
    installed = real_cli.baton("hooks", "install", "--agent", "pi",
                               env={"PI_CODING_AGENT_DIR": str(pi.agent)})
    assert installed.returncode == 0, installed.stdout + installed.stderr
    p_pane = pi.start(tmux_server)  # no trust dialog: the input box at once
    assert "Trust project folder?" not in tmux_server.capture(p_pane)
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    config = make_config({"pi": {"pane": p_pane}, "t": {"pane": target, "agent": "demo"}},
                         [{"from": "pi", "to": "t", "transform": "raw"}])
    caplog.set_level(logging.DEBUG, logger="batonpass")
    async with running(config, tmux_server) as pipeline:
        assert pipeline.tiles["pi"].adapter.name == "pi"
        pi.say(tmux_server, p_pane, "E2E-OLD1: hello from 0.73.1")
        await until(lambda: messages(log), 40, "the answer in the target")
        [(turn, _, _)] = real_cli.completions(caplog, "pi")
        await until(lambda: "hook" in real_cli.signals_seen(caplog, turn), 10, "the extension hook's record")
        await aquiet_for(1.5, "a second hand-off")
    assert messages(log) == [DEFAULT_ANSWER]
    [(turn, outcome, _)] = real_cli.completions(caplog, "pi")
    assert outcome == "completed" and turn.startswith("pi:")


async def test_real_pi_retries_a_server_error_and_the_final_answer_is_handed_on_once(
        tmux_server: TmuxServer, tmp_path: Path, pi_bin: Path, node: Path, chat: FakeChat,
        caplog: pytest.LogCaptureFixture) -> None:
    """The model call fails with HTTP 500; pi writes the ``error`` message, shows ``Retrying (1/3)``, calls
    again and gets the answer: one turn, completed, its final answer handed on once (the error is
    provisional: never handed on as a failed turn)."""
    chat.fail_next(1)
    pi = make_pi_home(tmp_path, api_url=chat.url, pi_bin=pi_bin, node=node)
    p_pane = pi.start(tmux_server)
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    config = make_config({"pi": {"pane": p_pane}, "t": {"pane": target, "agent": "demo"}},
                         [{"from": "pi", "to": "t", "transform": "raw"}])
    caplog.set_level(logging.DEBUG, logger="batonpass")
    async with running(config, tmux_server):
        pi.say(tmux_server, p_pane, "E2E-RETRY1: answer after a server error")
        await until(lambda: messages(log), 60, "the retried answer in the target")
        await aquiet_for(2.0, "a second hand-off")
    kinds = [r.kind for r in chat.requests if r.kind in ("error", "answer")]
    assert kinds == ["error", "answer"], kinds  # pi retried by itself
    assert messages(log) == [DEFAULT_ANSWER]
    assert [outcome for _, outcome, _ in real_cli.completions(caplog, "pi")] == ["completed"]
    [session] = pi.session_files()
    stops = [json.loads(line)["message"].get("stopReason") for line in session.read_text().splitlines()
             if '"role":"assistant"' in line.replace(" ", "")]
    assert stops == ["error", "stop"], stops  # what the file held: the error, then the retried answer
