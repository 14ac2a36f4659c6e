"""How a shell tile's screen is read: which lines are prompt lines, and the command on them."""

from __future__ import annotations

import pytest

from plugins.terminal.adapter import command_on


@pytest.mark.parametrize("line,prompt,command", [
    ("$ echo hi", "$ ", "echo hi"),
    ("$", "$ ", ""),                                  # an Enter on an empty line (trailing space trimmed)
    ("bash-5.2# ls -l", "bash-5.2# ", "ls -l"),
    ("echo hi$ echo hi", "$ ", "echo hi"),            # typed before the shell drew its prompt: echoed twice
    ("hi", "$ ", None),
    ("price: 5$ each", "$ ", None),                   # output that happens to hold the prompt
    ("", "$ ", None),
])
def test_prompt_lines_and_their_commands(line: str, prompt: str, command: str | None) -> None:
    assert command_on(line, prompt) == command
