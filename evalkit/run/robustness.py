"""What a corruption did to a score: each robustness variant's row beside its clean pair's.

A variant (``<dataset>@<corruption>``, made by the plan from the ``corruptions`` option) runs as a pair of
its own. Once every engine has finished, its result row gets ``details["robustness"]``: the corruption
(name, level, seed), the clean dataset and score, the change (variant minus clean, in the metric's units) and,
when both record files are at hand, the paired test of the two over the samples scored in both
(:mod:`evalkit.report.paired`: McNemar's exact test for 0/1 scores, else the paired bootstrap).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from evalkit.report.records import RecordReader
from evalkit.report.results import ResultRow
from evalkit.run.engine_result import EngineResult

log = logging.getLogger("evalkit")

#: the paired comparison's figures a result row keeps (the full comparison is `evalkit compare`'s)
_PAIRED_KEYS = ("n_paired", "diff", "diff_ci", "p_value", "test", "verdict", "improved", "worsened")


def add_robustness(rows: list[ResultRow], results: Sequence[EngineResult]) -> None:
    """Add ``details["robustness"]`` to every variant's row (in place); rows of clean pairs are left as they are."""
    by_key = {(r.dataset, r.metric, r.model): r for r in rows if r.kind == "dataset"}
    by_pair = {(res.spec.dataset.name, res.spec.metric): res for res in results}
    for res in results:
        corruption = res.spec.dataset.corruption
        if not corruption:
            continue
        clean_name = str(corruption.get("clean"))
        clean = by_pair.get((clean_name, res.spec.metric))
        for model in res.models:
            row = by_key.get((res.spec.dataset.name, res.spec.metric, model))
            if row is None:
                continue
            base = by_key.get((clean_name, res.spec.metric, model))
            info: dict[str, Any] = {
                "corruption": corruption.get("name"),
                "severity": corruption.get("severity"),
                "seed": corruption.get("seed"),
                "clean_dataset": clean_name,
                "clean_score": base.score if base is not None else None,
                "change": _change(row.score, base.score if base is not None else None),
            }
            if clean is not None:
                paired = _paired(clean, res, model)
                if paired is not None:
                    info["paired"] = paired
            row.details["robustness"] = info


def _change(score: float | None, clean: float | None) -> float | None:
    if score is None or clean is None or not (math.isfinite(score) and math.isfinite(clean)):
        return None
    return score - clean


def _paired(clean: EngineResult, variant: EngineResult, model: str) -> dict[str, Any] | None:
    """The paired test of the variant (B) against the clean pair (A) for one model; None without both files."""
    if clean.records_path is None or variant.records_path is None:
        return None
    if not (clean.records_path.is_file() and variant.records_path.is_file()):
        return None
    from evalkit.report.paired import paired_comparison  # only a run with corrupted variants needs the test

    reader = RecordReader(clean.records_path.parent)
    try:
        result = paired_comparison(
            reader.read(clean.records_path),
            reader.read(variant.records_path),
            variant.spec.metric,
            model_a=model,
            model_b=model,
            options=variant.spec.options,
        )
    except (OSError, ValueError) as error:  # a comparison that cannot be made must not cost the run its results
        log.warning("%s: no paired comparison with the clean pair: %s", variant.spec.id, error)
        return None
    data = result.as_dict()
    return {key: data[key] for key in _PAIRED_KEYS}
