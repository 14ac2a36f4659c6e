"""The plugin manager: built-ins and third-party plugins go through the same hooks.

Built-ins are listed in :data:`DEFAULT_PLUGINS` and registered first; third-party plugins come from the
``batonpass`` entry-point group. ``BATON_DISABLE_EXTERNAL_PLUGINS=1`` blocks them all;
``BATON_DISABLED_PLUGINS=name1,name2`` blocks some, by entry-point or distribution name (like tox's
``TOX_DISABLED_EXTERNAL_PLUGINS``). There is no global manager: :func:`make_plugin_manager` builds one, and
:func:`load_registries` asks it for the registered classes.

A third-party plugin that cannot be loaded — its entry point fails to import, its hooks do not validate, or
a hook raises — is left out with a warning naming it; every ``baton`` command keeps working and
``baton plugins`` lists it as ``failed: <error>``. A broken built-in is a bug and still raises.

Registration: :func:`load_registries` calls ``pm.hook.register_agents(register=…)``,
``pm.hook.register_transforms(register=…)`` and ``pm.hook.register_settings(register=…)``. A class's origin
comes from its ``__module__``: the built-in ``plugins`` package, or the distribution of the third-party
plugin whose module defines it. The classes are added in plugin order — built-ins first, then third-party
plugins in the order they loaded — and a **later class of the same name overrides** the earlier one (so a
third-party plugin can replace a built-in adapter). An override is never silent: a warning names the name
and both origins.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from types import TracebackType
from typing import Any, TypeVar

import pluggy

from pipeline.plugin import hookspecs
from pipeline.plugin.markers import PROJECT
from pipeline.plugin.registry import AgentRegistry, Registry, SettingsRegistry, TransformRegistry

__all__ = [
    "BUILTIN",
    "DEFAULT_PLUGINS",
    "BatonPluginManager",
    "Registries",
    "load_registries",
    "make_plugin_manager",
    "reload_registries",
]

log = logging.getLogger("batonpass.plugins")

DEFAULT_PLUGINS: tuple[str, ...] = (
    "plugins.terminal.adapter",
    "plugins.claude_code.adapter",
    "plugins.codex.adapter",
    "plugins.opencode.adapter",
    "plugins.copilot.adapter",
    "plugins.gemini.adapter",
    "plugins.qwen.adapter",
    "plugins.pi.adapter",
    "plugins.cline.adapter",
    "plugins.demo.adapter",
    "plugins.transforms.basic",
    "plugins.transforms.llm",
)
#: the origin of every class defined under the built-in ``plugins`` package
BUILTIN = "batonpass (built-in)"
DISABLE_ALL_ENV = "BATON_DISABLE_EXTERNAL_PLUGINS"
DISABLED_ENV = "BATON_DISABLED_PLUGINS"

T = TypeVar("T")


@dataclass
class External:
    """A third-party plugin found in the entry-point group, loaded or not."""

    name: str  #: the entry point's name (what pluggy and BATON_DISABLED_PLUGINS call it)
    module: str  #: the module the entry point names
    origin: str  #: ``distribution version``
    error: str = ""  #: why it is left out ("" when it loaded)


class BatonPluginManager(pluggy.PluginManager):
    """A pluggy manager that also remembers the third-party plugins: where each came from, and the ones
    that failed or were disabled (for ``baton plugins``)."""

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.externals: list[External] = []
        self.disabled: list[str] = []

    def failed(self) -> list[External]:
        return [e for e in self.externals if e.error]

    def fail(self, ext: External, error: str) -> None:
        """Leave ``ext`` out: unregister it (when it got that far) and warn, naming it."""
        ext.error = error
        if self.get_plugin(ext.name) is not None:
            self.unregister(name=ext.name)
        log.warning("plugin %s (%s) is left out: %s", ext.name, ext.origin, error)

    def origin_of(self, cls: type) -> tuple[int, str]:
        """(rank, origin) of a registered class, from its ``__module__``: rank 0 for the built-ins, then
        the third-party plugins in load order."""
        module = getattr(cls, "__module__", "") or ""
        if module == "plugins" or module.startswith(("plugins.", "pipeline.")):
            return 0, BUILTIN
        loaded = [e for e in self.externals if not e.error]
        for rank, ext in enumerate(loaded, start=1):
            if module == ext.module or module.startswith(ext.module + "."):
                return rank, ext.origin
        top = module.split(".")[0]
        for rank, ext in enumerate(loaded, start=1):
            if ext.module.split(".")[0] == top:
                return rank, ext.origin
        return len(loaded) + 1, module or "?"


def _disabled_names() -> set[str]:
    return {n.strip() for n in os.environ.get(DISABLED_ENV, "").split(",") if n.strip()}


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def _load_externals(pm: BatonPluginManager) -> None:
    """The entry points of the ``batonpass`` group, each registered, disabled, or failed by name. A name in
    ``BATON_DISABLED_PLUGINS`` that matches no plugin is said in one warning (a typo would block nothing)."""
    disabled, seen = _disabled_names(), set[str]()
    for dist in metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != PROJECT or pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            if any(e.name == ep.name for e in pm.externals):
                continue  # the same distribution found twice on sys.path
            dist_name = dist.metadata["name"] or "?"
            seen |= {ep.name, dist_name}
            if ep.name in disabled or dist_name in disabled:
                pm.disabled.append(ep.name)
                continue
            ext = External(ep.name, ep.value.split(":")[0].strip(), f"{dist_name} {dist.version}")
            pm.externals.append(ext)
            try:
                pm.register(ep.load(), name=ep.name)
            except Exception as exc:  # any failure of someone else's code
                pm.fail(ext, _error(exc))
    if unknown := sorted(disabled - seen):
        log.warning("%s names no installed plugin: %s (it blocks third-party plugins; the built-ins always "
                    "load); installed: %s", DISABLED_ENV, ", ".join(unknown),
                    ", ".join(sorted(seen)) or "(none)")


def _check_pending(pm: BatonPluginManager) -> None:
    """``check_pending()`` so that a misspelt hook fails loudly: a third-party plugin is left out for it, a
    built-in raises."""
    while True:
        try:
            pm.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            ext = next((e for e in pm.externals if pm.get_plugin(e.name) is exc.plugin), None)
            if ext is None:
                raise
            pm.fail(ext, _error(exc))


def make_plugin_manager(*, load_external: bool | None = None) -> BatonPluginManager:
    """A fresh manager with the built-ins and (unless disabled) the installed third-party plugins."""
    pm = BatonPluginManager()
    pm.add_hookspecs(hookspecs)
    for name in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if load_external is None:
        load_external = os.environ.get(DISABLE_ALL_ENV, "") not in ("1", "true", "yes")
    if load_external:
        _load_externals(pm)
    _check_pending(pm)
    return pm


@dataclass
class Registries:
    agents: AgentRegistry
    transforms: TransformRegistry
    #: the sections of ``settings:`` that plugins own (``register_settings``)
    settings: SettingsRegistry = field(default_factory=SettingsRegistry)
    #: the loaded third-party plugins, entry-point name → ``distribution version``
    externals: dict[str, str] = field(default_factory=dict)
    #: the plugins ``BATON_DISABLED_PLUGINS`` blocked, by entry-point name
    disabled: list[str] = field(default_factory=list)


@dataclass
class _Collected:
    """The classes one hook call registered, in call order."""

    classes: list[type] = field(default_factory=list)

    def __call__(self, cls: type) -> None:
        self.classes.append(cls)


def _culprit(pm: BatonPluginManager, hook: str, tb: TracebackType | None) -> External | None:
    """The loaded third-party plugin whose implementation of ``hook`` is in the traceback ``tb``."""
    codes = {impl.function.__code__: impl.plugin_name for impl in getattr(pm.hook, hook).get_hookimpls()
             if hasattr(impl.function, "__code__")}
    while tb is not None:
        name = codes.get(tb.tb_frame.f_code)
        if name is not None:
            return next((e for e in pm.externals if e.name == name and not e.error), None)
        tb = tb.tb_next
    return None


def _call(pm: BatonPluginManager, hook: str, registry: Registry[T]) -> None:
    """Call ``hook`` through pluggy and add what it registered to ``registry`` in plugin order; a
    third-party implementation that raises is left out (by name) and the hook called again."""
    while True:
        collected = _Collected()
        caller: Callable[..., Any] = getattr(pm.hook, hook)
        try:
            caller(register=collected)
        except Exception as exc:
            culprit = _culprit(pm, hook, exc.__traceback__)
            if culprit is None:
                raise
            pm.fail(culprit, f"{hook} raised {_error(exc)}")
            continue
        break
    ranked = sorted(((pm.origin_of(cls), i, cls) for i, cls in enumerate(collected.classes)),
                    key=lambda item: (item[0][0], item[1]))
    for (_, origin), _, cls in ranked:
        replaced = registry.add(cls, origin)
        if replaced is not None:
            log.warning("%s %r from %s overrides the one from %s", registry.kind,
                        getattr(cls, registry.key, "?"), origin, replaced)


def load_registries(pm: BatonPluginManager | None = None) -> Registries:
    """Call the registration hooks, remembering which plugin registered each class (see the module)."""
    pm = pm or make_plugin_manager()
    registries = Registries(AgentRegistry(), TransformRegistry(), SettingsRegistry())
    _call(pm, "register_agents", registries.agents)
    _call(pm, "register_transforms", registries.transforms)
    _call(pm, "register_settings", registries.settings)
    registries.externals = {e.name: e.origin for e in pm.externals if not e.error}
    registries.disabled = list(pm.disabled)
    return registries


def reload_registries(previous: Registries) -> Registries:
    """The registries read again for a reload of routes.yaml, so a plugin installed while ``baton run`` runs
    is used without a restart. A plugin whose version changed since ``previous`` keeps running the code
    imported first (Python cannot swap a loaded module): that is said in one line, with the fix."""
    importlib.invalidate_caches()  # the import system's view of the folders on sys.path
    registries = load_registries()
    for name, origin in registries.externals.items():
        before = previous.externals.get(name)
        if before is None:
            log.info("plugin %s (%s) installed since the start: loaded", name, origin)
        elif before != origin:
            log.warning("plugin %s changed from %s to %s: restart baton run to use the new version",
                        name, before, origin)
    return registries
