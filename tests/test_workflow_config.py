"""routes.yaml's workflow shapes (docs/workflows.md): every wrong shape gets one positioned error, the right
ones load with what the engine reads, and ``baton check --graph`` draws them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine.config import ConfigError, duration_s, parse_config
from pipeline.plugin.manager import load_registries

TILES = """\
version: 1
tiles:
  coder: {pane: "%1", agent: claude}
  security: {pane: "%2", agent: codex}
  style: {pane: "%3", agent: claude}
  planner: {pane: "%4"}
  backend: {pane: "%5", description: "the API and the database"}
  deployer: {pane: "%6", agent: shell}
settings: {max_hops: 4}
routes:
"""

GOOD = TILES + """\
  - name: review
    from: coder
    to: [security, style]
    transform: {type: template, template: "Review this change:\\n\\n{response}"}
  - name: verdicts
    from: [security, style]
    join: all
    within: 30m
    on_timeout: hand-on
    to: coder
    transform: {type: template, template: "The reviews:\\n\\n{responses}"}
  - name: dispatch
    from: planner
    to: {choose: [backend, coder], default: backend}
    transform: {type: ai-routing, instructions: "Send each task to the worker whose description fits."}
  - name: release
    from: coder
    to: deployer
    gate: person
"""


def problems(routes: str) -> list[str]:
    """The errors of TILES + ``routes``, each as LINE:COL: PATH: MESSAGE."""
    with pytest.raises(ConfigError) as caught:
        parse_config(TILES + routes, "routes.yaml", load_registries())
    return [f"{p.line}:{p.col}: {p.path}: {p.message}"
            for p in caught.value.problems if p.severity == "error"]


def test_the_issue_shape_loads_with_what_the_engine_reads() -> None:
    config, _ = parse_config(GOOD, "routes.yaml", load_registries())
    review, verdicts, dispatch, release = config.routes
    assert (review.sources, review.targets, review.fans_out) == (["coder"], ["security", "style"], True)
    assert review.branches() == [("security", "security"), ("style", "style")]
    assert (verdicts.is_join, verdicts.join_needs, verdicts.within_s, verdicts.on_timeout) == (
        True, 2, 1800.0, "hand-on")
    assert dispatch.chooses is not None and dispatch.chooses.default == "backend"
    assert dispatch.targets == ["backend", "coder"] and dispatch.branches() == [("backend", "")]
    assert release.gate == "person" and release.branches() == [("deployer", "")]
    assert [r.label for r in config.routes_from("security")] == ["verdicts"]
    assert [r.label for r in config.routes_from("coder")] == ["review", "release"]


@pytest.mark.parametrize("join, needs", [(None, 2), ("all", 2), ("any", 1), (1, 1), (2, 2)])
def test_join_needs(join: object, needs: int) -> None:
    line = "" if join is None else f"    join: {join}\n"
    config, _ = parse_config(TILES + "  - from: [security, style]\n    to: coder\n" + line, "r.yaml")
    assert config.routes[0].join_needs == needs


def test_default_labels_say_the_lists() -> None:
    config, _ = parse_config(TILES + """\
  - {from: coder, to: [security, style]}
  - {from: [security, style], to: coder}
  - {from: planner, to: {choose: [backend, coder]}, transform: {type: ai-routing}}
