"""ChEF's task metrics: counting, classification, scene-text OCR, detection and locating.

Each equals the class of OpenGVLab/LAMM ``src/ChEF/metric/`` named in its docstring, at commit
ea571363883ceba58a0f724ef197ed7205e07465, reading answers with :mod:`evalkit.metrics.chef.reading`; checked
against tables from running ChEF's code (tests/fixtures/references/chef_metrics.json). ChEF prints most figures
x 100; evalkit reports them on 0-1 (MAE as it is).

Corpus figures that are ratios of counts (detection's precision and recall, locating's accuracy over objects)
keep the counts as each sample's statistics, so the corpus value is ChEF's ratio and the interval a bootstrap of
samples; the others are means of per-sample scores with a normal interval.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings
from evalkit.metrics.chef.reading import (
    boxes_in,
    chef_clean,
    count_in,
    inside,
    iou,
    label_in,
    points_in,
    quoted_or_all,
    wordnet,
)


def _ratio(totals: np.ndarray, top: int, bottom: int) -> np.ndarray:
    """totals[..., top] / totals[..., bottom], NaN where the bottom is 0 (where ChEF divides by zero)."""
    t = np.asarray(totals, dtype=float)
    upper, lower = t[..., top], t[..., bottom]
    out = np.full(np.shape(upper), np.nan)
    np.divide(upper, lower, out=out, where=lower != 0)
    return out


class _Simple(Metric):
    """A ChEF metric without options: 0-1 per sample, the corpus mean."""

    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)


def _number(reference: Any) -> int | None:
    """A counting reference (ChEF's ``num``): an int, or text holding one."""
    values = reference_strings(reference)
    try:
        return int(float(values[0])) if values else None
    except ValueError:
        return None


class CountingAccuracy(_Simple):
    """ChEF Counting ACC: 1 when the answer's first number (digits or a number word, else 0) is the count."""

    name = "counting_accuracy"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        truth = _number(sample.reference)
        if truth is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        said = count_in(prediction or "")
        value = float(said == truth)
        return SampleScore(value, (value, 1.0), details={"count": said})


class CountingMae(Metric):
    """ChEF Counting MAE: |answer's count - count| capped at the count (a wild guess costs at most the count)."""

    name = "counting_mae"
    higher_is_better = False
    bounds = (0.0, None)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        truth = _number(sample.reference)
        if truth is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        said = count_in(prediction or "")
        value = float(min(truth, abs(said - truth)))
        return SampleScore(value, (value, 1.0), details={"count": said})


class CgClassificationAccuracy(_Simple):
    """ChEF CG_Classification ACC: 1 when the label is a word of the cleaned answer (CIFAR-10's coarse classes)."""

    name = "cg_classification_accuracy"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        labels = reference_strings(sample.reference)
        if not labels:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        cleaned = chef_clean(prediction or "")
        value = float(labels[0] in cleaned.split())
        return SampleScore(value, (value, 1.0), details={"cleaned": cleaned})


class UcMercedClassificationAccuracy(_Simple):
    """ChEF UCMerced_Classification: 1 when the label occurs in the answer as it is (case-sensitive substring)."""

    name = "ucmerced_classification_accuracy"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        labels = reference_strings(sample.reference)
        if not labels:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        value = float(labels[0] in (prediction or ""))
        return SampleScore(value, (value, 1.0))


class SvtOcrAccuracy(_Simple):
    """ChEF SVT_OCR: share of the image's words that are words of the answer (its quoted parts if any), any case."""

    name = "svt_ocr_accuracy"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        words = reference_strings(sample.reference)
        if not words:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        said = quoted_or_all(prediction or "").lower().split()
        value = sum(word.lower() in said for word in words) / len(words)
        return SampleScore(value, (value, 1.0))


def _objects(reference: Any) -> list[dict[str, Any]] | None:
    """Detection references: a list of {"label", "bbox": [x1, y1, x2, y2]} (ChEF's ``object`` list)."""
    if not isinstance(reference, list) or not reference:
        return None
    if not all(isinstance(o, dict) and isinstance(o.get("label"), str) and _is_box(o.get("bbox")) for o in reference):
        return None
    return reference


def _is_box(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) >= 4 and all(isinstance(v, (int, float)) for v in value[:4])


class _Detection(Metric):
    """ChEF Detection (single turn, direct): per sample (hits, predicted boxes, annotated objects).

    An object is found when the answer names its class (WordNet synonyms, as ChEF) and one of the answer's
    boxes overlaps it with IoU above ``threshold`` (default 0.5, strictly above as in ChEF); ChEF's mAP is
    hits over predicted boxes (a precision) and its mAR hits over objects, both pooled over the corpus.
    """

    ci_method = "bootstrap"
    bounds = (0.0, None)
    #: which pooled ratio the metric reports: (numerator column, denominator column)
    columns: tuple[int, int] = (0, 1)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("threshold",))
        super().__init__(language, **options)
        threshold = options.get("threshold", 0.5)
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 <= threshold < 1:
            raise ConfigError(f"metric {self.name!r}: option 'threshold' must be a number in [0, 1), got {threshold!r}")
        self.threshold = float(threshold)
        wordnet(self.name)  # a missing corpus stops the config at validation, not at the first sample

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        objects = _objects(sample.reference)
        if objects is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        text = prediction or ""
        boxes = boxes_in(text)
        hits = 0
        for obj in objects:
            if not label_in(obj["label"], text, self.name):
                continue
            if any(iou([float(v) for v in obj["bbox"][:4]], box) > self.threshold for box in boxes):
                hits += 1
        stats = (float(hits), float(len(boxes)), float(len(objects)))
        single = float(self.corpus(np.asarray(stats)))
        return SampleScore(None if math.isnan(single) else single, stats, details={"boxes": boxes, "hits": hits})

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        return _ratio(totals, *self.columns)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        return {"hits": float(t[0]), "predicted_boxes": float(t[1]), "objects": float(t[2])}

    def describe(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "labels": "WordNet synonyms (ChEF classification_acc)"}


