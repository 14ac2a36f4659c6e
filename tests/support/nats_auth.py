"""Credentials and certificates for a test nats-server: a creds file minted here, TLS made with openssl.

A NATS ``.creds`` file holds a user JWT signed by its account and the user's NKey seed; the server trusts
the account through the operator's JWT (operator mode, memory resolver). The JWTs are the nats-io/jwt v2
shape (header ``{"typ":"JWT","alg":"ed25519-nkey"}``, claims with ``iss``/``sub`` public keys), signed
here with the nkeys library that nats-py's ``nkeys`` extra installs, so no ``nsc`` tool is needed.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
from pathlib import Path

import nkeys
import orjson


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def new_key(prefix: int) -> nkeys.KeyPair:
    return nkeys.from_seed(nkeys.encode_seed(os.urandom(32), prefix))


def public(key: nkeys.KeyPair) -> str:
    return key.public_key.decode()


def jwt(issuer: nkeys.KeyPair, subject: nkeys.KeyPair, name: str, nats: dict) -> str:
    claims = {"jti": _b64(os.urandom(24)), "iat": int(time.time()), "iss": public(issuer), "name": name,
              "sub": public(subject), "nats": {**nats, "version": 2}}
    head = _b64(orjson.dumps({"typ": "JWT", "alg": "ed25519-nkey"})) + "." + _b64(orjson.dumps(claims))
    return head + "." + _b64(issuer.sign(head.encode()))


UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
             "conn": -1, "leaf": -1, "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


def operator_mode(folder: Path) -> tuple[Path, Path]:
    """A server config (operator, one account with JetStream, a system account) and a user's creds file."""
    operator, account, system = (new_key(nkeys.PREFIX_BYTE_OPERATOR), new_key(nkeys.PREFIX_BYTE_ACCOUNT),
                                 new_key(nkeys.PREFIX_BYTE_ACCOUNT))
    user = new_key(nkeys.PREFIX_BYTE_USER)
    op_jwt = jwt(operator, operator, "op", {"type": "operator", "system_account": public(system)})
    acc_jwt = jwt(operator, account, "baton", {"type": "account", "limits": UNLIMITED,
                                                "default_permissions": {"pub": {}, "sub": {}}})
    sys_jwt = jwt(operator, system, "SYS", {"type": "account", "limits": {**UNLIMITED, "mem_storage": 0,
                                                                           "disk_storage": 0, "streams": 0,
                                                                           "consumer": 0}})
    user_jwt = jwt(account, user, "alice", {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1,
                                            "payload": -1})
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "operator.conf"
    preload = f"  {public(account)}: {acc_jwt}\n  {public(system)}: {sys_jwt}\n"
    conf.write_text(f"operator: {op_jwt}\nsystem_account: {public(system)}\nresolver: MEMORY\n"
                    f"resolver_preload: {{\n{preload}}}\n")
    creds = folder / "alice.creds"
    seed = user.seed.decode()
    creds.write_text(f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
                     f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n")
    creds.chmod(0o600)
    return conf, creds


def certificates(folder: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made with the openssl CLI."""
    folder.mkdir(parents=True, exist_ok=True)
    f = {n: folder / n for n in ("ca.key", "ca.pem", "server.key", "server.pem", "client.key", "client.pem")}

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=baton test CA",
        "-keyout", str(f["ca.key"]), "-out", str(f["ca.pem"]))
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
                     ("client", "extendedKeyUsage=clientAuth")):
        (folder / f"{who}.ext").write_text(ext + "\n")
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}", "-keyout", str(f[f"{who}.key"]),
            "-out", str(folder / f"{who}.csr"))
        ssl("x509", "-req", "-in", str(folder / f"{who}.csr"), "-CA", str(f["ca.pem"]), "-CAkey",
            str(f["ca.key"]), "-CAcreateserial", "-days", "2", "-extfile", str(folder / f"{who}.ext"),
            "-out", str(f[f"{who}.pem"]))
    return f
