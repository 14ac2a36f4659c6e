"""``baton check`` looks at the live panes too: a pi tile whose pane's Node is older than pi 1.x's ``engines``
asks for (pi exits at start there) is a warning at the tile, in the words ``baton resolve`` prints for its
``node`` step; a tile whose pane is not there, or whose pi can start, is no warning.

The pane is real (its own tmux server), its shell's PATH holding pi 1.6.0's package and a ``node`` that is
20.20.2, as in tests/test_pi_adapter.py's check of the resolve step; typing ``pi`` there fails as pi does on
an old Node, and leaves the shell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import baton, write_routes
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux]

TOO_OLD = "needs Node 22.19.0 or newer; the pane's PATH has v20.20.2"


def pi_on_node(root: Path, version: str) -> dict[str, str]:
    """A PATH with pi 1.6.0's package (its ``engines``: Node 22.19 or newer) and a ``node`` of ``version``
    that, asked to run pi, fails as Node 20 does on pi 1.x."""
    package = root / "lib" / "node_modules" / "@earendil-works" / "pi-coding-agent"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "@earendil-works/pi-coding-agent",
                                                      "version": "1.6.0", "engines": {"node": ">=22.19.0"}}))
    (package / "dist" / "cli.js").write_text("#!/usr/bin/env node\n")
    (package / "dist" / "cli.js").chmod(0o755)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "pi").symlink_to(package / "dist" / "cli.js")
    (bin_dir / "node").write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && echo {version} && exit 0\n'
        "echo \"SyntaxError: The requested module 'node:module' does not provide an export named "
        "'enableCompileCache'\" >&2\nexit 1\n")
    (bin_dir / "node").chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def pane_where_pi_exited(server: TmuxServer, env: dict[str, str]) -> str:
    pane = server.new_pane(env=env)
    wait_for(lambda: "$" in server.capture(pane), what="the shell's prompt")
    server.type(pane, "pi")
    wait_for(lambda: "enableCompileCache" in server.capture(pane), what="pi failing at start")
    return pane


def test_check_warns_of_a_pi_tile_whose_node_is_too_old_in_resolves_words(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    pane = pane_where_pi_exited(tmux_server, pi_on_node(tmp_path / "old", "v20.20.2"))
    fine = pane_where_pi_exited(tmux_server, pi_on_node(tmp_path / "new", "v22.23.5"))
    config = write_routes(tmp_path, tmux_server.socket, {
        "coder": {"pane": pane, "agent": "pi"}, "other": {"pane": fine, "agent": "pi"},
        "later": {"pane": "nothere:0.0", "agent": "pi"}})
    resolved = baton("resolve", "coder", "-c", str(config), "--json")
    [node_step] = [s for s in json.loads(resolved.out)["steps"] if s["step"] == "node"]
    assert not node_step["ok"] and TOO_OLD in node_step["detail"], node_step

    checked = baton("check", "-c", str(config))
    assert checked.status == 0, checked.err
    assert "1 warning" in checked.out, checked.out
    [warning] = checked.err.splitlines()
    assert warning.startswith(f"{config}:") and warning.endswith(
        f": warning: tiles.coder.agent: {node_step['detail']}"), warning

    as_json = baton("check", "-c", str(config), "--json")
    out = json.loads(as_json.out)
    assert out["ok"] and [(p["severity"], p["path"], p["message"]) for p in out["problems"]] == [
        ("warning", "tiles.coder.agent", node_step["detail"])]


def test_check_without_a_tmux_server_says_nothing_of_panes(tmp_path: Path) -> None:
    config = write_routes(tmp_path, "baton-test-no-such-server", {"coder": {"pane": "%1", "agent": "pi"}})
    checked = baton("check", "-c", str(config))
    assert checked.status == 0 and checked.err == "" and "warning" not in checked.out, checked
