"""What a person does to the agents from outside their panes: approve or deny a permission prompt, send a
prompt, retry a failed hand-off, hold and resume a route, pass or drop a hand-off awaiting a person. One
entry, :func:`perform`, for every way in: the ``baton approve``/``deny``/``send``/``retry``/``hold``/
``resume``/``pass``/``drop`` commands, the web page, and another host's action arriving over the bus.

Each action is journaled (the ``actions`` table: what, on what, from where, when, how it ended) before its
side effect, and shown by ``baton history``. It never raises for bad input: a tile, route or hand-off that
does not exist, a prompt no longer on screen, a busy agent — each is ``ok=False`` with one line saying why,
and nothing typed.

- approve/deny: the keys are the adapter's (:meth:`~pipeline.plugin.agents.AgentAdapter.answer_keys`, per
  agent and version), sent one at a time through :mod:`pipeline.system.tmux`; then the screen is looked at
  again until the prompt has left it (said when it has not).
- send: ``baton send``'s path (:func:`pipeline.engine.send.send_text`): the dispatcher's checks and typing.
- retry: a ``failed`` hand-off, taken back in the journal (one retry wins), typed as ``send`` types, its
  outcome written on its own row.
- hold/resume: the ``holds`` table of the journal; the daemon's dispatcher keeps a held route's hand-offs
  queued (journaled ``held``) and types each, in order, once the route is resumed. Only that route waits:
  other routes' hand-offs to the same tile go on meanwhile.
- retry is typed as ``send`` types: its hop is not counted for the target's next turn (as a send's is not).
- pass/drop: a hand-off awaiting a person (``gate: person``), decided in the journal
  (:mod:`pipeline.engine.gate_actions`); a passed one is typed by the daemon's dispatcher, never here.

An action on a tile of another host (or a route whose target is there, or a hand-off that was typed there)
goes over the bus to that host's daemon (:mod:`pipeline.bus.actions`), once (its id is the message id and
the journal key there), and the outcome comes back.
"""

from __future__ import annotations

import logging
import sqlite3
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from pipeline.engine.action_kinds import KINDS, Action, ActionKind, ActionResult
from pipeline.engine.config import Config, ConfigError, load_config
from pipeline.engine.hosts import (
    BUS_URL_ENV,
    NO_BUS_CLIENT,
    bus_servers,
    local_host,
    no_bus_client,
    tile_host,
)
from pipeline.engine.journal import Journal
from pipeline.engine.pane_target import Setup, adapter_for, running_in
from pipeline.engine.send import send_text
from pipeline.engine.send_record import RetryRecord
from pipeline.plugin.registry import UnknownName
from pipeline.system.tmux import PaneGone, ServerGone, Tmux, TmuxError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pipeline.plugin.agents import AgentAdapter

__all__ = ["KINDS", "Action", "ActionKind", "ActionResult", "perform", "perform_here"]

log = logging.getLogger("batonpass")

#: after a key's effect shows, for the rest of the redraw before the next key
KEY_GAP_S = 0.05
#: how long a key's effect may take to show before the next key goes anyway
KEY_SETTLE_S = 1.0
#: the most keys one answer types (a menu that never reaches its choice stops here)
MAX_KEYS = 12
#: how long after the keys the prompt may take to leave the screen
CONFIRM_S = 3.0


async def perform(action: Action, *, config_path: Path, tmux: Tmux | None = None) -> ActionResult:
    """Do ``action`` with routes.yaml at ``config_path``: here, or over the bus on the host of its tile.
    ``tmux``: the server to act on when not routes.yaml's (``-L``/``-S``)."""
    return await perform_here(action, config_path=config_path, action_id=uuid.uuid4().hex, tmux=tmux)


