"""ChEF's option reading, VQA and MME accuracy, Winoground and Ch3Ef scores against ChEF's own code's output.

tests/fixtures/references/chef_choice.json: ChEF's vqa.py, winoground.py and Ch3Ef.py (OpenGVLab/LAMM at
commit ea57136, unmodified) run on the cases; its "reference" block names the command. Likelihood cases carry
each option's summed log-probability and token count, as evalkit's engine records them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.chef.choice import chef_option, mme_reading

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "chef_choice.json").read_text("utf-8"))


def _likelihood(item: dict[str, Any]) -> str:
    chars = [1.0] * len(item["logprobs"])
    return json.dumps({"logprobs": item["logprobs"], "tokens": item["tokens"], "chars": chars})


def _mean(name: str, pairs: list[tuple[str, Sample]], **options: Any) -> float:
    metric = METRICS.get(name)(language="en", **options)
    accumulator = ScoreAccumulator(metric)
    for prediction, sample in pairs:
        accumulator.add(metric.score(prediction, sample))
    return accumulator.result().score


def test_fixture_says_where_it_came_from() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "OpenGVLab/LAMM" and len(ref["commit"]) == 40 and ref["command"]


@pytest.mark.parametrize("case", FIXTURE["option_reading"], ids=lambda c: repr(c["answer"])[:30])
def test_option_reading_equals_chefs(case: dict[str, Any]) -> None:
    assert chef_option(case["answer"], case["choices"], case.get("content_only", False)) == case["expected"]


def test_vqa_accuracy_per_item_and_corpus() -> None:
    block = FIXTURE["vqa"]
    pairs = [
        (i["answer"], Sample(id=str(n), reference=i["gt_choice"], meta={"choices": i["choices"]}))
        for n, i in enumerate(block["items"])
    ]
    metric = METRICS.get("VQA")(language="en")
    assert [bool(metric.score(p, s).score) for p, s in pairs] == block["per_item"]
    assert _mean("VQA", pairs) == pytest.approx(block["expected"]["ACC"] / 100)


@pytest.mark.parametrize("case", FIXTURE["mme_reading"], ids=lambda c: repr(c["answer"])[:30])
def test_mme_reading_equals_chefs(case: dict[str, Any]) -> None:
    assert mme_reading(case["answer"]) == case["expected"]


def test_mme_accuracy_is_chefs_overall() -> None:
    block = FIXTURE["mme"]
    pairs = [(i["answer"], Sample(id=str(n), reference=i["gt_answers"])) for n, i in enumerate(block["items"])]
    assert _mean("MMEVQA", pairs) == pytest.approx(block["expected"]["overall"] / 100)


@pytest.mark.parametrize(
    "figure,name",
    [("Text", "winoground_text_score"), ("Image", "winoground_image_score"), ("Group", "winoground_group_score")],
)
def test_winoground_scores_equal_chefs(figure: str, name: str) -> None:
    block = FIXTURE["winoground_cap"]
    pairs = [(_likelihood(i), Sample(id=str(n))) for n, i in enumerate(block["items"])]
    assert _mean(name, pairs) == pytest.approx(block["expected"][figure])


def test_winoground_paper_comparison_reverses_chefs() -> None:
    """On an example where the model prefers the matching pairs, the paper's scores are 1 and ChEF's 0."""
    prefers_matches = {"logprobs": [-1.0, -5.0, -5.0, -1.0], "tokens": [1, 1, 1, 1]}
    sample = Sample(id="w")
    chef = METRICS.get("winoground_group_score")(language="en")
    paper = METRICS.get("winoground_group_score")(language="en", comparison="paper")
    assert chef.score(_likelihood(prefers_matches), sample).score == 0.0
    assert paper.score(_likelihood(prefers_matches), sample).score == 1.0
    with pytest.raises(ConfigError, match="comparison"):
        METRICS.get("winoground_text_score")(language="en", comparison="other")


def test_winoground_needs_four_options() -> None:
    three = {"logprobs": [-1.0, -2.0, -3.0], "tokens": [1, 1, 1]}
    result = METRICS.get("winoground_text_score")(language="en").score(_likelihood(three), Sample(id="w"))
    assert result.failure is not None and "4 option scores" in result.details["error"]


def test_ch3ef_accuracy_equals_chefs() -> None:
    block = FIXTURE["ch3ef"]
    pairs = [(_likelihood(i), Sample(id=str(n), meta={"choices": i["options"]})) for n, i in enumerate(block["items"])]
    metric = METRICS.get("Ch3Ef_Metric")(language="en")
    assert [bool(metric.score(p, s).score) for p, s in pairs] == block["per_item"]
    assert _mean("Ch3Ef_Metric", pairs) == pytest.approx(block["expected"]["ACC"] / 100)
    assert metric.scoring == "loglikelihood"
