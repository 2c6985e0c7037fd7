"""``${VAR}`` / ``$VAR`` expansion of config values from the environment.

Expansion happens on the parsed YAML tree (strings only), before validation,
so a missing variable is reported with the key that used it. ``$$`` stands
for a literal ``$`` and ``${VAR:-default}`` supplies a default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evalkit.errors import ConfigError

_PATTERN = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _expand(value: str, env: Mapping[str, str], where: str, missing: list[str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(3)
        default = match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        missing.append(f"{where}: environment variable ${{{name}}} is not set")
        return match.group(0)

    return _PATTERN.sub(replace, value)


def _hint(missing: list[str]) -> str:
    return "\n".join(missing) + "\n(export each, e.g. export NAME=..., or write ${NAME:-default})"


def expand_string(value: str, env: Mapping[str, str], where: str) -> str:
    """``value`` with every variable expanded; ConfigError listing every unset one."""
    missing: list[str] = []
    out = _expand(value, env, where, missing)
    if missing:
        raise ConfigError(_hint(missing))
    return out


def expand_tree(node: Any, env: Mapping[str, str], where: str) -> Any:
    """A copy of ``node`` with every string expanded; ConfigError listing every unset variable at once.

    ``where`` names the position, so each missing variable is reported with the key that uses it.
    """
    missing: list[str] = []
    out = _expand_tree(node, env, where, missing)
    if missing:
        raise ConfigError(_hint(missing))
    return out


def _expand_tree(node: Any, env: Mapping[str, str], where: str, missing: list[str]) -> Any:
    if isinstance(node, str):
        return _expand(node, env, where, missing) if "$" in node else node
    if isinstance(node, list):
        return [_expand_tree(item, env, f"{where}[{i}]", missing) for i, item in enumerate(node)]
    if isinstance(node, dict):
        return {key: _expand_tree(value, env, f"{where}.{key}", missing) for key, value in node.items()}
    return node


def referenced_names(node: Any) -> dict[str, bool]:
    """Every variable a parsed config uses -> whether it has a ``:-default``; ``$$`` is no variable.

    What a launcher that runs evalkit elsewhere (a Ray task, a batch job) must
    pass on from its own environment for the config to mean the same there.
    """
    found: dict[str, bool] = {}
    if isinstance(node, str):
        for match in _PATTERN.finditer(node):
            name = match.group(1) or match.group(3)
            if name:
                found[name] = found.get(name, True) and match.group(2) is not None
    elif isinstance(node, (list, dict)):
        for item in node.values() if isinstance(node, dict) else node:
            for name, defaulted in referenced_names(item).items():
                found[name] = found.get(name, True) and defaulted
    return found
