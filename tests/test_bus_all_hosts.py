"""`baton status --all-hosts` and `baton history --all-hosts`: all hosts, via the bus's KV bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.agents import messages
from tests.support.bus import NatsServer, two_hosts
from tests.support.cli import baton, json_lines
from tests.support.polling import until, wait_for

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def all_hosts(command: str, url: str, config: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", command, "--all-hosts", "--json", "-c", str(config)],
        capture_output=True,
        text=True,
        env={**os.environ, "BATON_BUS_URL": url},
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return json_lines(out.stdout) if command == "history" else json.loads(out.stdout)


def test_status_and_history_of_every_host_from_anywhere(tmp_path: Path, hosts, nats: NatsServer) -> None:  # noqa: F811
    alpha, beta, _, blog = two_hosts(tmp_path, hosts)
    alpha.start()
    beta.start()
    alpha.wait_running("a")
    beta.wait_running("b")
    for i in range(2):
        wait_for(lambda i=i: len(alpha.answers()) >= i, what=f"a's turn {i}")
        alpha.type("a", f"task {i}")
    wait_for(lambda: len(messages(blog)) >= 2, timeout=30, what="the hand-offs")

    def both_recorded() -> list[dict]:
        rows = all_hosts("history", nats.url, alpha.config)
        return (
            rows
            if sorted((r["host"], r["state"]) for r in rows)
            == [("alpha", "published"), ("alpha", "published"), ("beta", "delivered"), ("beta", "delivered")]
            else []
        )

    rows = wait_for(both_recorded, timeout=20, what="every host's hand-offs on the board")
    assert {r["key"] for r in rows if r["host"] == "alpha"} == {r["key"] for r in rows if r["host"] == "beta"}
    assert all("prompt" not in r for r in rows)
    tiles = wait_for(
        lambda: (
            [(r["host"], r["tile"]) for r in all_hosts("status", nats.url, alpha.config)]
            == [("alpha", "a"), ("beta", "b")]
            and all_hosts("status", nats.url, alpha.config)
        ),
        timeout=20,
        what="tiles",
    )
    assert {r["state"] for r in tiles} <= {"idle", "working"}  # the board's words, as baton status says them
    assert alpha.stop() == 0 and beta.stop() == 0


def test_all_hosts_without_a_bus_says_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BATON_BUS_URL"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "history", "--all-hosts"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(Path.cwd())},
        cwd=tmp_path,
    )
    assert out.returncode == 1 and "no bus configured" in out.stderr, out.stderr


def test_history_of_every_host_has_the_columns_and_ai_use_of_history(
    tmp_path: Path, nats: NatsServer, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    import anyio
    import orjson

    from pipeline.bus.board import _bucket, board_rows, publish_board
    from pipeline.bus.link import BusLink
    from pipeline.engine.journal import Journal, default_journal_path
    from tests.support.cli import baton
    from tests.support.journal import add_handoff

    journal = Journal(default_journal_path())
    add_handoff(journal, "a->b", "a", "b", "t1", "delivered")
    journal.record_usage("a->b@t1", {"model": "claude-sonnet-4-5", "input_tokens": 3000,
                                     "cache_read_tokens": 200, "output_tokens": 300, "cost_usd": 0.0102})
    add_handoff(journal, "b->c", "b", "c", "t2", "failed", "gave up on c")
    monkeypatch.setenv("BATON_BUS_URL", nats.url)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    async def publish() -> None:
        async def no_tiles() -> list[dict]:
            return []

        link = BusLink(None)
        await link.connect()
        try:
            bucket = await _bucket(link)  # made here, before the publisher and the reader race to make it
            async with anyio.create_task_group() as tg:
                tg.start_soon(publish_board, link, "alpha", journal, no_tiles)

                async def both_rows() -> bool:
                    return len(await board_rows(link, "history")) >= 2

                await until(both_rows, 30, "alpha's two history rows on the board")
                tg.cancel_scope.cancel()
            await bucket.put("history.gamma", b"not json")  # what another program (or version) might leave
            odd = [{"host": "delta", "route": "x->y", "usage": "?", "created": "soon"}, 7]
            await bucket.put("history.delta", orjson.dumps(odd))
        finally:
            await link.close()

    anyio.run(publish)
    here = baton("history", cwd=tmp_path)
    every = baton("history", "--all-hosts", cwd=tmp_path)
    assert here.status == every.status == 0 and "Traceback" not in every.err, every
    columns = ["WHEN", "ROUTE", "TURN", "HOP", "OUTCOME", "TRIES", "AI", "USE", "WHY"]
    assert here.out.splitlines()[0].split() == columns
    assert every.out.splitlines()[0].split() == ["WHEN", "HOST", *columns[1:]]
    for out in (here.out, every.out):
        assert "3200 in · 300 out · $0.0102" in out and "gave up on c" in out
    # the same total line under both
    assert here.out.splitlines()[-1] == every.out.splitlines()[-1] == (
        "AI transforms: 1 call, 3200 tokens in, 300 out, $0.0102")
    delta = next(line for line in every.out.splitlines() if "x->y" in line)
    assert delta.split()[:3] == ["?", "delta", "x->y"]  # fields missing or odd: shown, no traceback
    assert "history.gamma" in every.err and "not a list of rows" in every.err


def test_all_hosts_is_read_only_and_says_a_refusal_in_one_line(tmp_path: Path) -> None:
    """Issue 34 item 10: a read-only command logged "hand-offs are kept and retried" (it hands nothing
    off) and then "did not answer"; it says in one line that the credentials were refused, and a reading
    that works prints no bus log line."""
    conf = tmp_path / "token.conf"
    conf.write_text('authorization { token: "the-right-token" }\n')
    server = NatsServer(tmp_path / "nats", extra=["-c", str(conf)])
    server.start()
    try:
        (tmp_path / "routes.yaml").write_text("version: 1\ntiles: {}\n")
        wrong = baton("status", "--all-hosts", cwd=tmp_path,
                      env={"BATON_BUS_URL": server.url, "BATON_BUS_TOKEN": "a-wrong-token"})
        line = wrong.one_line_error(1, f"baton status --all-hosts: the bus at {server.url} refused the "
                                    "credentials: check settings.bus.creds or BATON_BUS_USER/")
        assert "kept and retried" not in line
        right = baton("history", "--all-hosts", cwd=tmp_path,
                      env={"BATON_BUS_URL": server.url, "BATON_BUS_TOKEN": "the-right-token"})
        assert (right.status, right.err) == (0, ""), right
    finally:
        server.stop()
