"""ChEF's counting, classification, OCR, detection and locating metrics against its own code's output.

tests/fixtures/references/chef_metrics.json holds what ChEF's metric files (OpenGVLab/LAMM src/ChEF/metric at
commit ea57136, run unmodified) gave for each case; its "reference" block names the command. WordNet's data is
not available offline, so ChEF's class-name check was replaced there by one rule (the label is one of the
answer's space-separated words), and these tests put the same rule in place of evalkit's WordNet lookup.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Image, Sample
from evalkit.errors import ConfigError
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.chef import tasks as chef_metrics
from evalkit.metrics.chef.reading import boxes_in, chef_clean, count_in, iou, points_in, quoted_or_all

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "chef_metrics.json").read_text("utf-8"))


def _label_rule(label: str, answer: str, metric: str = "") -> bool:
    return label in answer.split(" ")


@pytest.fixture
def no_wordnet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture's label rule in place of WordNet, and no corpus needed to build the metrics."""
    monkeypatch.setattr(chef_metrics, "label_in", _label_rule)
    monkeypatch.setattr(chef_metrics, "wordnet", lambda metric="": None)


def _corpus(name: str, items: list[tuple[str, Any]], **options: Any) -> Any:
    metric = METRICS.get(name)(language="en", **options)
    accumulator = ScoreAccumulator(metric)
    for n, (answer, reference) in enumerate(items):
        accumulator.add(metric.score(answer, Sample(id=str(n), reference=reference)))
    return accumulator.result()


def test_fixture_says_where_it_came_from() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "OpenGVLab/LAMM" and len(ref["commit"]) == 40 and ref["command"]


@pytest.mark.parametrize(
    "key,reader",
    [
        ("count_in", count_in),
        ("boxes_in", boxes_in),
        ("points_in", points_in),
        ("chef_clean", chef_clean),
        ("quoted_or_all", quoted_or_all),
    ],
)
def test_answer_readings_equal_chefs(key: str, reader: Any) -> None:
    for case in FIXTURE[key]:
        assert reader(case["text"]) == case["expected"], case["text"]


def test_iou_equals_chefs() -> None:
    for case in FIXTURE["iou"]:
        assert iou(case["a"], case["b"]) == pytest.approx(case["expected"], rel=1e-12, abs=0)


def test_counting_accuracy_and_mae() -> None:
    block = FIXTURE["counting"]
    items = [(i["answer"], i["gt_answers"]) for i in block["items"]]
    assert _corpus("Counting", items).score == pytest.approx(block["expected"]["ACC"] / 100)
    mae = _corpus("counting_mae", items)
    assert mae.score == pytest.approx(block["expected"]["MAE"])
    assert METRICS.get("counting_mae").higher_is_better is False


@pytest.mark.parametrize(
    "key,name",
    [("cg_classification", "CG_Classification"), ("ucmerced", "UCMerced_Classification"), ("svt_ocr", "SVT_OCR")],
)
def test_per_item_and_corpus(key: str, name: str) -> None:
    block = FIXTURE[key]
    metric = METRICS.get(name)(language="en")
    scores = [metric.score(i["answer"], Sample(id="x", reference=i["gt_answers"])).score for i in block["items"]]
    assert scores == pytest.approx([float(v) for v in block["per_item"]])
    expected = block["expected_acc"] / (1 if key == "svt_ocr" else 100)  # ChEF prints SVT on 0-1, the others x 100
    assert _corpus(name, [(i["answer"], i["gt_answers"]) for i in block["items"]]).score == pytest.approx(expected)


@pytest.mark.parametrize("threshold", ["0.5", "0.25"])
def test_detection_pooled_precision_and_recall(no_wordnet: None, threshold: str) -> None:
    block = FIXTURE["detection"]
    items = [(i["answer"], i["gt_answers"]) for i in block["items"]]
    expected = block["expected"][threshold]
    precision = _corpus("Detection", items, threshold=float(threshold))
    recall = _corpus("detection_mar", items, threshold=float(threshold))
    assert precision.score == pytest.approx(expected[f"mAP@{threshold}"] / 100)
    assert recall.score == pytest.approx(expected[f"mAR@{threshold}"] / 100)
    assert precision.ci_method == "bootstrap" and precision.ci_low <= precision.score <= precision.ci_high


def test_inside_bbox_pools_objects(no_wordnet: None) -> None:
    block = FIXTURE["inside_bbox"]
    items = [(i["answer"], i["gt_answers"]) for i in block["items"]]
    assert _corpus("InsideBbox", items).score == pytest.approx(block["expected_acc"] / 100)


def _png(width: int, height: int) -> bytes:
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (width, height)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_inside_human_bbox_scales_points_by_the_images_size() -> None:
    block = FIXTURE["inside_human_bbox"]
    metric = METRICS.get("InsideHumanBbox")(language="en")
    accumulator = ScoreAccumulator(metric)
    for n, item in enumerate(block["items"]):
        width, height = block["image_sizes"][item["image_path"]]
        sample = Sample(id=str(n), reference=item["gt_answers"], images=[Image(data=_png(width, height))])
        accumulator.add(metric.score(item["answer"], sample))
    assert accumulator.result().score == pytest.approx(block["expected_acc"] / 100)


def test_detection_threshold_is_checked(no_wordnet: None) -> None:
    with pytest.raises(ConfigError, match="threshold"):
        METRICS.get("detection_map")(language="en", threshold=1.5)


def test_detection_without_wordnet_names_what_to_download(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from evalkit.metrics.chef import reading as chef_reading

    chef_reading.wordnet.cache_clear()
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    import nltk.data

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    try:
        with pytest.raises(ConfigError, match="nltk.downloader -d DIR wordnet"):
            METRICS.get("detection_map")(language="en")
    finally:
        chef_reading.wordnet.cache_clear()


def test_a_bad_detection_reference_fails_the_sample_not_the_run(no_wordnet: None) -> None:
    metric = METRICS.get("detection_map")(language="en")
    assert metric.score("dog [0, 0, 1, 1]", Sample(id="1", reference="dog")).failure is not None
