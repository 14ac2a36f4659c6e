"""Issue 34, the plugin items as a newcomer meets them: the docs' transform example installed and listed with
its summary and used with its option, the README naming every agent ``baton plugins`` lists, and
``baton extract`` knowing whose file it is given."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.agents import start_agent
from tests.support.cli import baton
from tests.support.paths import FIXTURES, REPO
from tests.support.plugins import install_plugin
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

ARCHITECTURE = REPO / "docs" / "architecture.md"


def transform_example() -> str:
    """The module docs/architecture.md shows under ``<!-- transform-example: baton_shout.py -->``."""
    found = re.search(r"<!-- transform-example: baton_shout.py -->\n```python\n(.*?)^```",
                      ARCHITECTURE.read_text(), re.S | re.M)
    assert found, "docs/architecture.md lost its transform example"
    return found.group(1)


def test_the_docs_transform_example_is_listed_with_its_docstring_and_takes_its_option(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site, "baton_shout", transform_example(), "baton-shout", "0.1", "shout")
    env = {"PYTHONPATH": str(site), "BATON_DISABLE_EXTERNAL_PLUGINS": ""}
    listed = baton("plugins", "--json", env=env)
    assert listed.status == 0, listed
    rows = {r["name"]: r for r in json.loads(listed.out)["classes"]}
    assert rows["shout"]["from"] == "baton-shout 0.1"
    assert rows["shout"]["summary"] == 'Upper-cases the answer and ends it with `suffix` (default "!").'
    table = baton("plugins", env=env)
    assert 'shout        baton-shout 0.1       Upper-cases the answer' in table.out, table.out

    routes = tmp_path / "routes.yaml"
    routes.write_text("version: 1\ntiles: {a: {pane: '%1'}, b: {pane: '%2'}}\n"
                      "routes:\n  - {from: a, to: b, transform: {type: shout, suffix: ' !!'}}\n")
    shouted = baton("-c", str(routes), "preview", "a->b", "--input", "-", input="ship it", env=env)
    assert (shouted.status, shouted.out, shouted.err) == (0, "SHIP IT !!\n", ""), shouted
    routes.write_text(routes.read_text().replace("suffix", "sufix"))
    wrong = baton("-c", str(routes), "check", env=env)
    assert wrong.status == 1 and "unknown option 'sufix' for transform 'shout'" in wrong.err, wrong


def test_the_readme_names_every_built_in_agent_with_a_line() -> None:
    """``terminal`` and ``demo`` were missing from the README's list of agents."""
    listed = baton("plugins", "--json", env={"BATON_DISABLE_EXTERNAL_PLUGINS": "1"})
    agents = {r["name"] for r in json.loads(listed.out)["classes"] if r["kind"] == "agent"}
    assert {"terminal", "demo"} <= agents
    readme = (REPO / "README.md").read_text()
    lines = [line for line in readme.splitlines() if line.startswith("- `")]
    missing = [a for a in sorted(agents) if not any(f"`{a}`" in line.split(":")[0] for line in lines)]
    assert missing == [], f"README.md lists no line for the agents {missing}"


# ---- item 7: `baton extract` knows a file by its shape -----------------------------------------------------

CODEX_ROLLOUT = (FIXTURES / "codex" / "codex_home" / "sessions" / "2026" / "12" / "02"
                 / "rollout-2026-12-02T13-33-09-01a236f5-84d9-7100-93e1-206418a9f3b1.jsonl")
OLD_ROLLOUT = (FIXTURES / "codex-old"
               / "rollout-2025-09-05T17-07-46-c27a914d-8e1f-4b7a-9d2c-6f3e5a1b0c9d.jsonl")
OPENCODE_STORE = FIXTURES / "opencode" / "opencode.db"


def test_extract_without_agent_reads_a_codex_rollout_and_an_opencode_store_as_theirs(tmp_path: Path) -> None:
    """A Codex rollout read without ``--agent`` said "holds no turn: no prompt was written to it"."""
    for path, agent in ((CODEX_ROLLOUT, "codex"), (OLD_ROLLOUT, "codex"), (OPENCODE_STORE, "opencode")):
        found = baton("extract", str(path))
        as_json = json.loads(baton("extract", "--json", str(path)).out)
        assert as_json["agent"] == agent and as_json["text"].strip()
        assert (found.status, found.out.rstrip("\n"), found.err) == (0, as_json["text"].rstrip("\n"), "")
    wrong = baton("extract", "--agent", "claude", str(CODEX_ROLLOUT))
    wrong.one_line_error(1, "; it is a Codex rollout: use --agent codex")


def test_extract_of_an_empty_name_is_refused_not_read_as_this_folder() -> None:
    result = baton("extract", "")
    line = result.one_line_error(2, "FILE is empty: name the file")
    assert "is a folder" not in line


@pytest.mark.tmux
def test_extract_reads_the_demo_transcript_status_names(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """status and resolve show a transcript for a demo tile: ``extract --agent demo`` reads it (it said
    "the demo adapter reads no files"), and without ``--agent`` it is known for a demo transcript."""
    pane = start_agent(tmux_server, tmp_path / "agent.jsonl", "agent", work_s=0.05)
    tmux_server.type(pane, "hello from the demo")
    wait_for(lambda: tmux_server.capture(pane).count("hello from the demo") >= 2, what="the demo's answer")
    routes = tmp_path / "routes.yaml"
    routes.write_text(json.dumps({"version": 1, "tmux": {"socket_name": tmux_server.socket},
                                  "tiles": {"d": {"pane": pane, "agent": "demo"}}, "routes": []}))
    status = baton("-c", str(routes), "status", "--json")
    transcript = json.loads(status.out)[0]["transcript"]
    assert transcript and Path(transcript).is_file(), status
    told = baton("extract", "--agent", "demo", transcript)
    assert (told.status, told.out, told.err) == (0, "hello from the demo\n", ""), told
    found = baton("extract", transcript)
    assert (found.status, found.out) == (0, "hello from the demo\n"), found
