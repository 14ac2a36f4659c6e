"""Issue 34, the plugin items as a newcomer meets them: the docs' transform example installed and listed with
its summary and used with its option, and the README naming every agent ``baton plugins`` lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.cli import baton
from tests.support.paths import REPO
from tests.support.plugins import install_plugin

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
