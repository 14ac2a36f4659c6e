"""``settings.notify``: where to tell a person that a tile needs them (config side only).

Each entry names one place — ``tmux`` (a message in the clients attached to the tiles' tmux server),
``desktop`` (``notify-send``) or ``webhook`` (a JSON POST, e.g. to ntfy or a chat bridge) — and, optionally,
which events it wants. A webhook's URL often carries a token, so it is a secret: it is held as a
:class:`~pydantic.SecretStr` (its repr is masked), shown only as :func:`url_label`, and no validation
message quotes it.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

__all__ = ["EVENTS", "NotifyEvent", "NotifyTarget", "url_label"]

NotifyEvent = Literal["waiting", "kept", "failed", "max_hops", "awaiting"]
#: what each event means, for the README and ``--help`` texts
EVENTS: dict[NotifyEvent, str] = {
    "waiting": "a tile waits for a person (a permission prompt, a dialog)",
    "kept": "a hand-off is kept: its target pane is gone or shows no agent",
    "failed": "a hand-off failed (gave up on its target, or its transform failed)",
    "max_hops": "a chain of hand-offs stopped at settings.max_hops",
    "awaiting": "a hand-off of a gated route (gate: person) awaits a person: baton pass or baton drop",
}


class NotifyTarget(BaseModel):
    """One place notices go to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tmux", "desktop", "webhook"]
    #: webhook only: where to POST; may hold a token, so it is never logged
    url: SecretStr | None = None
    #: the events this place wants (default: all of them)
    events: list[NotifyEvent] = Field(default_factory=lambda: list(EVENTS))
    #: webhook, desktop: how long one POST (one notify-send) may take before it is given up (it never holds
    #: up a hand-off)
    timeout_s: float = Field(default=5.0, gt=0, le=60, allow_inf_nan=False, strict=True)
    #: webhook: for how long a notice whose POST failed (no connection, no answer, HTTP 5xx or 429) is tried
    #: again, waiting 1 s, 2 s, 4 s … between tries; 0 tries once
    retry_s: float = Field(default=30.0, ge=0, le=600, allow_inf_nan=False, strict=True)
    #: tmux: how long the message stays on the status line
    display_s: float = Field(default=8.0, gt=0, le=600, allow_inf_nan=False, strict=True)

    @model_validator(mode="after")
    def _url_fits_kind(self) -> NotifyTarget:
        # messages here never quote the URL: it may hold a token and `baton check` prints them
        if self.kind != "webhook":
            for name in ("url", "retry_s"):
                if name in self.model_fields_set:
                    raise ValueError(f"{name} is only for kind: webhook (this is kind: {self.kind})")
            return self
        if self.url is None:
            raise ValueError("a webhook needs a url (https://HOST/PATH)")
        raw = self.url.get_secret_value()
        parts = urlsplit(raw)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the webhook url must be http:// or https:// with a host (the url is not shown: "
                             "it may hold a token)")
        try:
            parts.port  # noqa: B018 - raises ValueError for a port that is no number from 0 to 65535
        except ValueError:
            raise ValueError("the webhook url's port must be a number from 1 to 65535 (the url is not "
                             "shown: it may hold a token)") from None
        if any(c.isspace() or not c.isprintable() for c in raw):
            raise ValueError("the webhook url holds a space or a control character; write %20 for a space "
                             "(the url is not shown: it may hold a token)")
        return self

    def wants(self, event: str) -> bool:
        return event in self.events

    def label(self) -> str:
        """How logs name this place: the kind, and for a webhook only its scheme and host."""
        return f"webhook {url_label(self.url)}" if self.url is not None else self.kind


def url_label(url: SecretStr | str) -> str:
    """``https://ntfy.sh/…``: enough to tell webhooks apart, nothing of the path, query or user part,
    where tokens live."""
    raw = url.get_secret_value() if isinstance(url, SecretStr) else url
    try:
        parts = urlsplit(raw)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unreadable url)"
    return f"{parts.scheme}://{host}{port}/…"
