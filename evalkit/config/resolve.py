"""The one way in: a config source and its overrides -> the validated config a plan is built from.

A source is a path (read, ``${VAR}``-expanded, a foreign format translated, validated, its relative paths
anchored to its folder), a dict of config keys (the same without the file) or a Config (copied, so the
caller's stays as it was); the overrides are then applied in one pass (:mod:`evalkit.config.overrides`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalkit.config.load import load_config, parse_config
from evalkit.config.overrides import Overrides, Registries, apply_overrides
from evalkit.config.schema import Config


def resolve(
    source: Config | dict[str, Any] | str | Path,
    overrides: Overrides | None = None,
    *,
    registries: Registries | None = None,
    env: Mapping[str, str] | None = None,
    label: str | None = None,
) -> tuple[Config, str]:
    """The validated config of ``source`` with ``overrides`` applied, and the label naming its source in messages.

    ``registries`` (the metric and processor registries) are needed with ``overrides``, whose names are checked
    against them; ``env`` replaces the environment ``${VAR}`` is read from. ``label`` names a dict or Config
    source where messages and results.json say where the config came from (``command line`` for one built
    from ``evalkit run``'s flags); a file is always named by its path.
    """
    config, label = _read(source, env, label)
    if overrides is not None:
        if registries is None:
            raise TypeError("resolve: overrides are checked against the metric and processor registries; pass them")
        config = apply_overrides(config, overrides, registries)
    return config, label


def _read(source: Any, env: Mapping[str, str] | None, label: str | None) -> tuple[Config, str]:
    if isinstance(source, Config):
        return source.model_copy(deep=True), label or "Config"
    if isinstance(source, dict):
        label = label or "config dict"
        return parse_config(source, label, env), label
    if isinstance(source, (str, Path)):
        return load_config(source, env), str(source)
    raise TypeError(f"config must be a Config, a dict or a path, not {type(source).__name__}")
