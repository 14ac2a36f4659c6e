"""Logging for the `baton` command: one line per event, and no secret ever written.

Every line is formatted by :class:`RedactingFormatter`: the values of the API-key environment variables
and anything shaped like an API key are replaced by ``[redacted]`` — also inside exception text, where an
SDK may quote a server's error body or a request's headers. It redacts the formatted text, never the
record itself, which other handlers (a test's log capture, say) share.
"""

from __future__ import annotations

import logging
import os
import re
import sys

__all__ = ["HTTP_LOGGERS", "SECRET_ENV_VARS", "RedactingFormatter", "add_secret", "redact", "setup_logging"]

SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "CODEX_API_KEY",
                   "BATON_BUS_PASSWORD", "BATON_BUS_TOKEN")
#: a URL's user:password@ (or token@) part (a bus URL may carry credentials)
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_KEY_SHAPES = re.compile(
    r"\b(?:sk-ant-[A-Za-z0-9_\-]{8,}|sk-[A-Za-z0-9_\-]{16,}|(?:Bearer|x-api-key:?)\s+[A-Za-z0-9_\-\.]{12,})"
)
#: secrets that come from routes.yaml rather than the environment (a webhook URL holding a token)
_SECRETS: set[str] = set()


def add_secret(value: str) -> None:
    """Redact ``value`` from every log line from now on."""
    if len(value) >= 6:
        _SECRETS.add(value)


def redact(text: str) -> str:
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name)
        if value and len(value) >= 6:
            text = text.replace(value, "[redacted]")
    for value in _SECRETS:
        text = text.replace(value, "[redacted]")
    return _KEY_SHAPES.sub("[redacted]", _URL_USERINFO.sub("[redacted]@", text))


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


#: the HTTP clients' loggers (the Anthropic SDK's: httpx, or httpx2 from its 2.x on): their INFO line per
#: request (``HTTP Request: POST …``) is for ``-v`` only
HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "anthropic")


def setup_logging(verbose: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s.%(msecs)03d %(message)s", datefmt="%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    for noisy in HTTP_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)
