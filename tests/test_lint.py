"""ruff and mypy, run by the README's test command: a long line, an unused import or a type error fails the
suite like a broken test would. Both take their settings from pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    tool = BIN / name
    if not tool.exists():  # an old venv: the test extra grew; CI always installs it
        pytest.skip(f"{name} is not installed in {BIN.parent}: run pip install -e '.[test]'")
    return subprocess.run([str(tool), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_ruff_is_clean() -> None:
    result = run_tool("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = run_tool("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean_on_the_plugin_api() -> None:
    """The contract plugin authors code against is typed strictly (the modules it imports are checked by
    ``test_mypy_is_clean`` with the project's settings)."""
    result = run_tool("mypy", "--strict", "--follow-imports=silent", "pipeline/plugin")
    assert result.returncode == 0, result.stdout + result.stderr


def test_plugins_import_only_the_plugin_api() -> None:
    """Built-in plugins are written like third-party ones: of batonpass they import ``pipeline.plugin``
    (and its submodules) only, so what a plugin may rely on is all in one place."""
    import ast

    outside = []
    for path in sorted((REPO / "plugins").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            outside += [f"{path.relative_to(REPO)}:{node.lineno}: {name}" for name in names
                        if name.split(".")[0] == "pipeline" and name.split(".")[:2] != ["pipeline", "plugin"]]
    assert outside == []


def test_no_test_module_imports_another_or_the_conftest() -> None:
    """What tests share lives in ``tests.support`` (its fixtures registered as plugins by the conftest): a
    test module is never imported by another, nor is the conftest, so each can be read, moved or deleted
    on its own."""
    import ast

    def banned(module: str) -> bool:
        parts = module.split(".")
        return len(parts) > 1 and parts[0] == "tests" and (parts[1] == "conftest" or parts[1][:5] == "test_")

    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                module = node.module or ""
                names = [module] + ([f"{module}.{a.name}" for a in node.names] if module == "tests" else [])
            else:
                continue
            found += [f"{path.relative_to(REPO)}:{node.lineno}: {name}" for name in names if banned(name)]
    assert found == []


def test_every_sleep_in_a_test_shapes_its_scenario() -> None:
    """Tests wait on a condition with ``tests.support.polling``; a fixed sleep is only there to shape the
    scenario (a beat, an outage, a window to count in) and says so: ``# shapes the scenario`` on its line
    or the line above."""
    import ast

    sleeps = {"time.sleep", "anyio.sleep", "asyncio.sleep"}
    unmarked = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.parent.name == "fakes" or path.name in ("polling.py", "record_paste_screens.py"):
            continue  # the fakes play agents (their sleeps are the agent's pace); polling is the waiting
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines), str(path))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in sleeps:
                near = " ".join(lines[max(0, node.lineno - 2): node.end_lineno or node.lineno])
                if "shapes the scenario" not in near:
                    where = f"{path.relative_to(REPO)}:{node.lineno}"
                    unmarked.append(f"{where}: {lines[node.lineno - 1].strip()}")
    assert unmarked == []


def test_the_code_cites_the_projects_own_docs() -> None:
    """The facts the code relies on are written in docs/ (docs/agents.md for the agents' files and screens):
    no file under pipeline/, plugins/, tests/ or bench/ cites a specification a person who clones the
    project does not have."""
    word = "SP" + "EC"  # spelt apart, so this file does not cite it either
    citing = [str(path.relative_to(REPO)) for folder in ("pipeline", "plugins", "tests", "bench")
              for path in sorted((REPO / folder).rglob("*"))
              if path.is_file() and "__pycache__" not in path.parts and word.encode() in path.read_bytes()]
    assert citing == []
