"""routes.yaml as plain data that remembers where each value was written, and problems at those positions.

The loader composes the YAML node tree (which keeps line/column marks); :class:`Positions` builds the data
from it, noting what plain data cannot hold (a key written twice, a value no constructor makes, control
characters), and turns pydantic's errors into :class:`Problem` lines at the right ``FILE:LINE:COL``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from pydantic import ValidationError

__all__ = ["ConfigError", "Positions", "Problem", "dotted", "message", "pydantic_problems"]


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    col: int
    path: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}:{self.line}:{self.col}: {self.severity}: {where}{self.message}"


class ConfigError(Exception):
    """Raised by :func:`load_config` when any error was found; ``problems`` holds all of them."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class Positions:
    """Builds plain data from YAML nodes while remembering where each path was written."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.value_marks: dict[tuple[Any, ...], tuple[int, int]] = {}
        self.key_marks: dict[tuple[Any, ...], tuple[int, int]] = {}
        #: what the YAML says that plain data cannot hold: a key written twice, a value no constructor makes
        self.problems: list[Problem] = []
        self._loader = _loader()

    def build(self, node: yaml.Node, path: tuple[Any, ...]) -> Any:
        """Plain data for ``node``. Recursive: :func:`~pipeline.engine.yaml_text.compose_checked` has held
        the tree (aliases expanded) to MAX_DEPTH levels and ALIAS_BUDGET extra nodes."""
        here = (node.start_mark.line + 1, node.start_mark.column + 1)
        self.value_marks[path] = here
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self._key(key_node, path)
                if key is None:
                    continue
                at = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                if key in out:
                    first = self.key_marks[path + (key,)]
                    what = "tile" if path == ("tiles",) else "key"
                    self.problems.append(Problem(self.filename, *at, dotted(path + (key,)),
                                                 f"{what} {key!r} defined twice: at {first[0]}:{first[1]} "
                                                 f"and {at[0]}:{at[1]}"))
                    continue
                self.key_marks[path + (key,)] = at
                out[key] = self.build(value_node, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, path + (i,)) for i, child in enumerate(node.value)]
        try:
            value = self._loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            why = getattr(exc, "problem", None) or str(exc)
            self.problems.append(Problem(self.filename, *here, dotted(path),
                                         f"cannot read this value: {why}"))
            return None
        if isinstance(value, str) and (unsafe := _UNSAFE_TEXT.search(value)) is not None:
            odd = unsafe.group()
            self.problems.append(Problem(self.filename, *here, dotted(path),
                                         f"the value holds character U+{ord(odd):04X}, which is not text"))
        return value

    def _key(self, node: yaml.Node, path: tuple[Any, ...]) -> str | None:
        """A mapping key as a name (keys are names in routes.yaml); None, with a problem, when it is not
        one."""
        at = (node.start_mark.line + 1, node.start_mark.column + 1)
        if not isinstance(node, yaml.ScalarNode):
            kind = "mapping" if isinstance(node, yaml.MappingNode) else "list"
            self.problems.append(Problem(self.filename, *at, dotted(path),
                                         f"a key must be a name, not a {kind}"))
            return None
        if node.tag == "tag:yaml.org,2002:merge":
            self.problems.append(Problem(self.filename, *at, dotted(path),
                                         "YAML merge keys (<<) are not supported; write the keys out"))
            return None
        if _UNSAFE_TEXT.search(node.value) or "\n" in node.value or "\t" in node.value:
            self.problems.append(Problem(self.filename, *at, dotted(path),
                                         f"the key {node.value!r} holds a control character"))
            return None
        return node.value

    def mark(self, path: Iterable[Any], *, key: bool = False) -> tuple[int, int]:
        path = tuple(path)
        if key and path in self.key_marks:
            return self.key_marks[path]
        while path:
            if path in self.value_marks:
                return self.value_marks[path]
            path = path[:-1]
        return self.value_marks.get((), (1, 1))

    def problem(self, path: Iterable[Any], message: str, *, key: bool = False,
                severity: Literal["error", "warning"] = "error") -> Problem:
        path = tuple(path)
        line, col = self.mark(path, key=key)
        return Problem(self.filename, line, col, dotted(path), message, severity)


#: a string value may hold newlines and tabs (a template), never other controls, NUL or lone surrogates
_UNSAFE_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff]")


def _loader() -> yaml.SafeLoader:
    return yaml.SafeLoader("")


def dotted(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_ALIASES = {"from_": "from"}


def pydantic_problems(exc: ValidationError, positions: Positions) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = [_ALIASES.get(p, p) if isinstance(p, str) else p for p in err["loc"]]
        # a union (str | dict) reports one error per member; the first member's branch name is noise
        loc = [p for p in loc if p not in ("str", "dict[str,any]", "function-after[...]")]
        # a route end's shape (pipeline.engine.config: one tile, a list, a choice) is a tag, not a key
        if len(loc) > 2 and loc[0] == "routes" and loc[2] in ("from", "to") and len(loc) > 3:
            loc = [*loc[:3], *loc[4:]] if loc[3] in ("one", "list", "choice") else loc
        kind = err["type"]
        if kind == "extra_forbidden":
            problems.append(positions.problem(loc, f"unknown key {loc[-1]!r}", key=True))
        elif kind == "missing":
            parent = loc[:-1]
            problems.append(Problem(positions.filename, *positions.mark(parent), dotted(loc),
                                    f"missing required key {loc[-1]!r}"))
        elif kind == "literal_error" and loc == ["version"]:
            problems.append(positions.problem(loc, "unsupported version; this batonpass reads version 1"))
        else:
            problems.append(positions.problem(loc, message(err)))
    # str | dict unions repeat the same position for each member; keep one message per path
    seen: set[str] = set()
    unique = []
    for p in problems:
        if p.path not in seen or not p.path.endswith("transform"):
            unique.append(p)
        seen.add(p.path)
    return unique


def message(err: Any) -> str:
    return str(err["msg"]).removeprefix("Value error, ")
