"""Named registries for pluggable parts (metrics, preprocessors, postprocessors).

A registry is a plain decorator; third-party packages add entries through the
``evalkit.plugins`` entry-point group, whose entries are imported once, on the
first lookup of a name no built-in has or the first listing (importing the
module runs its ``@register`` decorators): a run naming only built-ins never
scans the installed packages, and a plugin cannot take a built-in's name.
Built-in entries may instead be *lazy* ("module:attribute" from a static
table), so looking one up imports only its own module.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from evalkit.errors import ConfigError, did_you_mean

T = TypeVar("T")

_plugins_loaded = False


def load_plugins() -> None:
    """Import every module named in the ``evalkit.plugins`` entry-point group, once."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points  # with the scan: importing it is start-up time too

    for ep in entry_points(group="evalkit.plugins"):
        ep.load()


def import_plugin_modules(modules: Iterable[str], where: str = "plugins", beside: Path | None = None) -> None:
    """Import the plain modules a config names in ``plugins:``; a module that cannot be imported is a ConfigError.

    A module is looked for ``beside`` the config first (its folder: ``my_metrics.py`` or a package
    ``my_pkg/`` there), then on ``sys.path`` (installed, or on PYTHONPATH), so a plugin next to its
    config needs no PYTHONPATH. Only the named module's top-level name is taken from that folder:
    putting the folder first on ``sys.path`` would let any file there (a ``yaml.py``) shadow a library.
    The folder is added at the *end* of ``sys.path``, so the plugin's own ``import helpers`` of a
    sibling file works too.
    """
    for i, module in enumerate(modules):
        try:
            if beside is not None:
                _import_top_level_from(module.partition(".")[0], beside)
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            missing = f" (no module named {error.name!r})" if error.name and error.name != module else ""
            folder = f"put it beside the config ({beside}), " if beside is not None else ""
            raise ConfigError(
                f"{where}[{i}]: cannot import plugin module {module!r}{missing}: {folder}install it or put its "
                "folder on PYTHONPATH"
            ) from None
        except Exception as error:
            raise ConfigError(
                f"{where}[{i}]: importing plugin module {module!r} failed: {type(error).__name__}: {error}"
            ) from None


def _import_top_level_from(name: str, folder: Path) -> None:
    """Import the module or package ``name`` from ``folder`` when it is there and not imported yet."""
    if name in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec(name, [str(folder)])
    if spec is None or spec.loader is None:
        return
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise


