"""An AI transform falls back on ANY failure of its model call (#31, item 5): a 200 whose body is no
Messages response, an empty content list, no text block — the raw answer goes on (or the hand-off is
skipped with ``on_error: skip``), the reason is in ``baton history``, and ``baton preview`` says it in one
line. A third-party transform that raises is one line in ``baton preview`` as well.

The model is a fake Messages API on 127.0.0.1 reached through ``ANTHROPIC_BASE_URL`` by the real SDK.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from pipeline.plugin.transforms import TransformSkipped
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply
from tests.support.agents import messages, start_agent, transcript_answers
from tests.support.cli import baton, json_lines
from tests.support.daemons import write_config
from tests.support.plugins import SHOUT, install_plugin
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer
from tests.support.transforms import ANSWER, handoff, make

UNREADABLE = "the API's answer could not be read (JSONDecodeError"
NO_MESSAGE = "the API answered HTTP 200 with no Messages response: "
#: what a server (or a proxy in front of it) may answer with a 200, and the reason the note gives
NOT_A_MESSAGE: dict[str, tuple[Any, str]] = {
    "a JSON string": ("hello", NO_MESSAGE + "a string"),
    "a JSON list": ([1, 2], NO_MESSAGE + "a list"),
    "null": (b"null", NO_MESSAGE + "null"),
    "an object without content": ({"ok": True}, NO_MESSAGE + "no content"),
    "content that is a string": ({"type": "message", "content": "hi"},
                                 NO_MESSAGE + "content that is a str"),
    "no JSON at all": (b"<html>502 Bad Gateway</html>", UNREADABLE),
    "an empty body": (b"", UNREADABLE),
    "an empty content list": ({"type": "message", "role": "assistant", "model": "claude-test", "content": [],
                               "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 0}},
                              "claude-test returned no text (stop_reason: end_turn)"),
    "no text block": ({"type": "message", "role": "assistant", "model": "claude-test",
                       "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
                       "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 1}},
                      "claude-test returned no text (stop_reason: tool_use)"),
    "a text block without text": ({"type": "message", "content": [{"type": "text"}, "stray"]},
                                  "claude-test returned no text (stop_reason: None)"),
}




@pytest.mark.anyio
@pytest.mark.parametrize("body", sorted(NOT_A_MESSAGE))
@pytest.mark.parametrize("on_error", ["raw", "skip"])
async def test_an_answer_that_is_no_messages_response_falls_back(
        registries, anthropic_api: FakeAnthropicAPI, caplog, body: str, on_error: str) -> None:
    sent, reason = NOT_A_MESSAGE[body]
    anthropic_api.default = Reply(body=sent)
    transform = make(registries, "summary", on_error=on_error)
    caplog.set_level(logging.INFO, logger="batonpass")
    if on_error == "skip":
        with pytest.raises(TransformSkipped, match="on_error: skip") as skipped:
            await transform.apply(handoff())
        assert reason in str(skipped.value)
    else:
        result = await transform.apply(handoff())
        assert result.text == ANSWER
        assert result.note.startswith(f"summary fell back to the raw answer: {reason}")
        assert reason in caplog.text and "handing on the raw answer instead" in caplog.text
    assert len(anthropic_api.messages) == 1


@pytest.mark.tmux
@pytest.mark.slow
def test_the_daemon_hands_on_the_raw_answer_and_history_says_why(
        tmux_server: TmuxServer, tmp_path: Path, private_state: Path, anthropic_api: FakeAnthropicAPI,
        daemon_factory) -> None:
    """``baton run`` (it inherits ANTHROPIC_BASE_URL): every turn's hand-off arrives raw, none ends failed."""
    anthropic_api.default = Reply(body="hello")
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a = start_agent(tmux_server, alog, "a", role="writer", work_s=0.1)
    b = start_agent(tmux_server, blog, "b", work_s=0.1)
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
                          [{"name": "sum", "from": "a", "to": "b", "transform": {"type": "summary"}}])
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    for i in range(2):
        wait_for(lambda i=i: len(messages(blog)) == i, what=f"hand-off {i}")
        tmux_server.type(a, f"task {i}")
    wait_for(lambda: len(messages(blog)) == 2, timeout=30, what="both hand-offs")
    # the paste is in b's log a moment before the daemon has seen b's turn start and recorded it delivered
    wait_for(lambda: [r["state"] for r in json_lines(baton("history", "--json").out)] == ["delivered"] * 2,
             what="both recorded delivered")
    assert daemon.stop() == 0
    # a's own answers, raw: the model's reply was unreadable
    assert set(messages(blog)) <= set(transcript_answers(private_state))
    assert [m.split(":")[0] for m in messages(blog)] == ['Draft 1 by a, answering "task 0"',
                                                         'Draft 2 by a, answering "task 1"']
    rows = json_lines(baton("history", "--json").out)
    assert [r["state"] for r in rows] == ["delivered", "delivered"]
    for row in rows:
        assert row["note"] == ("summary fell back to the raw answer: the API answered HTTP 200 with no "
                               "Messages response: a string")
    assert len(anthropic_api.messages) == 2


