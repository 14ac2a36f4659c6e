"""The README and docs/ as a newcomer meets them: every relative link leads to a file that exists and, with
an ``#anchor``, to a heading there; the README stays short enough to read to the end, keeps the two
commands CI and people run, and its first routes.yaml passes ``baton check``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
#: the README's two commands, run as they are by .ci/run and by people from a fresh clone
COMMANDS = [
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/baton demo",
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest -n 2",
]
MAX_README_LINES = 200

_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose(text: str) -> str:
    """The text outside fenced code blocks, with code blanked (a link written in code is an example, not a
    link); line breaks stay where they were, so that a position still gives its line."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            lines.append("")
            continue
        lines.append("" if fenced else line)
    return _CODE_SPAN.sub(lambda span: "\n" * span.group(0).count("\n"), "\n".join(lines))


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.replace("`", "").strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in page.read_text().splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """Each link's line and target; a link's text may run over two lines."""
    text = prose(page.read_text())
    return [(text.count("\n", 0, match.start()) + 1, match.group(1)) for match in _LINK.finditer(text)]


def broken(page: Path, root: Path = REPO) -> list[str]:
    """Each link of ``page`` that leads nowhere, as ``PAGE:LINE: TARGET: why`` (paths from ``root``)."""
    problems = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: …: not ours to check
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(root)}")
    return problems


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    assert len(PAGES) > 5
    problems = [problem for page in PAGES for problem in broken(page)]
    assert problems == [], "\n".join(problems)


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Its `--json` part: fields\n\n"
                                       "## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[ok](other.md#its---json-part-fields) [ok](other.md#twice-1) [ok](#page)\n"
                    "[gone](missing.md) [no heading](other.md#nowhere) `[in code](missing.md)`\n"
                    "a `code span\nover two lines` and [a link over\ntwo lines](gone.md)\n"
                    "```\n[in a block](missing.md)\n```\n[web](https://example.com/x)\n")
    assert broken(page, tmp_path) == ["page.md:4: missing.md: no such file",
                                      "page.md:4: other.md#nowhere: no heading #nowhere in other.md",
                                      "page.md:6: gone.md: no such file"]


def test_the_readme_is_short_enough_to_read_to_the_end() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: move detail to docs/"


def test_the_readme_keeps_its_two_commands() -> None:
    lines = README.read_text().splitlines()
    for command in COMMANDS:
        assert command in lines, command


def test_every_page_in_docs_is_linked_from_the_readme() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in links(README)}
    unlinked = [page.name for page in PAGES[1:] if page.resolve() not in linked]
    assert unlinked == []


def test_the_readmes_first_routes_yaml_passes_check(tmp_path: Path) -> None:
    text = README.read_text().split("## A first routes.yaml", 1)[1]
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    config = tmp_path / "routes.yaml"
    config.write_text(block)
    result = subprocess.run([sys.executable, "-m", "pipeline.cli", "check", "-c", str(config)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


#: a file of the repository named in code, ``tests/x.py`` or ``tests/x.py::test_name``
_NAMED_FILE = re.compile(r"`((?:pipeline|plugins|tests|bench|docs)/[\w./-]+?)(?:::(\w+))?`")


def test_every_file_and_test_the_pages_name_exists() -> None:
    """A page that cites ``plugins/codex/follow.py`` or ``tests/test_amp.py::test_…`` sends a reader there:
    after a rename the citation must follow."""
    missing = []
    for page in PAGES:
        for match in _NAMED_FILE.finditer(page.read_text()):
            path, name = match.groups()
            target = REPO / path
            where = f"{page.relative_to(REPO)}: {match.group(0)}"
            if not target.exists():
                missing.append(f"{where}: no such file")
            elif name and not re.search(rf"^\s*(?:async\s+)?def {name}\b", target.read_text(), re.M):
                missing.append(f"{where}: no test {name} there")
    assert missing == [], "\n".join(missing)
