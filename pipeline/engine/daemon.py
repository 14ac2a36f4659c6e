"""The daemon ``baton run`` starts (:mod:`pipeline.commands.run`): the pipeline under signals and live reload.

The daemon runs one :class:`~pipeline.engine.runtime.Pipeline` at a time. When routes.yaml changes it is read
again: if it is invalid, every problem is reported with its position and the running config stays; if it
is valid, the running pipeline is stopped and a new one started with the new config. Nothing is lost in
between — the journal holds every hand-off that was queued, and the new pipeline picks them up first — and
the notifier (``settings.notify``) lives as long as the daemon: a tile still waiting for a person is not
announced again, and a notice still being tried is not dropped. A reload reads the installed plugins again, so
a plugin installed while the daemon runs is used without a restart (one upgraded needs a restart, and a line
says so: :func:`pipeline.plugin.manager.reload_registries`).
It prunes the journal as it starts and once a day (what finished more than 30 days ago:
:mod:`pipeline.engine.journal.prune`).
SIGINT/SIGTERM stop the daemon cleanly with exit status 0. A state folder or journal it cannot write
(read-only, full, locked, damaged) stops it at start with one line naming the file and the fix, exit status
1; one that fails while it runs pauses delivery until it can be written again
(:mod:`pipeline.engine.journal`).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from pipeline.engine.config import Config, ConfigError, load_config
from pipeline.engine.hosts import local_host
from pipeline.engine.journal import Journal, JournalUnusable, check_folder, open_journal
from pipeline.engine.notify import Notifier
from pipeline.engine.presence import watch_presence
from pipeline.engine.runtime import Pipeline
from pipeline.engine.state_lock import StateFolderBusy, hold_state_folder
from pipeline.engine.watch import FileWatcher, Subscription
from pipeline.plugin.manager import Registries, reload_registries
from pipeline.spool import spool_dir, state_dir
from pipeline.system.text import count
from pipeline.system.tmux import Tmux

__all__ = ["run_daemon"]

log = logging.getLogger("batonpass")


async def run_daemon(config: Config, path: Path, registries: Registries, server: Callable[[Config], Tmux], *,
                     dry_run: bool = False, host: str | None = None) -> None:
    """Route until a signal. ``server`` picks the tmux server for a config (the command line's ``-L``/``-S``
    win over the file's ``tmux.socket_name``). Raises TmuxError when tmux cannot run at all."""
    host = host or local_host()
    if dry_run:
        # a copy of the journal: its catch-up is the daemon's (handed off, followed until), its writes its own
        await _route(config, path, registries, server, Journal.copy_of(), dry_run, host)
        return
    try:
        check_folder(state_dir())  # a folder it cannot write: one line naming it, before anything runs
        check_folder(spool_dir())
        with hold_state_folder(state_dir(), host):  # one daemon per journal
            await _route(config, path, registries, server, open_journal(), dry_run, host)
    except (StateFolderBusy, JournalUnusable) as exc:
        raise SystemExit(f"baton run: {exc}") from None


async def _route(config: Config, path: Path, registries: Registries, server: Callable[[Config], Tmux],
                 journal: Journal, dry_run: bool, host: str) -> None:
    await journal.prune_now()  # and once a day while it runs (keep_pruned)
    watcher, notifier = FileWatcher(), Notifier()
    async with anyio.create_task_group() as outer:
        outer.start_soon(watcher.run)
        outer.start_soon(notifier.run)
        outer.start_soon(_stop_on_signal, outer.cancel_scope)
        outer.start_soon(journal.keep_pruned)
        with watcher.subscribe(path.resolve()) as sub:
            while True:
                tmux = server(config)
                notifier.reload(config.settings.notify, tmux, config.on_host(host).tiles)
                async with anyio.create_task_group() as tg:
                    await tg.start(watch_presence, config.on_host(host), registries, tmux)
                    tg.start_soon(Pipeline(config, registries, tmux, dry_run=dry_run, journal=journal,
                                           watcher=watcher, host=host, notifier=notifier).run)
                    config, registries = await _next_valid_config(sub, path, registries, config)
                    log.info("reloading: %s changed; restarting the pipeline with the new routes", path)
                    tg.cancel_scope.cancel()


async def _next_valid_config(
    sub: Subscription, path: Path, registries: Registries, current: Config
) -> tuple[Config, Registries]:
    """The next valid routes.yaml, read with the plugins installed now (one installed since the start is
    used without a restart), and the registries it was read with."""
    last = path.read_bytes() if path.exists() else b""
    missing = False
    while True:
        await sub.wait()
        try:
            data = path.read_bytes()
        except OSError as exc:
            # an editor replacing the file makes it vanish for a moment; say so only if it stays away
            await anyio.sleep(0.3)
            if not missing and not path.exists():
                missing = True
                log.warning("%s: %s; the running config stays until the file is back",
                            path, "deleted" if isinstance(exc, FileNotFoundError) else f"unreadable ({exc})")
            continue
        if missing:
            missing = False
            log.info("%s is back", path)
        if data == last:
            continue
        last = data
        fresh = reload_registries(registries)
        try:
            config, warnings = load_config(path, fresh)
        except ConfigError as exc:
            for problem in exc.problems:
                print(problem, file=sys.stderr)
            log.error(
                "%s is invalid (%s); the running config stays", path, count(len(exc.problems), "problem")
            )
            continue
        for problem in warnings:
            print(problem, file=sys.stderr)
        if config == current and fresh.externals == registries.externals:
            continue
        return config, fresh


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("stopping on %s", signal.Signals(signum).name)
            scope.cancel()
            return
