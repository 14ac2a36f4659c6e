"""routes.yaml v1: pydantic models, and a loader that reports every problem at its YAML position.

The loader composes the YAML node tree (which keeps line/column marks), builds the data, validates it
with pydantic, validates each route's transform options with that transform's own ``Options`` model, and
runs the graph checks. Problems are collected, never raised one at a time, and print as
``FILE:LINE:COL: error: DOTTED.PATH: message`` — all of them in one run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pipeline.engine.hosts import BusSettings, crossing_problems, tile_host
from pipeline.engine.notify_config import NotifyTarget
from pipeline.engine.yaml_text import (
    NESTED_TOO_DEEP,
    TextProblem,
    check_text,
    compose_checked,
    decode_checked,
    read_checked,
)
from pipeline.plugin.registry import UnknownName
from pipeline.plugin.settings import SectionT
from pipeline.system.jsonl import json_list, json_object

__all__ = [
    "Config",
    "ConfigError",
    "Problem",
    "Route",
    "Settings",
    "Tile",
    "default_config_path",
    "load_config",
    "parse_config",
]

DEFAULT_MAX_HOPS = 6


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class TmuxSettings(Strict):
    socket_name: str | None = Field(default=None, description="like `tmux -L NAME`")


class Tile(Strict):
    pane: str = Field(description="%N, session:window.pane, or title:NAME")
    agent: str = "auto"
    command: str | None = None
    cwd: str | None = None
    description: str = ""
    #: the machine whose ``baton run`` follows this tile (none: the machine baton run runs on)
    host: str | None = None

    @field_validator("pane")
    @classmethod
    def _named_pane(cls, pane: str) -> str:
        # tmux reads an empty target as "the current pane": prompts would be typed into a pane nobody named
        if not pane.strip() or not pane.removeprefix("title:").strip():
            raise ValueError("the pane is empty; name it %N, session:window.pane or title:NAME")
        if pane != pane.strip():
            raise ValueError(f"the pane {pane!r} has spaces around it")
        return pane


class Route(Strict):
    name: str | None = None
    from_: str = Field(alias="from")
    to: str
    on: Literal["completed", "failed", "any"] = "completed"
    match: str | None = None
    transform: str | dict[str, Any] = "raw"
    #: at most this many hand-offs typed in any hour; more are held (kept) until the hour allows them.
    #: None: ``settings.max_per_hour``
    max_per_hour: int | None = Field(default=None, gt=0, strict=True)

    @property
    def label(self) -> str:
        return self.name or f"{self.from_}->{self.to}"

    @property
    def transform_type(self) -> str:
        return self.transform if isinstance(self.transform, str) else str(self.transform.get("type", ""))

    @property
    def transform_options(self) -> dict[str, Any]:
        return (
            {}
            if isinstance(self.transform, str)
            else {k: v for k, v in self.transform.items() if k != "type"}
        )


# numbers are strict: `true` or "600" is a mistake in routes.yaml, not the number 1 or 600
class Settings(BaseModel):
    """The engine's settings; any other key is a plugin's own section (``register_settings``), checked
    by the loader with that plugin's model and read by the plugin with :meth:`section`."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    max_hops: int | None = Field(default=None, ge=0, strict=True)
    #: every route's rate limit unless the route sets its own (None: no limit)
    max_per_hour: int | None = Field(default=None, gt=0, strict=True)
    catch_up_s: float = Field(default=300, ge=0, allow_inf_nan=False, strict=True)
    #: how long a hand-off to a missing pane or exited agent is kept and retried before it fails
    give_up_s: float = Field(default=600, gt=0, allow_inf_nan=False, strict=True)
    #: the NATS servers joining hosts (only needed when a route crosses hosts)
    bus: BusSettings | None = None
    #: where to tell a person that a tile waits for them, a hand-off was kept or failed, a loop stopped
    notify: list[NotifyTarget] = []

    @property
    def hop_limit(self) -> int:
        return DEFAULT_MAX_HOPS if self.max_hops is None else self.max_hops

    def section(self, model: type[SectionT]) -> SectionT:
        """A plugin's own section, ``settings.<model.section>``, read with its model (the model's defaults
        when routes.yaml has none)."""
        raw = (self.model_extra or {}).get(model.section)
        return raw if isinstance(raw, model) else model.model_validate(raw or {})


