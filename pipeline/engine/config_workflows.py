"""The checks of a route's workflow shape (docs/workflows.md) that pydantic cannot make on one field: a
fan-out's and a join's lists of tiles, ``join:``, a model's choice, and a join's ``{answers[tile]}``.

Each problem carries its YAML position. They run on the raw data (before or beside pydantic), so that a
file with several mistakes gets all of them in one run.
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.engine.config_positions import Positions, Problem

__all__ = ["ANSWERS_PLACEHOLDER", "end_paths", "route_ends", "workflow_problems"]

#: ``{answers[security]}`` in a join's template: one source's answer
ANSWERS_PLACEHOLDER = re.compile(r"(?<!\{)\{answers\[([^\]{}]*)\]\}")


def route_ends(value: Any) -> list[str]:
    """The tile names a ``from:`` or ``to:`` value names (one, a list, or a choice's list); others: []."""
    if isinstance(value, dict):
        value = value.get("choose")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def end_paths(at: tuple[Any, ...], route: dict[str, Any], key: str) -> list[tuple[tuple[Any, ...], str]]:
    """Each tile name of the route's ``from:`` or ``to:`` with its YAML path (a list's item, a choice's)."""
    value, path = route.get(key), (*at, key)
    if isinstance(value, dict):
        value, path = value.get("choose"), (*path, "choose")
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, list):
        return [((*path, j), tile) for j, tile in enumerate(value) if isinstance(tile, str)]
    return []


def workflow_problems(
    i: int, route: dict[str, Any], tiles: dict[str, Any], positions: Positions
) -> list[Problem]:
    """A route's list, join, choice and gate problems, in the order a reader meets them."""
    at = ("routes", i)
    problems = _list_problems(at, route, positions)
    sources = route_ends(route.get("from"))
    one_to_one = isinstance(route.get("from"), str) and isinstance(route.get("to"), str)  # "to itself"
    for path, tile in [] if one_to_one else end_paths(at, route, "to"):
        if tile in sources and tile in tiles:
            problems.append(positions.problem(
                path, f"tile {tile!r} is in both from: and to: (a route never hands a turn to its source)"))
    problems.extend(_join_problems(at, route, positions))
    problems.extend(_choice_problems(at, route, tiles, positions))
    problems.extend(_answers_problems(at, route, positions))
    return problems


def _list_problems(at: tuple[Any, ...], route: dict[str, Any], positions: Positions) -> list[Problem]:
    """A list in ``from:``/``to:`` (or a choice's) holds each tile once; ``from:`` needs two to join."""
    problems: list[Problem] = []
    for key in ("from", "to"):
        value = route.get(key)
        path: tuple[Any, ...] = (*at, key)
        if isinstance(value, dict):
            value, path = value.get("choose"), (*path, "choose")
        if not isinstance(value, list):
            continue
        if not value:
            problems.append(positions.problem(path, f"an empty list in {key}: names no tile"))
        for j, tile in enumerate(value):
            if isinstance(tile, str) and tile in value[:j]:
                problems.append(positions.problem((*path, j), f"tile {tile!r} is listed twice"))
    sources = route.get("from")
    if isinstance(sources, list) and len(sources) == 1:
        problems.append(positions.problem(
            (*at, "from"), "a join needs two or more tiles in from: (for one, write `from: "
            f"{sources[0]}`)"))
    return problems


def _join_problems(at: tuple[Any, ...], route: dict[str, Any], positions: Positions) -> list[Problem]:
    """``join:`` is all, any or a count from 1 to the number of sources, and only on a join."""
    join, sources = route.get("join"), route.get("from")
    if join is None:
        return []
    path = (*at, "join")
    if not isinstance(sources, list):
        return [positions.problem(path, "join: applies to a route with a list of tiles in from:")]
    if type(join) is int and join > len(sources):  # its other mistakes are the model's to say
        return [positions.problem(
            path, f"join: {join} is not a number of answers from 1 to {len(sources)} (the tiles in from:)")]
    return []


def _choice_problems(
    at: tuple[Any, ...], route: dict[str, Any], tiles: dict[str, Any], positions: Positions
) -> list[Problem]:
    """A model's choice needs the ``ai-routing`` transform, and its ``default:`` is one of its tiles."""
    to = route.get("to")
    if not isinstance(to, dict):
        return []
    problems: list[Problem] = []
    transform = route.get("transform", "raw")
    kind = transform.get("type") if isinstance(transform, dict) else transform
    if kind != "ai-routing":
        problems.append(positions.problem(
            (*at, "to", "choose"), "to: {choose: ...} needs `transform: {type: ai-routing, ...}` (the model "
            f"that picks the tile), not {kind!r}"))
    default, choices = to.get("default"), route_ends(to)
    if isinstance(default, str) and choices and default not in choices:
        problems.append(positions.problem(
            (*at, "to", "default"), f"default tile {default!r} is not one of choose: {', '.join(choices)}"))
    return problems


def _answers_problems(at: tuple[Any, ...], route: dict[str, Any], positions: Positions) -> list[Problem]:
    """``{answers[tile]}`` in a template names a tile of the route's ``from:`` (only a join has answers)."""
    transform = route.get("transform")
    template = transform.get("template") if isinstance(transform, dict) else None
    if not isinstance(template, str):
        return []
    sources = route_ends(route.get("from"))
    problems: list[Problem] = []
    for name in ANSWERS_PLACEHOLDER.findall(template):
        if name not in sources or not isinstance(route.get("from"), list):
            known = ", ".join(sources) if isinstance(route.get("from"), list) else "none: it is no join"
            problems.append(positions.problem(
                (*at, "transform", "template"),
                f"{{answers[{name}]}} names no tile of this route's from: (its tiles: {known})"))
    return problems
