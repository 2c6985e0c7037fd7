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


def expand_string(value: str, env: Mapping[str, str], where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(3)
        default = match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(
            f"{where}: environment variable ${{{name}}} is not set (export {name}=... or write ${{{name}:-default}})"
        )

    return _PATTERN.sub(replace, value)


def expand_tree(node: Any, env: Mapping[str, str], where: str) -> Any:
    """Return a copy of ``node`` with every string expanded; ``where`` names the position."""
    if isinstance(node, str):
        return expand_string(node, env, where) if "$" in node else node
    if isinstance(node, list):
        return [expand_tree(item, env, f"{where}[{i}]") for i, item in enumerate(node)]
    if isinstance(node, dict):
        return {key: expand_tree(value, env, f"{where}.{key}") for key, value in node.items()}
    return node
