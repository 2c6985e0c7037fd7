"""The results table's rows from the engines' results.

One row per (pair, model); a robustness variant's row also says how it compares with its clean pair's.
"""

from __future__ import annotations

from typing import Any

from evalkit.report.results import ResultRow
from evalkit.run.engine_result import EngineResult
from evalkit.run.robustness import add_robustness


def rows_from_engines(results: list[EngineResult], max_failure_rate: float) -> list[ResultRow]:
    """One result row per (engine, model).

    A pair whose share of failed samples exceeds ``max_failure_rate`` is marked unreliable. A pair whose engine
    failed (a metric that raised, data that stopped being read) has no score: one computed from the samples scored
    around the failure would read as the pair's; its error says why, and its records keep every sample's score.
    """
    rows = []
    for res in results:
        spec = res.spec
        for model, mres in res.models.items():
            metric_result = mres.result
            headline = metric_result if res.error is None else None
            n = metric_result.n if metric_result else 0
            # a metric scored over groups counts groups in n; failures are samples, so the rate is over samples
            scored = metric_result.details.get("n_samples", n) if metric_result else 0
            total = scored + mres.n_failed
            rate = mres.n_failed / total if total else 0.0
            rows.append(
                ResultRow(
                    dataset=spec.dataset.name,
                    task=spec.dataset.task,
                    category=spec.dataset.category,
                    metric=spec.metric,
                    model=model,
                    score=headline.score if headline else None,
                    ci_low=headline.ci_low if headline else None,
                    ci_high=headline.ci_high if headline else None,
                    n=n,
                    n_failed=mres.n_failed,
                    failure_rate=rate,
                    unreliable=rate > max_failure_rate or res.error is not None,
                    seconds=round(res.seconds, 3),
                    failure_reasons=mres.failure_reasons,
                    failure_examples=mres.failure_examples,
                    details={**res.metric_info, **(metric_result.details if metric_result else {})},
                    error=res.error,
                    reported_as=spec.reported_as.as_dict() if spec.reported_as is not None else None,
                    partial=row_partial(mres.partial, res.partial),
                    usage=mres.usage,
                    judge_usage=mres.judge_usage,
                )
            )
    add_robustness(rows, results)  # a corrupted variant's row: the clean score, the change, the paired test
    return rows


def row_partial(stopped: dict[str, Any] | None, cut: str | None) -> dict[str, Any] | None:
    """A row's ``partial``: how far ``stop_at_ci`` let its model go, with the budget's reason when the budget cut
    the pair first (its score then answers neither the dataset nor the precision asked)."""
    if cut is None:
        return stopped
    return {**(stopped or {}), "reason": cut}
