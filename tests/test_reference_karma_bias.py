"""stratified_accuracy, geographic_accuracy, demographic_accuracy and bias_disparity against KARMA's classes.

tests/fixtures/references/karma_bias.json (made by tests/fixtures/references/make_karma_fixtures.py): AMQA-shaped
samples (five questions in eight variants, one question missing two) and AfriMedQA-shaped samples with country
and mentions_* flags, some missing; KARMA's outputs over all of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "karma_bias.json").read_text("utf-8"))
AMQA = FIXTURE["amqa"]
STRATIFIED = FIXTURE["stratified"]


def _result(name: str, rows: list[tuple[str, Sample]], **options: Any) -> Any:
    metric = METRICS.get(name)(language="en", **options)
    acc = ScoreAccumulator(metric)
    for prediction, sample in rows:
        acc.add(metric.score(prediction, sample))
    return acc.result()


def _amqa() -> list[tuple[str, Sample]]:
    return [
        (r["prediction"], Sample(id=str(i), reference=r["reference"], meta={"variant": r["variant"]}))
        for i, r in enumerate(AMQA["rows"])
    ]


def _stratified() -> list[tuple[str, Sample]]:
    return [
        (r["prediction"], Sample(id=str(i), reference=r["reference"], meta=dict(r["other_args"])))
        for i, r in enumerate(STRATIFIED["rows"])
    ]


def test_the_fixture_says_where_it_came_from_and_is_not_one_sided() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "eka-care/KARMA-OpenMedEvalKit" and len(ref["commit"]) == 40 and ref["command"]
    assert 0 < AMQA["bias_disparity"]["bias_disparity"] < 1
    assert len(set(STRATIFIED["stratified_accuracy"]["accuracy_by_country"].values())) > 2


@pytest.mark.parametrize("name", ["stratified_accuracy", "geographic_accuracy", "demographic_accuracy"])
def test_overall_and_per_group_accuracy_are_karmas(name: str) -> None:
    karma = STRATIFIED[name]
    result = _result(name, _stratified())
    assert round(result.score, 4) == karma[name] == karma["overall_accuracy"]
    assert result.n == karma["total_samples"]
    fields = [key.removeprefix("accuracy_by_") for key in karma if key.startswith("accuracy_by_")]
    assert fields
    subscores = result.details["subscores"]
    for field in fields:
        for label, accuracy in karma[f"accuracy_by_{field}"].items():
            group = subscores[f"{field}={label}"]
            assert round(group["score"], 4) == accuracy
            assert group["n"] == karma[f"sample_counts_by_{field}"][label]
            if group["n"] > 1:  # one sample has no spread to give an interval
                assert group["ci_low"] <= group["score"] <= group["ci_high"]
    assert len(subscores) == sum(len(karma[f"accuracy_by_{f}"]) for f in fields)


def test_stratify_by_takes_a_field_or_a_list() -> None:
    one = _result("stratified_accuracy", _stratified(), stratify_by="mentions_age")
    assert set(one.details["subscores"]) == {"mentions_age=with_age", "mentions_age=without_age"}
    with pytest.raises(ConfigError, match="stratify_by"):
        METRICS.get("stratified_accuracy")(language="en", stratify_by=[])
    with pytest.raises(ConfigError, match="unknown option"):
        METRICS.get("geographic_accuracy")(language="en", stratify_by=["country"])


def test_bias_disparity_and_its_details_are_karmas() -> None:
    karma = AMQA["bias_disparity"]
    result = _result("bias_disparity", _amqa())
    assert result.score == pytest.approx(karma["bias_disparity"], abs=1e-4)
    assert round(result.score, 4) == karma["bias_disparity"]
    details = result.details
    assert {v: round(a, 4) for v, a in details["accuracy_by_variant"].items()} == karma["accuracy_by_variant"]
    for category in ("race", "gender", "ses"):
        assert round(details[f"{category}_disparity"], 4) == karma[f"{category}_disparity"]
        assert details[f"{category}_direction"] == karma[f"{category}_direction"]
    for key, drop in karma.items():
        if key.endswith("_accuracy_drop"):
            assert round(details[key], 4) == drop
    # a corpus statistic: the bootstrap interval is of the max-min gap itself and holds it
    assert result.ci_method == "bootstrap" and result.ci_low <= result.score <= result.ci_high
    assert result.ci_high > result.ci_low


def test_bias_disparity_batches_equal_rows() -> None:
    metric = METRICS.get("bias_disparity")(language="en")
    rows = np.array([metric.score(p, s).stats for p, s in _amqa()])
    batch = np.stack([rows.sum(axis=0), rows[:10].sum(axis=0), rows[:1].sum(axis=0)])
    assert metric.corpus(batch).tolist() == [float(metric.corpus(row)) for row in batch]
    assert float(metric.corpus(rows[:1].sum(axis=0))) == 0.0  # one variant seen: no gap


def test_a_variant_outside_the_list_fails_naming_the_option() -> None:
    metric = METRICS.get("bias_disparity")(language="en", variants=["white", "black"])
    scored = metric.score("A", Sample(id="x", reference="A", meta={"variant": "male"}))
    assert scored.failure == FailureReason.METRIC_ERROR and "variants" in scored.details["error"]
    with pytest.raises(ConfigError, match="variants"):
        METRICS.get("bias_disparity")(language="en", variants=["a", "a"])


def test_bias_consistency_and_its_pair_figures_are_karmas() -> None:
    """Grouped by question: every variant's answer alike, and each KARMA pair's agreement."""
    metric = METRICS.get("bias_consistency")(language="en")
    acc = ScoreAccumulator(metric)
    for r in AMQA["rows"]:
        meta = {"variant": r["variant"], "question_id": r["question_id"]}
        sample = Sample(id=f"{r['question_id']}#{r['variant']}", reference=r["reference"], meta=meta)
        acc.add(metric.score(r["prediction"], sample), group=metric.group_of(sample))
    result = acc.result()
    karma = AMQA["bias_consistency"]
    assert result.score == pytest.approx(karma["bias_consistency"]) and result.n == karma["total_questions"]
    for key in (
        "fully_consistent_questions",
        "original_desensitized_consistency",
        "race_consistency",
        "race_total_pairs",
        "gender_consistency",
        "gender_total_pairs",
        "ses_consistency",
        "ses_total_pairs",
    ):
        assert result.details[key] == pytest.approx(karma[key]), key  # fmt: skip
    assert result.ci_low <= result.score <= result.ci_high
