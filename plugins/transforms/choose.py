"""``ai-routing`` on a route whose target a model picks (``to: {choose: [backend, frontend]}``): one Messages
call both chooses the tile and writes its prompt.

The answer is structured, not parsed from prose: the request offers one tool, ``hand_off``, whose
``target`` is an enum of the listed tiles, and forces the model to call it (``tool_choice``). What comes
back is still read without trusting its shape — a proxy or an older model may answer with text, no tool
call, or a tile that was not offered — and anything but a listed tile with a prompt is a failure the
transform falls back from (docs/workflows.md: the route's ``default:``, or a skip with ``on_error: skip``).
"""

from __future__ import annotations

from typing import Any

from pipeline.plugin import Candidate, TransformInput

__all__ = ["TOOL", "ChoiceRefused", "choice_message", "hand_off_tool", "read_choice"]

TOOL = "hand_off"


class ChoiceRefused(Exception):
    """The model's answer names no listed tile, or holds no prompt: the message says what it did."""


def hand_off_tool(choices: tuple[Candidate, ...]) -> dict[str, Any]:
    """The one tool the model must call: the tile (one of ``choices``) and the prompt for it."""
    return {
        "name": TOOL,
        "description": "Hand the work to one of the listed agents: name its tile and write its prompt.",
        "input_schema": {
            "type": "object",
            "properties": {
                "target": {"type": "string", "enum": [c.tile for c in choices],
                           "description": "the tile whose agent should do this work"},
                "prompt": {"type": "string",
                           "description": "the prompt for that agent, ready to paste (the rules above)"},
                "why": {"type": "string", "description": "one short sentence: why this tile"},
            },
            "required": ["target", "prompt"],
        },
    }


def choice_message(data: TransformInput, answer: str, instructions: str) -> str:
    """The user message of a choosing call: the source, the candidates with their descriptions, the
    route's instructions and the answer."""
    lines = [f"source: tile {data.source!r}, agent {data.source_agent}"
             + (f" — {data.source_description}" if data.source_description else ""),
             f"the source's turn: {data.response.completion.outcome}"]
    if data.cwd:
        lines.append(f"the source's working directory: {data.cwd}")
    tiles = "\n".join(f"- tile {c.tile!r}, agent {c.agent}" + (f": {c.description}" if c.description else "")
                      for c in data.choices)
    return (f"<handoff route=\"{data.route}\">\n" + "\n".join(lines) + "\n</handoff>\n\n"
            f"<targets>\n{tiles}\n</targets>\n\n"
            f"<instructions>\n{instructions}\n</instructions>\n\n"
            f"<answer>\n{answer}\n</answer>\n\n"
            f"Choose the one target whose description fits this work best, and write the prompt for it. "
            f"Answer only by calling {TOOL}.")


def read_choice(message: Any, choices: tuple[Candidate, ...]) -> tuple[str, str, str]:
    """(target, prompt, why) from the model's ``hand_off`` call; :class:`ChoiceRefused` when it chose no
    listed tile or wrote no prompt."""
    content = getattr(message, "content", None)
    blocks = content if isinstance(content, list) else []
    calls = [b for b in blocks if getattr(b, "type", None) == "tool_use" and getattr(b, "name", None) == TOOL]
    if not calls:
        wrote = " ".join(str(getattr(b, "text", "")) for b in blocks if getattr(b, "type", None) == "text")
        raise ChoiceRefused(f"the model did not call {TOOL}"
                            + (f" (it wrote: {wrote.strip()[:80]!r})" if wrote.strip() else ""))
    given = getattr(calls[0], "input", None)
    given = given if isinstance(given, dict) else {}
    target, prompt, why = given.get("target"), given.get("prompt"), given.get("why")
    listed = [c.tile for c in choices]
    if target not in listed:
        raise ChoiceRefused(f"the model chose {target!r}, not one of {', '.join(listed)}")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ChoiceRefused(f"the model chose {target!r} but wrote no prompt")
    return str(target), prompt.strip(), why.strip() if isinstance(why, str) else ""
