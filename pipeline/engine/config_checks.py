"""The checks of routes.yaml that pydantic cannot make on one field: names that refer to each other,
regexes, plugin names, each transform's options with its own model, plugins' settings sections, keys a
transform needs, hosts, and the route graph's cycles. Each problem carries its YAML position."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from pipeline.engine.config_positions import Positions, Problem, dotted, message
from pipeline.engine.config_workflows import end_paths, workflow_problems
from pipeline.engine.hosts import crossing_problems
from pipeline.system.jsonl import json_list, json_object

__all__ = ["DEFAULT_MAX_HOPS", "KNOWN_SHOWN", "TOP_LEVEL", "semantic_problems"]

DEFAULT_MAX_HOPS = 6
#: routes.yaml's top-level keys besides settings: (one put under `settings:` is told where it goes)
TOP_LEVEL = ("version", "tmux", "tiles", "routes")


def semantic_problems(
    data: dict[str, Any], positions: Positions, registries: Any, engine_keys: Iterable[str]
) -> list[Problem]:
    """Checks pydantic cannot make on one field: names that refer to each other, regexes, plugin names,
    transform options, and the route graph."""
    tiles = json_object(data.get("tiles"))
    problems = _agent_problems(tiles, positions, registries)
    edges: list[tuple[str, str]] = []
    names_seen: dict[str, int] = {}
    for i, route in enumerate(json_list(data.get("routes"))):
        if isinstance(route, dict):
            problems.extend(_route_problems(i, route, tiles, positions, registries, edges, names_seen))
    problems.extend(crossing_problems(data, positions))
    settings = json_object(data.get("settings"))
    if registries is not None:
        problems.extend(_section_problems(settings, positions, registries, list(engine_keys)))
    if "max_hops" not in settings:
        problems.extend(_cycle_warnings(edges, positions))
    return problems


def _agent_problems(tiles: dict[str, Any], positions: Positions, registries: Any) -> list[Problem]:
    """A tile's ``agent:`` must name an installed adapter (or ``auto``)."""
    if registries is None:
        return []
    problems: list[Problem] = []
    for name, tile in tiles.items():
        agent = tile.get("agent", "auto") if isinstance(tile, dict) else None
        if isinstance(agent, str) and agent != "auto" and agent not in registries.agents:
            known = ", ".join(["auto", *registries.agents.names()])
            problem = _unknown("agent", agent, known, registries)
            problems.append(positions.problem(("tiles", name, "agent"), problem))
    return problems


def _unknown(kind: str, name: Any, known: str, registries: Any) -> str:
    """An unknown plugin name, with the plugins ``BATON_DISABLED_PLUGINS`` blocked: a name one of them
    would have given is said to be disabled, not unknown."""
    disabled: list[str] = getattr(registries, "disabled", [])
    if name in disabled:
        return f"{kind} {name!r} is disabled by BATON_DISABLED_PLUGINS; known: {known}"
    text = f"unknown {kind} {name!r}; known: {known}"
    return text + (f" (disabled by BATON_DISABLED_PLUGINS: {', '.join(disabled)})" if disabled else "")


def _route_problems(
    i: int, route: dict[str, Any], tiles: dict[str, Any], positions: Positions, registries: Any,
    edges: list[tuple[str, str]], names_seen: dict[str, int],
) -> list[Problem]:
    """One route's problems, in the order a reader meets them; its edge joins ``edges`` and its name
    ``names_seen`` for the checks that span routes."""
    problems = _endpoint_problems(i, route, tiles, positions, edges)
    problems.extend(_name_problems(i, route, positions, names_seen))
    if isinstance(route.get("match"), str):
        try:
            re.compile(route["match"])
        except re.error as exc:
            problems.append(positions.problem(("routes", i, "match"), f"bad regex: {exc}"))
    if registries is not None:
        problems.extend(_transform_problems(route.get("transform", "raw"), ("routes", i, "transform"),
                                            positions, registries))
    return problems


