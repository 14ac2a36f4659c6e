"""docs/json.md's exit statuses against the CLI that defines the commands, and the places where a stranger
put routes.yaml's `tmux:` under `settings:` (the README's sentence, `baton check`'s message) — issue 39."""

from __future__ import annotations

import argparse
import re

from pipeline.cli import _parser
from pipeline.engine.config import Config, ConfigError, parse_config
from pipeline.engine.config_checks import TOP_LEVEL
from pipeline.plugin.manager import load_registries
from tests.support.paths import REPO

JSON_DOC = REPO / "docs" / "json.md"


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command `baton` runs, as typed (`status`, `hooks install`: a group's actions, not the group),
    with its parser."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= subcommands(sub, f"{prefix}{name} ") or {f"{prefix}{name}": sub}
    return found


def documented_commands() -> set[str]:
    """The commands named in the first cell of the per-command exit-status table (`resolve TILE|PANE`:
    `resolve`; `history --follow`: `history`; `approve TILE`, `deny TILE`: both)."""
    text = JSON_DOC.read_text()
    table = text[text.index("| command | 0 | 1 | other |"):].split("\n\n", 1)[0]
    named: set[str] = set()
    for row in table.splitlines()[2:]:
        for code in re.findall(r"`([^`]+)`", row.split(" | ", 1)[0]):
            words = []
            for word in code.split():
                if not re.fullmatch(r"[a-z]+", word):
                    break
                words.append(word)
            named.add(" ".join(words))
    return named


def test_json_md_has_an_exit_status_row_for_every_command_the_cli_defines() -> None:
    defined = set(subcommands(_parser()))
    assert {"approve", "deny", "hold", "resume", "retry", "web", "hooks install"} <= defined
    missing = sorted(defined - documented_commands())
    assert missing == [], f"docs/json.md has no exit-status row for: {missing}"


def test_json_md_says_web_port_takes_0_for_any_free_port() -> None:
    web = subcommands(_parser())["web"]
    assert web.parse_args(["--port", "0"]).port == 0  # the parser takes it: any free port
    assert "`web --port` 0 to 65535 — 0: any free port" in JSON_DOC.read_text()


def test_tmux_under_settings_is_told_it_is_a_top_level_key() -> None:
    text = ("version: 1\ntiles:\n  a: {pane: '%1', agent: shell}\nsettings:\n  max_hops: 3\n"
            "  tmux: {socket_name: agents}\n")
    try:
        parse_config(text, "r.yaml", load_registries())
    except ConfigError as exc:
        problems = [str(p) for p in exc.problems]
    else:
        raise AssertionError("tmux under settings: was accepted")
    assert len(problems) == 1
    assert problems[0].startswith("r.yaml:6:3: error: settings.tmux: unknown key 'tmux'")
    assert problems[0].endswith("; tmux is a top-level key, beside tiles: (not under settings:)"), problems


def test_the_hint_knows_every_top_level_key() -> None:
    assert set(TOP_LEVEL) == set(Config.model_fields) - {"settings", "path"}


def test_the_readme_and_the_example_say_tmux_is_top_level() -> None:
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`tmux: {socket_name: NAME}`, top level (not under `settings:`)" in readme
    example = (REPO / "routes.yaml").read_text()
    said = r"^tmux: +# a top-level key, beside tiles: and settings: \(not under settings:\)$"
    assert re.search(said, example, re.M)


def test_web_md_says_what_the_page_shows_where_the_board_shows_a_dash() -> None:
    """The board's TOKENS `-` (no usage) is no line on the page; a model with no price: tokens alone."""
    from pipeline.plugin.usage import SessionUsage
    from pipeline.views.board import TileView
    from pipeline.web.feed import _tile

    none = _tile(TileView("sh", "shell"), "here", True)
    unpriced = _tile(TileView("c", "claude", usage=SessionUsage(input=12_000, cost_usd=None)), "here", True)
    assert (none["tokens"], none["cost"]) == ("", "")  # board.js writes no usage line for ""
    assert (unpriced["tokens"], unpriced["cost"]) == ("12k", "")
    web = " ".join((REPO / "docs" / "web.md").read_text().split())
    assert "Where the board shows `-`" in web and "the card shows nothing at all" in web
    assert "a model with no known price shows its tokens alone (`12k tokens`)" in web
