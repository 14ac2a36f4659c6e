"""What a transform is: a named class with an ``Options`` model and an async ``apply``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from pipeline.events import Response

__all__ = ["NoOptions", "Transform", "TransformInput", "TransformSkipped"]


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TransformSkipped(Exception):
    """Raised by a transform that decided this hand-off should not happen; the message says why."""


@dataclass(frozen=True)
class TransformInput:
    """Everything a transform may use. ``terminal_text`` is read only when the transform asks for it
    (``needs_terminal``), since it costs a screen capture."""

    response: Response
    route: str
    source: str
    target: str
    source_agent: str
    target_agent: str
    source_description: str
    target_description: str
    cwd: str | None
    terminal_text: Callable[[], Awaitable[str]]


class Transform:
    """Base class. Instantiated once per route with its validated options."""

    name: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = NoOptions
    summary: ClassVar[str] = ""

    def __init__(self, options: BaseModel) -> None:
        self.options = options

    @classmethod
    def from_config(cls, options: dict) -> Transform:
        return cls(cls.Options.model_validate(options))

    async def apply(self, data: TransformInput) -> str:
        """The prompt for the target. Raise :class:`TransformSkipped` to drop this hand-off on purpose."""
        raise NotImplementedError
