"""``to: {choose: [...]}`` with ``ai-routing``: one call to a fake Messages API on 127.0.0.1 (the real SDK)
picks the tile, by a forced tool call, and writes its prompt; anything else goes to ``default:`` (or is
skipped), and the journal, ``baton preview`` and the target pane say which and why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Config, parse_config
from pipeline.engine.journal import MEMORY, Journal
from pipeline.engine.runtime import Pipeline
from pipeline.engine.stages.route import PromptRouter
from pipeline.plugin.events import Completion, Delivery, Response
from pipeline.plugin.transforms import Candidate, TransformSkipped
from plugins.transforms.choose import TOOL
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply
from tests.support.agents import demo_agent_command, messages
from tests.support.polling import until
from tests.support.stages import completion, tiles
from tests.support.transforms import ANSWER, handoff, make

pytestmark = pytest.mark.anyio

CHOICES = (Candidate("backend", "claude", "the API and the database"),
           Candidate("frontend", "codex", "the React app"),
           Candidate("docs", "demo", ""))
PROMPT = "Add the /v2/tokens endpoint in api/tokens.py and its migration."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def choosing(**kw: object):  # the input of a route that chooses among CHOICES
    from dataclasses import replace
    return replace(handoff(), choices=CHOICES, target="backend", **kw)


def picks(target: object, prompt: object = PROMPT, why: str = "it is API work") -> Reply:
    return Reply(tool={"name": TOOL, "input": {"target": target, "prompt": prompt, "why": why}})


# ---- the transform ------------------------------------------------------------------------------------


async def test_one_forced_tool_call_picks_the_tile_and_writes_its_prompt(registries, anthropic_api):
    anthropic_api.default = picks("frontend")
    transform = make(registries, "ai-routing", instructions="Send each task to the worker that fits.")
    result = await transform.apply(choosing())
    assert (result.target, result.text) == ("frontend", PROMPT)
    assert result.note == "the model chose frontend: it is API work"
    assert result.usage is not None and result.usage.model == "claude-test"
    [request] = anthropic_api.messages
    body = request.body
    assert body["tool_choice"] == {"type": "tool", "name": TOOL}
    [tool] = body["tools"]
    assert tool["input_schema"]["properties"]["target"]["enum"] == ["backend", "frontend", "docs"]
    assert tool["input_schema"]["required"] == ["target", "prompt"]
    user = request.user_text
    for part in ("- tile 'backend', agent claude: the API and the database",
                 "- tile 'frontend', agent codex: the React app", "- tile 'docs', agent demo",
                 "Send each task to the worker that fits.", f"<answer>\n{ANSWER}\n</answer>"):
        assert part in user


REFUSALS = {
    "outside the list": (picks("nosuch"), "the model chose 'nosuch', not one of backend, frontend, docs"),
    "no prompt": (picks("docs", prompt="  "), "the model chose 'docs' but wrote no prompt"),
    "text, no tool call": (Reply(text="I would pick backend."),
                           "the model did not call hand_off (it wrote: 'I would pick backend.')"),
    "api error": (Reply(status=500, headers={"retry-after-ms": "1"}),
                  "the API answered HTTP 500: api_error: fake error 500"),
    "timeout": (Reply(delay_s=30), "no answer from claude-test within timeout_s=0.5"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_a_choice_that_is_not_one_falls_back_with_its_reason(registries, anthropic_api, case):
    reply, reason = REFUSALS[case]
    anthropic_api.default = reply
    result = await make(registries, "ai-routing", timeout_s=0.5).apply(choosing())
    assert result.target is None and result.text == ANSWER
    assert result.note == f"ai-routing fell back to the raw answer: {reason}"
    with pytest.raises(TransformSkipped, match="on_error: skip"):
        await make(registries, "ai-routing", timeout_s=0.5, on_error="skip").apply(choosing())


async def test_without_a_key_nothing_is_called(registries, anthropic_api, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = await make(registries, "ai-routing").apply(choosing())
    assert result.target is None and "ANTHROPIC_API_KEY is not set" in result.note
    assert anthropic_api.messages == []


async def test_a_route_that_does_not_choose_sends_no_tool(registries, anthropic_api):
    anthropic_api.default = Reply(text=PROMPT)
    await make(registries, "ai-routing").apply(handoff())
    assert "tools" not in anthropic_api.messages[0].body


# ---- the router: the hand-off goes to the pick, else the default ----------------------------------------

ROUTES = """
version: 1
settings: {max_hops: 3, llm: {model: claude-test, timeout_s: 0.5}}
tiles:
  planner: {pane: '%1', agent: shell}
  backend: {pane: '%2', agent: shell, description: the API}
  frontend: {pane: '%3', agent: shell, description: the web app}
routes:
  - name: dispatch
    from: planner
    to: {choose: [backend, frontend], default: backend}
    transform: {type: ai-routing}
  - name: nodefault
    from: planner
    to: {choose: [backend, frontend]}
    transform: {type: ai-routing, instructions: "pick"}
