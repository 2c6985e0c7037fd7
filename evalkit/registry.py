"""Named registries for pluggable parts (metrics, preprocessors, postprocessors).

A registry is a plain decorator; third-party packages add entries through the
``evalkit.plugins`` entry-point group, whose entries are imported once on the
first lookup (importing the module runs its ``@register`` decorators).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
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
    for ep in entry_points(group="evalkit.plugins"):
        ep.load()


class Registry(Generic[T]):
    """A name -> object map with aliases and "did you mean" errors."""

    def __init__(self, kind: str, builtin_modules: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._builtin_modules = builtin_modules
        self._builtins_loaded = False

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            for alias in aliases:
                self._aliases[alias] = name
            return obj

        return decorator

    def _ensure_loaded(self) -> None:
        if not self._builtins_loaded:
            self._builtins_loaded = True
            import importlib

            for module in self._builtin_modules:
                importlib.import_module(module)
        load_plugins()

    def canonical(self, name: str) -> str:
        self._ensure_loaded()
        return self._aliases.get(name, name)

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return isinstance(name, str) and self.canonical(name) in self._items

    def get(self, name: str, *, where: str = "") -> T:
        """Look a name up; an unknown name raises ConfigError naming ``where``."""
        self._ensure_loaded()
        key = self._aliases.get(name, name)
        if key not in self._items:
            hint = did_you_mean(name, self.names())
            prefix = f"{where}: " if where else ""
            raise ConfigError(
                f"{prefix}unknown {self.kind} {name!r}{hint}. Known: {', '.join(sorted(self._items))}"
            )
        return self._items[key]

    def names(self, include_aliases: bool = True) -> list[str]:
        self._ensure_loaded()
        names = list(self._items)
        if include_aliases:
            names += list(self._aliases)
        return sorted(names)

    def items(self) -> Iterator[tuple[str, T]]:
        self._ensure_loaded()
        return iter(sorted(self._items.items()))
