"""Cline's ``ask_question`` (the model asks the person a question, with 2-5 options and a line for a typed
response): the board says ``waiting`` with the question, not working; a hand-off to Cline waits until the
person answered (typed in, its paste would be dropped and its Enter would pick the selected option for
them). Read from the screens and session files recorded from the real Cline 3.0.65
(tests/fixtures/cline-3.0.65: ``screens/question*.ans``, ``question/asking/`` and the same session in
``sessions/`` once answered), then proven on the real CLI."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from plugins.cline.adapter import ClineAdapter
from plugins.cline.session import SessionFile
from tests.agent_versions import resolve
from tests.fakes.openai_chat import OPTIONS, QUESTION, FakeChat
from tests.support.agents import messages, start_agent
from tests.support.cli import write_routes
from tests.support.cline import ClineHome, cline_session
from tests.support.paths import FIXTURES
from tests.support.pipelines import make_config, running
from tests.support.polling import aquiet_for, until
from tests.support.real_cli import baton, npm_package
from tests.support.tmux import TmuxServer

ROOT = FIXTURES / "cline-3.0.65"
SESSION = "1796620671965_dv4wg"
WRAPPED = ("Which of these databases should the new billing service use for its ledger tables, given that we "
           "need strong transactional guarantees and the team already runs one of them in production today?")
CHOICES = "PostgreSQL, SQLite, MySQL or a typed response"
CLINE = resolve("cline")


def screen(name: str) -> str:
    return (ROOT / "screens" / f"{name}.ans").read_text(encoding="utf-8")


@pytest.mark.parametrize(("name", "question"), [("question", QUESTION), ("question_wrapped", WRAPPED),
                                                ("question_typing", QUESTION)])
def test_a_question_on_the_screen_is_waiting_for_the_person_with_its_words(name: str, question: str) -> None:
    adapter = object.__new__(ClineAdapter)  # reads the screen it is given, nothing of a tile
    shown = screen(name)
    assert adapter.waiting_for(shown) == f"question: {question}"
    assert adapter.asks(shown) == f"{question}\n{CHOICES}"
    assert adapter.answer_keys(shown, True) is None  # baton approve answers no question for the person
    assert adapter.input_box(shown) is None  # no input box: a hand-off is held (target_state: busy)


@pytest.mark.parametrize("name", ["question_answered_by_enter", "question_dismissed", "idle", "busy",
                                  "approval", "draft"])
def test_no_other_screen_is_taken_for_a_question(name: str) -> None:
    adapter = object.__new__(ClineAdapter)
    assert not (adapter.waiting_for(screen(name)) or "").startswith("question")


def test_while_the_question_is_asked_the_turn_is_open_and_its_answer_ends_it() -> None:
    asking = SessionFile(ROOT / "question" / "asking" / SESSION / f"{SESSION}.json")
    assert asking.read() and asking.state.busy  # status running
    [turn] = asking.state.turns()
    assert (turn.prompt, turn.outcome) == ("ASKTEST: set up the service", None)
    answered = SessionFile(ROOT / "sessions" / SESSION / f"{SESSION}.json")
    assert answered.read() and not answered.state.busy
    [turn] = answered.state.turns()  # the person's choice is a tool result, not a prompt
    assert turn.outcome == "completed"
    assert turn.answer == "TOOL_FINAL_BEGIN\nThe tool said:\nSQLite\nTOOL_FINAL_END"


@pytest.mark.tmux
@pytest.mark.slow
@pytest.mark.anyio
async def test_real_cline_asking_a_question_is_waiting_and_holds_a_hand_off_until_answered(
        tmux_server: TmuxServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with FakeChat() as chat, cline_session(tmux_server, tmp_path / "cl", api_url=chat.url,
                                           cline_bin=npm_package(CLINE)) as cline:
        await _ask_and_hand_off(tmux_server, tmp_path, cline, chat, caplog)


async def _ask_and_hand_off(tmux_server: TmuxServer, tmp_path: Path, cline: ClineHome, chat: FakeChat,
                            caplog: pytest.LogCaptureFixture) -> None:
    pane = cline.start(tmux_server)
    source, target = tmp_path / "source.jsonl", tmp_path / "target.jsonl"
    tiles = {"cl": {"pane": pane, "agent": "cline"},
             "src": {"pane": start_agent(tmux_server, source, "src"), "agent": "demo"},
             "t": {"pane": start_agent(tmux_server, target, "t"), "agent": "demo"}}
    routes = [{"from": "src", "to": "cl", "transform": "raw"}, {"from": "cl", "to": "t", "transform": "raw"}]
    routes_file = write_routes(tmp_path, tmux_server.socket, tiles, routes)
    caplog.set_level(logging.DEBUG, logger="batonpass")
    async with running(make_config(tiles, routes), tmux_server) as pipeline:
        cline.say(tmux_server, pane, "ASKTEST: set up the service")
        ctx = pipeline.tiles["cl"].ctx
        await until(lambda: ctx.waiting_for == f"question: {QUESTION}", 30, "the question, waiting")
        done = baton("status", "--json", "-c", str(routes_file))
        row = next(r for r in json.loads(done.stdout) if r["tile"] == "cl")
        assert (row["state"], row["waiting_for"]) == (f"waiting: question: {QUESTION}",
                                                      f"{QUESTION}\n{', '.join(OPTIONS)} or a typed response")
        cline.say(tmux_server, tiles["src"]["pane"], "HANDOFF-Q: from the other agent")  # its echo: to cl
        await until(lambda: messages(source), 10, "the source's prompt")
        await aquiet_for(3.0, "the hand-off typed into the question")
        assert [r.kind for r in chat.requests] == ["tool"]  # nothing answered the question
        assert ctx.waiting_for == f"question: {QUESTION}" and messages(target) == []
        tmux_server.run("send-keys", "-t", pane, "Down")  # the person picks SQLite
        tmux_server.run("send-keys", "-t", pane, "Enter")
        await until(lambda: messages(target), 30, "the answer after the question, handed on")
        await until(lambda: len(cline.prompts()) == 2, 30, "the held hand-off typed once Cline is idle")
        await until(lambda: len(messages(target)) == 2, 30, "the hand-off's turn handed on")
        await aquiet_for(1.5, "a second typing of the hand-off")
    assert "SQLite" in messages(target)[0]
    prompts = cline.prompts()
    assert prompts[0] == "ASKTEST: set up the service" and "HANDOFF-Q" in prompts[1] and len(prompts) == 2
    assert ctx.waiting_for is None
