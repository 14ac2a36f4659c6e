"""routes.yaml v1: pydantic models, and a loader that reports every problem at its YAML position.

The loader composes the YAML node tree (which keeps line/column marks), builds the data
(:mod:`~pipeline.engine.config_positions`), validates it with pydantic, then runs the checks pydantic cannot
make on one field (:mod:`~pipeline.engine.config_checks`). Problems are collected, never raised one at a
time, and print as ``FILE:LINE:COL: error: DOTTED.PATH: message`` — all of them in one run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator

from pipeline.engine.config_checks import DEFAULT_MAX_HOPS, KNOWN_SHOWN, semantic_problems
from pipeline.engine.config_positions import ConfigError, Positions, Problem, pydantic_problems
from pipeline.engine.hosts import BusSettings, tile_host
from pipeline.engine.notify_config import NotifyTarget
from pipeline.engine.yaml_text import (
    NESTED_TOO_DEEP,
    TextProblem,
    check_text,
    compose_checked,
    decode_checked,
    read_checked,
)
from pipeline.plugin.settings import SectionT

__all__ = [
    "DEFAULT_MAX_HOPS",
    "KNOWN_SHOWN",
    "Choose",
    "Config",
    "ConfigError",
    "Problem",
    "Route",
    "Settings",
    "Tile",
    "default_config_path",
    "duration_s",
    "load_config",
    "parse_config",
]



class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class TmuxSettings(Strict):
    socket_name: str | None = Field(default=None, description="like `tmux -L NAME`")


class Tile(Strict):
    pane: str = Field(description="%N, session:window.pane, or title:NAME")
    agent: str = "auto"
    command: str | None = None
    cwd: str | None = None
    description: str = ""
    #: the machine whose ``baton run`` follows this tile (none: the machine baton run runs on)
    host: str | None = None

    @field_validator("pane")
    @classmethod
    def _named_pane(cls, pane: str) -> str:
        # tmux reads an empty target as "the current pane": prompts would be typed into a pane nobody named
        if not pane.strip() or not pane.removeprefix("title:").strip():
            raise ValueError("the pane is empty; name it %N, session:window.pane or title:NAME")
        if pane != pane.strip():
            raise ValueError(f"the pane {pane!r} has spaces around it")
        return pane


#: ``within:`` — a number and a unit (``90s``, ``30m``, ``2h``, ``1d``; ``1h30m``): how long a join's
#: started group, or a gated hand-off, waits
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)([smhd]))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration_s(text: str) -> float:
    """``30m`` -> 1800.0; raises ValueError for anything else (a bare number, a sign, an unknown unit)."""
    text = text.strip()
    if not _DURATION.fullmatch(text):
        raise ValueError(f"{text!r} is not a duration: write a number and a unit, like 90s, 30m, 2h or 1d")
    seconds = sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION_PART.findall(text))
    if seconds <= 0:
        raise ValueError(f"{text!r} is no time at all: give a duration above zero")
    return seconds


class Choose(Strict):
    """``to: {choose: [a, b], default: a}``: a model picks one of the tiles (an ``ai-routing`` transform)."""

    choose: list[str]  # an empty one is config_workflows' to say
    #: where the hand-off goes when the model cannot choose (no key, a timeout, a failure, a name not listed)
    default: str | None = None


JoinMode = Literal["all", "any"]


def _end_kind(value: object) -> str:
    """Which shape a ``from:``/``to:`` value has: pydantic then checks that one alone (an error names
    the mistake, not every shape the value is not)."""
    if isinstance(value, dict | Choose):
        return "choice"
    return "list" if isinstance(value, list) else "one"


class Route(Strict):
    name: str | None = None
    #: one tile, or a list of tiles: a join (one hand-off once the group of answers is complete)
    from_: Annotated[
        Annotated[str, Tag("one")] | Annotated[list[str], Tag("list")], Discriminator(_end_kind)
    ] = Field(alias="from")
    #: one tile, a list of tiles (a fan-out: one hand-off per target), or ``{choose: [...]}``
    to: Annotated[
        Annotated[str, Tag("one")] | Annotated[list[str], Tag("list")] | Annotated[Choose, Tag("choice")],
        Discriminator(_end_kind),
    ]
    on: Literal["completed", "failed", "any"] = "completed"
    match: str | None = None
    transform: str | dict[str, Any] = "raw"
    #: at most this many hand-offs typed in any hour; more are held (kept) until the hour allows them.
    #: None: ``settings.max_per_hour``
    max_per_hour: int | None = Field(default=None, gt=0, strict=True)
    #: a join's rule: ``all`` (the default for a list in ``from:``), ``any``, or N (the first N answers)
    join: JoinMode | int | None = None
    #: how long a join's started group (or a gated hand-off) waits; then ``on_timeout`` (a gate: expired)
    within: str | None = None
    #: a join whose ``within:`` passed: ``hand-on`` what came (saying who did not answer), or ``drop`` it
    on_timeout: Literal["hand-on", "drop"] = "hand-on"
    #: ``person``: the hand-off waits, transformed and journaled ``awaiting``, until a person passes it
    gate: Literal["person"] | None = None

    @field_validator("join", mode="plain")
    @classmethod
    def _a_join(cls, join: object) -> object:
        if join is None or join in ("all", "any") or (type(join) is int and join > 0):
            return join
        if type(join) is int:
            raise ValueError(f"join: {join} answers is none: give all, any or a number from 1")
        raise ValueError(f"join: {join!r} is not all, any or a number of answers")

    @field_validator("gate", mode="before")
    @classmethod
    def _a_gate(cls, gate: object) -> object:
        if gate is not None and gate != "person":
            raise ValueError(f"gate: {gate!r} is not a gate; `gate: person` makes each hand-off wait for a "
                             "person (baton pass / baton drop)")
        return gate

    @field_validator("within")
    @classmethod
    def _a_duration(cls, within: str | None) -> str | None:
        if within is not None:
            duration_s(within)
        return within

    @property
    def sources(self) -> list[str]:
        """The tiles whose turns this route hands on (one, or a join's)."""
        return [self.from_] if isinstance(self.from_, str) else list(self.from_)

    @property
    def targets(self) -> list[str]:
        """The tiles this route may type into: its one target, a fan-out's, or the tiles a model chooses
        from."""
        if isinstance(self.to, Choose):
            return list(self.to.choose)
        return [self.to] if isinstance(self.to, str) else list(self.to)

    def branches(self) -> list[tuple[str, str]]:
        """(target, branch) for each hand-off one firing makes: one per target of a fan-out (the branch,
        its target, is part of the hand-off's key), else the one target (no branch). A choice is one
        hand-off: its target is decided when it fires."""
        if self.fans_out:
            return [(target, target) for target in self.targets]
        choice = self.chooses
        return [(choice.default if choice is not None and choice.default else self.targets[0], "")]

    @property
    def chooses(self) -> Choose | None:
        return self.to if isinstance(self.to, Choose) else None

    @property
    def is_join(self) -> bool:
        return isinstance(self.from_, list)

    @property
    def fans_out(self) -> bool:
        return isinstance(self.to, list)

    @property
    def join_needs(self) -> int:
        """How many of the sources' answers complete a group (``all``: every source)."""
        if isinstance(self.join, int):
            return self.join
        return 1 if self.join == "any" else len(self.sources)

    @property
    def within_s(self) -> float | None:
        return None if self.within is None else duration_s(self.within)

    @property
    def arrow(self) -> str:
        """``from->to`` as written (lists joined by ``,``, a choice's tiles by ``|``)."""
        return f"{_side(self.from_)}->{_side(self.to)}"

    @property
    def label(self) -> str:
        return self.name or self.arrow

    @property
    def transform_type(self) -> str:
        return self.transform if isinstance(self.transform, str) else str(self.transform.get("type", ""))

    @property
    def transform_options(self) -> dict[str, Any]:
        return (
            {}
            if isinstance(self.transform, str)
            else {k: v for k, v in self.transform.items() if k != "type"}
        )


def _side(end: str | list[str] | Choose) -> str:
    """A route end as its default label writes it: ``a``, ``a,b`` (a list), ``a|b`` (a choice)."""
    if isinstance(end, Choose):
        return "|".join(end.choose)
    return end if isinstance(end, str) else ",".join(end)


# numbers are strict: `true` or "600" is a mistake in routes.yaml, not the number 1 or 600
class Settings(BaseModel):
    """The engine's settings; any other key is a plugin's own section (``register_settings``), checked
    by the loader with that plugin's model and read by the plugin with :meth:`section`."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    max_hops: int | None = Field(default=None, ge=0, strict=True)
    #: every route's rate limit unless the route sets its own (None: no limit)
    max_per_hour: int | None = Field(default=None, gt=0, strict=True)
    catch_up_s: float = Field(default=300, ge=0, allow_inf_nan=False, strict=True)
    #: how long a hand-off to a missing pane or exited agent is kept and retried before it fails
    give_up_s: float = Field(default=600, gt=0, allow_inf_nan=False, strict=True)
    #: the NATS servers joining hosts (only needed when a route crosses hosts)
    bus: BusSettings | None = None
    #: where to tell a person that a tile waits for them, a hand-off was kept or failed, a loop stopped
    notify: list[NotifyTarget] = []

    @property
    def hop_limit(self) -> int:
        return DEFAULT_MAX_HOPS if self.max_hops is None else self.max_hops

    def section(self, model: type[SectionT]) -> SectionT:
        """A plugin's own section, ``settings.<model.section>``, read with its model (the model's defaults
        when routes.yaml has none)."""
        raw = (self.model_extra or {}).get(model.section)
        return raw if isinstance(raw, model) else model.model_validate(raw or {})


class Config(Strict):
    version: Literal[1]
    tmux: TmuxSettings = TmuxSettings()
    tiles: dict[str, Tile]
    routes: list[Route] = []
    settings: Settings = Settings()
    #: where the config was read from (not part of the YAML)
    path: str = Field(default="<memory>", exclude=True)

    def routes_from(self, tile: str) -> list[Route]:
        """The routes a turn of ``tile`` may fire: those naming it in ``from:`` (alone or in a join)."""
        return [r for r in self.routes if tile in r.sources]

    def rate_limits(self) -> dict[str, int]:
        """Each rate-limited route's ``max_per_hour`` (its own, else ``settings.max_per_hour``), by label."""
        limits = {r.label: r.max_per_hour or self.settings.max_per_hour for r in self.routes}
        return {label: n for label, n in limits.items() if n is not None}

    def tiles_on(self, host: str) -> dict[str, Tile]:
        """The tiles ``baton run --host HOST`` follows and types into."""
        return {name: t for name, t in self.tiles.items() if tile_host(t, host) == host}

    def on_host(self, host: str) -> Config:
        """This config with only the tiles of ``host`` (what its daemon follows, checks and types into)."""
        return self.model_copy(update={"tiles": self.tiles_on(host)})

    def crosses_hosts(self, host: str) -> bool:
        """Whether any route starting or ending on ``host`` has its other end on another host."""
        here = self.tiles_on(host)
        return any(
            (src in here) != (dst in here) for r in self.routes for src in r.sources for dst in r.targets
        )


