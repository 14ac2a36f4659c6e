"""The plugin manager: built-ins and third-party plugins go through the same hooks.

Built-ins are listed in :data:`DEFAULT_PLUGINS` and registered first; third-party plugins come from the
``batonpass`` entry-point group unless ``BATON_DISABLE_EXTERNAL_PLUGINS=1``. There is no global manager:
:func:`make_plugin_manager` builds one, and :func:`load_registries` asks it for the registered classes.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

import pluggy

from pipeline.plugin import hookspecs
from pipeline.plugin.markers import PROJECT
from pipeline.plugin.registry import AgentRegistry, TransformRegistry

__all__ = ["DEFAULT_PLUGINS", "Registries", "load_registries", "make_plugin_manager", "plugin_origin"]

DEFAULT_PLUGINS: tuple[str, ...] = (
    "plugins.terminal.adapter",
    "plugins.claude_code.adapter",
    "plugins.codex.adapter",
    "plugins.opencode.adapter",
    "plugins.demo.adapter",
    "plugins.transforms.basic",
    "plugins.transforms.llm",
)


def make_plugin_manager(*, load_external: bool | None = None) -> pluggy.PluginManager:
    """A fresh manager with the built-ins and (unless disabled) the installed third-party plugins.

    ``check_pending()`` runs after registration so that a misspelt hook implementation fails loudly
    instead of being silently ignored.
    """
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if load_external is None:
        load_external = os.environ.get("BATON_DISABLE_EXTERNAL_PLUGINS", "") not in ("1", "true", "yes")
    if load_external:
        pm.load_setuptools_entrypoints(PROJECT)
    pm.check_pending()
    return pm


def plugin_origin(pm: pluggy.PluginManager, plugin: object) -> str:
    """The distribution a plugin came from (``batonpass`` for the built-ins)."""
    for loaded, dist in pm.list_plugin_distinfo():
        if loaded is plugin:
            return f"{dist.project_name} {dist.version}"
    name = pm.get_name(plugin) or "?"
    return "batonpass (built-in)" if name in DEFAULT_PLUGINS else name


@dataclass
class Registries:
    agents: AgentRegistry
    transforms: TransformRegistry


def load_registries(pm: pluggy.PluginManager | None = None) -> Registries:
    """Call both registration hooks, remembering which plugin registered each class.

    Implementations are called in registration order (built-ins first, the reverse of pluggy's LIFO call
    order), so a third-party class of the same name replaces a built-in one.
    """
    pm = pm or make_plugin_manager()
    agents, transforms = AgentRegistry(), TransformRegistry()
    for caller, registry in ((pm.hook.register_agents, agents), (pm.hook.register_transforms, transforms)):
        for impl in caller.get_hookimpls():
            registry._current_origin = plugin_origin(pm, impl.plugin)
            impl.function(register=registry.add)
    return Registries(agents, transforms)
