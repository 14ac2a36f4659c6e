"""The ``baton`` command. Thin: parse arguments, call into pipeline.commands, print, choose the exit status.

Exit statuses: 0 done; 1 the command failed (every reason printed as one line, never a traceback); 2 bad
usage (argparse); 3 ``status`` found none of the tiles; 130 interrupted (``demo``: 128 + the signal that
stopped it).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable
from typing import Any

from pipeline.cmdline.examples import ExamplesFormatter, epilog
from pipeline.cmdline.options import (
    OneLineParser,
    add_common,
    bounded_float,
    bounded_int,
    name_value,
    non_blank,
    non_blank_path,
    pane_target,
    parse_since,
)
from pipeline.cmdline.output import quiet_stdout
from pipeline.engine.hosts import NO_BUS_CLIENT, no_bus_client
from pipeline.engine.journal import STATES
from pipeline.plugin.registry import UnknownName
from pipeline.system.logs import setup_logging
from pipeline.system.tmux import TmuxError

__all__ = ["MAX_LIMIT", "main"]

#: how an action ended, in ``baton history``
ACTION_OUTCOMES = ("done", "refused", "started")
#: the commands that run on and log what happens as it happens; the others say their outcome themselves
EVENT_COMMANDS = ("run", "bus", "demo")
#: the most hand-offs ``history -n`` shows: more than a month of a busy daemon's journal holds
MAX_LIMIT = 1_000_000


def _actions(parser: argparse.ArgumentParser) -> list[str]:
    """The actions of a command that has them (``baton hooks install``)."""
    return [name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices]


def main(argv: list[str] | None = None) -> int:
    try:
        parser = _parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:  # Ctrl-C as baton starts
        return 130
    setup_logging(args.verbose)
    if not args.verbose and getattr(args, "command", None) not in EVENT_COMMANDS:
        # what an adapter finds while a one-shot command looks (a rollout, a session file) is `run`'s news
        # (resolve lists it as a step): warnings only, the rest with -v
        logging.getLogger("batonpass").setLevel(logging.WARNING)
    if not getattr(args, "func", None):
        if (named := getattr(args, "help_of", None)) is not None:  # `baton hooks`: the action is missing
            named.error(f"which action? usage: {named.prog} ACTION, one of: {', '.join(_actions(named))}")
        parser.print_help()
        return 2
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """The command, its user errors each said in one line (the bus's missing client: how to install it)."""
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `baton plugins | head -3`: the reader has what it wanted
        quiet_stdout()
        return 0
    except (TmuxError, UnknownName, ModuleNotFoundError) as exc:
        if isinstance(exc, ModuleNotFoundError) and not no_bus_client(exc):
            raise
        print(f"baton {args.command}: {_said(exc)}", file=sys.stderr)
        return 1
    except BaseExceptionGroup as group:  # from a task group (run): the same errors, one line each
        user_errors, rest = group.split(lambda e: isinstance(e, TmuxError | UnknownName) or no_bus_client(e))
        if rest is not None or user_errors is None:
            raise
        for message in dict.fromkeys(_said(e) for e in _leaves(user_errors)):
            print(f"baton {args.command}: {message}", file=sys.stderr)
        return 1


def _said(exc: BaseException) -> str:
    return NO_BUS_CLIENT if no_bus_client(exc) else str(exc)


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    return [leaf for exc in group.exceptions
            for leaf in (_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])]


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """The handler ``NAME_command`` of ``pipeline.commands.NAME`` (``module:function`` when they differ),
    imported only when that command runs: each command pays the start-up of its own imports only."""
    module, _, function = name.partition(":")

    def run(args: argparse.Namespace) -> int:
        handler: Callable[[argparse.Namespace], int] = getattr(
            importlib.import_module(f"pipeline.commands.{module}"), function or f"{module}_command")
        return handler(args)

    return run


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("batonpass")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="baton", description="Pass the baton between AI coding agents in tmux panes.",
                      epilog=epilog(""), formatter_class=ExamplesFormatter)
    p.add_argument("--version", action="version", version=f"baton {_version()}")
    add_common(p, top=True)
    sub = p.add_subparsers(metavar="COMMAND")

    def cmd(
        name: str,
        func: Callable[[argparse.Namespace], int] | None,
        help: str,
        parent: argparse._SubParsersAction[Any] = sub,
    ) -> argparse.ArgumentParser:
        sp = parent.add_parser(name, help=help, description=help, formatter_class=ExamplesFormatter)
        sp.epilog = epilog(sp.prog.partition(" ")[2])
        sp.set_defaults(func=func, command=name)
        add_common(sp, top=False)
        return sp

    def host_flag(sp: argparse.ArgumentParser, verb: str) -> None:
        sp.add_argument("--host", type=non_blank("--host"), default=None,
                        help=f"{verb} the tiles of this host (default: this machine's host name)")

    def json_flag(sp: argparse.ArgumentParser, what: str) -> None:
        sp.add_argument("--json", action="store_true", help=f"{what} as JSON")

    sp = cmd("run", _command("run"), "the routing daemon, in the foreground")
    sp.description = (
        "the routing daemon, in the foreground (Ctrl-C ends it, status 0). Started before tmux, or while a "
        "tile's pane is missing, it keeps running and says so: each tile is followed once its pane is there, "
        "and hand-offs to it are kept until then (settings.give_up_s)")
    sp.add_argument("--dry-run", action="store_true",
                    help="print prompts instead of typing them; decides from a copy of the journal (what "
                    "a running daemon handed off is not handed again), writes nothing to it")
    sp.add_argument("--host", type=non_blank("--host"), default=None,
                    help="run the tiles of this host (default: this machine's host name)")

    sp = cmd("bus", _command("bus"), "start a local nats-server with JetStream (in "
             "$XDG_STATE_HOME/batonpass/bus) for routes that cross hosts")
    sp.add_argument("--listen", default="127.0.0.1", type=non_blank("--listen"),
                    help="the address to listen on (default 127.0.0.1; 0.0.0.0 for other machines)")
    sp.add_argument("--port", type=bounded_int(1, 65535), default=4222, help="the client port (default 4222)")
    sp.add_argument("--name", default=None, type=non_blank("--name"),
                    help="the server's name (default: batonpass-HOSTNAME)")

    sp = cmd("check", _command("check"), "validate routes.yaml; exit 0 if valid, 1 if not")
    json_flag(sp, "the verdict and every problem")
    sp.add_argument("--graph", action="store_true",
                    help="print the tiles and routes as a Mermaid flowchart (GitHub and editors draw it)")

    sp = cmd("demo", _command("demo"),
             "a self-contained demo on real tmux panes (no API key, no agents needed)")
    sp.add_argument("--handoffs", type=bounded_int(1, 100), default=4,
                    help="stop after this many hand-offs, 1 to 100 (default 4)")
    # a turn over before batonpass sees it start is no turn an agent takes: at 0 the demo lost hand-offs
    sp.add_argument("--work-s", type=bounded_float(0.1, 10.0), default=1.0,
                    help="how long each demo turn works, 0.1 to 10 seconds (default 1.0)")
    sp.add_argument("--keep", action="store_true", help="leave the demo's tmux server running")
    sp.add_argument("--ask", action="store_true",
                    help="the first turn asks permission first (its prompt holds NEEDS_APPROVAL), as a "
                         "real agent's permission prompt does: answer it with the baton approve (or deny) "
                         "line the demo prints, or with Approve/Deny in baton web")

    target_help = "a tile's name (routes.yaml), or a pane: %%N, session:window.pane or title:NAME"
    sp = cmd("send", _command("send"), "hand text to a tile's agent exactly as the dispatcher "
             "does: refused (exit 1, nothing typed) when the pane is gone, busy, holds a draft or runs no "
             "agent of the kind expected")
    sp.add_argument("pane", type=pane_target, help=target_help)
    sp.add_argument("text", help="the text (up to 8 MB), or - to read standard input")
    sp.add_argument("--agent", default="auto", type=non_blank("--agent"),
                    help="the agent expected in a pane no tile declares (default: found from its process "
                    "tree; a pane with no agent is refused); a tile's pane expects the tile's agent")
    sp.add_argument("--wait", type=bounded_float(0.0, 86400.0), default=0.0, metavar="SECONDS",
                    help="wait up to SECONDS while the agent is busy or holds a draft, as the dispatcher "
                    "does (default 0: refuse at once)")
    sp.add_argument("--force", action="store_true",
                    help="type even when the pane runs no agent of the kind expected: types into whatever "
                    "program runs in the pane (a shell runs the text as a command)")

    tile_help = "a tile's name in routes.yaml (one of another host goes over the bus to that host's daemon)"
    sp = cmd("approve", _command("approve"), "answer the permission prompt on a tile's screen: allow it once "
             "(exit 1, nothing typed, when no prompt shows)")
    sp.add_argument("tile", type=non_blank("the tile"), help=tile_help)
    sp = cmd("deny", _command("deny"), "answer the permission prompt on a tile's screen: refuse it "
             "(exit 1, nothing typed, when no prompt shows)")
    sp.add_argument("tile", type=non_blank("the tile"), help=tile_help)
    sp = cmd("retry", _command("retry"), "type a failed hand-off again, with baton send's checks, once")
    sp.add_argument("handoff", type=non_blank("the hand-off"),
                    help="the hand-off's key (baton history --outcome failed --json shows it)")
    sp = cmd("hold", _command("hold"), "keep a route's hand-offs queued (held) until baton resume; the "
             "running daemon honours it")
    sp.add_argument("route", type=non_blank("the route"), help="the route's name, or FROM->TO")
    sp = cmd("resume", _command("resume"), "let a held route's queued hand-offs go, each once")
    sp.add_argument("route", type=non_blank("the route"), help="the route's name, or FROM->TO")
    gated_help = "the hand-off's key (baton history --outcome awaiting --json shows it)"
    sp = cmd("pass", _command("pass"), "let a hand-off awaiting a person (gate: person) go: "
             "the running daemon types it once its tile is ready (exit 1, nothing changed, when it is not "
             "awaiting)")
    sp.add_argument("handoff", type=non_blank("the hand-off"), help=gated_help)
    sp.add_argument("--text", default=None, metavar="TEXT|-",
                    help="type this prompt instead of the hand-off's own (- reads it from standard input); "
                    "the edit is journaled")
    sp = cmd("drop", _command("drop"), "discard a hand-off awaiting a person (gate: person): it is never "
             "typed (exit 1, nothing changed, when it is not awaiting)")
    sp.add_argument("handoff", type=non_blank("the hand-off"), help=gated_help)

    sp = cmd("resolve", _command("resolve"),
             "run the resolution chain for one tile's pane (or any pane) and show every step")
    sp.add_argument("pane", type=pane_target, metavar="TILE|PANE", help=target_help)
    sp.add_argument("--agent", default="auto", type=non_blank("--agent"),
                    help="read the pane with this agent's adapter (default: the tile's agent, else found "
                    "from the pane's process tree)")
    json_flag(sp, "the steps")

    sp = cmd("up", _command("up"), "create the panes of tiles that declare a command, and start their agents")
    sp.description = (
        "create the panes of tiles that declare a command, and start their agents: a title:NAME pane "
        "anywhere, a session:window.pane one only as the next pane of its window (else it says which address "
        "to write); a pane already there is left alone, one whose command exited is started again; a command "
        "that ends within a second is reported exited, with its status and its last line")
    host_flag(sp, "bring up")

    sp = cmd("status", _command("status"), "per tile: pane, agent, agent PID, state, session, transcript, "
             "last answer (exit 3 when no tile's pane exists)")
    json_flag(sp, "one object per tile")
    sp.add_argument("--all-hosts", action="store_true", help="every host's tiles, from the bus")
    host_flag(sp, "show")
    sp.add_argument("--watch", action="store_true",
                    help="a live board in the terminal, redrawn as agents work: state and why, last answer, "
                    "queued and last hand-off, tokens and cost (q quits)")

    sp = cmd("web", _command("web"), "the live board in a browser, with approve, deny, send, retry, hold and "
             "resume: prints its URL (with the token it needs) and serves until Ctrl-C")
    sp.add_argument("--port", type=bounded_int(0, 65535), default=8765,
                    help="the port (default 8765; 0: any free one)")
    sp.add_argument("--host", default="127.0.0.1", type=non_blank("--host"),
                    help="the address to listen on (default 127.0.0.1; another needs --public)")
    sp.add_argument("--public", action="store_true",
                    help="allow an address other machines reach (put TLS in front of it)")

    sp = cmd("extract", _command("extract"),
             "print the last finished turn's answer from a transcript or rollout file")
    sp.add_argument("file", type=non_blank_path("FILE"))
    sp.add_argument("--agent", type=non_blank("--agent"),
                    help="whose file it is: any registered agent that reads files (default: the agent "
                    "whose file it looks like — a Claude Code transcript, a Codex rollout, an OpenCode "
                    "store, a demo transcript — else claude)")
    sp.add_argument("--session", metavar="ID", type=non_blank("--session"),
                    help="a store holding several sessions (opencode): which one (= --option session=ID)")
    sp.add_argument("-o", "--option", metavar="NAME=VALUE", action="append", default=[],
                    type=name_value("--option"), help="an option of that agent's files (its ExtractOptions)")
    json_flag(sp, "the answer, its turn id, outcome and source")

    sp = cmd("hooks", None, "the agents' own completion hooks")
    hooks = sp.add_subparsers(metavar="ACTION")
    sp.set_defaults(help_of=sp)
    hp = cmd("install", _command("hooks:install_command"), "add the agents' completion hooks (Claude "
             "Code's Stop hook, Codex's notify, Gemini's AfterAgent, Copilot's agentStop, a plugin's own), "
             "pointing at batonpass", parent=hooks)
    hp.set_defaults(command="hooks install")
    hp.add_argument("--agent", metavar="NAME", dest="agents", action="append", default=[],
                    type=non_blank("--agent"),
                    help="this agent's hooks (repeatable; default: every agent that has hooks)")
    hp.add_argument("--claude", dest="agents", action="append_const", const="claude", help="= --agent claude")
    hp.add_argument("--codex", dest="agents", action="append_const", const="codex", help="= --agent codex")

    sp = cmd("preview", _command("preview"), "print what a route would hand on for an answer (default: the "
             "source tile's last answer); exit 1 when the route would not fire")
    sp.add_argument("route", type=non_blank("the route"), help="the route's name, or FROM->TO")
    sp.add_argument("--input", metavar="FILE", type=non_blank("--input"),
                    help="the answer (up to 8 MB): a file, or - for standard input")
    sp.add_argument("--dry-run", action="store_true",
                    help="AI transforms: print the request that would be sent instead of calling the model")
    json_flag(sp, "the text (or why the route would not fire) and the notes")

    sp = cmd("history", _command("history"), "the hand-off journal: when, route, turn, hop, outcome, and "
             "why;\nand the actions people took (approve, deny, send, retry, hold, resume)")
    json_flag(sp, "the hand-offs, one object per line")
    sp.add_argument("-n", "--limit", type=bounded_int(1, MAX_LIMIT), default=50,
                    help=f"how many of the latest hand-offs, 1 to {MAX_LIMIT} (default 50)")
    sp.add_argument("--all-hosts", action="store_true", help="every host's hand-offs, from the bus")
    sp.add_argument("--route", type=non_blank("--route"),
                    help="only this route's hand-offs: its name, or FROM->TO (any route between those tiles)")
    sp.add_argument("--tile", type=non_blank("--tile"), help="only hand-offs from or to this tile")
    sp.add_argument("--outcome", choices=(*STATES, *ACTION_OUTCOMES), metavar="OUTCOME",
                    help=f"only hand-offs in this state: {', '.join(STATES)}; actions: "
                    f"{', '.join(ACTION_OUTCOMES)}")
    sp.add_argument("--since", type=parse_since, metavar="WHEN",
                    help="only hand-offs made since: 30s, 10m, 2h, 1d ago (no sign: a duration counts "
                    "back), or an ISO time (2026-03-01T14:00)")
    sp.add_argument("--refused", action="store_true",
                    help="also the actions refused before they changed anything (a typo's baton hold NOSUCH)")
    sp.add_argument("-f", "--follow", action="store_true",
                    help="keep printing hand-offs as the journal records them (Ctrl-C ends it)")
    sp.formatter_class = argparse.RawDescriptionHelpFormatter

    sp = cmd("plugins", _command("plugins"),
             "loaded agent adapters and transforms, and where each comes from")
    json_flag(sp, "the plugins and their classes")
    return p


if __name__ == "__main__":
    sys.exit(main())
