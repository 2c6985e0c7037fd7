"""``lamm_vqa_accuracy`` against ChEF's own LAMM_VQA, per answer and over all of them.

tests/fixtures/references/chef_lamm_vqa.json holds the verdicts ChEF's ``LAMM_VQA.metric_func`` gave at the pinned
commit (make_chef_lamm_vqa.py there): a reasoning, when there is one, joined before the answer, as ChEF's metric
reads a chain-of-thought answer and as an entry with ``chain_of_thought_form: separate`` hands it to the metric.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "chef_lamm_vqa.json").read_text(encoding="utf-8")
)


def _score(case: dict[str, Any]) -> float | None:
    metric = METRICS.get("lamm_vqa_accuracy")(language="en")
    sample = Sample(id="s", reference=case["gt_choice"], meta={"choices": FIXTURE["choices"]})
    return metric.score(case["reasoning"] + case["answer"], sample).score


def test_the_fixture_records_where_it_came_from() -> None:
    assert FIXTURE["reference"]["repository"] == "OpenGVLab/LAMM"
    assert re.fullmatch(r"[0-9a-f]{40}", FIXTURE["reference"]["commit"])
    assert {value for value in (case["value"] for case in FIXTURE["cases"])} == {0.0, 1.0}


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda case: case["answer"])
def test_each_answer_gets_chefs_verdict(case: dict[str, Any]) -> None:
    assert _score(case) == case["value"]


def test_the_corpus_figure_is_chefs() -> None:
    values = [_score(case) for case in FIXTURE["cases"]]
    assert sum(v for v in values if v is not None) / len(values) == pytest.approx(FIXTURE["vision_acc"])


def test_a_row_without_options_or_with_an_unreadable_answer_key_is_not_scored() -> None:
    metric = METRICS.get("lamm_vqa_accuracy")(language="en")
    assert metric.score("(A)", Sample(id="s", reference=0)).failure == FailureReason.NO_CHOICES
    unknown = Sample(id="s", reference="purple", meta={"choices": ["red", "blue"]})
    assert metric.score("(A)", unknown).failure == FailureReason.UNRESOLVABLE_REFERENCE
