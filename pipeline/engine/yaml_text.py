"""routes.yaml from bytes to a YAML node tree, refusing hostile input before anything is built from it.

routes.yaml is written by people, editors and merges, and read again on every live reload of a running
daemon, so no file may crash, hang or pass silently. Every refusal carries the line and column it is about,
and each is answered in well under a second, whatever the file holds:

- size: over :data:`MAX_BYTES` is refused after reading one byte past the limit, never the whole file;
- text: bytes that are not UTF-8, binary content (a NUL byte, or mostly non-text), a UTF-16/32 file, and
  characters YAML forbids are refused at the first offending byte, before the YAML parser sees them;
- nesting: checked on the parser's *event stream* while it is read, so 5,000 nested ``[`` stop at level
  :data:`MAX_DEPTH` (PyYAML's composer is recursive and would end in a RecursionError);
- aliases: allowed, because sharing one long template between two routes is ordinary YAML, but what they
  add is counted on the event stream without expanding anything: at most :data:`ALIAS_BUDGET` nodes in all
  (a 1 KB "billion laughs" file would otherwise expand to 10^9 nodes and hang the loader), no alias to a
  collection that contains it, and the expanded depth is held to :data:`MAX_DEPTH` too.

The tree is composed from the checked events iteratively (no recursion), with libyaml's parser when it is
installed (30x faster than the pure-Python one: a 1 MB file parses in ~0.1 s instead of ~4 s).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ALIAS_BUDGET", "MAX_BYTES", "MAX_DEPTH", "NESTED_TOO_DEEP", "TextProblem", "check_text",
           "compose_checked", "decode_checked", "read_checked"]

#: routes.yaml is a few KB; a megabyte is already thousands of tiles
MAX_BYTES = 1024 * 1024
#: the schema nests at most 5 collections deep (routes[0].transform.OPTION[...]); room for plugin options
MAX_DEPTH = 20
#: nodes that aliases may add to the document, in all
ALIAS_BUDGET = 10_000

NESTED_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels; nothing in routes.yaml needs more than a few"

_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: what YAML 1.1 accepts as text (its reader refuses the rest, but with an offset, not a line and column)
_NOT_YAML_TEXT = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32",
         b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


@dataclass(frozen=True)
class TextProblem(Exception):
    """Why the file cannot be read as routes.yaml, and where (1-based line and column)."""

    line: int
    col: int
    message: str


def read_checked(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes; :class:`TextProblem` when it is over :data:`MAX_BYTES` (found after reading one
    byte past the limit, so ``/dev/zero`` or a runaway FIFO is refused too). OSError passes through."""
    with Path(path).open("rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise TextProblem(1, 1, f"the file is over {MAX_BYTES // 1024} KB; routes.yaml is a few KB of text "
                                "(is this the right file?)")
    return data


def decode_checked(data: bytes) -> str:
    """``data`` as text; :class:`TextProblem` at the first byte that is not UTF-8 YAML text."""
    for bom, name in _BOMS.items():
        if data.startswith(bom):
            raise TextProblem(1, 1, f"the file is {name} (it starts with a {name} byte order mark); "
                                    "save it as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start
        if _looks_binary(data):
            raise _binary(data, min(bad, _first_nul(data))) from None
        line, col = _position(data, bad)
        raise TextProblem(line, col, f"not UTF-8: byte 0x{data[bad]:02x} (byte offset {bad}) {exc.reason}; "
                                     "save the file as UTF-8") from None
    if (odd := _NOT_YAML_TEXT.search(text)) is not None and _looks_binary(data):
        raise _binary(data, len(text[:odd.start()].encode("utf-8")))
    check_text(text)
    return text


def check_text(text: str) -> None:
    """:class:`TextProblem` at the first character YAML does not accept as text (a control character, or a
    lone surrogate in text that did not come from bytes)."""
    if (odd := _NOT_YAML_TEXT.search(text)) is not None:
        at = odd.start()
        line, col = text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1
        code = ord(odd.group())
        kind = "a lone surrogate" if 0xD800 <= code <= 0xDFFF else "a non-character" if code > 0xFFFD else \
            "a control character"
        raise TextProblem(line, col, f"character U+{code:04X} ({kind}) is not allowed in YAML text; "
                                     "write it as "
                                     "an escape (\"\\x..\") inside double quotes")


def _first_nul(data: bytes) -> int:
    at = data.find(b"\x00")
    return len(data) if at < 0 else at


def _looks_binary(data: bytes) -> bool:
    """A NUL byte, or more than a tenth of the first 4 KB neither text nor UTF-8: not a text file at all."""
    if b"\x00" in data:
        return True
    head = data[:4096]
    text = head.decode("utf-8", "replace")
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\r\n"))
    return odd * 10 > len(text)


def _binary(data: bytes, at: int) -> TextProblem:
    line, col = _position(data, at)
    return TextProblem(line, col, f"binary content, not text (byte 0x{data[at]:02x} at byte offset {at}); "
                                  "routes.yaml must be YAML text in UTF-8")


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of the byte at ``offset``."""
    start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, len(data[start:offset].decode("utf-8", "replace")) + 1


class _Open:
    """A collection being composed: its node, its children, and what its aliases expand to."""

    __slots__ = ("anchor", "children", "height", "node", "size")

    def __init__(self, node: yaml.Node, anchor: str | None) -> None:
        self.node, self.anchor = node, anchor
        self.children: list[yaml.Node] = []
        self.size, self.height = 1, 1


def compose_checked(text: str) -> yaml.Node | None:
    """The document's node tree (None for an empty file). Raises :class:`TextProblem` for nesting or alias
    expansion past the limits, and yaml.YAMLError for what the YAML parser itself refuses."""
    composer = _Composer()
    event: Any  # PyYAML's stubs leave every event's marks optional; the parser always sets them
    for event in yaml.parse(text, Loader=_Parser):
        on_event = _ON_EVENT.get(type(event))
        if on_event is not None:
            on_event(composer, event)
    return composer.root


class _Composer:
    """What :func:`compose_checked` keeps between events: the open collections, the anchors seen with
    what each expands to, and the nodes aliases have added so far."""

    def __init__(self) -> None:
        self.resolver = yaml.resolver.Resolver()
        self.anchors: dict[str, tuple[yaml.Node, int, int]] = {}  # node, expanded size, expanded height
        self.stack: list[_Open] = []
        self.root: yaml.Node | None = None
        self.added = 0
        self.documents = 0

    def attach(self, node: yaml.Node, size: int, height: int) -> None:
        """``node`` becomes the next child of the innermost open collection, or the root."""
        if self.stack:
            parent = self.stack[-1]
            parent.children.append(node)
            parent.size += size
            parent.height = max(parent.height, height + 1)
        else:
            self.root = node

    def document_start(self, event: Any) -> None:
        self.documents += 1
        if self.documents > 1:
            mark = event.start_mark
            raise TextProblem(mark.line + 1, mark.column + 1,
                              "a second YAML document (after ---); routes.yaml holds exactly one")

    def scalar(self, event: Any) -> None:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        _remember(self.anchors, event, node, 1, 0)
        self.attach(node, 1, 0)

    def collection_start(self, event: Any) -> None:
        """A sequence or mapping opens: refused past :data:`MAX_DEPTH`, before anything deeper is read."""
        if len(self.stack) >= MAX_DEPTH:
            mark = event.start_mark
            raise TextProblem(mark.line + 1, mark.column + 1, NESTED_TOO_DEEP)
        kind = yaml.SequenceNode if isinstance(event, yaml.SequenceStartEvent) else yaml.MappingNode
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(kind, None, event.implicit)
        collection = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
        self.stack.append(_Open(collection, event.anchor))

    def collection_end(self, event: Any) -> None:
        done = self.stack.pop()
        node: Any = done.node
        node.end_mark = event.end_mark
        kids = done.children
        node.value = kids if isinstance(node, yaml.SequenceNode) else list(zip(kids[::2], kids[1::2],
                                                                              strict=False))
        if done.anchor is not None:
            _remember(self.anchors, event, node, done.size, done.height, anchor=done.anchor)
        self.attach(node, done.size, done.height)

    def alias(self, event: Any) -> None:
        """An alias adds its anchor's expanded size to the budget and its height to the depth, without
        expanding anything."""
        where = (event.start_mark.line + 1, event.start_mark.column + 1)
        if event.anchor not in self.anchors:
            open_here = any(o.anchor == event.anchor for o in self.stack)
            raise TextProblem(*where, f"alias *{event.anchor} "
                              + ("is inside the collection it names (a loop)" if open_here
                                 else f"names no anchor (&{event.anchor}) written before it"))
        node, size, height = self.anchors[event.anchor]
        self.added += size
        if self.added > ALIAS_BUDGET:
            raise TextProblem(*where, f"aliases expand the document past {ALIAS_BUDGET} nodes "
                              f"(*{event.anchor} alone is {size}); write the values out instead")
        if len(self.stack) + height > MAX_DEPTH:
            raise TextProblem(*where, f"alias *{event.anchor} nests the document deeper than {MAX_DEPTH} "
                              "levels")
        self.attach(node, size, height)


#: the parser's events that build or check the tree (stream and document ends need nothing)
_ON_EVENT: dict[type[yaml.Event], Callable[[_Composer, Any], None]] = {
    yaml.DocumentStartEvent: _Composer.document_start,
    yaml.ScalarEvent: _Composer.scalar,
    yaml.SequenceStartEvent: _Composer.collection_start,
    yaml.MappingStartEvent: _Composer.collection_start,
    yaml.SequenceEndEvent: _Composer.collection_end,
    yaml.MappingEndEvent: _Composer.collection_end,
    yaml.AliasEvent: _Composer.alias,
}


def _remember(anchors: dict[str, tuple[yaml.Node, int, int]], event: yaml.Event, node: yaml.Node, size: int,
              height: int, *, anchor: str | None = None) -> None:
    anchor = anchor if anchor is not None else getattr(event, "anchor", None)
    if anchor is None:
        return
    if anchor in anchors:
        first = anchors[anchor][0].start_mark
        mark = node.start_mark
        raise TextProblem(mark.line + 1, mark.column + 1, f"anchor &{anchor} is defined twice: at "
                          f"{first.line + 1}:{first.column + 1} and {mark.line + 1}:{mark.column + 1}")
    anchors[anchor] = (node, size, height)
