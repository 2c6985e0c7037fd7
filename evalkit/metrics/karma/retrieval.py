"""KARMA-OpenMedEvalKit's retrieval metrics ``ndcg@k``, ``recall@k``, ``map@k`` and ``precision@k``, computed as
trec_eval computes ``ndcg_cut``, ``recall``, ``map_cut`` and ``P`` (KARMA calls pytrec_eval).

A retrieval sample's reference is its relevance judgements (qrels), KARMA's
``{query_id: {doc_id: relevance}}`` or a bare ``{doc_id: relevance}``; the
answer is the ranking, KARMA's ``{query_id: {doc_id: score}}`` as a Python or
JSON literal, a bare ``{doc_id: score}``, or a JSON list of doc ids best first.

trec_eval's rules, kept: documents are ranked by score, highest first, ties
broken by doc id in reverse string order; a document is relevant when its
judgement is at least 1; nDCG's gain is the judgement itself with a log2(rank
+ 1) discount, over the ideal ordering of all judged documents; precision at k
divides by k even when fewer documents were returned; a query without a
relevant document scores 0. KARMA evaluates every k of ``k_values`` (1, 3, 5,
10) and reports the mean over queries of each, rounded to 5 places; evalkit's
headline is option ``k`` (default the largest), the others are in the details,
unrounded, under KARMA's keys (``NDCG@10``).
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any, ClassVar

import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options

DEFAULT_K = (1, 3, 5, 10)


class UnreadableRanking(ValueError):
    """The answer or the reference is not a ranking or judgements evalkit can read."""


def _literal(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UnreadableRanking("not a JSON or Python literal") from None


def _query_level(value: Any, query_id: str | None) -> tuple[str | None, Any]:
    """``(query id, inner mapping)`` from KARMA's one-query nesting, or ``(None, value)`` when not nested."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if isinstance(inner, dict):
            return str(key), inner
    return None, value


def read_qrels(reference: Any) -> tuple[str | None, dict[str, int]]:
    """The judged documents and their relevance, and the query id when the reference names one."""
    query_id, inner = _query_level(_literal(reference), None)
    if not isinstance(inner, dict):
        raise UnreadableRanking("the reference is not {doc_id: relevance}")
    try:
        return query_id, {str(doc): int(rel) for doc, rel in inner.items()}
    except (TypeError, ValueError):
        raise UnreadableRanking("a relevance is not an integer") from None


def read_run(answer: Any, query_id: str | None) -> dict[str, float]:
    """The answer's scored documents for the query (a list is read as a ranking, best first)."""
    value = _literal(answer)
    if isinstance(value, dict) and query_id is not None and query_id in value and isinstance(value[query_id], dict):
        value = value[query_id]
    else:
        ranked_query, inner = _query_level(value, query_id)
        if ranked_query is not None:
            if query_id is not None and ranked_query != query_id:
                raise UnreadableRanking(f"the answer ranks query {ranked_query!r}, the reference is {query_id!r}")
            value = inner
    if isinstance(value, list):
        return {str(doc): float(len(value) - i) for i, doc in enumerate(value)}
    if not isinstance(value, dict):
        raise UnreadableRanking("the answer is not {doc_id: score} or a list of doc ids")
    try:
        return {str(doc): float(score) for doc, score in value.items()}
    except (TypeError, ValueError):
        raise UnreadableRanking("a document's score is not a number") from None


def ranked(run: dict[str, float]) -> list[str]:
    """trec_eval's order: score descending, ties by doc id in reverse string order."""
    return sorted(run, key=lambda doc: (run[doc], doc), reverse=True)


def measure(kind: str, ranking: list[str], qrels: dict[str, int], k: int) -> float:
    """One trec_eval measure at cut-off k: "ndcg_cut", "recall", "map_cut" or "P"."""
    top = ranking[:k]
    relevant = {doc for doc, rel in qrels.items() if rel >= 1}
    if kind == "P":
        return sum(doc in relevant for doc in top) / k
    if not relevant:
        return 0.0
    if kind == "recall":
        return sum(doc in relevant for doc in top) / len(relevant)
    if kind == "map_cut":
        found, total = 0, 0.0
        for rank, doc in enumerate(top, start=1):
            if doc in relevant:
                found += 1
                total += found / rank
        return total / len(relevant)
    if kind == "ndcg_cut":
        gains = [max(qrels.get(doc, 0), 0) for doc in top]
        ideal = sorted((rel for rel in qrels.values() if rel > 0), reverse=True)[:k]
        dcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))
        idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
        return dcg / idcg if idcg > 0 else 0.0
    raise ValueError(f"unknown trec_eval measure {kind!r}")


class _RetrievalMetric(Metric):
    """One trec_eval measure at each of k_values; the headline at option k, the mean over queries."""

    measure: ClassVar[str] = ""
    #: KARMA's key for a cut-off, e.g. "NDCG@{k}"
    label: ClassVar[str] = ""
    bounds = (0.0, 1.0)
    tasks = ("retrieval",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("k", "k_values"))
        super().__init__(language, **options)
        k_values = options.get("k_values", list(DEFAULT_K))
        if (
            not isinstance(k_values, (list, tuple))
            or not k_values
            or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in k_values)
        ):
            raise ConfigError(f"metric {self.name!r}: option 'k_values' must be a list of positive integers")
        k = options.get("k", max(k_values))
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            raise ConfigError(f"metric {self.name!r}: option 'k' must be a positive integer, not {k!r}")
        ordered = sorted(set(k_values) | {k})
        self.k_values: tuple[int, ...] = (k, *(v for v in ordered if v != k))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        try:
            query_id, qrels = read_qrels(sample.reference)
            run = read_run(prediction or "", query_id)
        except UnreadableRanking as error:
            if sample.reference is None:
                return SampleScore(None, failure=FailureReason.NO_REFERENCE)
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": str(error)})
        ranking = ranked(run)
        values = [measure(self.measure, ranking, qrels, k) for k in self.k_values]
        details = {self.label.format(k=k): v for k, v in zip(self.k_values, values)}
        return SampleScore(values[0], (values[0], 1.0, *values[1:]), details=details)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        totals = np.asarray(totals, dtype=float)
        sums = [totals[0], *totals[2:]]
        n = totals[1]
        return {
            self.label.format(k=k): float(s / n) if n > 0 else math.nan for k, s in sorted(zip(self.k_values, sums))
        }

    def describe(self) -> dict[str, Any]:
        return {"k": self.k_values[0], "k_values": sorted(self.k_values), "trec_eval_measure": self.measure}


class NdcgAtK(_RetrievalMetric):
    """nDCG at k as trec_eval's ndcg_cut (KARMA's ndcg@k via pytrec_eval), the mean over queries."""

    name = "ndcg@k"
    measure = "ndcg_cut"
    label = "NDCG@{k}"


class RecallAtK(_RetrievalMetric):
    """Recall at k as trec_eval's recall (KARMA's recall@k via pytrec_eval), the mean over queries."""

    name = "recall@k"
    measure = "recall"
    label = "Recall@{k}"


class MapAtK(_RetrievalMetric):
    """Average precision cut at k as trec_eval's map_cut (KARMA's map@k via pytrec_eval), the mean over queries."""

    name = "map@k"
    measure = "map_cut"
    label = "MAP@{k}"


class PrecisionAtK(_RetrievalMetric):
    """Precision at k as trec_eval's P (KARMA's precision@k via pytrec_eval), the mean over queries."""

    name = "precision@k"
    measure = "P"
    label = "Precision@{k}"
