"""No import circles in pipeline/ and plugins/, and no import from a floor above: each module can be read
knowing only what it imports, and each floor only what lies below it.

The graph is read from the source with :mod:`ast`, not by importing it, and it is honest: every import
counts — at module level, inside functions, and under ``if TYPE_CHECKING:``. An import hidden in a function
still ties two modules together; a circle is broken by moving code to where it belongs.
``from package import name`` points at ``package.name`` when that is a module, else at the package.

The floors, top first (docs/architecture.md#layout): what a module may import lies on its own floor or below.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pipeline.cli import main

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("pipeline", "plugins")
#: the floors, top first, each with the packages and modules on it (a module is on the floor of its longest
#: prefix here). The entry points on top; the commands and the web page, the two fronts; what the commands
#: show; what they share (options, routes.yaml found, tables and JSON: the views print with it); the engine,
#: with the bus it hands off over (each calls the other: one floor); the plugin API and the built-in plugins;
#: the low-level helpers, with the hooks' spool (it imports nothing of batonpass) and the empty root package.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("entry", ("pipeline.cli", "pipeline.launch")),
    ("commands", ("pipeline.commands", "pipeline.web")),
    ("views", ("pipeline.views",)),
    ("cmdline", ("pipeline.cmdline",)),
    ("engine", ("pipeline.engine", "pipeline.bus")),
    ("plugin", ("pipeline.plugin", "plugins")),
    ("system", ("pipeline.system", "pipeline.spool", "pipeline")),
)
#: the built-in plugins import the plugin API and one another only, as a third-party plugin does
PLUGINS_SEE = ("pipeline.plugin", "plugins")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for root in ROOTS for p in sorted((REPO / root).rglob("*.py"))}


def imported(path: Path, name: str, known: dict[str, Path]) -> dict[str, int]:
    """The modules of ``known`` that ``path`` (module ``name``) imports, each with the line of its first
    import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target and target not in known:  # an attribute, or a module outside pipeline/ and plugins/
            target = target.rpartition(".")[0]
        if target and target != name:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base, node.lineno)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {name: imported(path, name, known) for name, path in known.items()}


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def describe(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    inside = set(component)
    edges = [f"  {a} -> {b} (line {line})" for a in component for b, line in sorted(graph[a].items())
             if b in inside]
    return "\n".join([" <-> ".join(component), *edges])


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def floor(name: str) -> int:
    """The floor ``name`` is on, 0 the top (by its longest prefix in :data:`FLOORS`)."""
    best = max(((len(p), i) for i, (_, prefixes) in enumerate(FLOORS) for p in prefixes if under(name, (p,))),
               default=None)
    assert best is not None, f"{name} is on no floor: add it to FLOORS (and to docs/architecture.md)"
    return best[1]


def upward(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every import from a floor above the importer's, and every import of a built-in plugin's outside the
    plugin API, one line each."""
    found = []
    for a, targets in sorted(graph.items()):
        for b, line in sorted(targets.items()):
            if floor(b) < floor(a):
                found.append(f"  {a} (line {line}) -> {b}: {FLOORS[floor(a)][0]} imports from "
                             f"{FLOORS[floor(b)][0]}, a floor above it")
            elif under(a, ("plugins",)) and not under(b, PLUGINS_SEE):
                found.append(f"  {a} (line {line}) -> {b}: a plugin imports only pipeline.plugin")
    return found


def test_no_module_imports_from_a_floor_above_it() -> None:
    """commands -> views -> cmdline -> engine -> plugin -> system, every import counted (module level, in a
    function, under TYPE_CHECKING): a lower floor that needs something of a higher one gets it moved down."""
    found = upward(import_graph())
    assert not found, "upward imports:\n" + "\n".join(found)


def test_the_floor_check_sees_an_upward_import_of_every_kind() -> None:
    """The rule itself, on made-up edges: each kind of import the reader sees (module level, in a function,
    under TYPE_CHECKING — one edge to it) counts once it points up; down and sideways pass."""
    graph = {"pipeline.engine.actions": {"pipeline.commands.send": 3, "pipeline.engine.journal": 4,
                                         "pipeline.system.tmux": 5},
             "pipeline.plugin.agents": {"pipeline.engine.config": 30},
             "plugins.codex.adapter": {"pipeline.system.proc": 7, "pipeline.plugin": 8, "plugins.codex.x": 9},
             "pipeline.views.board": {"pipeline.cmdline.output": 2, "pipeline.commands.web": 3},
             "pipeline.spool": {}}
    assert [line.split(":")[0].strip() for line in upward(graph)] == [
        "pipeline.engine.actions (line 3) -> pipeline.commands.send",
        "pipeline.plugin.agents (line 30) -> pipeline.engine.config",
        "pipeline.views.board (line 3) -> pipeline.commands.web",
        "plugins.codex.adapter (line 7) -> pipeline.system.proc",
    ]
    assert floor("pipeline") == floor("pipeline.spool") == floor("pipeline.system.tmux")


def test_the_import_graph_has_no_circles() -> None:
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(describe(graph, c) for c in found)


def test_each_command_is_the_module_of_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    """pipeline/commands/ holds the handlers and nothing else, one module per ``baton`` subcommand, named
    after it; what they share lives in pipeline/cmdline/, what they show in pipeline/views/."""
    with pytest.raises(SystemExit):
        main(["--help"])
    commands = set(re.findall(r"^    ([a-z]+) ", capsys.readouterr().out, re.M))
    modules = {p.stem for p in (REPO / "pipeline" / "commands").glob("*.py")} - {"__init__"}
    assert commands and modules == commands


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The reader itself: imports in functions, under TYPE_CHECKING and relative ones all count, and a
    circle among them is found."""
    source = {"__init__": "",
              "a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n",
              "b": "def f():\n    from . import c\n",
              "c": "import pkg.a.x\n"}
    (tmp_path / "pkg").mkdir()
    known = {}
    for n, text in source.items():
        (tmp_path / "pkg" / f"{n}.py").write_text(text)
        known["pkg" if n == "__init__" else f"pkg.{n}"] = tmp_path / "pkg" / f"{n}.py"
    graph = {name: imported(path, name, known) for name, path in known.items()}
    assert graph == {"pkg": {}, "pkg.a": {"pkg.b": 3}, "pkg.b": {"pkg.c": 2}, "pkg.c": {"pkg.a": 1}}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
