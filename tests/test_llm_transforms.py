"""summary and ai-routing against a fake Messages API on 127.0.0.1, reached by the real SDK.

What is sent (model, system prompt, the answer, max_tokens), the model's text becoming the prompt, each
failure falling back per ``on_error``, the SDK's retries, the shared limiter, the long-input cut, the
``baton check`` warning, and one hand-off through ai-routing between two real tmux panes.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anthropic
import anyio
import pytest

from pipeline.engine.config import Config, ConfigError, Settings, parse_config
from pipeline.engine.runtime import Pipeline
from pipeline.plugin.events import Completion, Delivery
from pipeline.plugin.transforms import TransformResult, TransformSkipped, Usage
from plugins.transforms.llm import MAX_CONCURRENT_CALLS, LLMSettings, system_prompt
from tests.fakes.anthropic_api import TEST_KEY, FakeAnthropicAPI, Reply
from tests.support.agents import demo_agent_command, messages
from tests.support.polling import until
from tests.support.transforms import ANSWER, handoff, make

pytestmark = pytest.mark.anyio

MODEL_PROMPT = "Review `refresh_token()` in src/auth/tokens.py:\ncheck that expired tokens are refused."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"




# ---- what is sent, what comes back ------------------------------------------------------------------


async def test_ai_routing_sends_the_answer_and_hands_on_the_models_prompt(
    registries, anthropic_api: FakeAnthropicAPI
):
    anthropic_api.default = Reply(text=MODEL_PROMPT)
    transform = make(registries, "ai-routing", instructions="Ask for a security review.")
    result = await transform.apply(handoff())
    # the fake's usage: 10 tokens in, a quarter of the text out; claude-test has no price: tokens only
    usage = Usage("claude-test", 10, len(MODEL_PROMPT) // 4)
    assert result == TransformResult(MODEL_PROMPT, note="", usage=usage)
    [request] = anthropic_api.messages
    assert request.path.startswith("/v1/messages")
    assert TEST_KEY in request.headers.get("x-api-key", "") + request.headers.get("authorization", "")
    body = request.body
    assert (body["model"], body["max_tokens"]) == ("claude-test", 333)
    assert body["system"] == [{"type": "text", "text": system_prompt("ai-routing"),
                               "cache_control": {"type": "ephemeral"}}]
    assert "verbatim" in body["system"][0]["text"] and "what to do next" in body["system"][0]["text"]
    [message] = body["messages"]
    assert message["role"] == "user"
    user = request.user_text
    assert f"<answer>\n{ANSWER}\n</answer>" in user
    for part in ("Ask for a security review.", "tile 'coder', agent claude — writes the code",
                 "tile 'reviewer', agent codex — reviews each change", "/src/app", "completed"):
        assert part in user


async def test_route_options_override_settings_llm(registries, anthropic_api: FakeAnthropicAPI):
    transform = make(registries, "ai-routing", model="claude-route-model", max_tokens=77)
    await transform.apply(handoff())
    [request] = anthropic_api.messages
    assert (request.body["model"], request.body["max_tokens"]) == ("claude-route-model", 77)
    assert "(none: write the natural next step for the target)" in request.user_text


async def test_summary_asks_for_max_words_with_its_own_system_prompt(
    registries, anthropic_api: FakeAnthropicAPI
):
    anthropic_api.default = Reply(text="  Moved token checks to src/auth/tokens.py.  \n")
    transform = make(registries, "summary", max_words=40, instructions="For the release notes.")
    result = await transform.apply(handoff())
    assert result.text == "Moved token checks to src/auth/tokens.py."
    [request] = anthropic_api.messages
    assert request.body["system"][0]["text"] == system_prompt("summary")
    assert request.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert ANSWER in request.user_text
    assert "at most 40 words" in request.user_text and "For the release notes." in request.user_text


async def test_the_sdk_retries_overloaded_and_server_errors(registries, anthropic_api: FakeAnthropicAPI):
    fast = {"retry-after-ms": "10"}
    anthropic_api.script(
        Reply(status=529, headers=fast), Reply(status=500, headers=fast), Reply(text=MODEL_PROMPT)
    )
    result = await make(registries, "ai-routing").apply(handoff())
    assert result.text == MODEL_PROMPT and result.note == ""
    assert len(anthropic_api.messages) == 3


# ---- failure is not loss ------------------------------------------------------------------------------

FAILURES = {
    "no-key": ("ANTHROPIC_API_KEY is not set", None),
    "api-error": ("the API answered HTTP 400: invalid_request_error: fake error 400", Reply(status=400)),
    "timeout": ("no answer from claude-test within timeout_s=0.5", Reply(delay_s=30)),
    "empty": ("claude-test returned no text (stop_reason: end_turn)", Reply(empty=True)),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("on_error", ["raw", "skip"])
async def test_each_failure_falls_back_as_configured(registries, anthropic_api: FakeAnthropicAPI, monkeypatch,
                                                     caplog, failure: str, on_error: str):
    reason, reply = FAILURES[failure]
    if reply is None:
        monkeypatch.delenv("ANTHROPIC_API_KEY")
    else:
        anthropic_api.default = reply
    transform = make(registries, "ai-routing", on_error=on_error, timeout_s=0.5)
    caplog.set_level(logging.INFO, logger="batonpass")
    if on_error == "skip":
        with pytest.raises(TransformSkipped, match="on_error: skip") as skipped:
            await transform.apply(handoff())
        assert reason in str(skipped.value)
    else:
        result = await transform.apply(handoff())
        assert result.text == ANSWER
        assert result.note == f"ai-routing fell back to the raw answer: {reason}"
        assert f"route review: ai-routing on turn turn-7: {reason}; handing on the raw answer" in caplog.text
    assert len(anthropic_api.messages) == (0 if failure == "no-key" else 1)


async def test_an_empty_answer_is_not_sent(registries, anthropic_api: FakeAnthropicAPI):
    with pytest.raises(TransformSkipped, match="empty"):
        await make(registries, "summary").apply(handoff(" \n"))
    assert anthropic_api.messages == []


# ---- limits -------------------------------------------------------------------------------------------


async def test_concurrent_calls_share_one_limiter(registries, anthropic_api: FakeAnthropicAPI):
    anthropic_api.default = Reply(text=MODEL_PROMPT, delay_s=0.3)
    transforms = [make(registries, "ai-routing"), make(registries, "summary")]
    results: list[TransformResult] = []

    async def one(i: int) -> None:
        results.append(await transforms[i % 2].apply(handoff()))

    async with anyio.create_task_group() as tg:
        for i in range(3 * MAX_CONCURRENT_CALLS):
            tg.start_soon(one, i)
    assert [r.text for r in results] == [MODEL_PROMPT] * (3 * MAX_CONCURRENT_CALLS)
    assert anthropic_api.max_in_flight == MAX_CONCURRENT_CALLS


async def test_a_long_answer_is_cut_in_the_middle_with_a_visible_marker(
    registries, anthropic_api: FakeAnthropicAPI, caplog
):
    answer = (
        "FIRST LINE src/a.py\n" + "".join(f"middle line {i}\n" for i in range(500)) + "LAST LINE src/z.py"
    )
    caplog.set_level(logging.WARNING, logger="batonpass")
    result = await make(registries, "ai-routing", max_input_chars=1000).apply(handoff(answer))
    cut = len(answer) - 1000
    user = anthropic_api.messages[0].user_text
    assert "FIRST LINE src/a.py" in user and "LAST LINE src/z.py" in user
    assert f"\n\n[… {cut} characters cut by batonpass …]\n\n" in user
    assert "middle line 250\n" not in user
    sent = user.split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]
    assert len(sent) == 1000 + len(f"\n\n[… {cut} characters cut by batonpass …]\n\n")
    assert f"{cut} characters cut from the middle of the answer (max_input_chars=1000)" in result.note
    assert "characters cut from the middle" in caplog.text


# ---- configuration ------------------------------------------------------------------------------------

ROUTES = """\
version: 1
tiles:
  coder: {pane: "%1", agent: claude}
  reviewer: {pane: "%2", agent: codex}