async def perform_here(action: Action, *, config_path: Path, action_id: str, host: str | None = None,
                       tmux: Tmux | None = None) -> ActionResult:
    """:func:`perform` with a given id (an action that came over the bus keeps its sender's) and as the
    daemon of ``host`` (default: this machine) on its tmux server."""
    here = host or local_host()
    problem = _bad_input(action)
    if problem:
        return ActionResult(False, problem)
    try:
        config = _config(config_path)
        journal = Journal()
    except (_Refused, sqlite3.Error, OSError) as exc:
        return ActionResult(False, str(exc))
    try:
        try:  # recorded before anything is done: an action the journal cannot hold is not done
            fresh = journal.start_action(action_id, action.kind, action.target, action.origin, here)
        except sqlite3.Error as exc:
            return ActionResult(False, f"cannot record it in the journal {journal.path} ({exc}): not done")
        if not fresh:
            done = journal.action(action_id)
            return ActionResult(done is not None and done.outcome == "done",
                                f"already done: {done.message if done else ''}")
        try:
            result = await _dispatch(action, config, journal, here, action_id, tmux)
        except (_Refused, TmuxError, UnknownName, sqlite3.Error, OSError) as exc:
            result = ActionResult(False, str(exc))
        except Exception as exc:  # a bug: one line (the traceback with -v), the action recorded as refused
            log.debug("action %s %s failed", action.kind, action.target, exc_info=True)
            result = ActionResult(False, f"failed: {type(exc).__name__}: {exc}")
        try:
            journal.end_action(action_id, result.ok, result.message)
        except sqlite3.Error as exc:
            log.warning("action %s %s: its outcome not recorded in the journal (%s)", action.kind,
                        action.target, exc)
        log.debug("action      %s %s (%s): %s", action.kind, action.target, action.origin, result.message)
        return result
    finally:
        journal.close()


class _Refused(Exception):
    """An action that cannot be done as asked: the message says why, in one line."""


def _bad_input(action: Action) -> str | None:
    if action.kind not in KINDS:
        return f"no action {action.kind!r}: one of {', '.join(KINDS)}"
    if not isinstance(action.target, str) or not action.target.strip():
        return f"{action.kind}: no target named"
    if action.kind == "send" and not (action.text or "").strip():
        return "send: the text is empty: nothing to type"
    return None


def _config(path: Path) -> Config:
    from pipeline.plugin.manager import load_registries

    try:
        config, _ = load_config(path, load_registries())
    except ConfigError as exc:
        first = exc.problems[0] if exc.problems else "invalid"
        raise _Refused(f"{path} is invalid ({len(exc.problems)} problems; first: {first})") from None
    except OSError as exc:
        raise _Refused(f"cannot read {path}: {exc.strerror or exc}") from None
    return config


async def _dispatch(action: Action, config: Config, journal: Journal, here: str, action_id: str,
                    tmux: Tmux | None) -> ActionResult:
    remote = _remote_host(action, config, journal, here)
    if remote is not None:
        host, tile = remote
        if not bus_servers(config.settings.bus):  # nothing to reach that host through (a client would spin)
            raise _Refused(f"{action.kind} {action.target} is for host {host}, and {config.path} names no "
                           f"bus (settings.bus.servers, or {BUS_URL_ENV}): nothing sent; run it on {host}")
        try:
            from pipeline.bus.actions import send_action  # only here: a single machine never loads the client
        except ModuleNotFoundError as exc:
            if not no_bus_client(exc):
                raise
            raise _Refused(f"{action.kind} {action.target} is for host {host}: {NO_BUS_CLIENT}") from None
        return await send_action(action, config, host, action_id, here, tile)
    if action.kind in ("approve", "deny"):
        return await _answer(action, _setup(config, here, tmux), approve=action.kind == "approve")
    if action.kind == "send":
        ok, line = await send_text(action.target, action.text or "", _setup(config, here, tmux))
        return ActionResult(ok, line)
    if action.kind == "retry":
        return await _retry(action, _setup(config, here, tmux), journal)
    if action.kind in ("pass", "drop"):
        from pipeline.engine.gate_actions import gate_action

        return gate_action(action, config, journal, here)
    return _hold(action, config, journal)


