"""`evalkit convert`: an AU-Harness config file rewritten as evalkit's own format, checked to validate as such."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from evalkit.config.foreign.auharness import convert_text
from evalkit.config.foreign.auharness_names import is_auharness
from evalkit.config.load import parse_config
from evalkit.config.models import blank_urls_allowed
from evalkit.config.schema import Config
from evalkit.errors import ConfigError
from evalkit.util.yaml_safe import load_yaml_file


def convert_file(source: Path) -> str:
    """The YAML text of ``source`` (an AU-Harness config) in evalkit's format; ConfigError if it is not one."""
    if not source.is_file():
        raise ConfigError(f"{source}: config file not found")
    data = load_yaml_file(source)
    if not isinstance(data, dict) or not is_auharness(data):
        raise ConfigError(f"{source}: not an AU-Harness config (no task_metric, filter, ... or flat model entries)")
    text = convert_text(data, str(source), Config.model_fields, base_dir=source.parent)
    # the result must validate as evalkit's own format; unset ${VAR}s only stand in for their values here
    # (and a template's <ENDPOINT_URL> is left for the user to fill: validate and run refuse it then)
    with blank_urls_allowed():
        parse_config(_yaml_tree(text), f"{source} (converted)", env=_PlaceholderEnv(), base_dir=source.parent)
    return text


def _yaml_tree(text: str) -> Any:
    return yaml.safe_load(text)


class _PlaceholderEnv(dict[str, str]):
    """The environment, where an unset variable reads as "0": enough to check a converted config's shape."""

    def __init__(self) -> None:
        super().__init__(os.environ)

    def __missing__(self, key: str) -> str:
        return "0"

    def __contains__(self, key: object) -> bool:
        return True
