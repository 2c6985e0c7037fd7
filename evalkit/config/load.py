"""Reading a config: the file, its YAML, ``${VAR}`` expansion, a foreign format translated, then validation.

A bad config stops here with a ConfigError listing every problem (exit code 2, no traceback).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalkit.config.envvars import expand_tree
from evalkit.config.foreign.auharness_names import is_auharness
from evalkit.config.messages import format_validation_error
from evalkit.config.schema import Config
from evalkit.errors import ConfigError
from evalkit.util.yaml_safe import load_yaml_file

if TYPE_CHECKING:
    from evalkit.config.foreign.auharness import Translation


def parse_config(
    data: Any, source: str = "config", env: Mapping[str, str] | None = None, base_dir: Path | None = None
) -> Config:
    """Validate a parsed YAML tree; raises ConfigError listing every problem.

    An AU-Harness config is translated first (evalkit.config.foreign.auharness); ``base_dir``, the config file's folder,
    is where its names are looked up (its runspecs_dir).
    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping of keys (dataset_metric, models, ...), got {type(data).__name__}"
        )
    foreign = is_auharness(data)
    data = expand_tree(data, os.environ if env is None else env, source)
    translation: Translation | None = None
    if foreign:
        from evalkit.config.foreign.auharness import translate  # the translator: only for a config in its format

        translation = translate(data, source, Config.model_fields, base_dir=base_dir)
    try:
        config = Config.model_validate(translation.data if translation is not None else data)
    except ValidationError as error:
        message = format_validation_error(error, source)
        raise ConfigError(translation.rename(message, source) if translation else message) from None
    if translation is not None:
        config.pair_labels = list(translation.pair_labels)
    return config


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    data = load_yaml_file(path)
    config = parse_config(data, str(path), env, base_dir=path.parent)
    config.anchor(path.parent)
    return config