class Registry(Generic[T]):
    """A name -> object map with aliases and "did you mean" errors."""

    def __init__(
        self,
        kind: str,
        builtin_modules: tuple[str, ...] = (),
        lazy: Iterable[tuple[str, tuple[str, ...], str]] = (),
    ) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        #: name -> "module:attribute", imported on first lookup (so a lookup imports one module, not all)
        self._lazy: dict[str, str] = {}
        self._builtin_modules = builtin_modules
        self._builtins_loaded = False
        for name, aliases, target in lazy:
            self._claim(name, aliases, None)
            self._lazy[name] = target
            self._aliases.update(dict.fromkeys(aliases, name))

    def _claim(self, name: str, aliases: Iterable[str], obj: T | None) -> None:
        """Refuse a name or alias already in use before anything is stored, so a refused entry leaves no trace.

        Registering the same object again is allowed: a module imported twice runs its decorators twice.
        """
        if name in self._lazy or (name in self._items and self._items[name] is not obj):
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        if name in self._aliases:
            raise ValueError(f"{self.kind} {name!r} is already an alias of {self._aliases[name]!r}")
        for alias in aliases:
            if self._aliases.get(alias, name) != name or alias in self._items or alias in self._lazy or alias == name:
                raise ValueError(f"{self.kind} alias {alias!r} of {name!r} is already taken")

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        """The decorator a plugin registers its class (or function) with, under ``name`` and ``aliases``."""

        def decorator(obj: T) -> T:
            if not self._is_table_entry(name, aliases, obj):
                self._claim(name, aliases, obj)
            if isinstance(obj, type) and getattr(obj, "name", None) == "":
                setattr(obj, "name", name)  # noqa: B010 (a plugin class that left ``name`` blank gets its registered name)
            self._items[name] = obj
            self._aliases.update(dict.fromkeys(aliases, name))
            return obj

        return decorator

    def _is_table_entry(self, name: str, aliases: Iterable[str], obj: T) -> bool:
        """Whether a decorator registers exactly what the static table says (the class's module, once imported).

        Built-in classes that keep their decorators (the preprocessors) then register themselves once
        more when their module is imported for a lookup: the same name, aliases and object, not a clash.
        """
        target = self._lazy.get(name)
        if target is None or target != f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}":
            return False
        return set(aliases) == {alias for alias, owner in self._aliases.items() if owner == name}

    def _resolve(self, name: str) -> T | None:
        """The object registered as ``name`` (a canonical name), importing a lazy entry's module once."""
        if name not in self._items and name in self._lazy:
            module, _, attribute = self._lazy[name].partition(":")
            self._items[name] = getattr(importlib.import_module(module), attribute)
        return self._items.get(name)

    def _ensure_builtins(self) -> None:
        if not self._builtins_loaded:
            self._builtins_loaded = True
            for module in self._builtin_modules:
                importlib.import_module(module)

    def _ensure_loaded(self) -> None:
        """Built-ins and every installed plugin: what a listing or an unknown name needs."""
        self._ensure_builtins()
        load_plugins()

    def _ensure_has(self, name: str) -> None:
        """The built-ins, and the installed plugins too when ``name`` is none of the built-ins' names or aliases.

        Scanning the installed packages' entry points costs a run's start-up some 10-20 ms, and a name
        among the built-ins never needs it: a plugin cannot take a built-in's name or alias (``_claim``).
        """
        self._ensure_builtins()
        if name not in self._aliases and name not in self._known():
            load_plugins()

    def canonical(self, name: str) -> str:
        """The canonical name of ``name`` (itself when it is no alias): the one place aliases are resolved."""
        self._ensure_has(name)
        return self._aliases.get(name, name)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        self._ensure_has(name)
        return self.canonical(name) in self._known()

    def _known(self) -> set[str]:
        return {*self._items, *self._lazy}

    def get(self, name: str, *, where: str = "") -> T:
        """Look a name up; an unknown name raises ConfigError naming ``where``."""
        self._ensure_has(name)
        key = self._aliases.get(name, name)
        found = self._resolve(key)
        if found is None:
            self._ensure_loaded()  # the message lists every name, the plugins' too
            hint = did_you_mean(name, self.names())
            prefix = f"{where}: " if where else ""
            raise ConfigError(f"{prefix}unknown {self.kind} {name!r}{hint}. Known: {', '.join(sorted(self._known()))}")
        return found

    def aliases(self, name: str) -> tuple[str, ...]:
        """The aliases of the canonical ``name``, sorted, so listings need not invert the alias map themselves."""
        self._ensure_loaded()
        return tuple(sorted(alias for alias, target in self._aliases.items() if target == name))

    def registered_items(self) -> Iterator[tuple[str, T]]:
        """The entries added with the decorator (plugins), sorted; lazy built-ins stay unimported.

        A static table already describes the lazy entries; only these need
        their objects read, and listing them must not import every built-in.
        """
        self._ensure_loaded()
        return iter(
            sorted(((n, obj) for n, obj in self._items.items() if n not in self._lazy), key=lambda item: item[0])
        )

    def names(self, include_aliases: bool = True) -> list[str]:
        """Every registered name, sorted; aliases too unless ``include_aliases`` is False."""
        self._ensure_loaded()
        names = list(self._known())
        if include_aliases:
            names += list(self._aliases)
        return sorted(names)

    def items(self) -> Iterator[tuple[str, T]]:
        """Every entry, lazy ones imported."""
        self._ensure_loaded()
        for name in self._lazy:
            self._resolve(name)
        return iter(sorted(self._items.items()))