routes:
  - from: coder
    to: reviewer
    transform: ai-routing
  - from: reviewer
    to: coder
    transform: {type: summary, max_words: 50, on_error: skip}
settings: {max_hops: 2}
"""


def test_check_warns_at_the_transform_when_no_key_is_set(registries, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    _, warnings = parse_config(ROUTES, "routes.yaml", registries)
    assert [str(w) for w in warnings] == [
        "routes.yaml:8:16: warning: routes[0].transform: transform 'ai-routing' needs ANTHROPIC_API_KEY, "
        "which is not set: this route will hand on the raw answer instead",
        "routes.yaml:11:23: warning: routes[1].transform.type: transform 'summary' needs ANTHROPIC_API_KEY, "
        "which is not set: this route will skip its hand-offs instead",
    ]
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    assert parse_config(ROUTES, "routes.yaml", registries)[1] == []


def test_options_are_checked_when_the_config_loads(registries):
    bad = ROUTES.replace("max_words: 50", "max_words: 0, instruction: typo")
    with pytest.raises(ConfigError) as exc:
        parse_config(bad, "routes.yaml", registries)
    text = str(exc.value)
    assert "unknown option 'instruction' for transform 'summary'" in text
    assert "routes[1].transform.max_words" in text


def test_settings_llm_is_the_plugins_own_section_checked_where_it_is_written(registries):
    """routes.yaml's ``settings.llm`` as before; the engine's Settings names no plugin, the LLM plugin
    registers the section (register_settings) and reads it."""
    assert "llm" not in Settings.model_fields and registries.settings.get("llm") is LLMSettings
    good = ROUTES.replace("settings: {max_hops: 2}", "settings: {max_hops: 2, llm: {model: m, timeout_s: 5}}")
    config, _ = parse_config(good, "routes.yaml", registries)
    assert config.settings.section(LLMSettings) == LLMSettings(model="m", timeout_s=5)
    transform = registries.transforms.get("summary").from_config({})
    transform.configure(config.settings)
    assert (transform.model, transform.timeout_s, transform.max_tokens) == ("m", 5, 1024)
    bad = ROUTES.replace("{max_hops: 2}", "\n  max_hops: 2\n  llm: {max_tokens: '9', modle: m}\n  lm: {}")
    with pytest.raises(ConfigError) as exc:
        parse_config(bad, "routes.yaml", registries)
    errors = [p for p in str(exc.value).splitlines() if "error" in p]
    assert errors[:2] == [
        "routes.yaml:14:21: error: settings.llm.max_tokens: Input should be a valid integer",
        "routes.yaml:14:26: error: settings.llm.modle: unknown key 'modle'",
    ]
    assert errors[2].startswith("routes.yaml:15:3: error: settings.lm: unknown key 'lm'; known: max_hops, ")
    assert errors[2].endswith(", llm") and len(errors) == 3


async def test_the_fake_also_streams_server_sent_events(anthropic_api: FakeAnthropicAPI):
    anthropic_api.default = Reply(text=MODEL_PROMPT * 3)
    async with anthropic.AsyncAnthropic() as client:
        async with client.messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as s:
            assert await s.get_final_text() == MODEL_PROMPT * 3
    assert anthropic_api.messages[0].body["stream"] is True


# ---- end to end: a shell pane hands off to a demo agent through ai-routing -----------------------------




async def hand_off_one_turn(tmux_server, registries, log: Path) -> list[Delivery]:
    """Run the daemon on a shell tile and a demo agent tile, finish one shell turn, wait for the hand-off."""
    shell = tmux_server.new_pane()
    agent = tmux_server.new_pane(demo_agent_command("reviewer", work_s=0.1, log=log))
    await until(lambda: "$" in tmux_server.capture(shell) and "demo❯" in tmux_server.capture(agent),
                what="both panes to show their prompts")
    config = Config.model_validate(
        {
            "version": 1,
            "tiles": {
                "sh": {"pane": shell, "agent": "shell", "description": "runs the tests"},
                "rev": {"pane": agent, "agent": "demo", "description": "fixes what fails"},
            },
            "routes": [
                {"from": "sh", "to": "rev", "transform": {"type": "ai-routing", "instructions": "Fix it."}}
            ],
            "settings": {"max_hops": 1, "llm": {"model": "claude-e2e", "timeout_s": 20}},
        }
    )
    deliveries: list[Delivery] = []

    def report(event: Completion | Delivery) -> None:
        if isinstance(event, Delivery):
            deliveries.append(event)

    pipeline = Pipeline(config, registries, tmux_server.tmux, report=report)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        # the shell adapter notes its prompt line first; a command typed before that is not a turn it saw
        await until(lambda: getattr(pipeline.tiles["sh"].adapter, "_mark", None) is not None,
                    what="the shell tile to be watched")
        tmux_server.type(shell, "printf 'FAIL %s\\n' tests/test_app.py::test_total")
        await until(lambda: deliveries, what="the hand-off")
        await until(lambda: messages(log), what="the demo agent to receive the prompt")
        tg.cancel_scope.cancel()
    return deliveries


@pytest.mark.tmux
async def test_ai_routing_hands_the_target_the_models_prompt(
    tmux_server, registries, anthropic_api, tmp_path
):
    anthropic_api.default = Reply(text=MODEL_PROMPT)
    log = tmp_path / "agent.jsonl"
    [delivery] = await hand_off_one_turn(tmux_server, registries, log)
    assert delivery.state == "delivered" and delivery.prompt.note == ""
    assert messages(log) == [MODEL_PROMPT]
    [request] = anthropic_api.messages
    assert request.body["model"] == "claude-e2e"
    assert "<answer>\nFAIL tests/test_app.py::test_total" in request.user_text
    assert "Fix it." in request.user_text


@pytest.mark.tmux
async def test_without_a_key_the_target_gets_the_raw_answer_and_the_log_says_why(
        tmux_server, registries, anthropic_api, monkeypatch, caplog, tmp_path):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    caplog.set_level(logging.INFO, logger="batonpass")
    log = tmp_path / "agent.jsonl"
    [delivery] = await hand_off_one_turn(tmux_server, registries, log)
    assert messages(log) == ["FAIL tests/test_app.py::test_total"]
    assert delivery.prompt.note == "ai-routing fell back to the raw answer: ANTHROPIC_API_KEY is not set"
    assert "route sh->rev: ai-routing on turn shell:" in caplog.text
    assert "ANTHROPIC_API_KEY is not set; handing on the raw answer instead (on_error: raw)" in caplog.text
    assert anthropic_api.messages == []
