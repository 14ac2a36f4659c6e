"""Every hook batonpass calls. Hooks are registration-shaped (after simonw/llm): a plugin is handed a
``register`` callable and adds classes with it. Async work lives in the registered classes, never in the
hooks themselves, because pluggy would hand back an un-awaited coroutine.

Specs only grow by adding keyword arguments; pluggy calls hooks with keyword arguments only, so an
implementation may accept fewer arguments than the spec offers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.plugin.agents import AgentAdapter
from pipeline.plugin.markers import hookspec
from pipeline.plugin.settings import SettingsSection
from pipeline.plugin.transforms import Transform

__all__ = [
    "RegisterAgent",
    "RegisterSettings",
    "RegisterTransform",
    "register_agents",
    "register_settings",
    "register_transforms",
]

#: what ``register_agents`` hands a plugin: call it with an adapter class
RegisterAgent = Callable[[type[AgentAdapter]], None]
#: what ``register_transforms`` hands a plugin: call it with a transform class
RegisterTransform = Callable[[type[Transform[Any]]], None]
#: what ``register_settings`` hands a plugin: call it with a settings section model
RegisterSettings = Callable[[type[SettingsSection]], None]


@hookspec
def register_agents(register: RegisterAgent) -> None:
    """Add agent adapter classes.

    :param register: call ``register(AdapterClass)`` once per adapter. The class subclasses
        :class:`pipeline.plugin.agents.AgentAdapter`; its ``name`` is what ``agent:`` in routes.yaml names
        and its ``process_names`` are the process names (``/proc/PID/comm``) that identify the agent in a
        pane.
        Built-ins register first; a later class of the same name (a third-party plugin's) overrides the
        earlier one, with a warning naming both origins.
    """


@hookspec
def register_transforms(register: RegisterTransform) -> None:
    """Add transform classes.

    :param register: call ``register(TransformClass)`` once per transform. The class subclasses
        :class:`pipeline.plugin.transforms.Transform`; its ``name`` is what ``transform:`` in routes.yaml
        names and its ``Options`` pydantic model (``extra="forbid"``) validates the route's options when the
        config loads, so a wrong option is reported before anything runs.
    """


@hookspec
def register_settings(register: RegisterSettings) -> None:
    """Add the sections of ``settings:`` in routes.yaml that a plugin owns.

    :param register: call ``register(SectionClass)`` once per section. The class subclasses
        :class:`pipeline.plugin.settings.SettingsSection` (a pydantic model, ``extra="forbid"``); its
        ``section`` is the key under ``settings:``. The config loader validates that section with it (each
        error at its YAML position) and the plugin reads it with ``settings.section(SectionClass)``.
    """
