"""Name → class registries filled by the plugin hooks. A miss says which names exist, so a typo in
routes.yaml is answered with the list to choose from."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from pipeline.plugin.agents import AgentAdapter
from pipeline.plugin.settings import SettingsSection
from pipeline.plugin.transforms import Transform

__all__ = ["AgentRegistry", "Registry", "SettingsRegistry", "TransformRegistry", "UnknownName"]

T = TypeVar("T")


class UnknownName(LookupError):
    """Raised by :meth:`Registry.get` for a name no plugin registered."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind, self.name, self.known = kind, name, known
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(known) or '(none)'}")


class Registry(Generic[T]):
    """Classes (subclasses of ``T``) by their ``name`` (the class attribute :attr:`key` says which)."""

    kind = "name"
    key = "name"

    def __init__(self) -> None:
        self._classes: dict[str, type[T]] = {}
        self._origin: dict[str, str] = {}

    def add(self, cls: type[T], origin: str = "?") -> str | None:
        """Register ``cls`` under its ``name``, replacing any earlier class of that name; returns the
        replaced class's origin (None when the name was new), so the caller can say so."""
        name = getattr(cls, self.key, None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"{cls!r} has no {self.key!r} string, so routes.yaml could not name it")
        replaced = self._origin.get(name) if name in self._classes else None
        self._classes[name] = cls
        self._origin[name] = origin
        return replaced

    def get(self, name: str) -> type[T]:
        try:
            return self._classes[name]
        except KeyError:
            raise UnknownName(self.kind, name, self.names()) from None

    def summary(self, name: str) -> str:
        """The one line ``baton plugins`` shows: the class's ``summary``, else the first line of its own
        docstring, else of its module's (a plugin written like the docs' example needs no ``summary``)."""
        cls = self.get(name)
        module_doc = getattr(sys.modules.get(getattr(cls, "__module__", "")), "__doc__", "")
        for text in (getattr(cls, "summary", ""), cls.__dict__.get("__doc__"), module_doc):
            if isinstance(text, str) and text.strip():
                return text.strip().splitlines()[0].strip()
        return ""

    def origin(self, name: str) -> str:
        """The plugin (distribution or module) that registered ``name``."""
        return self._origin.get(name, "?")

    def names(self) -> list[str]:
        return sorted(self._classes)

    def __contains__(self, name: object) -> bool:
        return name in self._classes

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


class AgentRegistry(Registry[AgentAdapter]):
    kind = "agent"


class TransformRegistry(Registry[Transform[Any]]):
    kind = "transform"


class SettingsRegistry(Registry[SettingsSection]):
    """The plugins' sections of ``settings:``, by their ``section`` key."""

    kind = "settings section"
    key = "section"
