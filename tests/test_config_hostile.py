"""routes.yaml files that people and attackers really produce (#16): each is refused by the real
`baton check` with FILE:LINE:COL and exit status 1, quickly, never a traceback or a hang. `baton run` reads
the same file at start and on every live reload (tests/test_daemon_faults.py covers the reload)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.engine.config import ConfigError, parse_config
from pipeline.engine.yaml_text import ALIAS_BUDGET, MAX_BYTES, MAX_DEPTH
from tests.support.agents import messages, start_agent
from tests.support.cli import baton
from tests.support.daemons import write_config
from tests.support.polling import wait_for

VALID = "version: 1\ntiles:\n  a: {pane: '%1', agent: shell}\n  b: {pane: '%2', agent: shell}\n" \
        "routes:\n  - {from: a, to: b}\n"


def billion_laughs(levels: int = 9) -> str:
    lines = ["version: 1", "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines.append("tiles:\n  a: {pane: '%1'}")
    return "\n".join(lines) + "\n"


CASES = {
    # name: (bytes, expected position, words the one error must hold)
    "pane name not UTF-8": (b"version: 1\ntiles:\n  a: {pane: 'caf\xe9', agent: shell}\n", "3:17",
                            "not UTF-8: byte 0xe9"),
    "2 KB of binary": (bytes(range(256)) * 8, "1:1", "binary content, not text"),
    "a tile twice": (b"version: 1\ntiles:\n  a: {pane: '%1', agent: shell}\n"
                     b"  a: {pane: '%2', agent: codex}\n", "4:3", "tile 'a' defined twice: at 3:3 and 4:3"),
    "aliases nested 9 deep": (billion_laughs().encode(), "",
                              f"aliases expand the document past {ALIAS_BUDGET}"),
    "5,000 nested [": (b"version: 1\ntiles: " + b"[" * 5000 + b"\n", "",
                       f"nested deeper than {MAX_DEPTH} levels"),
    "over 1 MB": (b"version: 1\n" + b"# padding\n" * (MAX_BYTES // 10 + 1), "1:1",
                  "the file is over 1024 KB"),
    "UTF-16": ("version: 1\n".encode("utf-16"), "1:1", "the file is UTF-16"),
    "a NUL in a value": (b"version: 1\ntiles:\n  a: {pane: '%1\x00'}\n", "", "binary content"),
    "a second document": (VALID.encode() + b"---\nversion: 1\n", "", "a second YAML document"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_baton_check_refuses_with_a_position(tmp_path: Path, name: str) -> None:
    data, position, words = CASES[name]
    path = tmp_path / "routes.yaml"
    path.write_bytes(data)
    result = baton("check", "-c", str(path), timeout=20)  # a hang would be a timeout, not a slow pass
    assert result.status == 1, (name, result)
    assert "Traceback" not in result.err, result.err
    first = result.err.splitlines()[0]
    where = position or r"\d+:\d+"
    assert re.match(re.escape(str(path)) + ":" + where + ": error: ", first), (name, first)
    assert words in first, (name, first)


def test_the_duplicate_names_both_positions_anywhere(tmp_path: Path) -> None:
    text = VALID.replace("  - {from: a, to: b}", "  - {from: a, to: b, from: b}")
    with pytest.raises(ConfigError) as err:
        parse_config(text, "r.yaml")
    assert "'from' defined twice: at 6:6 and 6:22" in str(err.value.problems[0]), err.value.problems


def test_an_ordinary_alias_still_works() -> None:
    """Sharing one template between two routes is ordinary YAML: aliases within the budget are read."""
    text = ("version: 1\ntiles:\n  a: {pane: '%1', agent: shell}\n  b: {pane: '%2', agent: shell}\n"
            "routes:\n  - {from: a, to: b, transform: &t {type: template, template: 'see {response}'}}\n"
            "  - {from: b, to: a, transform: *t}\n")
    config, _ = parse_config(text, "r.yaml")
    assert config.routes[0].transform == config.routes[1].transform


def test_an_alias_loop_and_an_unknown_alias_are_positioned() -> None:
    for text, words in (("version: 1\ntiles: &x {a: *x}\n", "is inside the collection it names"),
                        ("version: 1\ntiles: *nowhere\n", "names no anchor")):
        with pytest.raises(ConfigError) as err:
            parse_config(text, "r.yaml")
        problem = err.value.problems[0]
        assert problem.line == 2 and words in problem.message, problem


# ---- baton run: refused at start, survived on reload ---------------------------------------------------


@pytest.mark.parametrize("name", ["2 KB of binary", "aliases nested 9 deep"])
def test_baton_run_refuses_the_file_at_start(tmp_path: Path, name: str) -> None:
    path = tmp_path / "routes.yaml"
    path.write_bytes(CASES[name][0])
    result = baton("run", "-c", str(path), timeout=30)
    assert result.status == 1 and "Traceback" not in result.err, result
    assert re.match(re.escape(str(path)) + r":\d+:\d+: error: ", result.err), result.err


@pytest.mark.tmux
def test_a_running_daemon_keeps_its_config_through_hostile_reloads(tmux_server, tmp_path: Path,
                                                                   daemon_factory) -> None:
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a, b = start_agent(tmux_server, alog, "a", work_s=0.1), start_agent(tmux_server, blog, "b", work_s=0.1)
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
                          [{"from": "a", "to": "b"}])
    good = config.read_bytes()
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    for turn, name in enumerate(["2 KB of binary", "aliases nested 9 deep", "5,000 nested ["]):
        data, _, words = CASES[name]
        config.write_bytes(data)
        wait_for(lambda w=words: w in daemon.stderr(), what=f"the reload error for {name}")
        tmux_server.type(a, f"turn {turn}")
        wait_for(lambda t=turn: messages(blog)[-1:] == [f"turn {t}"], what=f"a hand-off after {name}")
        config.write_bytes(good)
    assert daemon.stop() == 0
    assert messages(blog) == ["turn 0", "turn 1", "turn 2"]
    assert "Traceback" not in daemon.stderr()


@pytest.mark.parametrize("shape", ["all to all", "a long chain"])
def test_route_graphs_that_would_take_forever_to_walk(tmp_path: Path, shape: str) -> None:
    """The cycle warning looks within a budget: 40 tiles routed to each other (exponentially many cycles)
    and a 3,000-tile ring (deeper than Python's stack) load and warn."""
    n = 40 if shape == "all to all" else 3000
    tiles = {f"t{i:04}": {"pane": f"%{i}", "agent": "shell"} for i in range(n)}
    names = sorted(tiles)
    pairs = [(a, b) for a in names for b in names if a != b] if shape == "all to all" else \
        [(names[i], names[(i + 1) % n]) for i in range(n)]
    path = tmp_path / "routes.yaml"
    routes = [{"from": a, "to": b} for a, b in pairs]
    path.write_text(json.dumps({"version": 1, "tiles": tiles, "routes": routes}))
    result = baton("check", "-c", str(path), timeout=120)
    assert result.status == 0, result.err[-500:]
    assert "routes form a cycle" in result.err