"""


def router(registries) -> tuple[PromptRouter, Journal]:
    cfg, _ = parse_config(ROUTES)
    journal = Journal(MEMORY)
    return PromptRouter(cfg, tiles(cfg), registries.transforms, journal=journal), journal


async def route_one(r: PromptRouter) -> list:
    send_in, receive_in = anyio.create_memory_object_stream[Response](1)
    send_out, receive_out = anyio.create_memory_object_stream(4)
    await send_in.send(Response(completion=completion("planner", "t1"), text=ANSWER, source="transcript"))
    send_in.close()
    await r.run(receive_in, send_out)
    return [p async for p in receive_out]


async def test_the_hand_off_goes_to_the_models_pick_and_the_journal_says_why(registries, anthropic_api):
    anthropic_api.default = picks("frontend")
    r, journal = router(registries)
    prompts = await route_one(r)
    assert [(p.route, p.target, p.text, p.key) for p in prompts] == [
        ("dispatch", "frontend", PROMPT, "dispatch@t1"), ("nodefault", "frontend", PROMPT, "nodefault@t1")]
    rows = {h.key: h for h in journal.history()}
    assert (rows["dispatch@t1"].target, rows["dispatch@t1"].state) == ("frontend", "transformed")
    assert rows["dispatch@t1"].note == "the model chose frontend: it is API work"
    assert rows["dispatch@t1"].usage is not None and rows["dispatch@t1"].usage["model"] == "claude-test"


async def test_a_failed_choice_goes_to_the_default_or_is_skipped_without_one(registries, anthropic_api):
    anthropic_api.default = picks("nosuch")
    r, journal = router(registries)
    [prompt] = await route_one(r)
    assert (prompt.route, prompt.target, prompt.text) == ("dispatch", "backend", ANSWER)
    rows = {h.key: h for h in journal.history()}
    assert rows["dispatch@t1"].note == ("to the default backend: ai-routing fell back to the raw answer: "
                                        "the model chose 'nosuch', not one of backend, frontend")
    assert rows["nodefault@t1"].state == "skipped"
    assert rows["nodefault@t1"].note.endswith("no tile was chosen and the route has no default:")
    assert "the model chose 'nosuch'" in rows["nodefault@t1"].note


# ---- baton preview shows the choice -------------------------------------------------------------------


def test_preview_shows_the_choice(tmp_path: Path, anthropic_api: FakeAnthropicAPI) -> None:
    anthropic_api.default = picks("frontend")
    # a tmux server that does not run: preview reads --input, and touches no person's server
    no_server = f"tmux: {{socket_name: baton-choose-none-{os.getpid()}}}\n"
    (tmp_path / "routes.yaml").write_text(ROUTES.replace("version: 1\n", "version: 1\n" + no_server))
    env = {**os.environ, "TMUX": "", "XDG_STATE_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "preview", "dispatch", "--input", "-"],
                          input=ANSWER, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == PROMPT + "\n"
    assert "baton preview: to frontend: the model chose frontend: it is API work" in done.stderr
    as_json = subprocess.run([sys.executable, "-m", "pipeline.cli", "preview", "dispatch", "--input", "-",
                              "--json"], input=ANSWER, cwd=tmp_path, capture_output=True, text=True, env=env,
                             timeout=60)
    shown = json.loads(as_json.stdout)
    assert (shown["to"], shown["text"], shown["fires"]) == ("frontend", PROMPT, True)


# ---- end to end on real tmux: a shell planner, two demo agents, the model picks the second -------------


@pytest.mark.tmux
async def test_the_picked_agent_gets_the_prompt_and_the_other_nothing(
        tmux_server, registries, anthropic_api, tmp_path):
    anthropic_api.default = picks("frontend", prompt="Make the login button blue.")
    shell = tmux_server.new_pane()
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("backend", "frontend")}
    panes = {name: tmux_server.new_pane(demo_agent_command(name, work_s=0.1, log=log))
             for name, log in logs.items()}
    await until(lambda: "$" in tmux_server.capture(shell)
                and all("demo❯" in tmux_server.capture(p) for p in panes.values()), what="the prompts")
    config = Config.model_validate({
        "version": 1,
        "tiles": {"planner": {"pane": shell, "agent": "shell"},
                  **{name: {"pane": pane, "agent": "demo", "description": f"the {name}"}
                     for name, pane in panes.items()}},
        "routes": [{"name": "dispatch", "from": "planner",
                    "to": {"choose": ["backend", "frontend"], "default": "backend"},
                    "transform": {"type": "ai-routing"}}],
        "settings": {"max_hops": 1, "llm": {"model": "claude-e2e", "timeout_s": 20}},
    })
    deliveries: list[Delivery] = []

    def report(event: Completion | Delivery) -> None:
        if isinstance(event, Delivery):
            deliveries.append(event)

    pipeline = Pipeline(config, registries, tmux_server.tmux, report=report)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        await until(lambda: getattr(pipeline.tiles["planner"].adapter, "_mark", None) is not None,
                    what="the shell tile to be watched")
        tmux_server.type(shell, "echo 'the login button should be blue'")
        await until(lambda: deliveries, what="the hand-off")
        await until(lambda: messages(logs["frontend"]), what="the frontend agent to receive the prompt")
        await anyio.sleep(0.5)  # shapes the scenario: a window for anything else to arrive in
        tg.cancel_scope.cancel()
    [delivery] = deliveries
    assert (delivery.state, delivery.prompt.target) == ("delivered", "frontend")
    assert messages(logs["frontend"]) == ["Make the login button blue."]
    assert messages(logs["backend"]) == []
    assert len(anthropic_api.messages) == 1
