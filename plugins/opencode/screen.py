"""OpenCode's screen: the text waiting in its input box."""

from __future__ import annotations

from pipeline.plugin.tools import strip_ansi

__all__ = ["input_draft"]


def input_draft(screen: str, placeholders: tuple[str, ...] = ("Ask anything",)) -> str:
    """The text in OpenCode's input box: the ``┃`` lines above its mode line (``┃  Build · …``), which sits
    on the box's bottom border (``╹▀▀▀``). Empty when the box is empty or shows its placeholder."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    bottom = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].lstrip().startswith("╹▀")), None)
    if bottom is None or bottom < 1:
        return ""
    box = []
    for line in reversed(lines[: bottom - 1]):  # above the mode line
        stripped = line.strip()
        if not stripped.startswith("┃"):
            break
        box.append(stripped[1:].strip())
    text = "\n".join(reversed(box)).strip()
    return "" if any(text.startswith(p) for p in placeholders) else text
