"""A plugin's own section of ``settings:`` in routes.yaml.

The engine owns the settings it acts on (``max_hops``, ``catch_up_s``, ``give_up_s``, ``bus``); a section a
plugin needs (the LLM transforms' ``llm``) is the plugin's: it registers a :class:`SettingsSection` with the
``register_settings`` hook, the config loader validates ``settings.<section>`` with it (every error at its
YAML position, like a transform's options), and the plugin reads it with ``settings.section(Model)`` when
:meth:`pipeline.plugin.transforms.Transform.configure` hands it the settings.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

__all__ = ["PluginSettings", "SettingsSection"]


class SettingsSection(BaseModel):
    """Base of a plugin's settings model; ``section`` is its key under ``settings:``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    section: ClassVar[str] = ""


SectionT = TypeVar("SectionT", bound=SettingsSection)


class PluginSettings(Protocol):
    """What a plugin sees of the config's settings: its own section."""

    def section(self, model: type[SectionT]) -> SectionT:
        """``settings.<model.section>`` read with ``model`` (its defaults when routes.yaml has none)."""
        ...
