"""`baton bus`: a local nats-server with JetStream in the user's state folder, credentials kept off `ps`."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import nats

from pipeline.bus.link import BusLink
from tests.support.bus import free_port
from tests.support.polling import wait_for


def test_baton_bus_starts_a_jetstream_server_in_the_state_folder(private_state: Path, monkeypatch) -> None:
    port = free_port()
    env = {**os.environ, "BATON_BUS_USER": "baton", "BATON_BUS_PASSWORD": "pw-not-on-the-command-line"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "bus", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def listening() -> bool:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return True
            except OSError:
                return False

        wait_for(listening, what="baton bus to listen")
        assert b"pw-not-on-the-command-line" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        conf = private_state / "batonpass" / "bus" / "nats-server.conf"
        assert stat.S_IMODE(conf.stat().st_mode) == 0o600
        monkeypatch.setenv("BATON_BUS_URL", f"nats://127.0.0.1:{port}")
        monkeypatch.setenv("BATON_BUS_USER", "baton")
        monkeypatch.setenv("BATON_BUS_PASSWORD", "pw-not-on-the-command-line")

        async def use() -> tuple[int, str]:
            link = BusLink(None)
            await link.connect()
            ack = await link.js.publish(
                link.subject("some.host", "tile"), b"{}", headers={"Nats-Msg-Id": "k1"}
            )
            again = await link.js.publish(
                link.subject("some.host", "tile"), b"{}", headers={"Nats-Msg-Id": "k1"}
            )
            await link.close()
            return ack.seq, f"{again.seq} {again.duplicate}"

        assert anyio.run(use) == (1, "1 True")
        assert any((private_state / "batonpass" / "bus" / "jetstream").rglob("*.blk"))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def test_baton_bus_refuses_wrong_credentials(private_state: Path) -> None:
    port = free_port()
    env = {**os.environ, "BATON_BUS_TOKEN": "the-right-token"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "bus", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _listening(port), what="baton bus to listen")

        async def wrong() -> str:
            try:
                nc = await nats.connect(
                    f"nats://127.0.0.1:{port}",
                    token="wrong",
                    allow_reconnect=False,
                    max_reconnect_attempts=0,
                    connect_timeout=2,
                )
            except Exception as exc:
                return type(exc).__name__
            await nc.close()
            return "connected"

        assert anyio.run(wrong) != "connected"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def test_baton_bus_on_loopback_says_so_and_names_the_store_it_uses(private_state: Path) -> None:
    """Issue 34 item 10: it printed ``BATON_BUS_URL=nats://THIS-HOST:PORT`` (unreachable: it listens on
    127.0.0.1) and a store folder one level above the one nats-server uses."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "bus", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().rstrip("\n")
        store = private_state / "batonpass" / "bus" / "jetstream" / "jetstream"
        assert line == (f"baton bus: nats://127.0.0.1:{port} (JetStream in {store}); it listens on this "
                        f"machine only: for other hosts start it with --listen 0.0.0.0 and set "
                        f"BATON_BUS_URL=nats://{socket.gethostname()}:{port} there")
        wait_for(lambda: _listening(port), what="baton bus to listen")
        wait_for(store.is_dir, what="the JetStream store named")
        assert [p.name for p in store.parent.iterdir()] == ["jetstream"]  # nothing else one level up
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