""", "r.yaml")
    assert [r.label for r in config.routes] == ["coder->security,style", "security,style->coder",
                                                 "planner->backend|coder"]


@pytest.mark.parametrize("routes, expected", [
    # a join with one source
    ("  - {from: [security], to: coder}\n",
     "11:12: routes[0].from: a join needs two or more tiles in from: (for one, write `from: security`)"),
    # a tile in both from: and to:
    ("  - {from: coder, to: [security, coder]}\n",
     "11:34: routes[0].to[1]: tile 'coder' is in both from: and to: "
     "(a route never hands a turn to its source)"),
    ("  - {from: [security, style], to: style}\n",
     "11:35: routes[0].to: tile 'style' is in both from: and to: "
     "(a route never hands a turn to its source)"),
    # choose: without ai-routing
    ("  - {from: planner, to: {choose: [backend, coder]}}\n",
     "11:34: routes[0].to.choose: to: {choose: ...} needs `transform: {type: ai-routing, ...}` (the model "
     "that picks the tile), not 'raw'"),
    # an unknown tile in a list
    ("  - {from: coder, to: [security, nosuch]}\n",
     "11:34: routes[0].to[1]: route to tile 'nosuch' is not defined under tiles; known tiles: backend, "
     "coder, deployer, planner, security, style"),
    ("  - {from: [security, ghost], to: coder}\n",
     "11:23: routes[0].from[1]: route from tile 'ghost' is not defined under tiles; known tiles: backend, "
     "coder, deployer, planner, security, style"),
    # join: 0, and other counts
    ("  - {from: [security, style], to: coder, join: 0}\n",
     "11:48: routes[0].join: join: 0 answers is none: give all, any or a number from 1"),
    ("  - {from: [security, style], to: coder, join: 3}\n",
     "11:48: routes[0].join: join: 3 is not a number of answers from 1 to 2 (the tiles in from:)"),
    ("  - {from: [security, style], to: coder, join: most}\n",
     "11:48: routes[0].join: join: 'most' is not all, any or a number of answers"),
    ("  - {from: coder, to: security, join: all}\n",
     "11:39: routes[0].join: join: applies to a route with a list of tiles in from:"),
    # within: not a duration
    ("  - {from: [security, style], to: coder, within: soon}\n",
     "11:50: routes[0].within: 'soon' is not a duration: write a number and a unit, like 90s, 30m, 2h or 1d"),
    ("  - {from: [security, style], to: coder, within: 0m}\n",
     "11:50: routes[0].within: '0m' is no time at all: give a duration above zero"),
    # gate: with another value
    ("  - {from: coder, to: deployer, gate: robot}\n",
     "11:39: routes[0].gate: gate: 'robot' is not a gate; `gate: person` makes each hand-off wait for a "
     "person (baton pass / baton drop)"),
    # a list naming a tile twice, an empty list, a default outside the choice
    ("  - {from: coder, to: [security, security]}\n",
     "11:34: routes[0].to[1]: tile 'security' is listed twice"),
    ("  - {from: coder, to: []}\n", "11:23: routes[0].to: an empty list in to: names no tile"),
    ("  - {from: planner, to: {choose: [backend, coder], default: style}, transform: {type: ai-routing}}\n",
     "11:61: routes[0].to.default: default tile 'style' is not one of choose: backend, coder"),
])
def test_each_wrong_shape_gets_one_positioned_error(routes: str, expected: str) -> None:
    assert problems(routes) == [expected]


def test_answers_must_name_a_tile_of_the_join() -> None:
    found = problems('  - {from: [security, style], to: coder, transform: {type: template, '
                     'template: "{answers[security]} and {answers[nobody]}"}}\n')
    assert found == ["11:80: routes[0].transform.template: {answers[nobody]} names no tile of this route's "
                     "from: (its tiles: security, style)"]


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400),
                                           ("1h30m", 5400), ("1.5h", 5400)])
def test_durations(text: str, seconds: float) -> None:
    assert duration_s(text) == seconds


@pytest.mark.parametrize("text", ["30", "-5m", "5 minutes", "m", "", "0s"])
def test_not_durations(text: str) -> None:
    with pytest.raises(ValueError):
        duration_s(text)


def baton(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_check_graph_draws_fan_out_join_choice_and_gate(tmp_path: Path) -> None:
    (tmp_path / "routes.yaml").write_text(GOOD)
    done = baton("check", "--graph", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    graph = done.stdout.splitlines()
    assert graph[0] == "flowchart LR"
    ids = {name: f"t{i}" for i, name in enumerate(["coder", "security", "style", "planner", "backend",
                                                     "deployer"])}
    assert f'  {ids["coder"]}["coder<br/><small>claude</small>"]' in graph
    # fan-out: one edge per target
    assert f'  {ids["coder"]} -->|"review"| {ids["security"]}' in graph
    assert f'  {ids["coder"]} -->|"review"| {ids["style"]}' in graph
    # join: its own node, fed by each source, one edge on to the target
    assert '  r1(["verdicts: join all within 30m, then hand-on"])' in graph
    join_edges = {f"  {ids['security']} --> r1", f"  {ids['style']} --> r1",
                  f'  r1 -->|"verdicts"| {ids["coder"]}'}
    assert join_edges <= set(graph)
    # choice: a diamond, dashed edges to the tiles it picks from, the default said
    assert '  r2_pick{"dispatch: a model picks"}' in graph
    assert f'  r2_pick -.->|"default"| {ids["backend"]}' in graph
    assert f"  r2_pick -.-> {ids['coder']}" in graph
    # gate: a thick edge that says so
    assert f'  {ids["coder"]} ==>|"release · gate: person"| {ids["deployer"]}' in graph
    as_json = json.loads(baton("check", "--graph", "--json", cwd=tmp_path).stdout)
    assert as_json["ok"] and as_json["graph"] == done.stdout


def test_check_graph_of_a_broken_file_says_its_errors(tmp_path: Path) -> None:
    (tmp_path / "routes.yaml").write_text(TILES + "  - {from: [security], to: coder}\n")
    done = baton("check", "--graph", cwd=tmp_path)
    assert done.returncode == 1 and "flowchart" not in done.stdout
    assert "a join needs two or more tiles" in done.stderr


def test_a_label_with_quotes_and_brackets_stays_one_label(tmp_path: Path) -> None:
    route = '  - {name: "say \\"hi\\" <now>", from: coder, to: style}\n'
    (tmp_path / "routes.yaml").write_text(TILES + route)
    done = baton("check", "--graph", cwd=tmp_path)
    assert '-->|"say #quot;hi#quot; #lt;now#gt;"|' in done.stdout
