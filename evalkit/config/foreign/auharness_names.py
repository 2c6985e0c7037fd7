"""The names an AU-Harness config or dataset is known by, apart from the translation that reads its config.

Every run asks these questions (is this config AU-Harness's? does this pair mean AU-Harness's computation?), and
only a config in AU-Harness's format needs :mod:`evalkit.config.foreign.auharness`'s translation, so the answers
live here and a run in evalkit's own format never loads the translator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.catalog import Catalog

#: the prefix that gives a name AU-Harness's meaning (runspecs/_names/auharness.json)
PREFIX = "auharness"
#: keys only AU-Harness's format has: one of them, or a flat model entry, marks a config as AU-Harness's
MARKERS = ("task_metric", "filter", "judge_settings", "logging", "prompt_overrides", "generation_params_override")
#: AU-Harness's metric names that evalkit computes otherwise -> the evalkit metric computing AU-Harness's value
#: (evalkit/metrics/auharness/named.py, judges.py); an AU-Harness config, or a pair whose dataset is written as
#: AU-Harness names it, means these
SAME_NAME_OTHER_COMPUTATION: dict[str, str] = {
    name: f"{PREFIX}:{name}" for name in ("word_error_rate", "bleu", "llm_judge_binary", "llm_judge_detailed")
}


def auharness_metric(name: str) -> str:
    """The evalkit metric computing what AU-Harness computes for its metric ``name`` (``auharness:`` optional)."""
    bare = name.removeprefix(f"{PREFIX}:")
    return SAME_NAME_OTHER_COMPUTATION.get(bare, bare)


def is_auharness_name(catalog: Catalog, dataset: str) -> bool:
    """Whether ``dataset`` is written as AU-Harness names a dataset (not as evalkit names its own entries).

    ``auharness:<name>`` always is; a bare AU-Harness name is unless evalkit also uses it (a dataset, alias,
    task or category), in which case an evalkit config means evalkit's.
    """
    tool, _, inner = dataset.partition(":")
    if inner and tool == PREFIX:
        return True
    if catalog.knows(dataset):  # evalkit's own names first: their runs never read the tool's table
        return False
    table = catalog.foreign.get(PREFIX)
    return table is not None and (dataset in table.datasets or dataset in table.groups)


def metric_for_pair(catalog: Catalog, dataset: str, metric: str) -> str:
    """The metric a pair runs: AU-Harness's computation for its names on an AU-Harness dataset, else as written."""
    if metric.startswith(f"{PREFIX}:"):
        return auharness_metric(metric)
    if metric in SAME_NAME_OTHER_COMPUTATION and is_auharness_name(catalog, dataset):
        return SAME_NAME_OTHER_COMPUTATION[metric]
    return metric


def is_auharness(data: Mapping[str, Any]) -> bool:
    """Whether a config tree is written in AU-Harness's format rather than evalkit's (LALMEval's) own."""
    if any(key in data for key in MARKERS):
        return True
    models = data.get("models")
    return isinstance(models, list) and any(isinstance(m, Mapping) and "info" not in m for m in models)
