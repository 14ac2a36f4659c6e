"""The AI transforms' own token use and cost, per hand-off: counted from the Messages API's ``usage`` (the
fake API on 127.0.0.1, reached by the real SDK through ANTHROPIC_BASE_URL), priced from the table in
plugins/transforms/prices.py, kept in the journal and shown by ``baton history`` (text and --json)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.transforms.prices import PRICES, price_of
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply
from tests.support.agents import messages, start_agent
from tests.support.cli import baton, json_lines
from tests.support.daemons import wait_followed, write_config
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

#: what the fake API says each call used
USAGE = {"input_tokens": 1200, "output_tokens": 300, "cache_creation_input_tokens": 400,
         "cache_read_input_tokens": 2000}
#: claude-sonnet-4-5 at $3 in, $15 out, $3.75 cache writes, $0.30 cache reads per million tokens
SONNET_COST = (1200 * 3 + 300 * 15 + 400 * 3.75 + 2000 * 0.30) / 1e6



def test_prices_are_found_by_id_alias_and_dated_id_and_unknown_models_have_none() -> None:
    sonnet = PRICES["claude-sonnet-4-5"]
    assert price_of("claude-sonnet-4-5") == price_of("claude-sonnet-4-5-20250929") == sonnet
    assert price_of("claude-opus-4-0") == price_of("claude-opus-4-20250514") == PRICES["claude-opus-4"]
    assert price_of("claude-3-5-haiku-latest") == PRICES["claude-3-5-haiku"]
    assert price_of("claude-opus-4-5").input < price_of("claude-opus-4-1").input  # not a prefix match
    assert price_of("claude-fake-1") is None and price_of("gpt-5") is None


@pytest.mark.tmux
@pytest.mark.slow
def test_each_hand_off_records_its_transforms_tokens_and_cost_and_history_shows_them(
    tmux_server: TmuxServer, tmp_path: Path, anthropic_api: FakeAnthropicAPI, daemon_factory
) -> None:
    anthropic_api.default = Reply(text="Review the change to tokens.py.", usage=USAGE)
    logs = {name: tmp_path / f"{name}.jsonl" for name in "abc"}
    panes = {name: start_agent(tmux_server, log, name, work_s=0.1) for name, log in logs.items()}
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {name: {"pane": pane, "agent": "demo"} for name, pane in panes.items()},
        [
            {"name": "review", "from": "a", "to": "b", "transform": {"type": "ai-routing"}},
            {"name": "digest", "from": "a", "to": "c",
             "transform": {"type": "summary", "model": "claude-fake-1"}},  # no price known for it
            {"name": "plain", "from": "b", "to": "c"},  # no model: no usage
        ],
        llm={"model": "claude-sonnet-4-5", "max_tokens": 500, "timeout_s": 20},
        max_hops=2,
    )
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    tmux_server.type(panes["a"], "I changed tokens.py")
    wait_for(lambda: len(messages(logs["c"])) == 2 and messages(logs["b"]), timeout=30,
             what="three hand-offs")
    assert daemon.stop() == 0
    assert daemon.verbose or "HTTP Request" not in daemon.stderr()  # the SDK's request lines are for -v
    assert {r.body["model"] for r in anthropic_api.messages} == {"claude-sonnet-4-5", "claude-fake-1"}

    rows = {r["route"]: r for r in json_lines(baton("history", "--json").out)}
    assert rows["review"]["usage"] == {
        "model": "claude-sonnet-4-5", "input_tokens": 1200, "output_tokens": 300, "cache_write_tokens": 400,
        "cache_read_tokens": 2000, "cost_usd": round(SONNET_COST, 6)}
    assert rows["digest"]["usage"]["cost_usd"] is None and rows["digest"]["usage"]["output_tokens"] == 300
    assert rows["plain"]["usage"] is None

    text = baton("history").out
    lines = {line.split()[2]: line for line in text.splitlines() if line[:1].isdigit()}
    assert "3600 in · 300 out · $0.0102" in lines["review"], text
    assert "3600 in · 300 out" in lines["digest"] and "$" not in lines["digest"], text
    assert "in ·" not in lines["plain"], text
    assert ("AI transforms: 2 calls, 7200 tokens in, 600 out, $0.0102 (1 of a model with no known price: "
            "tokens only)") in text
