"""What tmux says about a pane: the fields batonpass asks for (one format string for every lookup and listing)
and :class:`PaneInfo`, read from them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FIELDS", "PANE_FORMAT", "PaneInfo", "parse_pane"]

#: what every lookup and listing of panes asks tmux for, in this order
FIELDS = ("pane_id", "pane_pid", "pane_dead", "history_size", "cursor_x", "cursor_y", "pane_height",
          "pane_width", "pane_current_command", "pane_title", "session_name", "window_index", "pane_index",
          "pane_in_mode", "alternate_on", "pid", "window_name", "pane_dead_status")
PANE_FORMAT = "\x1f".join("#{%s}" % f for f in FIELDS)


@dataclass(frozen=True, slots=True)
class PaneInfo:
    pane_id: str
    pid: int
    dead: bool
    history_size: int
    cursor_x: int
    cursor_y: int
    height: int
    width: int
    current_command: str
    title: str
    address: str
    in_mode: bool
    alternate_on: bool
    #: the tmux server's PID: pane ids start again at %0 on a new server, so an id means nothing without it
    server_pid: int
    window_name: str = ""
    #: the exit status of a dead pane's command (only seen while ``remain-on-exit`` keeps the pane)
    dead_status: int | None = None

    def matches_address(self, target: str) -> bool:
        """Whether this pane is what ``session:window.pane`` names (tmux itself falls back to the active
        pane for a pane index that does not exist, which must never be mistaken for the tile's pane)."""
        session, _, rest = target.partition(":")
        window, _, pane = rest.rpartition(".") if "." in rest else (rest, "", "")
        here_session, _, here = self.address.partition(":")
        here_window, _, here_pane = here.rpartition(".")
        return ((not session or session == here_session)
                and (not window or window in (here_window, self.window_name))
                and (not pane or pane == here_pane))

    @property
    def cursor_line(self) -> int:
        """The cursor's line counted from the top of the scrollback: stable while output scrolls."""
        return self.history_size + self.cursor_y


def parse_pane(line: str) -> PaneInfo:
    """A pane from one line tmux printed with :data:`PANE_FORMAT`."""
    v = dict(zip(FIELDS, line.split("\x1f"), strict=False))
    return PaneInfo(
        pane_id=v["pane_id"],
        pid=int(v["pane_pid"] or 0),
        dead=v["pane_dead"] == "1",
        history_size=int(v["history_size"] or 0),
        cursor_x=int(v["cursor_x"] or 0),
        cursor_y=int(v["cursor_y"] or 0),
        height=int(v["pane_height"] or 0),
        width=int(v["pane_width"] or 0),
        current_command=v["pane_current_command"],
        title=v["pane_title"],
        address=f"{v['session_name']}:{v['window_index']}.{v['pane_index']}",
        in_mode=v["pane_in_mode"] == "1",
        alternate_on=v.get("alternate_on") == "1",
        server_pid=int(v.get("pid") or 0),
        window_name=v.get("window_name", ""),
        dead_status=int(v["pane_dead_status"])
        if v.get("pane_dead_status", "").lstrip("-").isdigit()
        else None,
    )
