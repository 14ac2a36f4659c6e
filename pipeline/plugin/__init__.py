"""The plugin API: everything an agent adapter or a transform imports, from one place (like ``tox.plugin``).

A plugin module needs only ``from pipeline.plugin import hookimpl, AgentAdapter, Transform, …`` (and
:mod:`pipeline.plugin.tools` for the low-level helpers); the modules behind it (``markers``, ``hookspecs``,
``agents``, ``transforms``, ``events``, ``settings``, ``registry``, ``manager``) are the plugin side of the
engine and import nothing from :mod:`pipeline.engine` at run time. Plugins import nothing else of batonpass
(``tests/test_lint.py`` checks it).
"""

from __future__ import annotations

from pipeline.plugin.agents import AgentAdapter, Emit, InputHolds, TargetState, TileContext, TileSettings
from pipeline.plugin.events import Completion, Delivery, Outcome, Prompt, Response, ResponseSource
from pipeline.plugin.hookspecs import RegisterAgent, RegisterSettings, RegisterTransform
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.settings import PluginSettings, SettingsSection
from pipeline.plugin.transforms import (
    Candidate,
    NoOptions,
    Transform,
    TransformInput,
    TransformResult,
    TransformSkipped,
    Usage,
)
from pipeline.plugin.turns import Resolution, ResolveStep, TurnEnd, TurnMark
from pipeline.spool import HookRecord
from pipeline.system.tmux import PaneGone, PaneInfo, ServerGone, TmuxError

__all__ = [
    "AgentAdapter",
    "Candidate",
    "Completion",
    "Delivery",
    "Emit",
    "HookRecord",
    "InputHolds",
    "NoOptions",
    "Outcome",
    "PaneGone",
    "PaneInfo",
    "PluginSettings",
    "Prompt",
    "RegisterAgent",
    "RegisterSettings",
    "RegisterTransform",
    "ResolveStep",
    "Response",
    "ResponseSource",
    "Resolution",
    "ServerGone",
    "SettingsSection",
    "TargetState",
    "TileContext",
    "TileSettings",
    "TmuxError",
    "Transform",
    "TransformInput",
    "TransformResult",
    "TransformSkipped",
    "TurnEnd",
    "TurnMark",
    "Usage",
    "hookimpl",
]
