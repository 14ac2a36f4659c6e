"""Claude Code's wrapper around pasted text, removed from prompts read back from its transcript.

Seen on the real 2.1.332 (docs/agents.md, Claude Code 2.1.332): a bracketed paste of 4 lines or more, or of
more than 800 characters (tests/test_claude_e2e.py finds these limits on the real CLI), reaches the transcript
— and the model — as ``\\n\\n<pasted_content id="00d6">\\n<the text>\\n</pasted_content id="00d6">\\n``, the
text inside intact. Anything that looks for a hand-off's prompt in the target's transcript (``received()``
after a crash mid-delivery, "was this prompt already typed?") compares the unwrapped text, or a delivered
prompt would be taken for undelivered and typed twice. The dispatcher pastes a hand-off as one unit, so a
template's own instruction travels inside the same wrapper as the answer it frames: the model reads it all as
the user's paste, which is what a person pasting the same text would get — splitting the paste to keep the
instruction outside would break the one-unit rule that keeps a half-delivered prompt from ever being
submitted.
"""

from __future__ import annotations

import re

__all__ = ["normalized", "unwrap_paste"]

_WRAPPED = re.compile(
    r'\n*<pasted_content id="([^"\n]{1,64})">\n(.*?)\n?</pasted_content id="\1">\n?', re.DOTALL
)


def unwrap_paste(text: str) -> str:
    """``text`` with every ``<pasted_content>`` wrapper replaced by the text it wraps; a message that is
    only a wrapper gives back exactly the pasted text. Text without a wrapper is returned unchanged."""
    if "<pasted_content id=" not in text:
        return text
    return _WRAPPED.sub(lambda m: m.group(2), text)


def normalized(text: str) -> str:
    """For comparing a typed prompt with its transcript line: wrapper removed, line ends unified,
    whitespace at both ends dropped (the terminal and the CLI may trim or add it)."""
    return unwrap_paste(text).replace("\r\n", "\n").replace("\r", "\n").strip()
