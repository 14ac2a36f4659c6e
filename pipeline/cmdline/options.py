"""Argument types and the options every ``baton`` subcommand shares.

A bad value is refused by argparse itself, so it ends as one line (``baton: error: argument -n: ...``) with
exit status 2 before any command runs. The shared options (``-L``, ``-S``, ``-c``, ``-v``) are added to the
top-level parser *and* to every subcommand, with ``SUPPRESS`` defaults in the subcommands, so they work
anywhere on the line (``baton -v status`` and ``baton status -v`` alike) and a later one wins.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, NoReturn

from pipeline.system.text import MAX_TEXT_BYTES

__all__ = [
    "MAX_INPUT_BYTES",
    "InputTooLarge",
    "OneLineParser",
    "add_common",
    "bounded_float",
    "bounded_int",
    "non_blank_path",
    "check_size",
    "name_value",
    "non_blank",
    "pane_target",
    "parse_since",
    "read_input",
]

#: the most text ``baton send`` / ``baton preview --input`` take: what batonpass types in one piece
MAX_INPUT_BYTES = MAX_TEXT_BYTES


class InputTooLarge(ValueError):
    """More text than batonpass types into a pane."""


def read_input(stream: IO[bytes] | IO[str], what: str) -> str:
    """At most :data:`MAX_INPUT_BYTES` from ``stream``, decoded as UTF-8 (bad bytes replaced); more is an
    error, found after reading one byte past the limit, never the whole stream. A text stream (no
    ``.buffer``, as under a test's captured stdin) is read the same way."""
    raw = getattr(stream, "buffer", stream)
    data = raw.read(MAX_INPUT_BYTES + 1)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    check_size(len(data), what)
    return data.decode("utf-8", "replace")


def check_size(size: int, what: str) -> None:
    if size > MAX_INPUT_BYTES:
        raise InputTooLarge(
            f"{what} is over {MAX_INPUT_BYTES // (1024 * 1024)} MB ({MAX_INPUT_BYTES} bytes); "
            "nothing was typed"
        )


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on standard error (``baton demo: error: argument ...; see baton demo -h``),
    exit status 2: the usage block is in ``-h``, not in front of every mistake.

    argparse reads any word that starts with ``-`` as an option, so ``--since -5m`` would be "expected one
    argument" instead of the option's own word on it. A value that starts with ``-`` and a digit can be no
    option of ``baton``, so it is joined to the option before argparse looks (``--since=-5m``, which
    ``--since`` then refuses in its own words); any other such value is named in the error, with the way to
    write it."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._words = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(_join_dash_digits(self, self._words), namespace)
        if extras and self.prog != _top(self.prog):  # said by this command, not by "baton" after it returns
            self.error(_unrecognized(self, extras))
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        message = _with_dash_hint(message, getattr(self, "_words", []))
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} -h\n")


#: a word that argparse would take for an option but no option of baton looks like: ``-5m``, ``-1e3``
_DASH_DIGIT = re.compile(r"-\.?\d")


def _top(prog: str) -> str:
    return prog.split(" ", 1)[0]


def _takes_a_value(parser: argparse.ArgumentParser, word: str) -> bool:
    action = parser._option_string_actions.get(word)
    return action is not None and action.nargs is None and action.option_strings != []


