"""No API key reaches a log or the journal; the hook spool is private; hooks never fail the agent."""

from __future__ import annotations

import io
import json
import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline import spool
from pipeline.system.logs import RedactingFormatter, redact
from tests.fakes.anthropic_api import TEST_KEY, Reply, serving
from tests.support.agents import demo_agent_command, messages
from tests.support.cli import json_lines
from tests.support.daemons import has_started
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer


def test_redact_masks_env_values_and_key_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "my-very-own-secret-value")
    text = (
        "auth failed for my-very-own-secret-value and sk-ant-api03-abcdefghijklmnop; "
        "Bearer abcdefghijklmnopqrstuv"
    )
    out = redact(text)
    assert (
        "my-very-own-secret-value" not in out
        and "sk-ant-api03" not in out
        and "abcdefghijklmnopqrstuv" not in out
    )
    assert out.count("[redacted]") == 3


def test_log_lines_and_tracebacks_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "another-secret-1234")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(RedactingFormatter("%(message)s"))
    logger = logging.getLogger("batonpass.test-redact")
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError("server said: bad key another-secret-1234")
        except RuntimeError:
            logger.exception("call failed with %s", "another-secret-1234")
    finally:
        logger.removeHandler(handler)
    assert "another-secret-1234" not in out.getvalue()
    assert (
        out.getvalue().count("[redacted]") == 3 and "RuntimeError" in out.getvalue()
    )  # message, source, error


def test_spool_files_are_private(private_state: Path) -> None:
    path = spool.write_record("claude", {"session_id": "x"}, "%1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    (record,) = spool.read_records()
    assert record.payload == {"session_id": "x"} and record.pane == "%1"
    assert not path.exists()


def test_hook_returns_zero_fast_even_when_it_cannot_write(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the state folder should be")
    for stdin in ("{not json", json.dumps({"session_id": "s"})):
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "pipeline.spool", "claude"],
            input=stdin,
            text=True,
            capture_output=True,
            env={**os.environ, "XDG_STATE_HOME": str(blocked)},
            timeout=10,
        )
        assert result.returncode == 0
        assert time.monotonic() - started < 10
        assert "batonpass hook" in result.stderr


@pytest.mark.tmux
def test_api_key_never_reaches_the_log_or_journal(tmux_server: TmuxServer, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(monkeypatch) as api:
        # a server that echoes the key in its error body (a buggy proxy would)
        api.script(*[Reply(status=401, error={"type": "error", "error": {
            "type": "authentication_error", "message": f"invalid x-api-key {TEST_KEY}"}})] * 4)
        log = tmp_path / "target.jsonl"
        shell = tmux_server.new_pane()
        target = tmux_server.new_pane(demo_agent_command(log=log, work_s=0.1))
        wait_for(lambda: "$" in tmux_server.capture(shell) and "demo❯" in tmux_server.capture(target))
        config = tmp_path / "routes.yaml"
        config.write_text(json.dumps({"version": 1, "tmux": {"socket_name": tmux_server.socket},
                                      "tiles": {"sh": {"pane": shell, "agent": "shell"},
                                                "agent": {"pane": target, "agent": "demo"}},
                                      "routes": [{"from": "sh", "to": "agent", "transform": "ai-routing"}]}))
        errfile = tmp_path / "daemon.err"
        with errfile.open("w") as errs:
            daemon = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "-v", "run", "-c", str(config)],
                                      stderr=errs, stdout=subprocess.DEVNULL)
        try:
            wait_for(lambda: has_started(errfile.read_text()), what="baton run")
            wait_for(lambda: "sh: shell prompt" in errfile.read_text(), what="the shell prompt learnt")
            tmux_server.type(shell, "echo please review")
            wait_for(lambda: messages(log), timeout=30, what="the raw fallback hand-off")
            wait_for(lambda: "delivered   sh -> agent" in errfile.read_text(), what="the delivery recorded")
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)
    err = errfile.read_text()
    assert messages(log) == ["please review"]  # fell back to the raw answer
    assert TEST_KEY not in err and "[redacted]" in err
    history = subprocess.run([sys.executable, "-m", "pipeline.cli", "history", "--json"], capture_output=True,
                             text=True).stdout
    assert TEST_KEY not in history and json_lines(history)[0]["state"] == "delivered"