class Config(Strict):
    version: Literal[1]
    tmux: TmuxSettings = TmuxSettings()
    tiles: dict[str, Tile]
    routes: list[Route] = []
    settings: Settings = Settings()
    #: where the config was read from (not part of the YAML)
    path: str = Field(default="<memory>", exclude=True)

    def routes_from(self, tile: str) -> list[Route]:
        return [r for r in self.routes if r.from_ == tile]

    def rate_limits(self) -> dict[str, int]:
        """Each rate-limited route's ``max_per_hour`` (its own, else ``settings.max_per_hour``), by label."""
        limits = {r.label: r.max_per_hour or self.settings.max_per_hour for r in self.routes}
        return {label: n for label, n in limits.items() if n is not None}

    def tiles_on(self, host: str) -> dict[str, Tile]:
        """The tiles ``baton run --host HOST`` follows and types into."""
        return {name: t for name, t in self.tiles.items() if tile_host(t, host) == host}

    def on_host(self, host: str) -> Config:
        """This config with only the tiles of ``host`` (what its daemon follows, checks and types into)."""
        return self.model_copy(update={"tiles": self.tiles_on(host)})

    def crosses_hosts(self, host: str) -> bool:
        """Whether any route starting or ending on ``host`` has its other end on another host."""
        here = self.tiles_on(host)
        return any((r.from_ in here) != (r.to in here) for r in self.routes)


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


def default_config_path() -> Path:
    """``./routes.yaml``, else ``$XDG_CONFIG_HOME/batonpass/routes.yaml``."""
    local = Path("routes.yaml")
    if local.exists():
        return local
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    xdg = Path(base) / "batonpass" / "routes.yaml"
    return xdg if xdg.exists() else local


def load_config(path: str | os.PathLike[str], registries: Any = None) -> tuple[Config, list[Problem]]:
    """Read and validate ``path``. Returns the config and its warnings; raises :class:`ConfigError`
    listing every error (and the warnings) if there is any."""
    try:
        text = decode_checked(read_checked(path))
    except OSError as exc:
        raise ConfigError([Problem(str(path), 1, 1, "", f"cannot read: {exc.strerror or exc}")]) from None
    except TextProblem as exc:
        raise ConfigError([Problem(str(path), exc.line, exc.col, "", exc.message)]) from None
    return parse_config(text, str(path), registries)


