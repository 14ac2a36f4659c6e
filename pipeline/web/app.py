"""The ``baton web`` application: one page, its event stream, and the actions — safe to leave open.

- Every request for the page (``/?token=…``), the stream (``/api/events?token=…``) and the snapshot
  (``/api/board``) needs the token; an action (``POST /api/action``) needs it in the ``X-Baton-Token``
  header — never a cookie (the server sets none), so no other site can make a browser send one. Without it:
  401. The static files (the page's script and style) hold nothing of the user's and need none.
- A request whose ``Host`` is not the address served (DNS rebinding), or a POST whose ``Origin`` or
  ``Sec-Fetch-Site`` says another site sent it: 403.
- Every response says: no inline scripts nor any other site's (``Content-Security-Policy``), no framing,
  no referrer (the page's URL carries the token), no content sniffing. The page renders agent text with
  ``textContent`` only.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pipeline.engine.action_kinds import KINDS as ACTION_KINDS
from pipeline.web.feed import WebFeed

__all__ = ["ACTION_KINDS", "HEADERS", "MAX_TEXT", "PAGE_TERMS", "Guard", "Handlers", "in_page_terms",
           "make_app"]

STATIC = Path(__file__).parent / "static"
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
#: the most text one Send may carry (``baton send``'s limit)
MAX_TEXT = 8 * 1024 * 1024
#: a comment line on a quiet stream, so that proxies and the browser keep it open
KEEPALIVE_S = 15.0
TOKEN_HEADER = "x-baton-token"
#: what an action's answer says in the terminal's terms (an option, a command), and what to do on the page
PAGE_TERMS = (
    ("; --agent NAME names the agent expected, --force types into whatever runs there",
     "; start the agent in its pane, or name the tile's agent in routes.yaml"),
    ("; --force types into whatever runs there", "; start the agent in its pane, then Send again"),
    ("; --wait SECONDS waits for it", "; Send again once it is idle"),
    ("until baton resume ", "until Resume on the route "),
    ("(baton history --outcome failed lists the failed ones)", "(Recent hand-offs lists the failed ones)"),
    ("(baton history --outcome awaiting lists the ones awaiting a person)", "(Awaiting you lists them)"),
)
Scope = MutableMapping[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]
Perform = Callable[[str, str, str | None, str], Awaitable[tuple[bool, str]]]


@dataclass(frozen=True)
class Guard:
    """What a request must show: the token, and (unless ``public``) a Host naming the loopback address
    served."""

    token: str
    port: int
    public: bool = False

    def host_ok(self, host: str) -> bool:
        if self.public:
            return True
        return host in {f"{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]")}

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


class Secured:
    """ASGI middleware: the security headers on every response; 403 for a foreign Host, or a POST from
    another origin."""

    def __init__(self, app: ASGI, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}

        async def secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.lower().encode(), v.encode()) for k, v in HEADERS.items())]
            await send(message)

        why = self.refusal(scope["method"], headers)
        if why:
            await PlainTextResponse(why + "\n", 403)(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    def refusal(self, method: str, headers: dict[str, str]) -> str:
        host = headers.get("host", "")
        if not self.guard.host_ok(host):
            return f"403: not served as {host!r} (open the URL baton web printed)"
        if method not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is not None and origin != f"http://{host}" and origin != f"https://{host}":
                return "403: a request from another site"
            if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
                return "403: a request from another site"
        return ""


def _unauthorized() -> Response:
    return PlainTextResponse("401: the token is missing or wrong: open the URL baton web printed "
                             "(it ends in ?token=…)\n", 401)


class Handlers:
    """The routes' handlers; ``perform(kind, target, text, origin)`` carries out an action."""

    def __init__(self, feed: WebFeed, guard: Guard, perform: Perform) -> None:
        self.feed, self.guard, self.perform = feed, guard, perform

    def _let_in(self, request: Request) -> bool:
        return self.guard.token_ok(request.query_params.get("token"))

    async def page(self, request: Request) -> Response:
        if not self._let_in(request):
            return _unauthorized()
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def board(self, request: Request) -> Response:
        if not self._let_in(request):
            return _unauthorized()
        return Response(self.feed.last or b"{}", media_type="application/json")

    async def events(self, request: Request) -> Response:
        if not self._let_in(request):
            return _unauthorized()

        async def stream() -> AsyncIterator[bytes]:
            with self.feed.listen() as listener:
                yield b"retry: 1000\n\n"
                while not listener.closed:
                    frame = await listener.next(KEEPALIVE_S)
                    yield b"event: board\ndata: " + frame + b"\n\n" if frame else b": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"X-Accel-Buffering": "no"})

    async def action(self, request: Request) -> Response:
        if not self.guard.token_ok(request.headers.get(TOKEN_HEADER)):
            return _unauthorized()
        try:
            kind, target, text = _action_of(orjson.loads(await request.body()))
        except (orjson.JSONDecodeError, ValueError) as exc:
            return JSONResponse({"ok": False, "message": f"bad request: {exc}"}, 400)
        client = request.client.host if request.client else "?"
        ok, message = await self.perform(kind, target, text, f"web {client}")
        self.feed.look_again()
        return JSONResponse({"ok": ok, "message": in_page_terms(message)})

    async def favicon(self, request: Request) -> Response:
        """The icon at the address browsers ask for when a page names none."""
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


def make_app(feed: WebFeed, guard: Guard, perform: Perform) -> ASGI:
    """The application: the page, its stream, the snapshot, the actions, the static files."""
    h = Handlers(feed, guard, perform)
    app = Starlette(routes=[
        Route("/", h.page),
        Route("/api/board", h.board),
        Route("/api/events", h.events),
        Route("/api/action", h.action, methods=["POST"]),
        Route("/favicon.ico", h.favicon),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])
    return Secured(app, guard)


def in_page_terms(message: str) -> str:
    """An action's answer as the page says it: what to do here, not a command's option (``--wait``)."""
    for terminal, page in PAGE_TERMS:
        message = message.replace(terminal, page)
    return message


def _action_of(asked: Any) -> tuple[str, str, str | None]:
    """(kind, target, text) from an action's JSON body; ValueError says what is wrong."""
    if not isinstance(asked, dict):
        raise ValueError("the body is a JSON object: {kind, target, text}")
    kind, target, text = asked.get("kind"), asked.get("target"), asked.get("text")
    if kind not in ACTION_KINDS:
        raise ValueError(f"kind is one of {', '.join(ACTION_KINDS)}")
    if not isinstance(target, str) or not target.strip() or len(target) > 500:
        raise ValueError("target is a tile, route or hand-off name")
    if kind == "send":
        if not isinstance(text, str) or not text.strip():
            raise ValueError("send needs some text")
        if len(text.encode()) > MAX_TEXT:
            raise ValueError("the text is over 8 MB")
        return kind, target, text
    if kind == "pass" and text is not None:  # the prompt as the person edited it on the page
        if not isinstance(text, str) or len(text.encode()) > MAX_TEXT:
            raise ValueError("pass takes the edited prompt as text (up to 8 MB), or none")
        return kind, target, text
    return kind, target, None