class DetectionPrecision(_Detection):
    """ChEF Detection mAP@threshold: objects found over boxes the answers gave, pooled (a precision, not COCO mAP)."""

    name = "detection_map"
    columns = (0, 1)


class DetectionRecall(_Detection):
    """ChEF Detection mAR@threshold: objects found over annotated objects, pooled over the corpus."""

    name = "detection_mar"
    columns = (0, 2)


class InsideBboxAccuracy(Metric):
    """ChEF InsideBbox (VOC locating): share of annotated objects named in the answer with a point inside their box.

    Pooled over objects: an answer without points counts all its image's objects as missed.
    """

    name = "inside_bbox_accuracy"
    ci_method = "bootstrap"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)
        wordnet(self.name)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        objects = _objects(sample.reference)
        if objects is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        text = prediction or ""
        points = points_in(text)
        found = 0
        if points:
            for obj in objects:
                if label_in(obj["label"], text, self.name) and inside(points, [float(v) for v in obj["bbox"][:4]]):
                    found += 1
        value = found / len(objects)
        return SampleScore(value, (float(found), float(len(objects))), details={"points": points})

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        return _ratio(totals, 0, 1)


class InsideHumanBboxAccuracy(_Simple):
    """ChEF InsideHumanBbox (LSP locating): 1 when a point of the answer, scaled to the image, is in the person's box.

    A point is read as a fraction of the image's width and height; the box spans the annotated joints, and the
    point must lie strictly inside it.
    """

    name = "inside_human_bbox_accuracy"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        joints = sample.reference
        if not isinstance(joints, list) or not joints or not all(isinstance(j, (list, tuple)) for j in joints):
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        points = points_in(prediction or "")
        if not points:
            return SampleScore(0.0, (0.0, 1.0), details={"points": []})
        size = _image_size(sample)
        if size is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE, details={"error": "no image to measure"})
        width, height = size
        xs = [float(j[0]) for j in joints]
        ys = [float(j[1]) for j in joints]
        box = [min(xs), min(ys), max(xs), max(ys)]
        scaled = [[p[0] * width, p[1] * height] for p in points]
        value = float(inside(scaled, box))
        return SampleScore(value, (value, 1.0), details={"points": points, "box": box})


def _image_size(sample: Sample) -> tuple[int, int] | None:
    """(width, height) of the sample's first image, read from its bytes or path."""
    from PIL import Image

    if not sample.images:
        return None
    image = sample.images[0]
    source: Any = io.BytesIO(image.data) if image.data is not None else image.path
    if source is None:
        return None
    with Image.open(source) as opened:
        return opened.size
