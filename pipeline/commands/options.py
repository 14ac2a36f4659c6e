"""Argument types and the options every ``baton`` subcommand shares.

A bad value is refused by argparse itself, so it ends as one line (``baton: error: argument -n: ...``) with
exit status 2 before any command runs. The shared options (``-L``, ``-S``, ``-c``, ``-v``) are added to the
top-level parser *and* to every subcommand, with ``SUPPRESS`` defaults in the subcommands, so they work
anywhere on the line (``baton -v status`` and ``baton status -v`` alike) and a later one wins.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

__all__ = [
    "MAX_INPUT_BYTES",
    "OneLineParser",
    "add_common",
    "bounded_float",
    "bounded_int",
    "name_value",
    "non_blank",
    "pane_target",
]

#: the most text ``baton send`` / ``baton preview --input`` take: far above any agent's answer, far below
#: what would make tmux or a terminal stall
MAX_INPUT_BYTES = 8 * 1024 * 1024


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on standard error (``baton demo: error: argument ...; see baton demo -h``),
    exit status 2: the usage block is in ``-h``, not in front of every mistake."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} -h\n")


def non_blank(what: str) -> Callable[[str], str]:
    """A string argument that must hold something besides whitespace."""

    def check(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"{what} is empty")
        if "\x00" in value:
            raise argparse.ArgumentTypeError(f"{what} holds a NUL byte")
        return value

    return check


def pane_target(value: str) -> str:
    """A pane: ``%N``, ``session:window.pane`` or ``title:NAME``. tmux reads an empty target as "the
    current pane", which is never the pane a person meant, so a blank one is refused here already."""
    value = non_blank("the pane")(value)
    if value != value.strip():
        raise argparse.ArgumentTypeError(f"the pane {value!r} has spaces around it")
    if value == "title:":
        raise argparse.ArgumentTypeError("title: needs a title after it (title:NAME)")
    return value


def name_value(what: str) -> Callable[[str], tuple[str, str]]:
    """A ``NAME=VALUE`` argument (an option handed on to a plugin), as the pair."""

    def check(value: str) -> tuple[str, str]:
        name, eq, rest = non_blank(what)(value).partition("=")
        if not eq or not name.strip():
            raise argparse.ArgumentTypeError(f"{what} takes NAME=VALUE, not {value!r}")
        return name.strip(), rest

    return check


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    def check(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
        if number < low or (high is not None and number > high):
            raise argparse.ArgumentTypeError(f"{number} is out of range ({_range(low, high)})")
        return number

    return check


def bounded_float(low: float, high: float) -> Callable[[str], float]:
    def check(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
        if not low <= number <= high:  # also refuses nan
            raise argparse.ArgumentTypeError(f"{value} is out of range ({_range(low, high)})")
        return number

    return check


def _range(low: float, high: float | None) -> str:
    return f"at least {low}" if high is None else f"{low} to {high}"


def add_common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The options every command takes. ``top``: the top-level parser, which holds the defaults."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    group = parser.add_argument_group("common options (anywhere on the line)")
    group.add_argument(
        "-L",
        dest="socket",
        metavar="NAME",
        type=non_blank("the socket name"),
        default=default(None),
        help="tmux socket name, like tmux -L (default: routes.yaml's tmux.socket_name, "
        "else the server of $TMUX, else tmux's default)",
    )
    group.add_argument("-S", dest="socket_path", metavar="PATH", type=non_blank("the socket path"),
                       default=default(None), help="tmux socket path, like tmux -S")
    group.add_argument(
        "-c",
        "--config",
        type=Path,
        default=default(None),
        help="routes.yaml (default ./routes.yaml, then $XDG_CONFIG_HOME/batonpass/routes.yaml)",
    )
    group.add_argument("-v", "--verbose", action="store_true", default=default(False), help="debug logging")
