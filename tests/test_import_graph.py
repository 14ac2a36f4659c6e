"""No import circles in pipeline/ and plugins/: each module can be read knowing only what it imports.

The graph is read from the source with :mod:`ast`, not by importing it, and it is honest: every import
counts — at module level, inside functions, and under ``if TYPE_CHECKING:``. An import hidden in a function
still ties two modules together; a circle is broken by moving code to where it belongs.
``from package import name`` points at ``package.name`` when that is a module, else at the package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pipeline.cli import main

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("pipeline", "plugins")


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
