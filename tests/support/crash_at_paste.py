"""The crash between a paste and its Enter, on a REAL agent as the target: ``baton run`` killed (SIGKILL) the
moment the agent's input shows the hand-off, started again, and the prompt must reach the agent exactly once.

A demo agent in another pane is the source; its answer reaches the real agent through a ``template`` route
(long: every agent draws it as its placeholder; short: drawn inline). The daemon kills itself once the paste
shows in the agent's input, before its Enter (``BATON_CRASH_BEFORE_ENTER``: the Enter follows the paste's
drawing within milliseconds, too soon for a kill from outside); the test looks at the target's screen —
the agent's own input line, read by its adapter's screen parser — and checks the paste is still there
unsubmitted (the kill did land between the paste and the Enter), restarts the daemon, and counts the
prompt in the agent's own records.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pipeline.engine.crash_points import ENTER_ENV
from tests.support.cli import json_lines
from tests.support.daemons import Daemon, wait_followed, write_config
from tests.support.fault_sources import DemoSource
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer

__all__ = ["LONG_TEMPLATE", "SHORT_TEMPLATE", "crash_at_paste"]

#: 14 lines, ~1,250 characters around the answer: a placeholder in every agent (docs/agent-versions.md)
LONG_TEMPLATE = "CRASH-AT-PASTE {marker}: review this answer\n{{response}}\n" + "\n".join(
    f"point {k}: check that part {k} of the change keeps its tests and its docs in step with the code"
    for k in range(12))
#: two lines: drawn inline by Codex (up to 1000 characters) and Claude Code (under 4 lines and 800 characters)
SHORT_TEMPLATE = "CRASH-AT-PASTE {marker}: review this answer\n{{response}}"


def history() -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "history", "--json", "-n", "1000"],
                         capture_output=True, text=True, check=True)
    return json_lines(out.stdout)


def crash_at_paste(server: TmuxServer, tmp: Path, target: dict[str, str], template: str,
                   holds_paste: Callable[[], bool], prompts: Callable[[], list[str]], marker: str) -> str:
    """Run the scenario; ``target`` is the real agent's tile, ``holds_paste()`` whether its input shows the
    hand-off (read from its screen), ``prompts()`` the prompts its own records hold. Returns the journal's
    note on the delivered hand-off. The caller has set the environment the daemon needs to find the
    agent's files (and ``XDG_STATE_HOME``)."""
    source = DemoSource(server, tmp)
    config = write_config(tmp / "routes.yaml", server.socket, {"a": source.tile, "rev": target},
                          [{"from": "a", "to": "rev",
                            "transform": {"type": "template", "template": template.format(marker=marker)}}])
    daemon = Daemon(config, tmp)
    try:
        daemon.env = {ENTER_ENV: "1"}  # it dies once the paste shows, before its Enter
        daemon.start()
        wait_followed(daemon, "a")
        source.begin(0)
        source.finish(0)
        wait_for(holds_paste, timeout=30, interval=0.005, what="the hand-off pasted into the agent's input")
        assert daemon.proc is not None
        daemon.proc.wait(timeout=30)
        daemon.env = {}
        quiet_for(1.0, "the Enter (the daemon is dead)")
        assert holds_paste(), "the kill came after the Enter: the paste is no longer in the agent's input"
        assert not [p for p in prompts() if marker in p], "the agent took the prompt before the restart"
        daemon.start()
        wait_for(lambda: [p for p in prompts() if marker in p], timeout=60,
                 what="the prompt in the agent's records")
        quiet_for(3.0, "a second copy of the prompt")
        taken = collections.Counter(p for p in prompts() if marker in p)
        assert sum(taken.values()) == 1, f"the prompt reached the agent {sum(taken.values())} times"
        assert daemon.stop() == 0
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()
    [handoff] = [h for h in history() if h["route"] == "a->rev"]
    assert handoff["state"] == "delivered", (handoff, daemon.stderr()[-3000:])
    return handoff.get("note") or ""
