"""`baton status --all-hosts` and `baton history --all-hosts`: all hosts, via the bus's KV bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bus_kit import NatsServer
from tests.cli_run import json_lines
from tests.conftest import messages, wait_for
from tests.test_bus import hosts, nats, two_hosts  # noqa: F401  (fixtures)

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
    assert {r["state"] for r in tiles} <= {"ready", "busy"}
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