def parse_config(
    text: str, filename: str = "<string>", registries: Any = None
) -> tuple[Config, list[Problem]]:
    """Validate YAML text; see :func:`load_config`. ``registries`` (from
    :func:`pipeline.plugin.manager.load_registries`) enables the agent and transform checks."""
    try:
        check_text(text)
        root = compose_checked(text)
    except TextProblem as exc:
        raise ConfigError([Problem(filename, exc.line, exc.col, "", exc.message)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = " ".join(str(x) for x in (getattr(exc, "context", None), getattr(exc, "problem", None)) if x)
        if "maximum nesting depth" in msg:  # libyaml's own limit (1000 levels), met while it scans ahead
            raise ConfigError([Problem(filename, line, col, "", NESTED_TOO_DEEP)]) from None
        raise ConfigError([Problem(filename, line, col, "", f"invalid YAML: {msg or exc}")]) from None
    if root is None:
        raise ConfigError(
            [Problem(filename, 1, 1, "", "the file is empty; it needs at least `version: 1` and `tiles:`")]
        )
    positions = _Positions(filename)
    data = positions.build(root, ())
    problems: list[Problem] = positions.problems
    if positions.problems:  # the data is not what the file says (a key twice, a value that is no value)
        raise ConfigError(sorted(problems, key=lambda p: (p.line, p.col)))
    if not isinstance(data, dict):
        raise ConfigError(
            [positions.problem((), "the top level must be a mapping (version, tiles, routes, ...)")]
        )
    config: Config | None = None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems.extend(_pydantic_problems(exc, positions))
    problems.extend(_semantic_problems(data, positions, registries))
    errors = [p for p in problems if p.severity == "error"]
    if errors or config is None:
        raise ConfigError(sorted(problems, key=lambda p: (p.line, p.col)))
    return config.model_copy(update={"path": filename}), problems


class _Positions:
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
                    self.problems.append(Problem(self.filename, *at, _dotted(path + (key,)),
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
            self.problems.append(Problem(self.filename, *here, _dotted(path),
                                         f"cannot read this value: {why}"))
            return None
        if isinstance(value, str) and (unsafe := _UNSAFE_TEXT.search(value)) is not None:
            odd = unsafe.group()
            self.problems.append(Problem(self.filename, *here, _dotted(path),
                                         f"the value holds character U+{ord(odd):04X}, which is not text"))
        return value

    def _key(self, node: yaml.Node, path: tuple[Any, ...]) -> str | None:
        """A mapping key as a name (keys are names in routes.yaml); None, with a problem, when it is not
        one."""
        at = (node.start_mark.line + 1, node.start_mark.column + 1)
        if not isinstance(node, yaml.ScalarNode):
            kind = "mapping" if isinstance(node, yaml.MappingNode) else "list"
            self.problems.append(Problem(self.filename, *at, _dotted(path),
                                         f"a key must be a name, not a {kind}"))
            return None
        if node.tag == "tag:yaml.org,2002:merge":
            self.problems.append(Problem(self.filename, *at, _dotted(path),
                                         "YAML merge keys (<<) are not supported; write the keys out"))
            return None
        if _UNSAFE_TEXT.search(node.value) or "\n" in node.value or "\t" in node.value:
            self.problems.append(Problem(self.filename, *at, _dotted(path),
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
        return Problem(self.filename, line, col, _dotted(path), message, severity)


#: a string value may hold newlines and tabs (a template), never other controls, NUL or lone surrogates
_UNSAFE_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff]")


def _loader() -> yaml.SafeLoader:
    return yaml.SafeLoader("")


def _dotted(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_ALIASES = {"from_": "from"}


def _pydantic_problems(exc: ValidationError, positions: _Positions) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = [_ALIASES.get(p, p) if isinstance(p, str) else p for p in err["loc"]]
        # a union (str | dict) reports one error per member; the first member's branch name is noise
        loc = [p for p in loc if p not in ("str", "dict[str,any]", "function-after[...]")]
        kind = err["type"]
        if kind == "extra_forbidden":
            problems.append(positions.problem(loc, f"unknown key {loc[-1]!r}", key=True))
        elif kind == "missing":
            parent = loc[:-1]
            problems.append(Problem(positions.filename, *positions.mark(parent), _dotted(loc),
                                    f"missing required key {loc[-1]!r}"))
        elif kind == "literal_error" and loc == ["version"]:
            problems.append(positions.problem(loc, "unsupported version; this batonpass reads version 1"))
        else:
            problems.append(positions.problem(loc, _message(err)))
    # str | dict unions repeat the same position for each member; keep one message per path
    seen: set[str] = set()
    unique = []
    for p in problems:
        if p.path not in seen or not p.path.endswith("transform"):
            unique.append(p)
        seen.add(p.path)
    return unique


def _message(err: Any) -> str:
    return str(err["msg"]).removeprefix("Value error, ")


def _semantic_problems(data: dict[str, Any], positions: _Positions, registries: Any) -> list[Problem]:
    """Checks pydantic cannot make on one field: names that refer to each other, regexes, plugin names,
    transform options, and the route graph."""
    problems: list[Problem] = []
    tiles = json_object(data.get("tiles"))
    routes = json_list(data.get("routes"))
    if registries is not None:
        for name, tile in tiles.items():
            agent = tile.get("agent", "auto") if isinstance(tile, dict) else None
            if isinstance(agent, str) and agent != "auto" and agent not in registries.agents:
                known = ", ".join(["auto", *registries.agents.names()])
                problems.append(
                    positions.problem(("tiles", name, "agent"), f"unknown agent {agent!r}; known: {known}")
                )
    edges: list[tuple[str, str]] = []
    names_seen: dict[str, int] = {}
    for i, route in enumerate(routes):
        if not isinstance(route, dict):
            continue
        src, dst = route.get("from"), route.get("to")
        for key, tile in (("from", src), ("to", dst)):
            if isinstance(tile, str) and tile not in tiles:
                problems.append(positions.problem(("routes", i, key), _unknown_tile(tile, i, key, tiles)))
        if isinstance(src, str) and src == dst:
            problems.append(positions.problem(("routes", i, "to"), f"route goes from tile {src!r} to itself"))
        elif isinstance(src, str) and isinstance(dst, str) and src in tiles and dst in tiles:
            edges.append((src, dst))
        label = route.get("name") or f"{src}->{dst}"
        if isinstance(label, str):
            if label in names_seen:
                hint = "" if route.get("name") else "; give one of them a `name:`"
                problems.append(
                    positions.problem(
                        ("routes", i, "name" if route.get("name") else "from"),
                        f"route name {label!r} is already used by routes[{names_seen[label]}]{hint}",
                    )
                )
            names_seen.setdefault(label, i)
        if isinstance(route.get("match"), str):
            try:
                re.compile(route["match"])
            except re.error as exc:
                problems.append(positions.problem(("routes", i, "match"), f"bad regex: {exc}"))
        if registries is not None:
            problems.extend(_transform_problems(route.get("transform", "raw"), ("routes", i, "transform"),
                                                positions, registries))
    problems.extend(crossing_problems(data, positions))
    settings = json_object(data.get("settings"))
    if registries is not None:
        problems.extend(_section_problems(settings, positions, registries))
    if "max_hops" not in settings:
        for cycle in _cycles(edges):
            path = " -> ".join([*cycle, cycle[0]])
            problems.append(positions.problem(
                ("routes",), f"routes form a cycle ({path}) and settings.max_hops is not set; "
                f"the chain will stop after the default {DEFAULT_MAX_HOPS} hand-offs", severity="warning"))
    return problems


KNOWN_SHOWN = 10


def _unknown_tile(tile: str, i: int, key: str, tiles: dict[str, Any]) -> str:
    names = sorted(str(t) for t in tiles)
    known = ", ".join(names[:KNOWN_SHOWN]) or "(none)"
    if len(names) > KNOWN_SHOWN:
        known += f", … ({len(names) - KNOWN_SHOWN} more)"
    return f"route {key} tile {tile!r} is not defined under tiles; known tiles: {known}"


def _transform_problems(
    spec: Any, path: tuple[Any, ...], positions: _Positions, registries: Any
) -> list[Problem]:
    kind: Any
    if isinstance(spec, str):
        kind, options, type_path = spec, {}, path
    elif isinstance(spec, dict):
        kind, type_path = spec.get("type"), path + ("type",)
        options = {k: v for k, v in spec.items() if k != "type"}
        if kind is None:
            return [positions.problem(path, "a transform mapping needs a 'type' key")]
    else:
        return []
    try:
        cls = registries.transforms.get(kind)
    except UnknownName as exc:
        return [
            positions.problem(type_path, f"unknown transform type {kind!r}; known: {', '.join(exc.known)}")
        ]
    try:
        validated = cls.Options.model_validate(options)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = path + tuple(err["loc"])
            if err["type"] == "extra_forbidden":
                problems.append(
                    positions.problem(
                        loc, f"unknown option {err['loc'][-1]!r} for transform {kind!r}", key=True
                    )
                )
            elif err["type"] == "missing":
                problems.append(Problem(positions.filename, *positions.mark(path), _dotted(loc),
                                        f"transform {kind!r} needs option {err['loc'][-1]!r}"))
            else:
                problems.append(positions.problem(loc, _message(err)))
        return problems
    return _api_key_problems(cls, kind, validated, type_path, positions)


def _section_problems(settings: dict[str, Any], positions: _Positions, registries: Any) -> list[Problem]:
    """``settings:`` keys the engine does not own are plugins' sections, each checked with its plugin's
    model (``register_settings``); a key no plugin registered is unknown."""
    problems: list[Problem] = []
    for key, value in settings.items():
        if key in Settings.model_fields:
            continue
        if key not in registries.settings:
            known = ", ".join([*Settings.model_fields, *registries.settings.names()])
            problems.append(positions.problem(("settings", key), f"unknown key {key!r}; known: {known}",
                                              key=True))
            continue
        try:
            registries.settings.get(key).model_validate(value if value is not None else {})
        except ValidationError as exc:
            for err in exc.errors():
                loc = ("settings", key, *err["loc"])
                if err["type"] == "extra_forbidden":
                    problems.append(positions.problem(loc, f"unknown key {loc[-1]!r}", key=True))
                else:
                    problems.append(positions.problem(loc, _message(err)))
    return problems


def _api_key_problems(
    cls: Any, kind: str, options: Any, path: tuple[Any, ...], positions: _Positions
) -> list[Problem]:
    """A warning when the transform calls a service whose key (``needs_api_key_env``) is not set: the
    config is valid, but every hand-off of the route will fall back."""
    env = getattr(cls, "needs_api_key_env", None)
    if not env or os.environ.get(env):
        return []
    then = "skip its hand-offs" if getattr(options, "on_error", "raw") == "skip" else "hand on the raw answer"
    return [
        positions.problem(
            path,
            f"transform {kind!r} needs {env}, which is not set: this route will {then} instead",
            severity="warning",
        )
    ]


#: the cycle warning names at most this many cycles, and looks at most this far (a dense route graph has
#: exponentially many: 40 tiles all routed to each other would otherwise never finish loading)
CYCLES_SHOWN, CYCLE_STEPS = 5, 20_000


def _cycles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """Elementary cycles, each reported once (rotated to start at its smallest name), at most
    :data:`CYCLES_SHOWN` of them within :data:`CYCLE_STEPS` steps. Iterative: a chain of thousands of
    tiles does not exhaust the stack."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    found: list[list[str]] = []
    steps = 0
    for start in sorted(graph):
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in graph.get(node, []):
                steps += 1
                if nxt == start:
                    found.append(trail)
                elif nxt not in trail and nxt > start:
                    stack.append((nxt, [*trail, nxt]))
            if len(found) >= CYCLES_SHOWN or steps > CYCLE_STEPS:
                return found
    return found