def _remote_host(action: Action, config: Config, journal: Journal, here: str) -> tuple[str, str] | None:
    """The host whose daemon must do ``action`` and the tile it is about (its bus subject), when that host
    is not this one; refused when its tile or route is not in routes.yaml. A retry goes where its hand-off
    was typed (a pass or drop where it awaits): a hand-off to another host's tile is ``published`` here, and
    fails (or awaits, or not) in that host's journal, under the same key."""
    tile: str | None
    if action.kind in ("approve", "deny", "send"):
        tile = action.target
        if tile not in config.tiles:
            names = ", ".join(sorted(config.tiles)) or "none"
            raise _Refused(f"no tile {tile!r} in {config.path} (tiles: {names})")
    elif action.kind in ("hold", "resume"):
        tile = _route_target(action.target, config)
    else:
        record = journal.handoff(action.target)
        if record is not None and record.state != "published":
            return None  # typed (or not) here: retried here
        tile = record.target if record is not None else _key_target(action.target, config)
        if tile is None:
            return None  # not a hand-off any host of routes.yaml took: said so here
    target = config.tiles.get(tile)
    host = tile_host(target, here) if target is not None else here
    return None if host == here else (host, tile)


def _key_target(key: str, config: Config) -> str | None:
    """The tile a hand-off key's route goes to (keys are ``ROUTE@TURN``, a fan-out's ``ROUTE/TARGET@TURN``),
    or None."""
    label, _, branch = key.split("@", 1)[0].partition("/")
    route = next((r for r in config.routes if label in (r.label, r.arrow)), None)
    return None if route is None else branch or route.targets[0]


def _route(name: str, config: Config) -> str:
    """The label of the route ``name`` names (its name, or FROM->TO)."""
    for r in config.routes:
        if name in (r.label, r.arrow):
            return r.label
    labels = ", ".join(r.label for r in config.routes) or "none"
    raise _Refused(f"no route {name!r} in {config.path} (routes: {labels})")


def _route_target(name: str, config: Config) -> str:
    label = _route(name, config)
    return next(r.targets[0] for r in config.routes if r.label == label)


def _setup(config: Config, here: str, tmux: Tmux | None) -> Setup:
    """What ``baton send`` works with, on routes.yaml's tmux server unless ``tmux`` is given: the tiles of
    host ``here`` (the daemon's ``--host`` may not be the machine's name)."""
    from pipeline.plugin.manager import load_registries

    tmux = tmux or Tmux(socket_name=config.tmux.socket_name)
    tiles = {name: tile.model_copy(update={"host": None}) for name, tile in config.tiles_on(here).items()}
    return Setup(load_registries(), config, tmux, tiles)