ROUTES = """\
version: 1
tiles:
  coder: {pane: "%1", agent: claude}
  reviewer: {pane: "%2", agent: codex}
routes:
  - {name: NAME, from: coder, to: reviewer, transform: TRANSFORM}
settings: {llm: {model: claude-test}}
"""


def write_routes(tmp_path: Path, on_error: str = "raw") -> Path:
    path = tmp_path / f"summary-{on_error}.yaml"
    transform = f"{{type: summary, on_error: {on_error}}}"
    path.write_text(ROUTES.replace("NAME", "sum").replace("TRANSFORM", transform))
    return path


@pytest.mark.parametrize("body", ["a JSON string", "no JSON at all", "an empty content list",
                                  "no text block"])
def test_preview_says_the_fallback_in_one_line(tmp_path: Path, anthropic_api: FakeAnthropicAPI,
                                                body: str) -> None:
    sent, reason = NOT_A_MESSAGE[body]
    anthropic_api.default = Reply(body=sent)
    result = baton("preview", "sum", "-c", str(write_routes(tmp_path)), "--input", "-", input=ANSWER)
    assert result.out == ANSWER + "\n"
    line = result.one_line_error(0, f"baton preview: summary fell back to the raw answer: {reason}")
    assert line.startswith("baton preview: summary fell back")
    skip = baton("preview", "sum", "-c", str(write_routes(tmp_path, "skip")), "--input", "-", input=ANSWER)
    skip.one_line_error(1, "route sum would not hand this off: summary could not run: ", reason)


@pytest.fixture(scope="module")
def shout_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A third-party transform, installed as a real distribution, that raises on an answer with "crash"."""
    site = tmp_path_factory.mktemp("shout-site")
    install_plugin(site, "baton_shout", SHOUT, "baton-shout", "1.2.3", "shout")
    return site


@pytest.mark.parametrize("as_json", [False, True])
def test_preview_of_a_third_party_transform_that_raises_is_one_line(tmp_path: Path, shout_site: Path,
                                                                    as_json: bool) -> None:
    env = {"PYTHONPATH": str(shout_site), "BATON_DISABLE_EXTERNAL_PLUGINS": ""}
    routes = tmp_path / "shout.yaml"
    routes.write_text(ROUTES.replace("NAME", "loud").replace("TRANSFORM", "shout"))
    args = ["preview", "loud", "-c", str(routes), "--input", "-", *(["--json"] * as_json)]
    fine = baton(*args, input="all good", env=env)
    assert (fine.status, fine.err) == (0, "")
    assert "ALL GOOD!" in fine.out
    result = baton(*args, input="a crash here", env=env)
    why = "transform shout failed: RuntimeError: shout cannot handle this one"
    if as_json:
        assert (result.status, result.err) == (1, "")
        assert '"fires": false' in result.out and why in result.out
    else:
        assert result.out == ""
        result.one_line_error(1, f"baton preview: route loud would not hand this off: {why}")
