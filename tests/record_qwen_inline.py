"""Record what the REAL Qwen Code shows for a long paste drawn inline — at most 10 lines and 1000 characters,
so no ``[Pasted Content N chars]``, but more rows than its input box's 10 once wrapped — and when.

    .venv/bin/python -m tests.record_qwen_inline [--rounds N]

Qwen Code 0.24.4 (the pin, on npm's Node 22) runs in a private tmux server against the fake Chat
Completions server, as in tests/record_paste_screens.py (whose session it reuses), in a 120×40 and an 80×24
pane. Each case is pasted the dispatcher's way and not submitted; the input is captured with escapes every
few milliseconds for 1.5 s: the first screen that shows the paste (Qwen draws the box from the paste's
first row, then scrolls it to the cursor in the next render) and the last one are written to
``tests/fixtures/qwen-code-<version>/screens/inline_<W>x<H>_<case>_first.ansi.txt`` and ``…_<case>.ansi.txt``;
``inline_cases.json`` beside them holds the texts and, per round, the milliseconds from the paste to each
view: when an Enter could go under each rule of :meth:`plugins.qwen.adapter.QwenAdapter.paste_landed`.
Everything it starts is stopped at the end (tests/record_paste_screens.py's ``stop_everything``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from pathlib import Path

import anyio

from pipeline.plugin.pastes import shows_text
from pipeline.system.text import sanitize
from pipeline.system.tmux import Tmux
from plugins.qwen.screen import PASTE_CHARS, PASTE_LINES, input_draft
from tests.record_paste_screens import AGENTS, FIXTURES, Session, fake_server, line, lines, stop_everything

#: (columns, rows) of the panes
SIZES = ((120, 40), (80, 24))
#: inline (at most 10 lines and 1000 characters), more than 10 rows once wrapped in either pane
CASES = {
    "lines8_960": lines("lines8_960", 8, 960),
    "line1000": line("line1000", 1000),
    "lines10_1000": lines("lines10_1000", 10, 1000),
}
WATCH_S = 1.5


async def watch(session: Session, text: str) -> tuple[list[tuple[float, str]], float]:
    """Paste ``text``; every distinct screen (ms after the paste, with escapes) for :data:`WATCH_S`."""
    shots: list[tuple[float, str]] = []
    await session.tmux.paste(session.pane, text)
    start = time.monotonic()
    while time.monotonic() - start < WATCH_S:
        screen = await session.screen()
        if not shots or screen != shots[-1][1]:
            shots.append((round((time.monotonic() - start) * 1000, 1), screen))
        await anyio.sleep(0.003)  # shapes the scenario: a look every few ms, to see the first render
    return shots, start


def views(shots: list[tuple[float, str]], text: str) -> dict[str, tuple[float, str]]:
    """The first screen whose input shows text (drawn from the paste's start), and the first that shows
    the paste's end (scrolled to the cursor: what the inline rule, :func:`shows_text`, takes for it)."""
    drawn = [(ms, s) for ms, s in shots if input_draft(s)]
    scrolled = next((ms, s) for ms, s in drawn if shows_text(input_draft(s) or "", text))
    return {"first": drawn[0], "scrolled": scrolled}


async def record(rounds: int) -> Path:
    from tests.agent_versions import PINNED
    from tests.fakes.npm_agents import install, node_22

    package, version = PINNED["qwen"]
    binary = install(package, version, node=node_22())
    out = FIXTURES / f"qwen-code-{version}" / "screens"
    socket = f"baton-rec-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmux = Tmux(socket_name=socket, config_file="/dev/null", control=False)
    root = Path(tempfile.mkdtemp(prefix="baton-rec-qwen-"))
    session: Session | None = None
    facts: dict[str, object] = {
        "version": version, "rules": {"lines": PASTE_LINES, "chars": PASTE_CHARS},
        "cases": {k: {"pasted": sanitize(v), "lines": v.count("\n") + 1, "chars": len(v)}
                  for k, v in CASES.items()},
        "sizes": {}}
    try:
        with fake_server("qwen") as url:
            agent = AGENTS["qwen"]
            session = Session(agent, tmux, agent.launch(root, binary, version, url), out,
                              token=root.name.rsplit("-", 1)[-1])
            await session.start()
            for width, height in SIZES:
                await tmux.run("resize-window", "-t", session.pane, "-x", str(width), "-y", str(height))
                await session.settled("")
                size = f"{width}x{height}"
                timings: dict[str, list[dict[str, float]]] = {}
                for case, raw in CASES.items():
                    for n in range(rounds):
                        shots, _ = await watch(session, sanitize(raw))
                        seen = views(shots, sanitize(raw))
                        timings.setdefault(case, []).append({k: ms for k, (ms, _) in seen.items()})
                        if n == 0:
                            for kind, (_, screen) in seen.items():
                                name = f"inline_{size}_{case}{'_first' if kind == 'first' else ''}.ansi.txt"
                                (out / name).write_text(session.anonymous(screen))
                        await session.clear()
                        print(f"  {size} {case} #{n}: {timings[case][-1]}", flush=True)
                facts["sizes"][size] = {"width": width, "height": height, "ms_to_view": timings}  # type: ignore[index]
    finally:
        await anyio.to_thread.run_sync(lambda: stop_everything(tmux, session, root))
    (out / "inline_cases.json").write_text(json.dumps(facts, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.record_qwen_inline",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="pastes of each case per pane size (timings)")
    print(anyio.run(record, parser.parse_args(argv).rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
