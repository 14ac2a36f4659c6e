"""``baton preview``: what a route would hand its target for a given answer, without typing anything.

The route's transform is built exactly as the daemon builds it (the router's own construction, so the
plugins' settings sections and the route's options apply) and given the same :class:`TransformInput`. What
is shown:

- for transforms that call nothing (raw, template, ...): the prompt they make;
- for AI transforms with their key set: the model's prompt — the API is called, so instructions can be
  tuned against real output; if the call fails the fallback is shown and the reason printed;
- for AI transforms without their key: what ``run`` would hand on then — the raw answer (or nothing, with
  ``on_error: skip``), and the reason;
- for AI transforms with ``--dry-run``: the exact request that would be sent (model, max_tokens, system
  prompt, user message), and no call is made.

The text shown is what ``run`` would type: sanitized the same way. A route whose ``on:`` or ``match:``
does not accept the answer is reported as not firing (exit status 1), as ``run`` would skip it.

Without an answer given, the source tile's last answer is read from its adapter (its transcript), else
from its screen, as ``baton status`` reaches tiles.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import anyio

from pipeline.engine.config import KNOWN_SHOWN, Config, Route
from pipeline.engine.last_answer import NoAnswer, last_response
from pipeline.engine.stages.route import PromptRouter
from pipeline.engine.tiles import TileRuntime, build_tiles
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.manager import Registries
from pipeline.plugin.transforms import Transform, TransformInput, TransformResult, TransformSkipped
from pipeline.system.logs import HTTP_LOGGERS
from pipeline.system.text import sanitize
from pipeline.system.tmux import Tmux

__all__ = ["PreviewError", "PreviewResult", "find_route", "preview_command", "preview_route"]

PREVIEW_TURN = "preview"


class PreviewError(Exception):
    """Nothing to preview; the message says why and what to do."""


@dataclass
class PreviewResult:
    #: what would be handed to the target (or, for a dry run, the request that would be sent)
    text: str
    #: where the answer came from, fallbacks, dry-run reasons: for standard error
    notes: list[str] = field(default_factory=list)
    #: set when the route would drop this hand-off (the transform raised TransformSkipped)
    skipped: str | None = None
    #: ``text`` is the request an AI transform would send (``--dry-run``), not a prompt
    request: bool = False
    #: the tile it would go to (a choosing route's pick, else the route's first target)
    target: str | None = None


def find_route(config: Config, name: str) -> Route:
    """The route labelled ``name`` (its ``name:``), or the one route from ``A`` to ``B`` for ``A->B``."""
    for route in config.routes:
        if route.label == name:
            return route
    src, arrow, dst = name.partition("->")
    between = [r for r in config.routes if arrow and r.arrow == f"{src.strip()}->{dst.strip()}"]
    if len(between) == 1:
        return between[0]
    if between:
        names = ", ".join(r.label for r in between)
        raise PreviewError(
            f"{len(between)} routes go from {src.strip()} to {dst.strip()} ({names}); name one"
        )
    shown = [r.label for r in config.routes[:KNOWN_SHOWN]]
    known = ", ".join(shown) + (
        f", … ({len(config.routes) - len(shown)} more)" if len(config.routes) > len(shown) else ""
    )
    raise PreviewError(f"no route {name!r} in {config.path}; routes: {known or '(none)'}")


async def preview_route(config: Config, registries: Registries, tmux: Tmux, route_name: str,
                        answer: str | None, *, dry_run: bool = False) -> PreviewResult:
    """Run ``route_name``'s transform on ``answer`` (None: the source tile's last answer)."""
    route = find_route(config, route_name)
    tiles = await build_tiles(config, registries.agents, tmux)
    try:
        router = PromptRouter(config, tiles, registries.transforms)
    except Exception as exc:  # a plugin's transform that cannot be set up
        raise PreviewError(f"the routes' transforms cannot be set up: {type(exc).__name__}: {exc}") from None
    notes: list[str] = []
    response = await _answer_for(config, tiles, route, answer, notes)
    why_not = router.why_not(route, response)
    if why_not:
        return PreviewResult("", notes, skipped=why_not)
    transform = router.transform_for(route)
    data = router.input_for(route, response)
    if dry_run:
        shown = _dry_run(route, transform, data, notes)
        if shown is not None:
            return shown
    try:
        result = TransformResult.of(await transform.apply(data))
    except TransformSkipped as exc:
        return PreviewResult("", notes, skipped=str(exc))
    except Exception as exc:  # a plugin's bug: run records the hand-off failed, with these words
        return PreviewResult("", notes, skipped=_failed(route, exc))
    if route.fans_out:
        notes.append(f"route {route.label} fans out to {', '.join(route.targets)}: this is {data.target}'s")
    if route.chooses is None:
        return replace(_as_typed(result, notes), target=data.target)
    chosen = router.chosen(route, result)
    if chosen is None:
        return PreviewResult("", notes, skipped=f"{result.note}; no tile was chosen and the route has no "
                                                "default:")
    target, why = chosen
    notes.append(f"to {target}: {why}")
    return replace(_as_typed(replace(result, note=""), notes), target=target)


async def _answer_for(config: Config, tiles: dict[str, TileRuntime], route: Route, answer: str | None,
                      notes: list[str]) -> Response:
    """The answer to preview: ``answer`` as given, or (None) the source tile's last one, said in ``notes``."""
    source = route.sources[0]
    if answer is not None:
        return Response(completion=Completion(tile=source, turn_id=PREVIEW_TURN, signal="preview"),
                        text=answer, source="input", cwd=config.tiles[source].cwd)
    response = await last_response(tiles[source])
    notes.append(f"the answer: tile {source}'s last one, from its {response.source} "
                 f"({len(response.text)} chars)")
    return response


