"""Named prompts: add-ons, system prompts, instruction pools and judge prompts.

The YAML files next to this module are the defaults. A config's
``prompts_dir`` (a folder with any of add_ons.yaml, system_prompts.yaml,
pools.yaml and judges/<metric>.yaml) and its inline ``prompts:`` override
entries by name or add new ones, in that order, without editing the package.
A name that does not exist stops the run at planning time with a
suggestion; a name whose texts apply to none of an engine's dataset, task or
category simply adds nothing there.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from evalkit.catalog import DatasetSpec
from evalkit.config import Config
from evalkit.errors import ConfigError, RunspecError, did_you_mean
from evalkit.prompts.preprocessors import PromptContext
from evalkit.util.yaml_safe import load_yaml_file

_HERE = Path(__file__).parent


@cache
def _load(name: str) -> dict[str, Any]:
    data = load_yaml_file(_HERE / name) or {}
    if not isinstance(data, dict):
        raise RuntimeError(f"{_HERE / name}: expected a mapping of names")
    return data


def add_ons() -> dict[str, Any]:
    return _load("add_ons.yaml")


def system_prompts() -> dict[str, Any]:
    return _load("system_prompts.yaml")


def pools() -> dict[str, list[str]]:
    return _load("pools.yaml")


#: the library files a prompts_dir may hold, by the PromptLibrary field they fill
PROMPT_FILES = {"add_ons": "add_ons.yaml", "system_prompts": "system_prompts.yaml", "pools": "pools.yaml"}


@dataclass(frozen=True)
class PromptLibrary:
    """The prompts one run uses: the package's, with the config's prompts_dir and inline prompts on top.

    The package's files are read when a part is first asked for: a run that names no add-on, system prompt,
    pool or judge never parses them. What the config adds was read and checked when the library was made.
    """

    #: what the config's prompts_dir and inline prompts add or replace, by part (add_ons, system_prompts, pools,
    #: judges); a judge is a YAML file path or an inline mapping of the same format
    layered: dict[str, dict[str, Any]]

    @cached_property
    def add_ons(self) -> dict[str, Any]:
        return {**add_ons(), **self.layered.get("add_ons", {})}

    @cached_property
    def system_prompts(self) -> dict[str, Any]:
        return {**system_prompts(), **self.layered.get("system_prompts", {})}

    @cached_property
    def pools(self) -> dict[str, list[str]]:
        return {**pools(), **self.layered.get("pools", {})}

    @cached_property
    def judges(self) -> dict[str, Any]:
        """Judge metric (prompt) name -> a YAML file path, or an inline mapping of the same format."""
        shipped = {path.stem: str(path) for path in sorted((_HERE / "judges").glob("*.yaml"))}
        return {**shipped, **self.layered.get("judges", {})}


def _read_user_file(path: Path, where: str) -> dict[str, Any]:
    try:
        data = load_yaml_file(path) or {}
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {path}: expected a mapping of prompt names")
    return data


def _check_pools(found: dict[str, Any], where: str) -> None:
    for name, templates in found.items():
        if not isinstance(templates, list) or not templates or not all(isinstance(t, str) for t in templates):
            raise ConfigError(f"{where}: pool {name!r}: expected a non-empty list of instruction templates")


def library_for(config: Config, source: str = "config") -> PromptLibrary:
    """The run's prompt library; a missing prompts_dir or an unreadable file is a ConfigError naming it."""
    # prompts.instructions replace datasets' instructions in the plan (evalkit/plan.py), not library entries
    overrides = (
        config.prompts.model_dump(exclude_none=True, exclude={"instructions"}) if config.prompts is not None else {}
    )
    return _library(config.prompts_dir, json.dumps(overrides, sort_keys=True), source)


