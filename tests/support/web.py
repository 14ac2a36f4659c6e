"""``baton web`` in tests: the real command in a subprocess (:func:`start_web`), plain HTTP requests to it
(:func:`request`), and a headless Chromium from Debian's packages driven by Playwright (:func:`browser`) —
no browser download: CI installs ``chromium`` with apt (.ci/run)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import BATON, baton_env
from tests.support.polling import wait_for

__all__ = ["CHROMIUM", "WebServer", "browser", "request", "start_web"]

CHROMIUM = Path("/usr/bin/chromium")


@dataclass
class WebServer:
    proc: subprocess.Popen[bytes]
    url: str
    out: Path
    err: Path

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.rsplit("token=", 1)[1]

    def stop(self) -> int:
        """Ctrl-C, as a terminal sends it; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("baton web did not stop on Ctrl-C") from None


def start_web(*args: str, tmp: Path, env: dict[str, str] | None = None,
              options: tuple[str, ...] = ()) -> WebServer:
    """``baton ARGS web --port 0 OPTIONS``, once it has printed its URL."""
    out, err = tmp / "web.out", tmp / "web.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen([*BATON, *args, "web", "--port", "0", *options], stdin=subprocess.DEVNULL,
                                stdout=o, stderr=e, env=baton_env(env))

    def url() -> str | None:
        if proc.poll() is not None:
            raise AssertionError(f"baton web exited {proc.returncode}: {err.read_text()}")
        found = re.search(r"http://\S+\?token=\S+", out.read_text())
        return found.group(0) if found else None

    return WebServer(proc, wait_for(url, 30, what="baton web's URL"), out, err)


def request(url: str, *, method: str = "GET", body: Any = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, the body's first bytes): an event stream is read only up to its first event."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            head = {k.lower(): v for k, v in resp.headers.items()}
            stream = head.get("content-type", "").startswith("text/event-stream")
            return resp.status, head, resp.read(2000) if not stream else resp.readline() + resp.readline()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium (Debian's), one per test module."""
    if not CHROMIUM.exists():
        if os.environ.get("CI"):  # CI installs it (.ci/run): missing there is a failure, not a skip
            pytest.fail("no /usr/bin/chromium: .ci/run did not install it")
        pytest.skip("no /usr/bin/chromium (apt-get install chromium; .ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()
