"""What a transform is: a named class with an ``Options`` model and an async ``apply``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from pipeline.plugin.events import Response
from pipeline.plugin.settings import PluginSettings

__all__ = [
    "Candidate",
    "NoOptions",
    "OptionsT",
    "Transform",
    "TransformInput",
    "TransformResult",
    "TransformSkipped",
    "Usage",
]


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: the pydantic model of a transform's options; ``Transform[MyOptions]`` types ``self.options``
OptionsT = TypeVar("OptionsT", bound=BaseModel)


class TransformSkipped(Exception):
    """Raised by a transform that decided this hand-off should not happen; the message says why."""


@dataclass(frozen=True)
class Usage:
    """What a transform's own model call used, as the API counted it; the journal keeps it with the
    hand-off and ``baton history`` shows it. ``cost_usd`` is None when the model's price is not known."""

    model: str
    input_tokens: int
    output_tokens: int
    #: input written to / read from the prompt cache (billed apart from ``input_tokens``)
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True)
class TransformResult:
    """A prompt plus a note on how it was made, for transforms with something to report (an AI transform
    that fell back to the raw answer says why), and what its model call used. ``apply`` may return this or
    a plain ``str``."""

    text: str
    note: str = ""
    usage: Usage | None = None
    #: the tile the transform picked, on a route that lets it choose (``to: {choose: [...]}``); None: it
    #: did not choose (the route's ``default:`` takes the hand-off)
    target: str | None = None

    @classmethod
    def of(cls, value: str | TransformResult) -> TransformResult:
        return value if isinstance(value, TransformResult) else cls(value)


@dataclass(frozen=True)
class Candidate:
    """A tile a choosing route may hand the prompt to, as routes.yaml describes it."""

    tile: str
    agent: str
    description: str


@dataclass(frozen=True)
class TransformInput:
    """Everything a transform may use. ``terminal_text`` is a coroutine function: the screen is captured
    only by a transform that awaits it."""

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
    #: a route that lets the transform choose its target (``to: {choose: [...]}``): the tiles, in the
    #: order routes.yaml lists them (``target`` is then the ``default:``, else the first); () otherwise
    choices: tuple[Candidate, ...] = ()
    #: each source's answer by tile: a join's group (``response.text`` is all of them, each under a
    #: ``## <tile>`` heading), else the one answer under its tile
    answers: Mapping[str, str] = field(default_factory=dict)


class Transform(Generic[OptionsT]):
    """Base class. Instantiated once per route with its validated options.

    A subclass names its options model twice: as the type argument (``Transform[MyOptions]``, so that
    ``self.options.my_field`` type-checks) and as ``Options = MyOptions`` (what the config is validated
    with at run time)."""

    name: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = NoOptions
    summary: ClassVar[str] = ""
    #: the environment variable holding the key of the service this transform calls; ``baton check``
    #: warns when a route uses the transform and the variable is unset
    needs_api_key_env: ClassVar[str | None] = None

    def __init__(self, options: OptionsT) -> None:
        self.options = options

    @classmethod
    def from_config(cls, options: dict[str, Any]) -> Transform[OptionsT]:
        return cls(cast(OptionsT, cls.Options.model_validate(options)))

    def configure(self, settings: PluginSettings) -> None:
        """Called once after construction with the config's settings, for transforms that take defaults
        from their plugin's own section (``settings.section(Model)``, a model registered with the
        ``register_settings`` hook; the LLM ones read ``llm``). Default: nothing."""

    def dry_run(self, data: TransformInput) -> str | None:
        """What :meth:`apply` would send to an outside service, shown instead of sending it
        (``baton preview --dry-run``). None for transforms that call nothing: those are simply applied."""
        return None

    async def apply(self, data: TransformInput) -> str | TransformResult:
        """The prompt for the target (a ``str``, or a :class:`TransformResult` with a note). Raise
        :class:`TransformSkipped` to drop this hand-off on purpose."""
        raise NotImplementedError