def default_config_path() -> Path:
    """``./routes.yaml``, else ``$XDG_CONFIG_HOME/batonpass/routes.yaml``."""
    local = Path("routes.yaml")
    if local.exists():
        return local
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    xdg = Path(base) / "batonpass" / "routes.yaml"
    return xdg if xdg.exists() else local


def load_config(path: str | os.PathLike[str], registries: Any = None) -> tuple[Config, list[Problem]]:
    """Read and validate ``path``. Returns the config and its warnings; raises :class:`ConfigError`
    listing every error (and the warnings) if there is any."""
    try:
        text = decode_checked(read_checked(path))
    except OSError as exc:
        raise ConfigError([Problem(str(path), 1, 1, "", f"cannot read: {exc.strerror or exc}")]) from None
    except TextProblem as exc:
        raise ConfigError([Problem(str(path), exc.line, exc.col, "", exc.message)]) from None
    return parse_config(text, str(path), registries)


def parse_config(
    text: str, filename: str = "<string>", registries: Any = None
) -> tuple[Config, list[Problem]]:
    """Validate YAML text; see :func:`load_config`. ``registries`` (from
    :func:`pipeline.plugin.manager.load_registries`) enables the agent and transform checks."""
    try:
        check_text(text)
        root = compose_checked(text)
    except TextProblem as exc:
        raise ConfigError([Problem(filename, exc.line, exc.col, "", exc.message)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = " ".join(str(x) for x in (getattr(exc, "context", None), getattr(exc, "problem", None)) if x)
        if "maximum nesting depth" in msg:  # libyaml's own limit (1000 levels), met while it scans ahead
            raise ConfigError([Problem(filename, line, col, "", NESTED_TOO_DEEP)]) from None
        lines = text.splitlines()
        if mark and mark.line < len(lines) and lines[mark.line][mark.column:mark.column + 1] == "\t":
            msg = "a tab character: YAML indents with spaces only (replace the tab with spaces)"
        raise ConfigError([Problem(filename, line, col, "", f"invalid YAML: {msg or exc}")]) from None
    if root is None:
        raise ConfigError(
            [Problem(filename, 1, 1, "", "the file is empty; it needs at least `version: 1` and `tiles:`")]
        )
    positions = Positions(filename)
    data = positions.build(root, ())
    problems: list[Problem] = positions.problems
    if positions.problems:  # the data is not what the file says (a key twice, a value that is no value)
        raise ConfigError(sorted(problems, key=lambda p: (p.line, p.col)))
    if not isinstance(data, dict):
        raise ConfigError(
            [positions.problem((), "the top level must be a mapping (version, tiles, routes, ...)")]
        )
    config: Config | None = None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems.extend(pydantic_problems(exc, positions))
    problems.extend(semantic_problems(data, positions, registries, Settings.model_fields))
    errors = [p for p in problems if p.severity == "error"]
    if errors or config is None:
        raise ConfigError(sorted(problems, key=lambda p: (p.line, p.col)))
    return config.model_copy(update={"path": filename}), problems
