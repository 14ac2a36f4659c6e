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


def test_the_code_cites_the_projects_own_docs() -> None:
    """The facts the code relies on are written in docs/ (docs/agents.md for the agents' files and screens):
    no file under pipeline/, plugins/, tests/ or bench/ cites a specification a person who clones the
    project does not have."""
    word = "SP" + "EC"  # spelt apart, so this file does not cite it either
    citing = [str(path.relative_to(REPO)) for folder in ("pipeline", "plugins", "tests", "bench")
              for path in sorted((REPO / folder).rglob("*"))
              if path.is_file() and "__pycache__" not in path.parts and word.encode() in path.read_bytes()]
    assert citing == []
