"""A 3-node NATS JetStream cluster (real nats-servers on 127.0.0.1) loses a node mid-run."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.agents import messages
from tests.support.bus import Host, NatsServer, counted, free_port, settle, write_routes
from tests.support.polling import wait_for

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def cluster(folder: Path) -> list[NatsServer]:
    routes = [free_port() for _ in range(3)]
    nodes = []
    for i in range(3):
        others = ",".join(f"nats://127.0.0.1:{p}" for j, p in enumerate(routes) if j != i)
        nodes.append(
            NatsServer(
                folder / f"n{i}",
                extra=[
                    "--server_name",
                    f"n{i}",
                    "--cluster_name",
                    "baton",
                    "--cluster",
                    f"nats://127.0.0.1:{routes[i]}",
                    "--routes",
                    others,
                ],
            )
        )
    return nodes


def test_three_node_cluster_loses_a_node_and_hand_offs_go_on(tmp_path: Path) -> None:
    nodes = cluster(tmp_path / "nats")
    hosts: list[Host] = []
    try:
        for node in nodes:
            node.start()
        url = ",".join(n.url for n in nodes)
        config = write_routes(
            tmp_path / "routes.yaml",
            {
                "a": {"pane": "title:a", "agent": "demo", "host": "alpha"},
                "b": {"pane": "title:b", "agent": "demo", "host": "beta"},
            },
            [{"from": "a", "to": "b", "transform": {"type": "template", "template": "from a: {response}"}}],
            bus={"replicas": 3},
        )
        alpha, beta = Host("alpha", tmp_path, config, url), Host("beta", tmp_path, config, url)
        hosts += [alpha, beta]
        alpha.agent("a")
        blog = beta.agent("b")
        alpha.start()
        beta.start()
        alpha.wait_running("a")
        beta.wait_running("b")
        sent = [f"task {i}" for i in range(6)]
        for i, task in enumerate(sent):
            wait_for(lambda i=i: len(alpha.answers()) >= i, timeout=30, what=f"a to finish turn {i}")
            if i == 3:
                wait_for(lambda: len(messages(blog)) >= 3, timeout=40, what="the hand-offs before the loss")
                victim = nodes[0]
                assert victim.proc is not None
                victim.proc.send_signal(signal.SIGKILL)  # a node is lost, not shut down
                victim.proc.wait()
                victim.proc = None
            alpha.type("a", task)
        expected = [f"from a: {t}" for t in sent]
        wait_for(lambda: len(messages(blog)) >= len(expected), timeout=60, what="every hand-off on beta")
        settle()
        assert alpha.stop() == 0 and beta.stop() == 0
        lost, repeated = counted(blog, expected)
        assert lost == [] and repeated == {}, alpha.stderr()[-3000:] + beta.stderr()[-3000:]
        assert messages(blog) == expected
        assert [h.state for h in alpha.history()] == ["published"] * 6
    finally:
        for host in hosts:
            host.close()
        for node in nodes:
            node.stop()
