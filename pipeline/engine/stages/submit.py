"""Typing one prompt into a pane, the one safe way: sanitized, pasted as one unit, Enter once the paste has
landed (:mod:`~pipeline.engine.stages.landing`) and always as a tmux command of its own, then a look for the
turn it started. A paste the target never took — no turn started, the target ready again with its input
empty, its own records without the prompt — is typed again (:data:`RETYPES` times at most), never one it may
hold. The dispatcher, ``baton send`` and the page's Send all type through here; a run that died between a
paste and its Enter submits what it left with :func:`submit_paste`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio

from pipeline.engine import crash_points
from pipeline.engine.context import engine_context, look_again
from pipeline.engine.stages.landing import until_landed
from pipeline.plugin.agents import AgentAdapter
from pipeline.system.text import sanitize
from pipeline.system.tmux import TmuxError

__all__ = ["RETYPES", "submit_paste", "type_prompt"]

log = logging.getLogger("batonpass")
#: how many times a prompt whose paste never reached the target is typed again
RETYPES = 2


async def type_prompt(adapter: AgentAdapter, text: str,
                      on_submit: Callable[[], None] | None = None) -> tuple[bool, str]:
    """Type ``text`` into the adapter's pane the one safe way, and watch for the turn to start.

    Sanitize; paste as one unit; wait until the paste has landed (:func:`until_landed`); Enter
    (:func:`submit_paste`) — always a tmux command of its own, never the paste's (Qwen Code submits its
    placeholder when it reads both at once). Unconfirmed, and the paste lost (:func:`_paste_lost`): all
    again, :data:`RETYPES` times at most. Returns (confirmed, pane_id). Raises
    :class:`pipeline.system.tmux.TmuxError` if the pane could not be typed into.
    """
    clean = sanitize(text)
    if not clean:
        raise ValueError("nothing printable left to type after sanitizing")
    confirmed, pane_id = await _type_once(adapter, clean, on_submit)
    for _ in range(RETYPES):
        if confirmed or not await _paste_lost(adapter, clean):
            break
        log.warning("retyping    %s: no turn started, its input is empty and it shows no such prompt: the "
                    "paste never reached it", adapter.ctx.name)
        confirmed, pane_id = await _type_once(adapter, clean, None)  # on_submit's hop is expected already
    return confirmed, pane_id


async def _type_once(adapter: AgentAdapter, clean: str,
                     on_submit: Callable[[], None] | None) -> tuple[bool, str]:
    """Paste ``clean``, wait for it to land, Enter, and look for the turn: one try of :func:`type_prompt`."""
    ctx = engine_context(adapter)
    info = await ctx.pane()
    await ctx.tmux.paste(info.pane_id, clean)
    pasted = time.monotonic()
    look_again()  # what follows looks at the pane as it is from now on
    await until_landed(adapter, clean, pasted)
    crash_points.before_enter()  # the tests' crash window (BATON_CRASH_BEFORE_ENTER), else nothing
    return await submit_paste(adapter, clean, on_submit, pane_id=info.pane_id)


async def _paste_lost(adapter: AgentAdapter, clean: str) -> bool:
    """Whether a prompt whose turn was not seen to start never reached the target: it is ready (no turn, no
    dialog, no draft), its input is empty and it shows it did not take ``clean`` — only for an agent whose
    ``received`` False proves that (:attr:`~pipeline.plugin.agents.AgentAdapter.retype_lost_paste`): one
    that may take text and show none of it is never typed into twice."""
    if not adapter.retype_lost_paste:
        return False
    look_again()
    try:
        return (await adapter.target_state() == "ready" and await adapter.input_holds(clean) == "empty"
                and await adapter.received(clean) is False)
    except TmuxError:
        return False


async def submit_paste(adapter: AgentAdapter, clean: str, on_submit: Callable[[], None] | None = None,
                       *, pane_id: str | None = None) -> tuple[bool, str]:
    """Press Enter on ``clean`` (sanitized), pasted into the adapter's input — by :func:`type_prompt`
    (``pane_id``: the pane it pasted into), or by a run that died before its Enter — then wait up to the
    adapter's ``confirm_timeout_s`` for it to show the turn started. Returns (confirmed, pane_id)."""
    ctx = engine_context(adapter)
    if pane_id is None:
        pane_id = (await ctx.pane()).pane_id
    before = await adapter.snapshot()
    adapter.prompt_submitted(clean, time.time())
    if on_submit is not None:
        on_submit()
    await ctx.tmux.send_keys(pane_id, "Enter")
    again = adapter.enter_again_s
    with anyio.move_on_after(adapter.confirm_timeout_s):
        tick = 0.005  # agents show a turn within milliseconds of the Enter: look soon, then less often
        again_at = time.monotonic() + (again or 0.0)
        while True:
            look_again()  # each look sees the pane as it is now, not as the block's first lookup saw it
            if await adapter.turn_started(before):
                break
            if again is not None and time.monotonic() >= again_at:
                again_at = time.monotonic() + again
                await _enter_again(adapter, pane_id, clean)
            await anyio.sleep(tick)
            tick = min(tick * 2, 0.05)
        return True, pane_id
    return False, pane_id


async def _enter_again(adapter: AgentAdapter, pane_id: str, clean: str) -> None:
    """Enter once more if the input still holds this prompt: the agent took the Enter for a newline
    (:attr:`pipeline.plugin.agents.AgentAdapter.enter_again_s`). Never on anything else in the input."""
    try:
        if await adapter.input_holds(clean) == "prompt":
            log.info("enter again %s: the input still holds the prompt after its Enter", adapter.ctx.name)
            await engine_context(adapter).tmux.send_keys(pane_id, "Enter")
    except TmuxError:
        return