def _endpoint_problems(
    i: int, route: dict[str, Any], tiles: dict[str, Any], positions: Positions, edges: list[tuple[str, str]]
) -> list[Problem]:
    """``from`` and ``to`` (a tile, a list of tiles, or a choice's) name defined tiles and differ; each
    sound pair of ends becomes an edge of the graph."""
    problems: list[Problem] = []
    ends = {key: end_paths(("routes", i), route, key) for key in ("from", "to")}
    for key, named in ends.items():
        for path, tile in named:
            if tile not in tiles:
                problems.append(positions.problem(path, _unknown_tile(tile, i, key, tiles)))
    src, dst = route.get("from"), route.get("to")
    if isinstance(src, str) and src == dst:
        problems.append(positions.problem(("routes", i, "to"), f"route goes from tile {src!r} to itself"))
    elif not problems:
        edges.extend((a, b) for _, a in ends["from"] for _, b in ends["to"] if a != b)
    return problems + workflow_problems(i, route, tiles, positions)


def _name_problems(
    i: int, route: dict[str, Any], positions: Positions, names_seen: dict[str, int]
) -> list[Problem]:
    """A route's name (given, or ``from->to``) is unique: the journal and the board tell routes apart."""
    label = route.get("name") or _arrow(route)
    if not isinstance(label, str):
        return []
    problems: list[Problem] = []
    if label in names_seen:
        hint = "" if route.get("name") else "; give one of them a `name:`"
        problems.append(
            positions.problem(
                ("routes", i, "name" if route.get("name") else "from"),
                f"route name {label!r} is already used by routes[{names_seen[label]}]{hint}",
            )
        )
    names_seen.setdefault(label, i)
    return problems


def _arrow(route: dict[str, Any]) -> str:
    """A route's default label as :attr:`pipeline.engine.config.Route.arrow` writes it."""
    def side(value: Any) -> str:
        if isinstance(value, dict):
            return "|".join(str(v) for v in value.get("choose") or [])
        return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
    return f"{side(route.get('from'))}->{side(route.get('to'))}"


def _cycle_warnings(edges: list[tuple[str, str]], positions: Positions) -> list[Problem]:
    """Routes in a cycle with no ``max_hops`` set: valid, but the chain stops at the default."""
    problems: list[Problem] = []
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
    spec: Any, path: tuple[Any, ...], positions: Positions, registries: Any
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
    if not isinstance(kind, str) or kind not in registries.transforms:  # as the agents are asked, above
        known = ", ".join(registries.transforms.names())
        return [positions.problem(type_path, _unknown("transform type", kind, known, registries))]
    cls = registries.transforms.get(kind)
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
                problems.append(Problem(positions.filename, *positions.mark(path), dotted(loc),
                                        f"transform {kind!r} needs option {err['loc'][-1]!r}"))
            else:
                problems.append(positions.problem(loc, message(err)))
        return problems
    return _api_key_problems(cls, kind, validated, type_path, positions)


def _section_problems(
    settings: dict[str, Any], positions: Positions, registries: Any, engine_keys: list[str]
) -> list[Problem]:
    """``settings:`` keys the engine does not own are plugins' sections, each checked with its plugin's
    model (``register_settings``); a key no plugin registered is unknown."""
    problems: list[Problem] = []
    for key, value in settings.items():
        if key in engine_keys:
            continue
        if key not in registries.settings:
            known = ", ".join([*engine_keys, *registries.settings.names()])
            if key in TOP_LEVEL:
                known += f"; {key} is a top-level key, beside tiles: (not under settings:)"
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
                    problems.append(positions.problem(loc, message(err)))
    return problems


def _api_key_problems(
    cls: Any, kind: str, options: Any, path: tuple[Any, ...], positions: Positions
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
    for a, b in dict.fromkeys(edges):  # two routes between the same tiles are one edge of the cycle
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
