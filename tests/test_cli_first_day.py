"""A first day with `baton`, each sharp edge a new user hit (#17): what `run` says about tiles that come
and go, one way to pick the tmux server for every command, `preview` showing what `run` would hand on, and
the wording. Everything through the real command, as a person runs it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import baton, shell_ready, start_baton, write_routes
from tests.support.daemons import has_started
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = pytest.mark.tmux


# ---- baton run names what it cannot reach, and says when it comes back ------------------------------------


def test_run_names_gone_tiles_at_start_and_when_they_come_back_and_a_deleted_config(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    here = shell_ready(tmux_server)
    config = write_routes(tmp_path, tmux_server.socket, {"here": {"pane": here, "agent": "shell"},
                                                          "later": {"pane": "later:0.0", "agent": "shell"}},
                          [{"from": "here", "to": "later"}])
    err = tmp_path / "run.err"
    daemon = start_baton("run", "-c", str(config), stderr=err)
    try:
        wait_for(lambda: has_started(err.read_text()), what="the daemon to start")
        assert re.search(r"tile later: pane later:0\.0 is gone \(.*\); hand-offs to it are kept and typed "
                         r"once it is back \(for up to give_up_s=600s\), its turns followed from then",
                         err.read_text()), err.read_text()
        assert "tile here:" not in err.read_text()  # a tile that is there is not mentioned
        tmux_server.run("new-session", "-d", "-s", "later", "bash --norc --noprofile")
        wait_for(lambda: "tile later: pane later:0.0 is back" in err.read_text(), what="'is back'")
        tmux_server.run("kill-session", "-t", "later")
        wait_for(lambda: err.read_text().count("tile later: pane later:0.0 is gone") == 2, what="gone again")
        config.unlink()
        wait_for(lambda: "routes.yaml: deleted; the running config stays" in err.read_text(),
                 what="the deleted routes.yaml")
        assert daemon.poll() is None  # still routing on the config it has
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
    assert "Traceback" not in err.read_text()


def test_status_exits_3_when_every_tile_is_gone_on_a_running_server(tmux_server: TmuxServer,
                                                                    tmp_path: Path) -> None:
    shell_ready(tmux_server)
    config = write_routes(tmp_path, tmux_server.socket, {"a": {"pane": "%90", "agent": "shell"},
                                                          "b": {"pane": "nosuch:0.0", "agent": "shell"}})
    result = baton("status", "-c", str(config))
    assert result.status == 3, result
    assert result.out.splitlines()[0].split() == ["TILE", "PANE", "AGENT", "PID", "SESSION", "STATE", "LAST",
                                                  "ANSWER"]
    assert f"none of the 2 tiles has its pane on tmux -L {tmux_server.socket}" in result.err


# ---- one way to pick the tmux server, for every command ---------------------------------------------------


def test_send_and_resolve_use_the_socket_routes_yaml_names(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """Inside a folder whose routes.yaml names a socket, `baton resolve %N` asks that server, not the
    default."""
    pane = shell_ready(tmux_server)
    write_routes(tmp_path, tmux_server.socket, {"a": {"pane": pane, "agent": "shell"}})
    result = baton("resolve", pane, cwd=tmp_path)
    assert result.status == 0 and result.out.startswith(f"{pane}: agent shell"), result
    sent = baton("send", pane, "echo via-routes-yaml", cwd=tmp_path)
    assert sent.status == 0, sent
    wait_for(lambda: "\nvia-routes-yaml" in tmux_server.capture(pane), what="the typed command's output")


def test_every_command_honours_TMUX_like_tmux_does(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """Run from inside a pane, `$TMUX` names the server: every command that talks to tmux uses it."""
    pane = shell_ready(tmux_server)
    socket_path = tmux_server.run("display-message", "-p", "#{socket_path}").strip()
    env = {"TMUX": f"{socket_path},1,0"}
    config = tmp_path / "elsewhere" / "routes.yaml"
    config.parent.mkdir()
    config.write_text(
        json.dumps({"version": 1, "tiles": {"a": {"pane": pane, "agent": "shell"}}, "routes": []})
    )
    assert baton("resolve", pane, cwd=tmp_path, env=env).status == 0
    status = baton("status", "-c", str(config), env=env)
    assert status.status == 0 and " shell " in status.out and "gone" not in status.out, status


@pytest.mark.parametrize("command", ["run", "check", "status", "up", "send", "resolve", "preview", "history",
                                     "extract", "plugins", "demo", "approve", "deny", "retry", "hold",
                                     "resume"])
def test_every_subcommand_takes_the_common_options_after_its_name(command: str) -> None:
    result = baton(command, "--help")
    assert result.status == 0, result
    for option in ("-L NAME", "-S PATH", "-c CONFIG", "-v"):
        assert option in result.out, (command, option)


# ---- preview shows what run would hand on -----------------------------------------------------------------


def test_preview_honours_the_routes_match_and_says_it_would_not_fire(tmp_path: Path) -> None:
    config = write_routes(tmp_path, "unused", {"a": {"pane": "%1", "agent": "shell"},
                                               "b": {"pane": "%2", "agent": "shell"}},
                          [{"name": "ok-only", "from": "a", "to": "b", "match": "^OK"}])
    refused = baton("preview", "ok-only", "-c", str(config), "--input", "-", input="nope")
    assert refused.status == 1 and refused.out == "", refused
    assert "route ok-only would not hand this off" in refused.err and "^OK" in refused.err, refused.err
    taken = baton("preview", "a->b", "-c", str(config), "--input", "-", input="OK then")
    assert (taken.status, taken.out) == (0, "OK then\n"), taken.err  # FROM->TO works for a named route too


# ---- wording --------------------------------------------------------------------------------------------


def test_counts_are_singular_and_plural(tmp_path: Path) -> None:
    one = write_routes(tmp_path, "unused", {"a": {"pane": "%1", "agent": "shell"}})
    result = baton("check", "-c", str(one))
    assert result.status == 0 and "ok — 1 tile, 0 routes" in result.out, result
    two = write_routes(
        tmp_path,
        "unused",
        {"a": {"pane": "%1", "agent": "shell"}, "b": {"pane": "%2", "agent": "shell"}},
        [{"from": "a", "to": "b"}],
    )
    result = baton("check", "-c", str(two))
    assert result.status == 0 and "ok — 2 tiles, 1 route" in result.out, result
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntiles:\n  a: {pane: '%1', agent: nosuchagent}\n")
    result = baton("check", "-c", str(bad))
    assert result.status == 1 and result.err.endswith(f"{bad}: 1 error\n"), result.err


def test_check_json_and_version_and_a_late_verbose_flag(tmp_path: Path) -> None:
    config = write_routes(tmp_path, "unused", {"a": {"pane": "%1", "agent": "shell"}})
    verdict = json.loads(baton("check", "-c", str(config), "--json", "-v").out)
    assert verdict["ok"] is True and verdict["tiles"] == 1 and verdict["problems"] == []
    version = baton("--version")
    assert version.status == 0 and re.fullmatch(r"baton \S+\n", version.out), version
    assert "as JSON" in baton("status", "--help").out  # --json says what it does


def test_send_reports_what_it_typed_after_sanitizing(tmux_server: TmuxServer) -> None:
    pane = shell_ready(tmux_server)
    result = baton("send", pane, "echo \x1b[31mred\x07", "--agent", "shell", "-L", tmux_server.socket)
    assert result.status == 0, result
    assert re.search(r"sent 8 chars to %\d+ \(shell\)", result.out + result.err), result
    wait_for(lambda: "\nred" in tmux_server.capture(pane), what="the sanitized command's output")
