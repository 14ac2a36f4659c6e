"""A bus that asks who you are: creds file, user/password, token and mutual TLS, on a real nats-server.

Each way of proving identity carries one cross-host hand-off, exactly once; the secret is in neither
host's log nor journal. Credentials the server refuses are reported in words and the hand-off is kept
until a daemon that holds the right ones starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.agents import messages
from tests.support.bus import Host, NatsServer, settle, write_routes
from tests.support.nats_auth import certificates, operator_mode
from tests.support.polling import wait_for

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

PASSWORD, TOKEN = "pw-7f3e9c1a-secret", "tok-5b2d8e4f-secret"


def _creds(folder: Path) -> tuple[str, dict, dict[str, str], str]:
    conf, creds = operator_mode(folder)
    return str(conf), {"creds": str(creds)}, {}, creds.read_text().split("\n")[1]


def _password(folder: Path) -> tuple[str, dict, dict[str, str], str]:
    conf = folder / "password.conf"
    conf.write_text(f'authorization {{ user: alice, password: "{PASSWORD}" }}\n')
    return str(conf), {}, {"BATON_BUS_USER": "alice", "BATON_BUS_PASSWORD": PASSWORD}, PASSWORD


def _token(folder: Path) -> tuple[str, dict, dict[str, str], str]:
    conf = folder / "token.conf"
    conf.write_text(f'authorization {{ token: "{TOKEN}" }}\n')
    return str(conf), {}, {"BATON_BUS_TOKEN": TOKEN}, TOKEN


def _mutual_tls(folder: Path) -> tuple[str, dict, dict[str, str], str]:
    f = certificates(folder / "tls")
    conf = folder / "tls.conf"
    conf.write_text(f'tls {{ cert_file: "{f["server.pem"]}", key_file: "{f["server.key"]}", '
                    f'ca_file: "{f["ca.pem"]}", verify: true }}\n')
    settings = {"tls_ca": str(f["ca.pem"]), "tls_cert": str(f["client.pem"]), "tls_key": str(f["client.key"])}
    return str(conf), settings, {}, f["client.key"].read_text().split("\n")[1]


WAYS: dict[str, Callable[[Path], tuple[str, dict, dict[str, str], str]]] = {
    "creds file": _creds, "user and password": _password, "token": _token, "mutual TLS": _mutual_tls,
}


@pytest.fixture
def made(tmp_path: Path) -> Iterator[list[Host | NatsServer]]:
    parts: list[Host | NatsServer] = []
    yield parts
    for part in parts:
        part.close() if isinstance(part, Host) else part.stop()


def setup(tmp_path: Path, made: list, way: str) -> tuple[Host, Host, Path, str, dict[str, str]]:
    conf, bus, env, secret = WAYS[way](tmp_path)
    nats = NatsServer(tmp_path / "nats", extra=["-c", conf])
    made.append(nats)
    nats.start()
    url = nats.url.replace("nats://", "tls://") if "tls_ca" in bus else nats.url
    config = write_routes(
        tmp_path / "routes.yaml",
        {"a": {"pane": "title:a", "agent": "demo", "host": "alpha"},
         "b": {"pane": "title:b", "agent": "demo", "host": "beta"}},
        [{"from": "a", "to": "b", "transform": {"type": "template", "template": "from a: {response}"}}],
        bus={"servers": [url], **bus},
    )
    alpha, beta = Host("alpha", tmp_path, config, url), Host("beta", tmp_path, config, url)
    made += [alpha, beta]
    alpha.agent("a")
    blog = beta.agent("b")
    return alpha, beta, blog, secret, env


@pytest.mark.parametrize("way", list(WAYS))
def test_each_way_of_proving_identity_carries_a_hand_off_once_and_keeps_the_secret(
    tmp_path: Path, made: list, way: str
) -> None:
    alpha, beta, blog, secret, env = setup(tmp_path, made, way)
    alpha.extra_env = beta.extra_env = env
    alpha.start()
    beta.start()
    alpha.wait_running("a")
    beta.wait_running("b")
    alpha.type("a", "hello")
    wait_for(lambda: messages(blog) == ["from a: hello"], timeout=30, what="the hand-off on beta")
    settle()
    assert alpha.stop() == 0 and beta.stop() == 0
    assert messages(blog) == ["from a: hello"]
    for host in (alpha, beta):
        assert secret not in host.stderr()
        assert secret.encode() not in (host.state / "batonpass" / "journal.sqlite3").read_bytes()


def test_refused_credentials_are_said_in_words_and_the_hand_off_waits_for_the_right_ones(
    tmp_path: Path, made: list
) -> None:
    alpha, beta, blog, _, env = setup(tmp_path, made, "user and password")
    beta.extra_env = env
    alpha.extra_env = {**env, "BATON_BUS_PASSWORD": "wrong-password-123"}
    beta.start()
    beta.wait_running("b")
    alpha.start()  # it cannot log in: it follows its tiles and keeps what it cannot publish
    wait_for(lambda: "the server refused the credentials" in alpha.err.read_text(), what="the refusal")
    assert "wrong-password-123" not in alpha.err.read_text()
    wait_for(lambda: alpha.journal().followed_until("a") is not None, what="a followed")
    alpha.type("a", "kept")
    wait_for(lambda: [h.state for h in alpha.history()] == ["transformed"], what="the hand-off kept")
    assert alpha.proc is not None and alpha.proc.poll() is None
    alpha.kill()
    alpha.extra_env = env
    alpha.start()
    wait_for(lambda: messages(blog) == ["from a: kept"], timeout=30, what="the kept hand-off on beta")
    settle()
    assert messages(blog) == ["from a: kept"]
    assert [h.state for h in alpha.history()] == ["published"]
