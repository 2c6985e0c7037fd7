"""Named prompts shipped with evalkit: add-ons, system prompts and instruction pools.

Names from config.yaml are looked up in the YAML files next to this module.
A name that does not exist stops the run at planning time with a
suggestion; a name whose texts apply to none of an engine's dataset, task or
category simply adds nothing there.
"""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from evalkit.catalog import DatasetSpec
from evalkit.config import Config
from evalkit.errors import ConfigError, RunspecError, did_you_mean
from evalkit.prompts.preprocessors import PromptContext

_HERE = Path(__file__).parent


@cache
def _load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((_HERE / name).read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise RuntimeError(f"{_HERE / name}: expected a mapping of names")
    return data


def add_ons() -> dict[str, Any]:
    return _load("add_ons.yaml")


def system_prompts() -> dict[str, Any]:
    return _load("system_prompts.yaml")


def pools() -> dict[str, list[str]]:
    return _load("pools.yaml")


def _specific_text(entry: dict[str, Any], spec: DatasetSpec, model: tuple[str, ...] = ()) -> str | None:
    """Most specific text of an entry for this dataset (and model): model > dataset > task > category > text."""
    by_model = entry.get("by_model") or {}
    for name in model:
        for key, text in by_model.items():
            if key == name or (key and name.lower().startswith(str(key).lower())):
                return text
    for field, key in (("by_dataset", spec.name), ("by_task", spec.task), ("by_category", spec.category)):
        text = (entry.get(field) or {}).get(key)
        if text is not None:
            return text
    return entry.get("text")


def _check(names: list[str], known: dict[str, Any], where: str) -> None:
    for name in names:
        if name not in known:
            raise ConfigError(
                f"{where}: unknown prompt {name!r}{did_you_mean(name, known)}. Known: {', '.join(sorted(known))}"
            )


def check_prompt_names(config: Config, source: str = "config") -> None:
    _check(config.filters.user_prompt_add_ons, add_ons(), f"{source}: filters.user_prompt_add_ons")
    _check(config.filters.system_prompts, system_prompts(), f"{source}: filters.system_prompts")


def _join(texts: list[str | None]) -> str | None:
    kept = [t.strip() for t in texts if t and t.strip()]
    return "\n\n".join(kept) if kept else None


def prompt_context_for(config: Config, spec: DatasetSpec, model_names: list[str]) -> PromptContext:
    """The PromptContext of one engine, with per-model system prompts where they differ."""
    check_prompt_names(config)
    filters = config.filters
    extras = [_specific_text(add_ons()[n], spec) for n in filters.user_prompt_add_ons]
    chosen = [system_prompts()[n] for n in filters.system_prompts]
    default_system = _join([_specific_text(entry, spec) for entry in chosen])
    ids = {entry.info.name: entry.info.model for entry in config.models}
    by_model: dict[str, str | None] = {}
    for model in model_names:
        text = _join([_specific_text(entry, spec, (model, ids.get(model, model))) for entry in chosen])
        if text != default_system:
            by_model[model] = text
    return PromptContext(
        system_prompt=default_system,
        system_by_model=by_model,
        add_ons=[t for t in extras if t],
        add_on_names=[n for n, t in zip(filters.user_prompt_add_ons, extras) if t],
        system_prompt_names=list(filters.system_prompts),
    )


def check_prompt_choice(spec: DatasetSpec) -> None:
    """A runspec's ``prompt_pool``/``prompt_choice`` name a pool and a template in it; RunspecError otherwise."""
    if spec.prompt_pool is None:
        if spec.prompt_choice is not None:
            raise RunspecError(f"{spec.file}: {spec.name}.prompt_choice: needs a `prompt_pool` to choose from")
        return
    pool = pools().get(spec.prompt_pool)
    if not pool:
        raise RunspecError(
            f"{spec.file}: {spec.name}.prompt_pool: unknown pool "
            f"{spec.prompt_pool!r}{did_you_mean(spec.prompt_pool, pools())}"
        )
    _template_index(spec, len(pool), "")


def _template_index(spec: DatasetSpec, size: int, sample_id: str, seed: int = 0) -> int:
    choice = spec.prompt_choice if spec.prompt_choice is not None else "random"
    if choice == "random":
        return random.Random(f"{seed}:{spec.name}:{sample_id}").randrange(size)
    try:
        index = int(choice)
    except (TypeError, ValueError):
        raise RunspecError(
            f'{spec.file}: {spec.name}.prompt_choice: expected a template index or "random", got {choice!r}'
        ) from None
    if not 0 <= index < size:
        raise RunspecError(
            f"{spec.file}: {spec.name}.prompt_choice: {index} is outside the pool of {size} templates (0..{size - 1})"
        )
    return index


def instruction_for(spec: DatasetSpec, sample_id: str, seed: int) -> tuple[str | None, int | None]:
    """The instruction template chosen from the dataset's pool for one sample, and its index.

    ``prompt_choice`` is a fixed index, or ``random`` (the default): a draw
    seeded by the run seed, the dataset and the sample id, so a rerun asks
    every sample the same way and two samples are asked independently.
    """
    if spec.prompt_pool is None:
        return None, None
    check_prompt_choice(spec)
    pool = pools()[spec.prompt_pool]
    index = _template_index(spec, len(pool), sample_id, seed)
    return pool[index], index
