"""Record what the REAL OpenCode shows while it starts, and which text typed then it keeps.

    .venv/bin/python -m tests.record_opencode_start [--runs N]

The pinned ``opencode-ai`` (tests/fakes/npm_agents.py's cache) starts in a private tmux server (160×45, as
tests/record_paste_screens.py starts it, against tests/fakes/openai_chat.FakeChat). From the pane's first
moment a numbered token (``T1 ``, ``T2 ``, …) is pasted every 0.25 s with the dispatcher's own paste
(:meth:`pipeline.system.tmux.Tmux.paste`), and the screen and tmux's cursor and alternate-screen flags are
read between pastes, until 2 s after the input box was first drawn; then the input is read. The tokens it
holds tell when OpenCode began to keep what is typed, against when its box showed.

Writes ``tests/fixtures/opencode-1.18.33/screens/start_<phase>.txt`` (and ``.ansi.txt``) of the first run —
``cooked`` (its last screen before OpenCode takes the terminal: the tty echoes the tokens), ``blank`` (the
alternate screen, cursor hidden, nothing drawn), ``box`` (the first screen with the input box) — and
``start.json``: per run, when each phase began, the tokens pasted (when) and kept. Every tmux server and
process it starts is stopped at the end; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

from pipeline.system.tmux import Tmux, remove_socket_file
from plugins.opencode.screen import input_box
from tests.agent_versions import resolve
from tests.fakes.npm_agents import install
from tests.fakes.openai_chat import FakeChat
from tests.record_paste_screens import _opencode_launch

OUT = Path(__file__).parent / "fixtures" / "opencode-1.18.33" / "screens"
STEP_S, AFTER_BOX_S, TIMEOUT_S = 0.25, 2.0, 180.0
FLAGS = "#{alternate_on} #{cursor_flag}"


def phase(flags: str, screen: str) -> str:
    """``cooked``, ``blank`` or ``box``: what the pane shows of a starting OpenCode."""
    if input_box(screen) is not None:
        return "box"
    return "blank" if flags.startswith("1") else "cooked"


async def one_run(root: Path, binary: Path, url: str, shots: dict[str, tuple[str, str]]) -> dict[str, Any]:
    launch = _opencode_launch(root, binary, resolve("opencode")[1], url)
    tmux = Tmux(socket_name=f"baton-rec-start-{uuid.uuid4().hex[:8]}", config_file="/dev/null")
    env = shlex.join(["env", "-i", *(f"{k}={v}" for k, v in launch.env.items()), launch.command])
    try:
        t0 = time.monotonic()
        pane = (await tmux.new_session("oc", f"exec {env}", cwd=str(launch.cwd),
                                       width=160, height=45)).pane_id
        began: dict[str, float] = {}
        pasted: list[tuple[int, float]] = []
        while time.monotonic() - t0 < TIMEOUT_S:
            now = round(time.monotonic() - t0, 3)
            flags = (await tmux.run("display-message", "-p", "-t", pane, FLAGS)).strip()
            screen = await tmux.run("capture-pane", "-p", "-J", "-t", pane)
            seen = phase(flags, screen)
            if seen not in began or seen == "cooked":  # the last cooked screen: the echoed tokens
                began.setdefault(seen, now)
                shots[seen] = (screen, await tmux.run("capture-pane", "-p", "-J", "-e", "-t", pane))
            if "box" in began and now > began["box"] + AFTER_BOX_S:
                break
            pasted.append((len(pasted) + 1, now))
            await tmux.paste(pane, f"T{len(pasted)} ")
            await anyio.sleep(STEP_S)  # shapes the scenario: a token every STEP_S
        await anyio.sleep(1.0)  # shapes the scenario: the last tokens drawn before the input is read
        held = input_box(await tmux.run("capture-pane", "-p", "-J", "-t", pane)) or ""
        kept = sorted(int(n) for n in re.findall(r"T(\d+)", held))
        return {"began_s": began, "pasted": pasted, "kept": kept}
    finally:
        await tmux.run("kill-server", check=False)
        remove_socket_file(tmux.socket_file)


async def record(runs: int) -> None:
    binary = install(*resolve("opencode"))
    shots: dict[str, tuple[str, str]] = {}
    results = []
    with FakeChat() as chat:
        for k in range(runs):
            with tempfile.TemporaryDirectory(prefix="baton-rec-opencode-") as tmp:
                result = await one_run(Path(tmp), binary, chat.url, shots if k == 0 else {})
                results.append(result)
                print(f"run {k}: {json.dumps(result['began_s'])}, kept T{result['kept'][:1]}…", flush=True)
    for name, (plain, ansi) in shots.items():
        tmp_part = re.compile(r"baton-rec-opencode-[a-z0-9_]{8}")
        (OUT / f"start_{name}.txt").write_text(tmp_part.sub("baton-rec-opencode-XXXXXXXX", plain))
        (OUT / f"start_{name}.ansi.txt").write_text(tmp_part.sub("baton-rec-opencode-XXXXXXXX", ansi))
    (OUT / "start.json").write_text(json.dumps({"version": resolve("opencode")[1], "step_s": STEP_S,
                                                "pane": {"width": 160, "height": 45}, "runs": results},
                                               indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="record_opencode_start")
    ap.add_argument("--runs", type=int, default=3)
    anyio.run(record, ap.parse_args(argv).runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
