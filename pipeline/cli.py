"""The ``baton`` command. Thin: parse arguments, call into pipeline.commands, print, choose the exit status.

Exit statuses: 0 done; 1 the command failed (every reason printed as one line, never a traceback); 2 bad
usage (argparse); 3 ``status`` found none of the tiles; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pipeline.commands.options import (
    OneLineParser,
    add_common,
    bounded_float,
    bounded_int,
    name_value,
    non_blank,
    pane_target,
)
from pipeline.commands.server import config_path, load, load_optional, tmux_for
from pipeline.commands.table import count, table
from pipeline.plugin.manager import load_registries, make_plugin_manager
from pipeline.plugin.registry import UnknownName
from pipeline.system.logs import setup_logging

if TYPE_CHECKING:
    from pipeline.engine.config import Config
    from pipeline.plugin.agents import AgentAdapter
    from pipeline.plugin.manager import Registries
    from pipeline.plugin.turns import ResolveStep
    from pipeline.system.tmux import Tmux
from pipeline.system.tmux import TmuxError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    if not getattr(args, "func", None):
        (getattr(args, "help_of", None) or parser).print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (TmuxError, UnknownName) as exc:
        print(f"baton {args.command}: {exc}", file=sys.stderr)
        return 1
    except BaseExceptionGroup as group:  # from a task group (run): the same errors, one line each
        user_errors, rest = group.split((TmuxError, UnknownName))
        if rest is not None or user_errors is None:
            raise
        for message in dict.fromkeys(str(e) for e in _leaves(user_errors)):
            print(f"baton {args.command}: {message}", file=sys.stderr)
        return 1


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    return [leaf for exc in group.exceptions
            for leaf in (_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("batonpass")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="baton", description="Pass the baton between AI coding agents in tmux panes.")
    p.add_argument("--version", action="version", version=f"baton {_version()}")
    add_common(p, top=True)
    sub = p.add_subparsers(metavar="COMMAND")

    def cmd(
        name: str,
        func: Callable[[argparse.Namespace], int] | None,
        help: str,
        parent: argparse._SubParsersAction[Any] = sub,
    ) -> argparse.ArgumentParser:
        sp = parent.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func, command=name)
        add_common(sp, top=False)
        return sp

    def host_flag(sp: argparse.ArgumentParser, verb: str) -> None:
        sp.add_argument("--host", type=non_blank("--host"), default=None,
                        help=f"{verb} the tiles of this host (default: this machine's host name)")

    def json_flag(sp: argparse.ArgumentParser, what: str) -> None:
        sp.add_argument("--json", action="store_true", help=f"{what} as JSON")

    sp = cmd("run", _run, "the routing daemon, in the foreground")
    sp.add_argument("--dry-run", action="store_true", help="print prompts instead of typing them")
    sp.add_argument("--host", type=non_blank("--host"), default=None,
                    help="run the tiles of this host (default: this machine's host name)")

    sp = cmd("bus", _bus, "start a local nats-server with JetStream (in $XDG_STATE_HOME/batonpass/bus) for "
             "routes that cross hosts")
    sp.add_argument("--listen", default="127.0.0.1", type=non_blank("--listen"),
                    help="the address to listen on (default 127.0.0.1; 0.0.0.0 for other machines)")
    sp.add_argument("--port", type=bounded_int(1, 65535), default=4222, help="the client port (default 4222)")
    sp.add_argument("--name", default=None, type=non_blank("--name"),
                    help="the server's name (default: batonpass-HOSTNAME)")

    sp = cmd("check", _check, "validate routes.yaml; exit 0 if valid, 1 if not")
    json_flag(sp, "the verdict and every problem")

    sp = cmd("demo", _demo, "a self-contained demo on real tmux panes (no API key, no agents needed)")
    sp.add_argument("--handoffs", type=bounded_int(1, 100), default=4,
                    help="stop after this many hand-offs, 1 to 100 (default 4)")
    sp.add_argument("--work-s", type=bounded_float(0.0, 10.0), default=1.0,
                    help="how long each demo turn works, 0 to 10 seconds (default 1.0)")
    sp.add_argument("--keep", action="store_true", help="leave the demo's tmux server running")

    sp = cmd("send", _send, "hand text to a pane exactly as the dispatcher does")
    sp.add_argument("pane", type=pane_target, help="%%N, session:window.pane or title:NAME")
    sp.add_argument("text", help="the text (up to 8 MB), or - to read standard input")
    sp.add_argument("--agent", default="auto", type=non_blank("--agent"),
                    help="the agent in the pane (default: from its process tree)")

    sp = cmd("resolve", _resolve, "run the resolution chain for one pane and show every step")
    sp.add_argument("pane", type=pane_target, help="%%N, session:window.pane or title:NAME")
    sp.add_argument("--agent", default="auto", type=non_blank("--agent"),
                    help="the agent in the pane (default: from its process tree)")
    json_flag(sp, "the steps")

    sp = cmd("up", _up, "create the panes of tiles that declare a command, and start their agents")
    host_flag(sp, "bring up")

    sp = cmd("status", _status, "per tile: pane, agent, agent PID, state, session, transcript, last answer "
             "(exit 3 when no tile's pane exists)")
    json_flag(sp, "one object per tile")
    sp.add_argument("--all-hosts", action="store_true", help="every host's tiles, from the bus")
    host_flag(sp, "show")
    sp.add_argument("--watch", action="store_true",
                    help="a live board in the terminal, redrawn as agents work: state and why, last answer, "
                    "queued and last hand-off, tokens and cost (q quits)")

    sp = cmd("extract", _extract, "print the last finished turn's answer from a transcript or rollout file")
    sp.add_argument("file", type=Path)
    sp.add_argument("--agent", default="claude", type=non_blank("--agent"),
                    help="whose file it is: any registered agent that reads files (default claude)")
    sp.add_argument("--session", metavar="ID", type=non_blank("--session"),
                    help="a store holding several sessions (opencode): which one (= --option session=ID)")
    sp.add_argument("-o", "--option", metavar="NAME=VALUE", action="append", default=[],
                    type=name_value("--option"), help="an option of that agent's files (its ExtractOptions)")
    json_flag(sp, "the answer, its turn id, outcome and source")

    sp = cmd("hooks", None, "the agents' own completion hooks")
    hooks = sp.add_subparsers(metavar="ACTION")
    sp.set_defaults(help_of=sp)
    hp = cmd("install", _hooks_install, "add the agents' completion hooks (Claude Code's Stop hook, Codex's "
             "notify, a plugin's own), pointing at batonpass", parent=hooks)
    hp.set_defaults(command="hooks install")
    hp.add_argument("--agent", metavar="NAME", dest="agents", action="append", default=[],
                    type=non_blank("--agent"),
                    help="this agent's hooks (repeatable; default: every agent that has hooks)")
    hp.add_argument("--claude", dest="agents", action="append_const", const="claude", help="= --agent claude")
    hp.add_argument("--codex", dest="agents", action="append_const", const="codex", help="= --agent codex")

    sp = cmd("preview", _preview, "print what a route would hand on for an answer (default: the source "
             "tile's last answer); exit 1 when the route would not fire")
    sp.add_argument("route", type=non_blank("the route"), help="the route's name, or FROM->TO")
    sp.add_argument(
        "--input", metavar="FILE", help="the answer (up to 8 MB): a file, or - for standard input"
    )
    sp.add_argument("--dry-run", action="store_true",
                    help="AI transforms: print the request that would be sent instead of calling the model")

    sp = cmd("history", _history, "the hand-off journal: when, route, turn, hop, outcome, and why")
    json_flag(sp, "the hand-offs")
    sp.add_argument("-n", "--limit", type=bounded_int(1), default=50,
                    help="how many of the latest hand-offs (default 50)")
    sp.add_argument("--all-hosts", action="store_true", help="every host's hand-offs, from the bus")

    sp = cmd("plugins", _plugins, "loaded agent adapters and transforms, and where each comes from")
    json_flag(sp, "the plugins and their classes")
    return p


# ---- commands ------------------------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    from pipeline.engine.config import ConfigError, load_config

    if not args.json:
        config, warnings = load(args, load_registries())
        if config is None:
            return 1
        print(f"{config.path}: ok — {count(len(config.tiles), 'tile')}, {count(len(config.routes), 'route')}"
              + (f", {count(len(warnings), 'warning')}" if warnings else ""))
        return 0
    path = config_path(args)
    try:
        config, problems = load_config(path, load_registries())
        out = {"file": str(path), "ok": True, "tiles": len(config.tiles), "routes": len(config.routes)}
    except ConfigError as exc:
        problems, out = exc.problems, {"file": str(path), "ok": False}
    out["problems"] = [
        {"line": p.line, "col": p.col, "severity": p.severity, "path": p.path, "message": p.message}
        for p in problems
    ]
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0 if out["ok"] else 1


def _run(args: argparse.Namespace) -> int:
    from pipeline.commands.daemon import run_daemon

    registries = load_registries()
    config, _ = load(args, registries)
    if config is None:
        return 1
    anyio.run(lambda: run_daemon(config, config_path(args), registries, lambda c: tmux_for(args, c),
                                 dry_run=args.dry_run, host=args.host))
    return 0


def _bus(args: argparse.Namespace) -> int:
    from pipeline.bus.server import NoServerBinary, serve
    from pipeline.engine.hosts import local_host

    try:
        serve(args.listen, args.port, args.name or f"batonpass-{local_host()}")
    except (NoServerBinary, OSError) as exc:
        print(f"baton bus: {exc}", file=sys.stderr)
        return 1
    return 0


def _demo(args: argparse.Namespace) -> int:
    import logging

    from pipeline.commands.demo import run_demo

    logging.getLogger("batonpass").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    return anyio.run(lambda: run_demo(handoffs=args.handoffs, work_s=args.work_s, keep=args.keep))


def _pane_adapter(args: argparse.Namespace) -> tuple[Registries, Tmux] | None:
    """(registries, tmux) for a one-pane command, or None when routes.yaml is named or found and broken."""
    registries = load_registries()
    if args.agent != "auto":
        registries.agents.get(args.agent)  # an unknown name: one line from main(), before anything else
    config, ok = load_optional(args, registries)
    return (registries, tmux_for(args, config)) if ok else None


def _send(args: argparse.Namespace) -> int:
    from pipeline.commands.pane import InputTooLarge, adapter_for, check_size, read_input, send_text

    try:
        if args.text == "-":
            text = read_input(sys.stdin, "standard input")
        else:
            check_size(len(os.fsencode(args.text)), "the text")
            text = args.text
    except InputTooLarge as exc:
        print(f"baton send: {exc}", file=sys.stderr)
        return 1
    setup = _pane_adapter(args)
    if setup is None:
        return 1

    async def send() -> int:
        return await send_text(await adapter_for(args.pane, args.agent, *setup), text)

    try:
        return anyio.run(send)
    except ValueError as exc:
        print(f"baton send: {exc}", file=sys.stderr)
        return 1


def _resolve(args: argparse.Namespace) -> int:
    from pipeline.commands.pane import adapter_for

    setup = _pane_adapter(args)
    if setup is None:
        return 1

    async def resolve() -> tuple[AgentAdapter, list[ResolveStep]]:
        adapter = await adapter_for(args.pane, args.agent, *setup)
        return adapter, await adapter.resolve()

    adapter, steps = anyio.run(resolve)
    ok = all(s.ok for s in steps)
    if args.json:
        print(
            json.dumps(
                {
                    "pane": args.pane,
                    "agent": adapter.name,
                    "ok": ok,
                    "steps": [
                        {"step": s.step, "ok": s.ok, "detail": s.detail, "value": s.value} for s in steps
                    ],
                },
                indent=2,
                default=str,
            )
        )
    else:
        print(f"{args.pane}: agent {adapter.name}")
        for s in steps:
            print(f"  {'ok ' if s.ok else 'STOP'} {s.step:<12} {s.detail}")
    return 0 if ok else 1


def _this_host(config: Config, host: str | None) -> Config:
    """Only the tiles of ``host`` (default: this machine): a tile on another machine has no pane here."""
    from pipeline.engine.hosts import local_host

    return config.on_host(host or local_host())


def _up(args: argparse.Namespace) -> int:
    from pipeline.commands.up import bring_up

    config, _ = load(args, load_registries())
    if config is None:
        return 1
    config = _this_host(config, args.host)
    results = anyio.run(lambda: bring_up(config, tmux_for(args, config)))
    for r in results:
        print(f"{r.tile:<14} {r.action:<10} {r.detail}")
        if r.action == "error":
            print(f"{r.tile}: {r.detail}", file=sys.stderr)
    return 1 if any(r.action == "error" for r in results) else 0


def _status(args: argparse.Namespace) -> int:
    from pipeline.commands.status import tile_status

    registries = load_registries()
    config, _ = load(args, registries)
    if config is None:
        return 1
    if args.all_hosts:
        from pipeline.commands.allhosts import print_all_hosts

        return print_all_hosts("tiles", config, args.json)
    config = _this_host(config, args.host)
    if args.watch:
        return _watch(args, config, registries)
    rows = anyio.run(lambda: tile_status(config, registries, tmux_for(args, config)))
    status = 3 if rows and all(r["state"] == "gone" for r in rows) else 0
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return status
    print(table(("TILE", "PANE", "AGENT", "PID", "STATE", "LAST ANSWER"),
                [(r["tile"], r["pane_id"] or r["pane"], r["agent"], r["agent_pid"] or "-", r["state"],
                  r["last_response"] or "-") for r in rows]))
    for r in rows:
        for key in ("session", "transcript", "error"):
            if r.get(key):
                print(f"{r['tile']} {key}: {r[key]}")
    if status:
        print(
            f"baton status: none of the {count(len(rows), 'tile')} has its pane on "
            f"{tmux_for(args, config).describe()}",
            file=sys.stderr,
        )
    return status


def _watch(args: argparse.Namespace, config: Config, registries: Registries) -> int:
    from pipeline.commands.watch import watch_board

    if args.json:
        print("baton status: --watch draws a board; --json prints once (use one of them)", file=sys.stderr)
        return 2
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("baton status --watch: needs a terminal (standard input and output); "
              "use baton status or baton status --json in scripts", file=sys.stderr)
        return 1
    return anyio.run(lambda: watch_board(config, registries, tmux_for(args, config)))


def _extract(args: argparse.Namespace) -> int:
    from pipeline.commands.extract import extract_answer

    options = [("--session", "session", args.session)] if args.session else []
    options += [(f"--option {name}", name, value) for name, value in args.option]
    return extract_answer(load_registries(), args.file, args.agent, options, args.json)


def _hooks_install(args: argparse.Namespace) -> int:
    from pipeline.commands.hooks import install_hooks

    return install_hooks(load_registries(), args.agents)


def _preview(args: argparse.Namespace) -> int:
    from pipeline.commands.pane import InputTooLarge, read_input
    from pipeline.commands.preview import PreviewError, preview_route

    registries = load_registries()
    config, _ = load(args, registries)
    if config is None:
        return 1
    try:
        answer = None
        if args.input == "-":
            answer = read_input(sys.stdin, "standard input")
        elif args.input is not None:
            with open(args.input, "rb") as f:  # a FIFO is read like standard input: up to the cap
                answer = read_input(f, f"--input {args.input}")
    except InputTooLarge as exc:
        print(f"baton preview: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"baton preview: cannot read --input {args.input}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        result = anyio.run(
            lambda: preview_route(
                config, registries, tmux_for(args, config), args.route, answer, dry_run=args.dry_run
            )
        )
    except PreviewError as exc:
        print(f"baton preview: {exc}", file=sys.stderr)
        return 1
    for note in result.notes:
        print(f"baton preview: {note}", file=sys.stderr)
    if result.skipped is not None:
        print(f"baton preview: route {args.route} would not hand this off: {result.skipped}", file=sys.stderr)
        return 1
    sys.stdout.write(result.text if result.text.endswith("\n") else result.text + "\n")
    return 0


def _history(args: argparse.Namespace) -> int:
    from pipeline.commands.extract import print_history

    if args.all_hosts:
        from pipeline.commands.allhosts import print_all_hosts

        config, ok = load_optional(args, load_registries())
        return print_all_hosts("history", config, args.json, args.limit) if ok else 1
    return print_history(args.limit, args.json)


def _plugins(args: argparse.Namespace) -> int:
    pm = make_plugin_manager()
    registries = load_registries(pm)
    rows = []
    for kind, registry in (("agent", registries.agents), ("transform", registries.transforms)):
        for name in registry.names():
            cls = registry.get(name)
            rows.append({"kind": kind, "name": name, "from": registry.origin(name),
                         "summary": getattr(cls, "summary", "")})
    failed = [{"name": e.name, "from": e.origin, "error": e.error} for e in pm.failed()]
    if args.json:
        print(json.dumps({"plugins": [pm.get_name(p) for p in pm.get_plugins()], "classes": rows,
                          "failed": failed, "disabled": pm.disabled}, indent=2))
        return 0
    print(
        table(
            ("KIND", "NAME", "FROM", "SUMMARY"),
            [(r["kind"], r["name"], r["from"], r["summary"]) for r in rows]
            + [("plugin", f["name"], f["from"], f"failed: {f['error']}") for f in failed],
        )
    )
    if os.environ.get("BATON_DISABLE_EXTERNAL_PLUGINS") == "1":
        print("(external plugins disabled by BATON_DISABLE_EXTERNAL_PLUGINS=1)")
    if pm.disabled:
        print(f"(disabled by BATON_DISABLED_PLUGINS: {', '.join(pm.disabled)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