def _dry_run(route: Route, transform: Transform, data: TransformInput,
             notes: list[str]) -> PreviewResult | None:
    """``--dry-run``: the request the transform would send (None: it calls no model, so it is run)."""
    try:
        request = transform.dry_run(data)
    except Exception as exc:
        return PreviewResult("", notes, skipped=_failed(route, exc))
    if request is None:
        return None
    notes.append(f"--dry-run: this is the request {route.transform_type} would send; "
                 "the model was not called")
    return PreviewResult(request, notes, request=True)


def _as_typed(result: TransformResult, notes: list[str]) -> PreviewResult:
    """The transform's text as run would type it, and what sanitizing it changed."""
    if result.note:
        notes.append(result.note)
    typed = sanitize(result.text)
    if not typed.strip():
        return PreviewResult("", notes, skipped="nothing printable is left to type")
    if typed.strip() != result.text.strip():  # a line end trimmed is no control character removed
        notes.append(f"{len(result.text) - len(typed)} control characters removed, as run removes them")
    return PreviewResult(typed, notes)


def _failed(route: Route, exc: Exception) -> str:
    """What the router records when a route's transform raises (the hand-off ends ``failed``)."""
    return f"transform {route.transform_type} failed: {type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _notes_only(verbose: bool) -> Iterator[None]:
    """What the transform logs (a fallback's warning, the SDK's request line) is in the notes already:
    below an error it is left to ``-v``, so each thing preview has to say is one line."""
    loggers = [logging.getLogger(name) for name in ("batonpass", *HTTP_LOGGERS)]
    levels = [logger.level for logger in loggers]
    if not verbose:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def preview_command(args: argparse.Namespace) -> int:
    """``baton preview``: 0 with the text; 1 when the route would not fire or there is nothing to preview.
    With ``--json`` one object (the text, or why it would not fire, and the notes) on standard output."""
    from pipeline.cmdline.config import load, tmux_for
    from pipeline.cmdline.options import InputTooLarge, read_input
    from pipeline.cmdline.output import json_text
    from pipeline.plugin.manager import load_registries

    registries = load_registries()
    # the config's warnings are about every route (a key not set); what matters for this route is in the
    # notes, once (`baton check` lists them all)
    config, _ = load(args, registries, warn=False)
    if config is None:
        return 1
    try:
        answer = None
        if args.input == "-":
            answer = read_input(sys.stdin, "standard input")
        elif args.input is not None:
            with open(args.input, "rb") as f:  # a FIFO is read like standard input: up to the cap
                answer = read_input(f, f"--input {args.input}")
    except InputTooLarge as exc:
        print(f"baton preview: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"baton preview: cannot read --input {args.input}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        route = find_route(config, args.route)
        with _notes_only(args.verbose):
            result = anyio.run(
                lambda: preview_route(
                    config, registries, tmux_for(args, config), args.route, answer, dry_run=args.dry_run
                )
            )
    except (PreviewError, NoAnswer) as exc:
        print(f"baton preview: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json_text({"route": route.label, "from": route.from_,
                         "to": result.target if route.chooses else route.to,
                         "transform": route.transform_type, "fires": result.skipped is None,
                         "text": result.text if result.skipped is None else None,
                         "skipped": result.skipped, "request": result.request, "notes": result.notes}))
        return 0 if result.skipped is None else 1
    for note in result.notes:
        print(f"baton preview: {note}", file=sys.stderr)
    if result.skipped is not None:
        print(f"baton preview: route {args.route} would not hand this off: {result.skipped}", file=sys.stderr)
        return 1
    sys.stdout.write(result.text if result.text.endswith("\n") else result.text + "\n")
    return 0