def _join_dash_digits(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """``--since -5m`` as ``--since=-5m``, up to a ``--`` (after it every word is a value anyway)."""
    joined: list[str] = []
    rest = iter(enumerate(words))
    for i, word in rest:
        if word == "--":
            return joined + words[i:]
        following = words[i + 1] if i + 1 < len(words) else ""
        if _takes_a_value(parser, word) and _DASH_DIGIT.match(following):
            joined.append(f"{word}={following}")
            next(rest)
        else:
            joined.append(word)
    return joined


def _unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """``unrecognized arguments: --jsn (did you mean --json?)``."""
    known = [s for s in parser._option_string_actions if s.startswith("--")]
    guesses = [(w, difflib.get_close_matches(w, known, 1, 0.75)) for w in extras]
    return "unrecognized arguments: " + " ".join(f"{w} (did you mean {close[0]}?)" if close else w
                                                 for w, close in guesses)


def _with_dash_hint(message: str, words: list[str]) -> str:
    """argparse's error, with the word it took for an option named when that is what went wrong."""
    expected = re.fullmatch(r"argument (\S+): expected one argument", message)
    if expected:
        names = expected.group(1).split("/")
        at = max((i for i, w in enumerate(words) if w in names), default=None)
        value = words[at + 1] if at is not None and at + 1 < len(words) else ""
        if value.startswith("-"):
            option = words[at] if at is not None else names[-1]
            return (f"argument {expected.group(1)}: {value!r} reads as an option, not as its value: "
                    f"write {option}={value} for a value that starts with -")
        return f"argument {expected.group(1)}: expected a value after it"
    explicit = re.fullmatch(r"argument (\S+): ignored explicit argument '(.*)'", message)
    dashed = [w for w in words if w.startswith("-") and w != "--"]
    if explicit:
        word = next((w for w in dashed if w.endswith(explicit.group(2))), explicit.group(2))
        if "=" in word:  # --json=yes
            return f"argument {explicit.group(1)} takes no value ({word})"
        return (f"{word!r} reads as options, not as a value: a value that starts with - goes after --, "
                f"as in -- {word}")
    if message.startswith("the following arguments are required") and dashed:
        return (f"{message} (a value that starts with - goes after --, as in -- {dashed[-1]}: "
                f"{dashed[-1]!r} read as an option)")
    return message


def non_blank(what: str) -> Callable[[str], str]:
    """A string argument that must hold something besides whitespace."""

    def check(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"{what} is empty")
        if "\x00" in value:
            raise argparse.ArgumentTypeError(f"{what} holds a NUL byte")
        return value

    return check


def non_blank_path(what: str) -> Callable[[str], Path]:
    """A file argument that must be named: an empty one would be read as ``.`` (this folder)."""
    check = non_blank(what)

    def path(value: str) -> Path:
        try:
            return Path(check(value))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{what} is empty: name the file") from None

    return path


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


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """A whole number from ``low`` to ``high``: every numeric flag has both bounds, so an absurd value
    (``-n 99999999999999999999999``) is a usage error here, not an overflow in whatever it reaches."""

    def check(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            if value.strip().lstrip("+-").isdigit():  # more than the 4300 digits int() reads
                raise argparse.ArgumentTypeError(
                    f"{_shown(value)} is out of range ({_range(low, high)})") from None
            raise argparse.ArgumentTypeError(f"{_shown(value, quote=True)} is not a whole number") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"{_shown(value)} is out of range ({_range(low, high)})")
        return number

    return check


def bounded_float(low: float, high: float) -> Callable[[str], float]:
    """A number from ``low`` to ``high`` (``nan`` and ``inf`` are neither)."""

    def check(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(value, quote=True)} is not a number") from None
        if not low <= number <= high:  # also refuses nan
            raise argparse.ArgumentTypeError(f"{_shown(value)} is out of range ({_range(low, high)})")
        return number

    return check


def _shown(value: str, width: int = 24, *, quote: bool = False) -> str:
    """A value as an error names it: whole when short, its start and length when it is not (one line)."""
    short = value.strip() if len(value.strip()) <= width else f"{value.strip()[:width]}…"
    shown = repr(short) if quote else short
    return shown if short == value.strip() else f"{shown} ({len(value.strip())} characters)"


def _range(low: float, high: float) -> str:
    return f"{low} to {high}"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: a duration ago: a number and its unit
_AGO = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


def parse_since(value: str) -> float:
    """``--since``: ``90s``, ``10m``, ``2h``, ``1d`` ago, or an ISO time (``2026-03-01T14:00``, local time
    unless it names its zone). Returns epoch seconds; argparse turns the error into a usage error (exit 2).
    A duration with a sign (``-2h``) is refused, not read as ``2h``: a duration already counts back from now,
    and ``+2h``/``-2h`` could as well mean the future. So is one that reaches back before 1970 (the epoch):
    no journal holds anything older, and it is a mistake."""
    value = value.strip()
    shown = value if len(value) <= 24 else f"{value[:24]}… ({len(value)} characters)"
    if value[:1] in "+-" and _AGO.fullmatch(value[1:].strip()):
        raise argparse.ArgumentTypeError(f"{shown} is not a duration: a duration counts back from now by "
                                         f"itself; write {value[1:].strip()}")
    ago = _AGO.fullmatch(value)
    if ago:
        since = time.time() - float(ago.group(1)) * _UNITS[ago.group(2)]
        if since < 0:
            raise argparse.ArgumentTypeError(f"{shown} reaches back before 1970 (no journal is that old): "
                                             "give a shorter one")
        return since
    try:
        return datetime.fromisoformat(value).timestamp()
    except (ValueError, OverflowError, OSError):  # not a time; or one the platform cannot count (year 1)
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither a duration (10m, 2h, 1d) nor an ISO time (2026-03-01T14:00)"
        ) from None


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
        type=non_blank_path("-c"),
        default=default(None),
        help="routes.yaml (default ./routes.yaml, then $XDG_CONFIG_HOME/batonpass/routes.yaml)",
    )
    group.add_argument("-v", "--verbose", action="store_true", default=default(False), help="debug logging")
