"""routes.yaml validation: every problem, with its position, in one run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine.config import ConfigError, load_config, parse_config
from pipeline.plugin.manager import load_registries

REPO = Path(__file__).resolve().parent.parent

BROKEN = """\
version: 1
tmux:
  socket: agents
tiles:
  coder:
    pane: "%3"
    agent: claud
    colour: blue
  reviewer:
    agent: codex
routes:
  - from: coder
    to: reviewr
    on: done
    match: "(unclosed"
  - from: reviewer
    to: reviewer
  - name: fix
    from: coder
    to: reviewer
    transform:
      type: template
      templat: "x"
  - from: reviewer
    to: coder
    transform: {type: summarize}
  - name: tail
    from: coder
    to: reviewer
    transform: {type: raw, lines: -2}
settings:
  max_hops: many
"""

EXPECTED = """\
routes.yaml:3:3: error: tmux.socket: unknown key 'socket'
routes.yaml:7:12: error: tiles.coder.agent: unknown agent 'claud'; known: auto, {agents}
routes.yaml:8:5: error: tiles.coder.colour: unknown key 'colour'
routes.yaml:10:5: error: tiles.reviewer.pane: missing required key 'pane'
routes.yaml:13:9: error: routes[0].to: route to tile 'reviewr' is not defined under tiles; known tiles: \
coder, reviewer
routes.yaml:14:9: error: routes[0].on: Input should be 'completed', 'failed' or 'any'
routes.yaml:15:12: error: routes[0].match: bad regex: missing ), unterminated subpattern at position 0
routes.yaml:17:9: error: routes[1].to: route goes from tile 'reviewer' to itself
routes.yaml:22:7: error: routes[2].transform.template: transform 'template' needs option 'template'
routes.yaml:23:7: error: routes[2].transform.templat: unknown option 'templat' for transform 'template'
routes.yaml:26:23: error: routes[3].transform.type: unknown transform type 'summarize'; known: {transforms}
routes.yaml:30:35: error: routes[4].transform.lines: Input should be greater than 0
routes.yaml:32:13: error: settings.max_hops: Input should be a valid integer
routes.yaml: 13 errors
"""


@pytest.fixture(scope="module")
def registries():
    return load_registries()


def run_check(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "check", "-c", path.name, *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
        env={"BATON_DISABLE_EXTERNAL_PLUGINS": "1", "PATH": "/usr/bin:/bin"},
    )


def test_check_names_every_problem_with_line_and_column(tmp_path: Path, registries) -> None:
    (tmp_path / "routes.yaml").write_text(BROKEN)
    result = run_check(tmp_path / "routes.yaml")
    # the lists of known agents and transforms grow with plugins; everything else is exact
    expected = EXPECTED.format(agents=", ".join(registries.agents.names()),
                               transforms=", ".join(registries.transforms.names()))
    assert result.stderr == expected
    assert result.returncode == 1


def test_repo_example_is_valid(registries) -> None:
    config, warnings = load_config(REPO / "routes.yaml", registries)
    assert config.tiles and config.routes
    assert [w for w in warnings if "cycle" in w.message] == []


def test_check_ok_exit_zero(tmp_path: Path) -> None:
    (tmp_path / "routes.yaml").write_text(
        "version: 1\ntiles:\n  a: {pane: '%1'}\n  b: {pane: '%2'}\nroutes:\n  - {from: a, to: b}\n"
    )
    result = run_check(tmp_path / "routes.yaml")
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_a_transform_type_that_is_no_name_is_a_problem_not_a_crash(registries) -> None:
    text = ("version: 1\ntiles:\n  a: {pane: '%1'}\n  b: {pane: '%2'}\n"
            "routes:\n  - {from: a, to: b, transform: {type: [x]}}\n")
    with pytest.raises(ConfigError) as err:
        parse_config(text, "r.yaml", registries)
    assert "routes[0].transform.type: unknown transform type ['x']; known: " in str(err.value)


def test_cycle_without_max_hops_is_a_warning(registries) -> None:
    text = (
        "version: 1\ntiles:\n  a: {pane: '%1'}\n  b: {pane: '%2'}\n"
        "routes:\n  - {from: a, to: b}\n  - {from: b, to: a}\n"
    )
    config, warnings = parse_config(text, "r.yaml", registries)
    assert [str(w) for w in warnings] == [
        "r.yaml:6:3: warning: routes: routes form a cycle (a -> b -> a) and settings.max_hops is not set; "
        "the chain will stop after the default 6 hand-offs"]
    assert config.settings.hop_limit == 6
    _, warnings = parse_config(text + "settings: {max_hops: 3}\n", "r.yaml", registries)
    assert warnings == []


def test_template_placeholders_checked_at_load(registries) -> None:
    text = ("version: 1\ntiles:\n  a: {pane: '%1'}\n  b: {pane: '%2'}\nroutes:\n"
            "  - from: a\n    to: b\n    transform: {type: template, template: '{response} {nope}'}\n")
    with pytest.raises(ConfigError) as err:
        parse_config(text, "r.yaml", registries)
    (problem,) = err.value.problems
    assert (problem.line, problem.path) == (8, "routes[0].transform.template")
    assert "unknown placeholder {nope}" in problem.message


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "r.yaml:1:1: error: the file is empty; it needs at least `version: 1` and `tiles:`"),
        ("version: 1\ntiles: [\n", "r.yaml:3:1: error: invalid YAML"),
        (
            "version: 2\ntiles: {}\n",
            "r.yaml:1:10: error: version: unsupported version; this batonpass reads version 1",
        ),
        ("- a\n- b\n", "r.yaml:1:1: error: the top level must be a mapping"),
        (
            "version: 1\ntiles: {a: {pane: '%1'}, b: {pane: '%2'}}\n"
            "routes:\n  - {from: a, to: b, trnsform: raw}\n",
            "r.yaml:4:22: error: routes[0].trnsform: unknown key 'trnsform'",
        ),
    ],
)
def test_single_problems(text: str, expected: str, registries) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "r.yaml", registries)
    assert str(err.value.problems[0]).startswith(expected)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    result = run_check(tmp_path / "nope.yaml")
    assert result.returncode == 1
    assert "nope.yaml:1:1: error: cannot read" in result.stderr
