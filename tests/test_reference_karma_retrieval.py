"""ndcg@k, recall@k, map@k and precision@k against KARMA's classes and the pytrec_eval measures they call.

tests/fixtures/references/karma_retrieval.json (made by tests/fixtures/references/make_karma_fixtures.py): eight
queries with graded and binary judgements, ties, unjudged documents, fewer documents than k and a query without a
relevant document; per query KARMA's output (rounded to 5 places) and pytrec_eval's own values, and KARMA's output
over all eight.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "karma_retrieval.json").read_text(encoding="utf-8")
)
QUERIES: list[dict[str, Any]] = FIXTURE["queries"]
#: evalkit name -> (trec_eval key prefix, KARMA's key prefix)
NAMES = {
    "ndcg@k": ("ndcg_cut_", "NDCG@"),
    "recall@k": ("recall_", "Recall@"),
    "map@k": ("map_cut_", "MAP@"),
    "precision@k": ("P_", "Precision@"),
}
KS = (1, 3, 5, 10)


def _sample(query: dict[str, Any]) -> Sample:
    return Sample(id=query["query_id"], reference={query["query_id"]: query["qrels"]})


def test_the_fixture_says_where_it_came_from_and_is_not_one_sided() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "eka-care/KARMA-OpenMedEvalKit" and len(ref["commit"]) == 40 and ref["command"]
    values = {v for q in QUERIES for m in q["trec_eval"].values() for v in m.values()}
    assert 0.0 in values and 1.0 in values and len(values) > 8


@pytest.mark.parametrize(("name", "query"), [(n, q) for n in NAMES for q in QUERIES], ids=str)
def test_each_query_at_each_k_is_trec_evals_and_karmas(name: str, query: dict[str, Any]) -> None:
    trec_key, karma_key = NAMES[name]
    metric = METRICS.get(name)(language="en")
    scored = metric.score(query["prediction"], _sample(query))
    for k in KS:
        value = scored.details[f"{karma_key}{k}"]
        assert value == pytest.approx(query["trec_eval"][name][f"{trec_key}{k}"], abs=1e-12)
        assert round(value, 5) == pytest.approx(query["karma"][name][f"{karma_key}{k}"], abs=1e-12)
    assert scored.score == scored.details[f"{karma_key}10"]


@pytest.mark.parametrize("name", NAMES)
def test_the_corpus_at_each_k_is_karmas(name: str) -> None:
    _, karma_key = NAMES[name]
    for k in KS:
        metric = METRICS.get(name)(language="en", k=k)
        acc = ScoreAccumulator(metric)
        for query in QUERIES:
            acc.add(metric.score(query["prediction"], _sample(query)))
        result = acc.result()
        assert round(result.score, 5) == pytest.approx(FIXTURE["corpus"][name][f"{karma_key}{k}"], abs=1e-12)
        assert result.details[f"{karma_key}{k}"] == result.score
        assert 0.0 <= result.ci_low <= result.score <= result.ci_high <= 1.0


def test_other_answer_shapes_rank_the_same() -> None:
    metric = METRICS.get("ndcg@k")(language="en")
    q = QUERIES[1]
    karma_shape = metric.score(q["prediction"], _sample(q)).score
    run = ast.literal_eval(q["prediction"])[q["query_id"]]
    as_json = metric.score(json.dumps(run), _sample(q)).score
    as_list = metric.score(json.dumps(sorted(run, key=run.get, reverse=True)), _sample(q)).score
    flat_reference = metric.score(json.dumps(run), Sample(id="q", reference=json.dumps(q["qrels"]))).score
    assert karma_shape == as_json == as_list == flat_reference


def test_unreadable_answers_and_another_query_fail_the_sample() -> None:
    metric = METRICS.get("recall@k")(language="en")
    q = QUERIES[0]
    assert metric.score("d1, d2", _sample(q)).failure == FailureReason.METRIC_ERROR
    other = metric.score(repr({"elsewhere": {"d1": 1.0}}), _sample(q))
    assert other.failure == FailureReason.METRIC_ERROR and "elsewhere" in other.details["error"]
    assert metric.score("{}", Sample(id="n", reference=None)).failure == FailureReason.NO_REFERENCE


def test_k_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="'k'"):
        METRICS.get("map@k")(language="en", k=0)
    with pytest.raises(ConfigError, match="k_values"):
        METRICS.get("map@k")(language="en", k_values=["3"])
    metric = METRICS.get("precision@k")(language="en", k=2, k_values=[1])
    scored = metric.score(QUERIES[0]["prediction"], _sample(QUERIES[0]))
    assert set(scored.details) == {"Precision@1", "Precision@2"} and scored.score == 0.5
