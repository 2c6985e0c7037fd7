"""ChEF's recipes as dataset_metric options: chain of thought, and robustness variants of a pair.

A pair's options are its metric's, except these, which say how the dataset is asked instead:

- ``chain_of_thought: true`` (aliases ``cot``, ChEF's ``CoT``): reason first, then answer (see
  :mod:`evalkit.prompts.chef.cot`).
- ``circular: true`` (ChEF's MMBench recipe on any multiple-choice dataset asked with
  ``MultipleChoicePreprocessor``): each question once per rotation of its options, as
  ``CircularMultipleChoicePreprocessor`` does; score it with ``mmbench_circular_accuracy``.
- ``corruptions: [gaussian_noise, jpeg, typos, ...]``: besides the clean pair, one *variant* per corruption,
  a dataset named ``<dataset>@<corruption>`` whose images or texts are corrupted (see
  :mod:`evalkit.data.image.corrupt`, :mod:`evalkit.data.audio.corrupt` and :mod:`evalkit.prompts.corrupt_text`).
  ``corruption_severity`` (1-5, default 3) and ``corruption_seed`` (default 0) apply to all of them. Each variant
  runs as a pair of its own (records, results), and its result row says the clean score and the change. ChEF's
  ``img_crp: true`` and ``text_crp: true`` add every image or every text corruption, ``audio_crp: true`` every
  audio one.
- ``corruption_severity: [1, 3, 5]``: a sweep; one variant per corruption and level, named
  ``<dataset>@<corruption>-<level>``, so the report draws the score against the level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.catalog import DatasetSpec
from evalkit.data.image.corrupt import DEFAULT_SEVERITY, IMAGE_CORRUPTIONS
from evalkit.errors import ConfigError

RECIPE_OPTIONS = (
    "circular",
    "chain_of_thought",
    "cot",
    "CoT",
    "corruptions",
    "corruption_severity",
    "corruption_seed",
    "img_crp",
    "text_crp",
    "audio_crp",
)


@dataclass(frozen=True, slots=True)
class Recipe:
    """How one dataset_metric pair asks its dataset, beyond the dataset's own entry."""

    chain_of_thought: bool = False
    corruptions: tuple[str, ...] = ()
    circular: bool = False
    severity: int = DEFAULT_SEVERITY
    seed: int = 0
    #: a sweep's levels (``corruption_severity`` given as a list); empty: the one ``severity``, unnamed
    sweep: tuple[int, ...] = ()


def _whole(value: Any, key: str, where: str, low: int, high: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        span = f"{low}-{high}" if high is not None else f">= {low}"
        raise ConfigError(f"{where}: option {key!r}: expected a whole number {span}, got {value!r}")
    return value


def _corruptions_of_kind(switch: str) -> tuple[str, ...]:
    """Every corruption a ChEF switch (``img_crp``, ``text_crp``, evalkit's ``audio_crp``) turns on."""
    if switch == "img_crp":
        return tuple(IMAGE_CORRUPTIONS)
    if switch == "text_crp":
        from evalkit.prompts.corrupt_text import TEXT_CORRUPTIONS

        return tuple(TEXT_CORRUPTIONS)
    from evalkit.data.audio.corrupt import AUDIO_CORRUPTIONS

    return tuple(AUDIO_CORRUPTIONS)


def split_recipe(options: dict[str, Any], where: str) -> tuple[dict[str, Any], Recipe]:
    """The metric's own options, and the recipe the pair's other options ask for (ConfigError on a bad one)."""
    metric_options = {k: v for k, v in options.items() if k not in RECIPE_OPTIONS}
    cot = options.get("chain_of_thought", options.get("cot", options.get("CoT", False)))
    if not isinstance(cot, bool):
        raise ConfigError(f"{where}: option 'chain_of_thought': expected true or false, got {cot!r}")
    raw = options.get("corruptions", [])
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(name, str) for name in raw):
        raise ConfigError(f"{where}: option 'corruptions': expected a list of corruption names, got {raw!r}")
    switches = ("img_crp", "text_crp", "audio_crp")
    for key in switches:  # ChEF's switches (and evalkit's audio one): all of a kind
        flag = options.get(key, False)
        if not isinstance(flag, bool):
            raise ConfigError(f"{where}: option {key!r}: expected true or false, got {flag!r}")
        if flag:
            raw = [*raw, *_corruptions_of_kind(key)]
    names: list[str] = []
    if raw:  # the corruption tables (audio, text) are read only for a pair that asks for a corruption
        from evalkit.prompts.corrupt_text import canonical_corruption, known_corruptions
    for name in raw:
        canonical = canonical_corruption(name)
        if canonical is None:
            raise ConfigError(
                f"{where}: option 'corruptions': unknown corruption {name!r}; known: {', '.join(known_corruptions())}"
            )
        if canonical not in names:
            names.append(canonical)
    levels = options.get("corruption_severity", DEFAULT_SEVERITY)
    sweep: tuple[int, ...] = ()
    if isinstance(levels, list):
        if not levels:
            raise ConfigError(f"{where}: option 'corruption_severity': expected levels 1-5, got an empty list")
        sweep = tuple(dict.fromkeys(_whole(v, "corruption_severity", where, 1, 5) for v in levels))
        severity = sweep[0]
    else:
        severity = _whole(levels, "corruption_severity", where, 1, 5)
    seed = _whole(options.get("corruption_seed", 0), "corruption_seed", where, 0)
    circular = options.get("circular", False)
    if not isinstance(circular, bool):
        raise ConfigError(f"{where}: option 'circular': expected true or false, got {circular!r}")
    return metric_options, Recipe(
        chain_of_thought=cot, corruptions=tuple(names), circular=circular, severity=severity, seed=seed, sweep=sweep
    )


