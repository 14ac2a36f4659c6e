"""routes.yaml as a picture: the tiles and routes as Mermaid flowchart text (``baton check --graph``).

GitHub, GitLab and most editors render Mermaid in Markdown, so a person can look at the graph instead of
reading the YAML. Tiles are nodes (name and agent); a route is an edge per target, labelled with its name;
a join is a node of its own that its sources feed, a model's choice a diamond whose dashed edges go to the
tiles it picks from, and a gate is said on its edges.
"""

from __future__ import annotations

from pipeline.engine.config import Config, Route

__all__ = ["mermaid"]


def _text(value: str) -> str:
    """A label in Mermaid's double quotes: its own quotes and angle brackets as entities."""
    return (value.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
            .replace("\n", " "))


def _edge_label(route: Route) -> str:
    words = [route.label]
    if route.gate:
        words.append("gate: person")
    if route.on != "completed":
        words.append(f"on {route.on}")
    return _text(" · ".join(words))


def _join_words(route: Route) -> str:
    mode = route.join if route.join is not None else "all"
    words = f"{route.label}: join {mode}"
    if route.within:
        words += f" within {route.within}, then {route.on_timeout}"
    return words


def mermaid(config: Config) -> str:
    """The routes of ``config`` as a Mermaid ``flowchart LR``."""
    ids = {name: f"t{i}" for i, name in enumerate(config.tiles)}
    lines = ["flowchart LR"]
    for name, tile in config.tiles.items():
        agent = tile.agent + (f" @ {tile.host}" if tile.host else "")
        lines.append(f'  {ids[name]}["{_text(name)}<br/><small>{_text(agent)}</small>"]')
    for i, route in enumerate(config.routes):
        lines.extend(_route_lines(f"r{i}", route, ids))
    return "\n".join(lines) + "\n"


def _route_lines(node: str, route: Route, ids: dict[str, str]) -> list[str]:
    label = _edge_label(route)
    sources = [ids[s] for s in route.sources if s in ids]
    targets = [ids[t] for t in route.targets if t in ids]
    lines: list[str] = []
    if route.is_join:
        lines.append(f'  {node}(["{_text(_join_words(route))}"])')
        lines.extend(f"  {s} --> {node}" for s in sources)
        sources = [node]
    choice = route.chooses
    if choice is not None:
        lines.append(f'  {node}_pick{{"{_text(route.label + ": a model picks")}"}}')
        lines.extend(f'  {s} -->|"{label}"| {node}_pick' for s in sources)
        for name, target in zip(route.targets, targets, strict=False):
            lines.append(f'  {node}_pick -.->|"default"| {target}' if name == choice.default
                         else f"  {node}_pick -.-> {target}")
        return lines
    arrow = "==>" if route.gate else "-->"
    lines.extend(f'  {s} {arrow}|"{label}"| {t}' for s in sources for t in targets)
    return lines