@cache
def _library(prompts_dir: str | None, inline: str, source: str) -> PromptLibrary:
    parts: dict[str, dict[str, Any]] = {"add_ons": {}, "system_prompts": {}, "pools": {}, "judges": {}}
    if prompts_dir is not None:
        folder = Path(prompts_dir)
        where = f"{source}: prompts_dir"
        if not folder.is_dir():
            raise ConfigError(
                f"{where}: {folder} is not a folder (it may hold {', '.join(PROMPT_FILES.values())} and judges/)"
            )
        for field_name, file in PROMPT_FILES.items():
            if (folder / file).is_file():
                found = _read_user_file(folder / file, where)
                if field_name == "pools":
                    _check_pools(found, f"{where}: {folder / file}")
                parts[field_name].update(found)
        for path in sorted((folder / "judges").glob("*.yaml")):
            parts["judges"][path.stem] = str(path)
    for field_name, found in json.loads(inline).items():
        if field_name == "pools":
            _check_pools(found, f"{source}: prompts.pools")
        parts[field_name].update(found)
    return PromptLibrary(parts)


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
    library = library_for(config, source)
    if config.filters.user_prompt_add_ons:  # the library's parts are read when asked: not for no names
        _check(config.filters.user_prompt_add_ons, library.add_ons, f"{source}: filters.user_prompt_add_ons")
    if config.filters.system_prompts:
        _check(config.filters.system_prompts, library.system_prompts, f"{source}: filters.system_prompts")


def _join(texts: list[str | None]) -> str | None:
    kept = [t.strip() for t in texts if t and t.strip()]
    return "\n\n".join(kept) if kept else None


def prompt_context_for(config: Config, spec: DatasetSpec, model_names: list[str]) -> PromptContext:
    """The PromptContext of one engine, with per-model system prompts where they differ."""
    check_prompt_names(config)
    library = library_for(config)
    filters = config.filters
    extras = [_specific_text(library.add_ons[n], spec) for n in filters.user_prompt_add_ons]
    chosen = [library.system_prompts[n] for n in filters.system_prompts]
    # the dataset's own system prompt (runspec `system_prompt`) first, then the config's named ones
    default_system = _join([spec.system_prompt, *(_specific_text(entry, spec) for entry in chosen)])
    ids = {entry.info.name: entry.info.model for entry in config.models}
    by_model: dict[str, str | None] = {}
    for model in model_names:
        texts = [_specific_text(entry, spec, (model, ids.get(model, model))) for entry in chosen]
        text = _join([spec.system_prompt, *texts])
        if text != default_system:
            by_model[model] = text
    return PromptContext(
        system_prompt=default_system,
        system_by_model=by_model,
        add_ons=[t for t in extras if t],
        add_on_names=[n for n, t in zip(filters.user_prompt_add_ons, extras) if t],
        system_prompt_names=list(filters.system_prompts),
        pool=library.pools.get(spec.prompt_pool) if spec.prompt_pool is not None else None,
    )


def check_prompt_choice(spec: DatasetSpec, known: dict[str, list[str]] | None = None) -> None:
    """A runspec's ``prompt_pool``/``prompt_choice`` name a pool and a template in it; RunspecError otherwise.

    ``known`` is the run's pools (:func:`library_for`); absent: the package's.
    """
    if spec.prompt_pool is None:
        if spec.prompt_choice is not None:
            raise RunspecError(f"{spec.file}: {spec.name}.prompt_choice: needs a `prompt_pool` to choose from")
        return
    known = pools() if known is None else known
    pool = known.get(spec.prompt_pool)
    if not pool:
        raise RunspecError(
            f"{spec.file}: {spec.name}.prompt_pool: unknown pool "
            f"{spec.prompt_pool!r}{did_you_mean(spec.prompt_pool, known)}"
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


def instruction_for(
    spec: DatasetSpec, sample_id: str, seed: int, pool: list[str] | None = None
) -> tuple[str | None, int | None]:
    """The instruction template chosen from the dataset's pool for one sample, and its index.

    ``prompt_choice`` is a fixed index, or ``random`` (the default): a draw
    seeded by the run seed, the dataset and the sample id, so a rerun asks
    every sample the same way and two samples are asked independently.
    ``pool`` is the run's templates of the dataset's pool (``PromptContext.pool``); absent: the package's.
    """
    if spec.prompt_pool is None:
        return None, None
    if pool is None:
        check_prompt_choice(spec)
        pool = pools()[spec.prompt_pool]
    index = _template_index(spec, len(pool), sample_id, seed)
    return pool[index], index
