"""KARMA's metric names in KARMA's meaning wherever a dataset is named as KARMA names it.

KARMA (eka-care/KARMA-OpenMedEvalKit) calls seven of its metrics by names
evalkit already uses for other computations (``exact_match``, ``wer``,
``bleu``, ...). evalkit keeps KARMA's versions under ``karma:<name>``
(evalkit/metrics/karma/named.py). A KARMA user runs KARMA's dataset ids
(``openlifescienceai/medqa``, ``karma:nfi_mcqa``) with KARMA's metric names
and must get KARMA's numbers without renaming anything, so a pair whose
dataset is written as a KARMA id reads those seven names in KARMA's meaning;
the same name on an evalkit dataset name (``medqa``) keeps evalkit's. With no
metric given, a KARMA id runs every metric KARMA registers for it, as
``karma eval`` does.

Pure name mapping: nothing here imports a metric.
"""

from __future__ import annotations

from evalkit.catalog import Catalog

#: the prefix that gives a name KARMA's meaning (runspecs/_names/karma.json)
PREFIX = "karma"
#: KARMA's metric names that evalkit computes otherwise -> the evalkit metric computing KARMA's value
SAME_NAME_OTHER_COMPUTATION: dict[str, str] = {
    name: f"{PREFIX}:{name}" for name in ("exact_match", "accuracy", "f1", "tokenised_f1", "wer", "cer", "bleu")
}
#: KARMA's metric names whose KARMA computation evalkit keeps under another name
RENAMED: dict[str, str] = {
    "json_rubric_evaluation": "karma_json_rubric_evaluation",
    "asr_semantic_metric": "semantic_wer",
}


def karma_metric(name: str) -> str:
    """The evalkit metric computing what KARMA computes for its metric ``name`` (``karma:`` prefix optional)."""
    bare = name.removeprefix(f"{PREFIX}:")
    return SAME_NAME_OTHER_COMPUTATION.get(bare) or RENAMED.get(bare) or (name if bare == name else bare)


def karma_id(catalog: Catalog, dataset: str) -> str | None:
    """The KARMA id (a key of runspecs/_names/karma.json) that ``dataset`` is written as, or None.

    ``karma:<id>`` always is one. A bare KARMA id is, unless it is also the
    name of an evalkit dataset, task or category; hub repo ids count as KARMA's
    even where the catalogue accepts them as aliases, since KARMA's ids are
    those repo ids. Case is ignored as the catalogue ignores it (``AI2D``).
    """
    tool, _, inner = dataset.partition(":")
    prefixed = bool(inner) and tool == PREFIX
    bare = inner if prefixed else dataset
    # evalkit's own names first: a run naming its datasets so never reads the tools' tables
    if not prefixed and (dataset in catalog.datasets or dataset in catalog.tasks or dataset in catalog.categories):
        return None
    names = catalog.foreign.get(PREFIX)
    if names is None:
        return None
    if bare in names.datasets or bare in names.groups:
        return bare
    spelled = catalog.spelling(dataset)
    return karma_id(catalog, spelled) if spelled is not None and spelled != dataset else None


def is_karma_name(catalog: Catalog, dataset: str) -> bool:
    """Whether ``dataset`` is written as KARMA names a dataset (not as evalkit names its own entries)."""
    return karma_id(catalog, dataset) is not None


def metric_for_pair(catalog: Catalog, dataset: str, metric: str) -> str:
    """The metric a pair runs: KARMA's computation for KARMA's names on a KARMA id, else the name as written."""
    if metric.startswith(f"{PREFIX}:"):
        return karma_metric(metric)
    if metric in SAME_NAME_OTHER_COMPUTATION and is_karma_name(catalog, dataset):
        return SAME_NAME_OTHER_COMPUTATION[metric]
    return metric


def default_metrics(catalog: Catalog, dataset: str) -> list[str] | None:
    """KARMA's registered metrics of a KARMA id, as evalkit names (what ``karma eval`` runs); None: not a KARMA id.

    A group id (Eka's MMLU medical MCQs: one id, twelve subsets) runs what its
    members share.
    """
    key = karma_id(catalog, dataset)
    if key is None:
        return None
    names = catalog.foreign[PREFIX]
    members = [key] if key in names.datasets else names.groups[key]
    found: dict[str, None] = {}
    for member in members:
        found.update(dict.fromkeys(karma_metric(m) for m in names.datasets[member].metrics))
    return list(found)