#: the preprocessor ``circular: true`` rotates, and what it becomes
PLAIN_MCQ, CIRCULAR_MCQ = "MultipleChoicePreprocessor", "CircularMultipleChoicePreprocessor"


def _circular(spec: DatasetSpec, where: str) -> DatasetSpec:
    """The dataset asked once per rotation of its options (MMBench's circular evaluation, ChEF's recipe)."""
    from evalkit.prompts.preprocessors import PREPROCESSORS

    asked = PREPROCESSORS.canonical(spec.preprocessor)
    if asked == CIRCULAR_MCQ:
        return spec
    if asked != PLAIN_MCQ:
        raise ConfigError(
            f"{where}: option 'circular' rotates the options of a multiple-choice dataset asked with {PLAIN_MCQ}; "
            f"dataset {spec.name!r} is asked with {spec.preprocessor}"
        )
    return spec.model_copy(update={"preprocessor": CIRCULAR_MCQ})


def recipe_datasets(spec: DatasetSpec, recipe: Recipe, where: str) -> list[DatasetSpec]:
    """The datasets a pair runs: the clean one (with chain of thought when asked), then one per corruption."""
    clean = spec.model_copy(update={"chain_of_thought": True}) if recipe.chain_of_thought else spec
    if recipe.circular:
        clean = _circular(clean, where)
    out = [clean]
    if recipe.corruptions:
        from evalkit.data.audio.corrupt import AUDIO_CORRUPTIONS
    for name in recipe.corruptions:
        if name in IMAGE_CORRUPTIONS and not spec.image_column:
            raise ConfigError(
                f"{where}: corruption {name!r} changes images, and dataset {spec.name!r} has no image_column"
            )
        if name in AUDIO_CORRUPTIONS and not (spec.audio_column or spec.turns_column):
            raise ConfigError(
                f"{where}: corruption {name!r} changes audio, and dataset {spec.name!r} has no audio_column"
            )
        for level in recipe.sweep or (recipe.severity,):
            corruption = {"name": name, "severity": level, "seed": recipe.seed, "clean": spec.name}
            variant = f"{spec.name}@{name}-{level}" if recipe.sweep else f"{spec.name}@{name}"
            out.append(clean.model_copy(update={"name": variant, "corruption": corruption}))
    return out


def clean_name(spec: DatasetSpec) -> str:
    """The name of the dataset a robustness variant corrupts (the dataset's own name when it is clean)."""
    return str(spec.corruption["clean"]) if spec.corruption else spec.name
