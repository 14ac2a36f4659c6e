"""A tile's last answer, read the way ``baton run`` reads a turn's: its adapter's own records first (its
``last_response()``, else its latest finished turn as ``baton run``'s catch-up reads it: ``finished_turns``
then ``response``), else what its screen shows (the terminal fallback) — for ``baton status``, ``baton
preview`` and the live board, so that the three show the answer ``run`` would hand on."""

from __future__ import annotations

from pipeline.engine.tiles import TileRuntime
from pipeline.plugin.agents import AgentAdapter
from pipeline.plugin.events import Completion, Response
from pipeline.system.proc import SHELLS
from pipeline.system.tmux import TmuxError

__all__ = ["LAST_TURN", "NoAnswer", "last_response"]

#: the turn id of a last answer looked up outside a turn's end
LAST_TURN = "preview:last"


class NoAnswer(Exception):
    """The tile's last answer cannot be read; the message says why and what to do."""


async def last_response(runtime: TileRuntime) -> Response:
    """The tile's last answer: its adapter's, else what its screen shows (the terminal fallback)."""
    completion = Completion(tile=runtime.name, turn_id=LAST_TURN, signal="preview")
    problems = []
    try:
        latest = await runtime.adapter.last_response() or await _last_finished_turn(runtime)
        if latest is not None and latest.text.strip():
            return latest
    except (TmuxError, OSError, LookupError, ValueError) as exc:
        problems.append(f"the {runtime.adapter.name} adapter: {exc}")
    if await _agent_absent(runtime):  # the screen is a shell's (or another program's), not the agent's answer
        raise NoAnswer(f"cannot read the last answer of tile {runtime.name}: no {runtime.adapter.name} runs "
                           f"in its pane (it shows {await _pane_command(runtime)}); start the agent there, "
                           "or give the answer with --input FILE or --input -")
    for adapter in dict.fromkeys((runtime.adapter, runtime.fallback)):
        try:
            response = await adapter.response(completion)
        except (TmuxError, OSError, LookupError, ValueError) as exc:
            problems.append(f"the {adapter.name} adapter: {exc}")
            continue
        if response is not None and response.text.strip():
            return response
        problems.append(f"the {adapter.name} adapter found no answer")
    why = "; ".join(dict.fromkeys(problems))
    raise NoAnswer(f"cannot read the last answer of tile {runtime.name} ({why}); "
                       "give the answer with --input FILE or --input -")


async def _last_finished_turn(runtime: TileRuntime) -> Response | None:
    """The latest turn the adapter's own records hold, answered by its ``response`` as ``baton run`` answers
    a caught-up turn; None for an adapter that cannot list past turns (a screen adapter). Asked only of an
    adapter without a ``last_response`` of its own: one that has one said it has no answer (and its past
    turns may be a long transcript to read on every look of the board)."""
    if type(runtime.adapter).last_response is not AgentAdapter.last_response:
        return None
    ends = await runtime.adapter.finished_turns(0.0)
    if not ends:
        return None
    return await runtime.adapter.response(ends[-1].completion(runtime.name, "catch-up"))


async def _agent_absent(runtime: TileRuntime) -> bool:
    """The tile names an agent found by its process, and no such process runs in the pane."""
    if not runtime.adapter.process_names:
        return False  # a shell or terminal tile: the screen is its answer
    try:
        return await runtime.adapter.agent_process() is None
    except TmuxError:
        return False  # no pane: the adapters below say so


async def _pane_command(runtime: TileRuntime) -> str:
    try:
        command = (await runtime.ctx.pane()).current_command
    except TmuxError:
        return "nothing"
    return f"a bare {command}" if command in SHELLS else command or "nothing"