async def _answer(action: Action, setup: Setup, *, approve: bool) -> ActionResult:
    """approve/deny: the adapter's keys for the prompt on screen, one at a time; then until it left."""
    from pipeline.engine.context import EngineContext

    name = action.target
    tile = setup.tiles[name]
    ctx = EngineContext(name=name, tile=tile, tmux=setup.tmux)
    try:
        info = await ctx.pane()
    except (PaneGone, ServerGone) as exc:
        return ActionResult(False, f"tile {name}: {exc}; nothing typed")
    found, running = running_in(info, setup.registries)
    agent = tile.agent if tile.agent != "auto" else (found or "terminal")
    adapter = adapter_for(agent, ctx, setup.registries)
    escapes, start, end = adapter.answer_screen
    where = f"tile {name} ({adapter.name}, {info.pane_id})"

    async def screen_now() -> str:
        return await ctx.capture(escapes=escapes, start=start, end=end)

    screen = await screen_now()
    plan = adapter.answer_keys(screen, approve)
    if plan is None:
        return ActionResult(False, f"{where} shows no permission prompt now: nothing typed, nothing to "
                            f"{action.kind}")
    typed: list[str] = []
    # a key at a time, the keys asked again once the screen shows the last one's effect: a TUI may read a
    # key against the state it drew before the previous one (Enter taking the choice the arrow left)
    while len(plan) > 1 and len(typed) < MAX_KEYS:
        typed.append(plan[0])
        await setup.tmux.send_keys(info.pane_id, plan[0])
        moved = await _changed(screen_now, screen)
        if moved is None:
            plan = plan[1:]
            continue
        screen, plan = moved, adapter.answer_keys(moved, approve)
        if plan is None:
            return ActionResult(False, f"the permission prompt of {where} left its screen after "
                                f"{' '.join(typed)}, before the answer was complete: look at the pane")
    typed.append(plan[0])
    await setup.tmux.send_keys(info.pane_id, plan[0])
    keys = " ".join(typed)
    if await _gone(screen_now, adapter, approve):
        said = "approved" if approve else "denied"
        return ActionResult(True, f"{said} the permission prompt of {where} (keys {keys}); it left the "
                            "screen")
    return ActionResult(False, f"typed {keys} into {where} to {action.kind}, but a permission prompt is "
                        f"still on its screen after {CONFIRM_S:g}s: look at the pane")


async def _changed(screen_now: Callable[[], Awaitable[str]], before: str) -> str | None:
    """The screen once it differs from ``before``, or None when it stayed the same for ``KEY_SETTLE_S``."""
    deadline = time.monotonic() + KEY_SETTLE_S
    while time.monotonic() < deadline:
        await anyio.sleep(0.02)
        screen = await screen_now()
        if screen != before:
            await anyio.sleep(KEY_GAP_S)  # the rest of the redraw
            return await screen_now()
    return None


async def _gone(screen_now: Callable[[], Awaitable[str]], adapter: AgentAdapter, approve: bool) -> bool:
    """Whether the permission prompt leaves the screen within ``CONFIRM_S``."""
    deadline = time.monotonic() + CONFIRM_S
    while time.monotonic() < deadline:
        await anyio.sleep(0.05)
        if adapter.answer_keys(await screen_now(), approve) is None:
            return True
    return False


async def _retry(action: Action, setup: Setup, journal: Journal) -> ActionResult:
    """A failed hand-off typed again as ``baton send`` types, on its own journal row: once."""
    key = action.target
    record = journal.handoff(key)
    if record is None:
        return ActionResult(False, f"no hand-off {key!r} in the journal (baton history --outcome failed "
                            "lists the failed ones)")
    if record.state != "failed":
        return ActionResult(False, f"hand-off {key} is {record.state}, not failed: nothing to retry")
    if not record.prompt:
        return ActionResult(False, f"hand-off {key} has no prompt recorded: nothing to retype")
    if not journal.claim_failed(key, f"retry asked ({action.origin})"):
        return ActionResult(False, f"hand-off {key} is being retried already")
    retry = RetryRecord(key, journal)
    ok, line = await send_text(record.target, record.prompt, setup, retry)
    if not retry.started:  # refused before anything was recorded (the tile is gone from routes.yaml)
        journal.set_state(key, "failed", error=f"retry: {line}")
    return ActionResult(ok, f"retry of {key}: {line}")


def _hold(action: Action, config: Config, journal: Journal) -> ActionResult:
    route = _route(action.target, config)
    if action.kind == "hold":
        if not journal.hold(route, action.origin):
            origin, at = journal.holds()[route]
            return ActionResult(False, f"route {route} is held already (by {origin} at "
                                f"{time.strftime('%H:%M:%S', time.localtime(at))}): nothing changed")
        return ActionResult(True, f"route {route} held: its hand-offs stay queued until baton resume {route}")
    if not journal.resume(route):
        return ActionResult(False, f"route {route} is not held: nothing to resume")
    return ActionResult(True, f"route {route} resumed: its queued hand-offs go out, each once")
