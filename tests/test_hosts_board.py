"""``baton status --watch --all-hosts``: a live board of every host's tiles, read from a real bus.

The hosts are stood in for by a publisher that puts ``tiles.<host>`` and ``history.<host>`` into the bus's
bucket every half second, as each host's ``baton run`` does (pipeline.bus.board.publish_board); the board
runs in a real 80-column tmux pane and is read with capture-pane. A host that stops publishing shows its
tiles gone; a bus that stops answering is said on the last line, and the board stays until ``q``.
"""

from __future__ import annotations

import re
import shlex
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest

from pipeline.bus.board import _bucket
from pipeline.bus.link import BusLink
from pipeline.engine.hosts import BusSettings
from tests.support.bus import NatsServer
from tests.support.cli import baton
from tests.support.paths import REPO
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux]


class Hosts:
    """Puts each host's keys into the bucket every half second (a host left out of ``live`` goes quiet)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.values: dict[str, list[dict]] = {}
        self.live: set[str] = set()
        self.stop = threading.Event()
        self.puts = 0
        self.thread = threading.Thread(target=anyio.run, args=(self._run,), daemon=True)

    async def _run(self) -> None:
        link = BusLink(BusSettings(servers=[self.url]))
        await link.connect()
        bucket = await _bucket(link)
        try:
            while not self.stop.is_set():
                for key, rows in list(self.values.items()):
                    if key.split(".", 1)[1] in self.live:
                        await bucket.put(key, orjson.dumps(rows))
                self.puts += 1
                await anyio.sleep(0.5)  # shapes the scenario: a publisher's beat
        finally:
            await link.close()


@pytest.fixture
def hosts(nats: NatsServer) -> Iterator[Hosts]:  # noqa: F811
    made = Hosts(nats.url)
    made.thread.start()
    yield made
    made.stop.set()
    made.thread.join(10)


def tile(host: str, name: str, agent: str, state: str, pane: str) -> dict:
    return {"host": host, "tile": name, "agent": agent, "state": state, "pane": pane}


def test_the_all_hosts_board_is_live(tmux_server: TmuxServer, tmp_path: Path, nats: NatsServer,  # noqa: F811
                                     hosts: Hosts) -> None:
    now = time.time()
    handoff = {"key": "coder->reviewer@t1", "route": "coder->reviewer", "source": "coder",
               "target": "reviewer",
               "turn_id": "t1", "hop": 1, "created": now - 30}
    hosts.values = {
        "tiles.alpha": [{**tile("alpha", "coder", "claude", "busy", "%1"), "working_since": now - 300}],
        "tiles.beta": [tile("beta", "reviewer", "codex", "ready", "%4")],
        "history.alpha": [{**handoff, "host": "alpha", "state": "published", "updated": now - 20}],
        "history.beta": [{**handoff, "host": "beta", "state": "delivered", "updated": now - 10}],
    }
    hosts.live = {"alpha", "beta"}
    config = tmp_path / "routes.yaml"
    config.write_text('version: 1\ntiles:\n  coder: {pane: "%1", agent: claude, host: alpha}\n'
                      '  reviewer: {pane: "%4", agent: codex, host: beta}\n'
                      "routes:\n  - {from: coder, to: reviewer}\n")
    board = [sys.executable, "-m", "pipeline.cli", "-c", str(config), "status", "--watch", "--all-hosts"]
    script = shlex.join(board) + "; echo EXIT=$?; sleep 60"
    pane = tmux_server.new_pane(f"bash --norc --noprofile -c {shlex.quote(script)}", cwd=REPO, width=80,
                                height=24,
                                env={"BATON_BUS_URL": nats.url, "NO_COLOR": "1"})

    def screen() -> list[str]:
        return tmux_server.run("capture-pane", "-p", "-t", pane).splitlines()

    def row(name: str) -> str:
        return next((line for line in screen() if line.startswith(name + " ")), "")

    wait_for(lambda: "working" in row("coder") and "idle" in row("reviewer"), 20, what="both hosts' tiles")
    assert re.search(r"working 5m\d\ds", row("coder")), row("coder")  # the turn's start, as alpha sent it
    text = "\n".join(screen())
    assert "on alpha, pane %1" in text and "on beta, pane %4" in text and "all hosts" in screen()[0]
    # the hand-off is in both hosts' journals: the row updated last (beta's) tells how it went
    assert "→reviewer delivered" in text and "←coder delivered" in text, text
    # live: a state change on one host shows without a restart
    hosts.values["tiles.beta"] = [tile("beta", "reviewer", "codex", "busy", "%4")]
    wait_for(lambda: "working" in row("reviewer"), 10, what="beta's tile going busy")
    # a host whose baton run stopped publishing: its tiles are not shown in the last state it sent
    hosts.live = {"beta"}
    wait_for(lambda: "gone: no word from alpha" in row("coder"), 20, what="alpha gone quiet")
    assert "working" in row("reviewer")
    hosts.stop.set()
    hosts.thread.join(10)
    nats.stop()
    wait_for(lambda: any("the bus did not answer" in line for line in screen()), 20, what="the outage said")
    assert all(len(line) <= 80 for line in screen())
    tmux_server.run("send-keys", "-t", pane, "q")
    wait_for(lambda: any("EXIT=0" in line for line in screen()), 10, what="q quitting the board")
    assert not any("Traceback" in line for line in screen())


def test_the_all_hosts_board_needs_a_bus_and_a_terminal(tmp_path: Path) -> None:
    config = tmp_path / "routes.yaml"
    config.write_text('version: 1\ntiles:\n  a: {pane: "%1", agent: shell}\n  b: {pane: "%2", agent: shell}\n'
                      "routes:\n  - {from: a, to: b}\n")
    watch = ("-c", str(config), "status", "--watch", "--all-hosts")
    baton(*watch, env={"BATON_BUS_URL": ""}).one_line_error(1, "no bus configured", "BATON_BUS_URL")
    baton(*watch, env={"BATON_BUS_URL": "nats://127.0.0.1:9"}).one_line_error(1, "needs a terminal")
    baton(*watch, "--json").one_line_error(2, "use one of them")
