"""The ``baton`` command. Thin: parse arguments, call into the engine, print, choose the exit status."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import anyio

from pipeline.engine.config import Config, ConfigError, Problem, default_config_path, load_config
from pipeline.plugin.manager import Registries, load_registries, make_plugin_manager
from pipeline.system.logs import setup_logging
from pipeline.system.tmux import Tmux, TmuxError

__all__ = ["main"]

log = logging.getLogger("batonpass")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="baton", description="Pass the baton between AI coding agents in tmux panes.")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(metavar="COMMAND")

    def cmd(name: str, func, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func)
        return sp

    sp = cmd("run", _run, "the routing daemon, in the foreground")
    _config_arg(sp)
    sp.add_argument("-L", dest="socket", help="tmux socket name (overrides tmux.socket_name)")
    sp.add_argument("--dry-run", action="store_true", help="print prompts instead of typing them")

    sp = cmd("check", _check, "validate routes.yaml; exit 0 if valid, 1 if not")
    _config_arg(sp)

    sp = cmd("demo", _demo, "a self-contained demo on real tmux panes (no API key, no agents needed)")
    sp.add_argument("--handoffs", type=int, default=4, help="stop after this many hand-offs (default 4)")
    sp.add_argument("--work-s", type=float, default=1.0, help="how long each demo turn works (default 1.0)")
    sp.add_argument("--keep", action="store_true", help="leave the demo's tmux server running")

    sp = cmd("send", _send, "hand text to a pane exactly as the dispatcher does")
    sp.add_argument("pane", help="%%N, session:window.pane or title:NAME")
    sp.add_argument("text", help="the text, or - to read standard input")
    sp.add_argument("-L", dest="socket", help="tmux socket name")
    sp.add_argument("--agent", default="auto", help="the agent in the pane (default: from its process tree)")

    sp = cmd("resolve", _resolve, "run the resolution chain for one pane and show every step")
    sp.add_argument("pane")
    sp.add_argument("-L", dest="socket", help="tmux socket name")
    sp.add_argument("--agent", default="auto")
    sp.add_argument("--json", action="store_true")

    sp = cmd("up", _up, "create the panes of tiles that declare a command, and start their agents")
    _config_arg(sp)

    sp = cmd("status", _status, "per tile: pane, agent, agent PID, state")
    _config_arg(sp)
    sp.add_argument("--json", action="store_true")

    sp = cmd("extract", _extract, "print the last finished turn's answer from a transcript or rollout file")
    sp.add_argument("file", type=Path)
    sp.add_argument("--agent", default="claude", help="whose file it is (default claude)")
    sp.add_argument("--session", metavar="ID", help="a store holding several sessions (opencode): which one")
    sp.add_argument("--json", action="store_true")

    sp = cmd("hooks", None, "the agents' own completion hooks")
    hooks = sp.add_subparsers(metavar="ACTION")
    hp = hooks.add_parser("install", help="add Claude Code's Stop hook / Codex's notify, pointing at batonpass")
    hp.set_defaults(func=_hooks_install)
    hp.add_argument("--claude", action="store_true")
    hp.add_argument("--codex", action="store_true")

    sp = cmd("preview", _preview, "print the prompt a route's transform would send for an answer "
             "(default: the source tile's last answer)")
    sp.add_argument("route", help="the route's name (or from->to)")
    _config_arg(sp)
    sp.add_argument("--input", metavar="FILE", help="the answer to transform: a file, or - for standard input")
    sp.add_argument("--dry-run", action="store_true",
                    help="AI transforms: print the request that would be sent instead of calling the model")

    sp = cmd("history", _history, "the hand-off journal: when, route, turn, hop, outcome, and why")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("-n", "--limit", type=int, default=50, help="how many of the latest hand-offs (default 50)")

    sp = cmd("plugins", _plugins, "loaded agent adapters and transforms, and where each comes from")
    sp.add_argument("--json", action="store_true")
    return p


def _config_arg(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("-c", "--config", type=Path, default=None,
                    help="routes.yaml (default ./routes.yaml, then $XDG_CONFIG_HOME/batonpass/routes.yaml)")


def _load(args: argparse.Namespace, registries: Registries) -> tuple[Config | None, list[Problem]]:
    path = args.config or default_config_path()
    try:
        config, warnings = load_config(path, registries)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        errors = sum(p.severity == "error" for p in exc.problems)
        print(f"{path}: {errors} error{'s' * (errors != 1)}", file=sys.stderr)
        return None, exc.problems
    for problem in warnings:
        print(problem, file=sys.stderr)
    return config, warnings


def _tmux(config: Config | None, socket: str | None) -> Tmux:
    return Tmux(socket_name=socket or (config.tmux.socket_name if config else None))


# ---- commands ------------------------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    config, warnings = _load(args, load_registries())
    if config is None:
        return 1
    print(f"{config.path}: ok — {len(config.tiles)} tiles, {len(config.routes)} routes"
          + (f", {len(warnings)} warning{'s' * (len(warnings) != 1)}" if warnings else ""))
    return 0


def _run(args: argparse.Namespace) -> int:
    from pipeline.commands.daemon import run_daemon

    registries = load_registries()
    path = args.config or default_config_path()
    config, _ = _load(args, registries)
    if config is None:
        return 1
    anyio.run(lambda: run_daemon(config, Path(path), registries, socket=args.socket, dry_run=args.dry_run))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from pipeline.commands.demo import run_demo

    logging.getLogger("batonpass").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    return anyio.run(lambda: run_demo(handoffs=args.handoffs, work_s=args.work_s, keep=args.keep))


def _adapter_for(args: argparse.Namespace, registries: Registries):
    from pipeline.engine.config import Tile
    from pipeline.engine.tiles import identify_agent
    from pipeline.plugin.agents import TileContext

    async def build():
        ctx = TileContext(name=args.pane, tile=Tile(pane=args.pane, agent=args.agent), tmux=_tmux(None, args.socket))
        kind = args.agent
        if kind == "auto":
            kind = identify_agent((await ctx.pane()).pid, registries.agents)
        return registries.agents.get(kind)(ctx)

    return build


def _send(args: argparse.Namespace) -> int:
    from pipeline.engine.stages.dispatch import type_prompt

    text = sys.stdin.read() if args.text == "-" else args.text
    build = _adapter_for(args, load_registries())

    async def send() -> int:
        adapter = await build()
        state = await adapter.target_state()
        if state in ("absent", "gone"):
            print(f"baton send: not typing into {args.pane}: it is {state} "
                  f"({'no ' + adapter.name + ' agent runs there' if state == 'absent' else 'no such pane'})",
                  file=sys.stderr)
            return 1
        confirmed, pane_id = await type_prompt(adapter, text)
        print(f"sent {len(text)} chars to {pane_id} ({adapter.name}): "
              f"{'the agent started a turn' if confirmed else 'typed; the agent did not show a new turn yet'}")
        return 0

    try:
        return anyio.run(send)
    except (TmuxError, ValueError) as exc:
        print(f"baton send: {exc}", file=sys.stderr)
        return 1


def _resolve(args: argparse.Namespace) -> int:
    build = _adapter_for(args, load_registries())

    async def resolve():
        adapter = await build()
        return adapter, await adapter.resolve()

    try:
        adapter, steps = anyio.run(resolve)
    except TmuxError as exc:
        print(f"baton resolve: {exc}", file=sys.stderr)
        return 1
    ok = all(s.ok for s in steps)
    if args.json:
        print(json.dumps({"pane": args.pane, "agent": adapter.name, "ok": ok,
                          "steps": [{"step": s.step, "ok": s.ok, "detail": s.detail, "value": s.value} for s in steps]},
                         indent=2, default=str))
    else:
        print(f"{args.pane}: agent {adapter.name}")
        for s in steps:
            print(f"  {'ok ' if s.ok else 'STOP'} {s.step:<12} {s.detail}")
    return 0 if ok else 1


def _up(args: argparse.Namespace) -> int:
    from pipeline.commands.up import bring_up

    config, _ = _load(args, load_registries())
    if config is None:
        return 1
    results = anyio.run(lambda: bring_up(config, _tmux(config, None)))
    for r in results:
        print(f"{r.tile:<14} {r.action:<10} {r.detail}")
    return 1 if any(r.action == "error" for r in results) else 0


def _status(args: argparse.Namespace) -> int:
    from pipeline.commands.status import tile_status

    registries = load_registries()
    config, _ = _load(args, registries)
    if config is None:
        return 1
    rows = anyio.run(lambda: tile_status(config, registries, _tmux(config, None)))
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    for r in rows:
        print(f"{r['tile']:<14} {r['pane_id'] or r['pane']:<8} {r['agent']:<9} pid {r['agent_pid'] or '-':<8} "
              f"{r['state']:<7} {r['last_response'] or ''}")
        for key in ("session", "transcript", "error"):
            if r.get(key):
                print(f"{'':<14} {key}: {r[key]}")
    return 0


def _extract(args: argparse.Namespace) -> int:
    registries = load_registries()
    options = {"session": args.session} if args.session else {}  # only stores of many sessions take it
    try:
        response = registries.agents.get(args.agent).extract_file(args.file, **options)
    except (LookupError, NotImplementedError, OSError) as exc:
        print(f"baton extract: {exc}", file=sys.stderr)
        return 1
    except TypeError:
        if not options:
            raise
        print(f"baton extract: --session is not an option for {args.agent} files", file=sys.stderr)
        return 1
    if response is None:
        print(f"baton extract: {args.file} holds no finished turn", file=sys.stderr)
        return 1
    if args.json:
        c = response.completion
        print(json.dumps({"text": response.text, "turn_id": c.turn_id, "outcome": c.outcome,
                          "source": response.source, "cwd": response.cwd}, ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(response.text if response.text.endswith("\n") else response.text + "\n")
    return 0


def _hooks_install(args: argparse.Namespace) -> int:
    registries = load_registries()
    kinds = [k for k, on in (("claude", args.claude), ("codex", args.codex)) if on] or ["claude", "codex"]
    status = 0
    for kind in kinds:
        try:
            print(registries.agents.get(kind).install_hooks([sys.executable, "-m", "pipeline.spool", kind]))
        except (NotImplementedError, OSError, ValueError) as exc:
            print(f"baton hooks install --{kind}: {exc}", file=sys.stderr)
            status = 1
    return status


def _preview(args: argparse.Namespace) -> int:
    from pipeline.commands.preview import PreviewError, preview_route

    registries = load_registries()
    config, _ = _load(args, registries)
    if config is None:
        return 1
    try:
        answer = (sys.stdin.read() if args.input == "-" else
                  Path(args.input).read_text(encoding="utf-8", errors="replace") if args.input else None)
    except OSError as exc:
        print(f"baton preview: cannot read --input {args.input}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        result = anyio.run(lambda: preview_route(config, registries, _tmux(config, None), args.route, answer,
                                                 dry_run=args.dry_run))
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
    import time as _time
    from dataclasses import asdict

    from pipeline.engine.journal import Journal, default_journal_path

    if not default_journal_path().exists():
        print("[]" if args.json else f"no hand-offs yet ({default_journal_path()} does not exist)")
        return 0
    journal = Journal()
    records = journal.history(args.limit)
    if args.json:
        print(json.dumps([asdict(r) for r in records], ensure_ascii=False, indent=2))
        return 0
    for r in records:
        when = _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(r.updated))
        why = r.last_error or r.note
        print(f"{when}  {r.route:<20} {r.turn_id[:28]:<28} hop {r.hop}  {r.state:<11} "
              f"{'x' + str(r.attempts) if r.attempts > 1 else '':<3} {why}")
    return 0


def _plugins(args: argparse.Namespace) -> int:
    pm = make_plugin_manager()
    registries = load_registries(pm)
    rows = []
    for kind, registry in (("agent", registries.agents), ("transform", registries.transforms)):
        for name in registry.names():
            cls = registry.get(name)
            rows.append({"kind": kind, "name": name, "from": registry.origin(name),
                         "summary": getattr(cls, "summary", "")})
    if args.json:
        print(json.dumps({"plugins": [pm.get_name(p) for p in pm.get_plugins()], "classes": rows}, indent=2))
    else:
        for r in rows:
            print(f"{r['kind']:<10} {r['name']:<12} {r['from']:<28} {r['summary']}")
        if os.environ.get("BATON_DISABLE_EXTERNAL_PLUGINS") == "1":
            print("(external plugins disabled by BATON_DISABLE_EXTERNAL_PLUGINS=1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
