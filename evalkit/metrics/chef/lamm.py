"""ChEF's Caption (Flickr30k, basic recipe), LAMM_Classification (CIFAR-10) and LAMM_Detection (VOC 2012).

Written from OpenGVLab/LAMM ``src/ChEF/metric/caption.py`` (``Caption``, strategy ``direct``),
``classification.py`` (``LAMM_Classification``) and ``detection.py`` (``LAMM_Detection``) at commit
ea571363883ceba58a0f724ef197ed7205e07465, and checked against a table from running those classes unmodified
(tests/fixtures/references/chef_lamm_metrics.json).

Caption: ChEF's basic captioning figures are not pycocoevalcap's but NLTK's ``sentence_bleu`` (BLEU-4, no
smoothing) and the ``rouge`` package's ROUGE-L F (summary level, words as a set), each the best over a few
readings of the answer (the whole answer, its quoted parts joined, each of their sentences); both are
written out here so neither package is needed, their quirks kept (an order without matches scores
``sys.float_info.min`` rather than 0; ROUGE counts distinct words). LAMM_Classification is the WordNet reading
of :func:`evalkit.metrics.chef.facial.hair_match` on the item's ``label``. LAMM_Detection reads "The <class>
object ... [x1, y1, x2, y2]" sentences, matches boxes to objects one to one (maximum bipartite matching at
IoU >= threshold, in float32 as torchvision's ``box_iou``) with or without the class check, and pools the
matches into recall and precision.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings
from evalkit.metrics.chef.facial import Facial, hair_match
from evalkit.metrics.chef.reading import label_in, quoted_or_all, wordnet

# ----------------------------------------------------------------------------------------- Caption: BLEU-4


def _ngrams(words: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def sentence_bleu4(references: list[list[str]], hypothesis: list[str]) -> float:
    """NLTK's ``sentence_bleu`` with weights 1/4 and no smoothing, as ChEF calls it.

    Clipped n-gram precisions (n = 1..4) against the references' maximum counts; 0 when no word matches; an
    order with no match counts as ``sys.float_info.min`` (NLTK's method0), so such a score is tiny, not 0;
    the brevity penalty uses the reference length closest to the hypothesis's (the shorter on a tie).
    """
    logs = []
    for n in range(1, 5):
        counts = _ngrams(hypothesis, n)
        best: Counter[tuple[str, ...]] = Counter()
        for reference in references:
            best |= _ngrams(reference, n)
        matched = sum(min(count, best[gram]) for gram, count in counts.items())
        if n == 1 and matched == 0:
            return 0.0
        total = max(1, sum(counts.values()))
        logs.append(0.25 * math.log(matched / total if matched else sys.float_info.min))
    length = len(hypothesis)
    closest = min((len(r) for r in references), key=lambda r: (abs(r - length), r))
    penalty = 1.0 if length > closest else math.exp(1 - closest / length)
    return penalty * math.exp(math.fsum(logs))


# ----------------------------------------------------------------------------------------- Caption: ROUGE-L


def _sentences(text: str) -> list[str]:
    """The ``rouge`` package's sentences: split at every period, each piece's whitespace collapsed.

    A piece of spaces alone stays, as an empty sentence whose one word is "".
    """
    return [" ".join(piece.split()) for piece in text.split(".") if piece]


def _lcs_words(reference: list[str], candidate: list[str]) -> set[str]:
    """The words of the longest common subsequence the ``rouge`` package reconstructs (its tie order)."""
    rows, cols = len(reference), len(candidate)
    table = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(1, rows + 1):
        for j in range(1, cols + 1):
            if reference[i - 1] == candidate[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    words: set[str] = set()
    i, j = rows, cols
    while i and j:  # the package recurses; walked here so a long answer cannot exhaust the stack
        if reference[i - 1] == candidate[j - 1]:
            words.add(reference[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return words


def rouge_l(hypothesis: str, reference: str) -> float | None:
    """``Rouge(metrics=["rouge-l"]).get_scores(hypothesis, reference, avg=True)["rouge-l"]["f"]``.

    Summary level with the package's default ``exclusive``: the union of LCS words (a set) over the
    reference's sentences against every hypothesis sentence, over the distinct words of each side. None where
    a side has no sentence (the package raises ValueError there).
    """
    hyp, ref = _sentences(hypothesis), _sentences(reference)
    if not hyp or not ref:
        return None
    ref_words = {w for s in ref for w in s.split(" ")}
    hyp_words = {w for s in hyp for w in s.split(" ")}
    union: set[str] = set()
    for sentence in ref:
        for candidate in hyp:
            union |= _lcs_words(sentence.split(" "), candidate.split(" "))
    recall, precision = len(union) / len(ref_words), len(union) / len(hyp_words)
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def caption_scores(answer: str, captions: list[str]) -> tuple[float, float]:
    """ChEF Caption (direct) for one answer: (BLEU-4, ROUGE-L F), each the best over the answer's readings.

    The readings: the answer split at whitespace, its quoted parts joined by ". " (or the answer when nothing
    is quoted), and each period-separated piece of that. References lose their periods for BLEU only. An
    empty answer scores 0 on both, as ChEF skips it but still counts it.
    """
    if answer == "":
        return 0.0, 0.0
    joined = quoted_or_all(answer)
    pieces = [piece for piece in joined.split(".") if piece != ""]
    references = [caption.replace(".", "").split() for caption in captions]
    bleu = max(sentence_bleu4(references, reading.split()) for reading in [answer, joined, *pieces])
    rouge = 0.0
    for caption in captions:
        for reading in [answer, joined, *pieces]:
            value = rouge_l(reading, caption)
            if value is not None:
                rouge = max(rouge, value)
    return bleu, rouge


class _Caption(Metric):
    """ChEF Caption (direct): per sample one of its two figures, the corpus mean (ChEF prints x 100)."""

    bounds = (0.0, 1.0)
    #: which of caption_scores' two values the metric reports
    position = 0

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        captions = reference_strings(sample.reference)
        if not captions:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        bleu, rouge = caption_scores(prediction or "", captions)
        value = (bleu, rouge)[self.position]
        return SampleScore(value, (value, 1.0), details={"bleu4": bleu, "rouge_l": rouge})


class ChefCaptionBleu4(_Caption):
    """ChEF Caption BLEU4: NLTK sentence BLEU-4 against the captions, the best of the answer's readings."""

    name = "chef_caption_bleu4"
    position = 0


class ChefCaptionRougeL(_Caption):
    """ChEF Caption Rouge: the rouge package's ROUGE-L F, the best over captions and the answer's readings."""

    name = "chef_caption_rouge_l"
    position = 1


# ----------------------------------------------------------------------------------------- LAMM_Classification


class LammClassificationAccuracy(Facial):
    """LAMM_Classification (CIFAR-10): 1 when the answer names the label or a lemma of its first WordNet synset."""

    name = "lamm_classification_accuracy"
    needs = ("stopwords", "wordnet")

    def right(self, answer: str, reference: Any) -> tuple[bool, dict[str, Any]]:
        return hair_match(reference, answer), {}

    def describe(self) -> dict[str, Any]:
        return {"reading": "ChEF LAMM_Classification: nltk tokens less stop words, WordNet morphy"}


# ----------------------------------------------------------------------------------------- LAMM_Detection

#: LAMM's phrasings of an object's class; where several match a sentence the last listed wins, as in ChEF
_CLASS_PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"The ([\w\W ]+?)(?=object)",
        r"classified as ([\w\W ]+?)(?= is| and| within|\.|,)",
        r"categorized as ([\w\W ]+?)(?= can| at|\.|,)",
        r"belong(?:s|ing) to the category of ([\w\W ]+?)(?= at|\.|,)",
        r"belong(?:s|ing) to the ([\w\W ]+) category",
        r"falls under the category of ([\w\W ]+?)(?=\.|,)",
        r"falls under the ([\w\W ]+) category",
        r"its category is ([\w\W ]+?)(?=\.|,)",
    )
)
_BOX = re.compile(r"\[ ?([\d\.]+), ?([\d\.]+), ?([\d\.]+), ?([\d\.]+) ?\]")


def lamm_objects(text: str) -> tuple[list[list[float]], list[str]]:
    """LAMM_Detection.parser: per ". "-separated sentence, its first [x1, y1, x2, y2] and its class phrase.

    A sentence without both is skipped, as is a box whose corners are out of order. A coordinate that is not
    one number ("1.2.3") makes ChEF raise; here that sentence is skipped.
    """
    sentences = text.strip().split(". ")
    boxes: list[list[float]] = []
    classes: list[str] = []
    for i, raw in enumerate(sentences):
        sentence = raw.strip()
        if not sentence:
            continue
        if i == len(sentences) - 1 and sentence.endswith("."):
            sentence = sentence[:-1]
        sentence += "."
        box = _BOX.search(sentence)
        if box is None:
            continue
        found = None
        for pattern in _CLASS_PATTERNS:
            found = pattern.search(sentence) or found
        if found is None:
            continue
        try:
            x1, y1, x2, y2 = (float(box.group(k)) for k in range(1, 5))
        except ValueError:
            continue
        if x1 <= x2 and y1 <= y2:
            boxes.append([x1, y1, x2, y2])
            classes.append(found.group(1).strip())
    return boxes, classes


def box_iou32(first: list[list[float]], second: list[list[float]]) -> np.ndarray:
    """Pairwise IoU in float32, as torchvision's ``box_iou`` computes it on ChEF's tensors."""
    a = np.asarray(first, dtype=np.float32).reshape(-1, 4)
    b = np.asarray(second, dtype=np.float32).reshape(-1, 4)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    low = np.maximum(a[:, None, :2], b[None, :, :2])
    high = np.minimum(a[:, None, 2:], b[None, :, 2:])
    size = np.clip(high - low, 0, None)
    inter = size[..., 0] * size[..., 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(inter / (area_a[:, None] + area_b[None, :] - inter), dtype=np.float32)


def matched_objects(allowed: np.ndarray, threshold: float) -> int:
    """How many objects (rows) ChEF's ``hungarian_match`` pairs with boxes (columns) at IoU >= threshold.

    Kuhn's augmenting paths, boxes in order, objects tried in order: a maximum one-to-one matching.
    """
    fits = allowed >= threshold
    owner = [-1] * fits.shape[0]

    def claim(box: int, seen: list[bool]) -> bool:
        for obj in range(fits.shape[0]):
            if fits[obj, box] and not seen[obj]:
                seen[obj] = True
                if owner[obj] == -1 or claim(owner[obj], seen):
                    owner[obj] = box
                    return True
        return False

    for box in range(fits.shape[1]):
        claim(box, [False] * fits.shape[0])
    return sum(o != -1 for o in owner)


def _objects(reference: Any) -> list[dict[str, Any]] | None:
    """LAMM's ``object`` list: {"label", "bbox": [x1, y1, x2, y2]} per annotated object."""
    if not isinstance(reference, list) or not reference:
        return None
    for obj in reference:
        box = obj.get("bbox") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or not isinstance(obj.get("label"), str) or not isinstance(box, (list, tuple)):
            return None
        if len(box) != 4 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in box):
            return None
    return reference


class _LammDetection(Metric):
    """LAMM_Detection at one IoU threshold: per sample (matches with class, matches, boxes read, objects).

    The corpus figure pools them as ChEF: recall = matches / objects, precision = matches / (boxes + 1e-7).
    """

    ci_method = "bootstrap"
    bounds = (0.0, 1.0)
    #: (numerator column, denominator column, what ChEF adds to the denominator)
    columns: tuple[int, int, float] = (0, 3, 0.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("threshold",))
        super().__init__(language, **options)
        threshold = options.get("threshold", 0.5)
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 < threshold <= 1:
            raise ConfigError(f"metric {self.name!r}: option 'threshold' must be a number in (0, 1], got {threshold!r}")
        self.threshold = float(threshold)
        wordnet(self.name)  # the class check reads WordNet: a missing corpus stops the config at validation

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        objects = _objects(sample.reference)
        if objects is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        boxes, classes = lamm_objects(prediction or "")
        matched = with_class = 0
        if boxes:
            ious = box_iou32([list(o["bbox"]) for o in objects], boxes)
            matched = matched_objects(ious, self.threshold)
            named = np.array([[label_in(o["label"], c, self.name) for c in classes] for o in objects], dtype=bool)
            with_class = matched_objects(np.where(named, ious, ious * np.float32(0)), self.threshold)
        stats = (float(with_class), float(matched), float(len(boxes)), float(len(objects)))
        single = float(self.corpus(np.asarray(stats)))
        details = {"boxes": boxes, "classes": classes, "matched": matched, "matched_with_class": with_class}
        return SampleScore(None if math.isnan(single) else single, stats, details=details)

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        t = np.asarray(totals, dtype=float)
        top, bottom, extra = self.columns
        upper, lower = t[..., top], t[..., bottom] + extra
        out = np.full(np.shape(upper), np.nan)
        np.divide(upper, lower, out=out, where=lower != 0)
        return out

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        return {
            "matched_with_class": float(t[0]),
            "matched": float(t[1]),
            "predicted_boxes": float(t[2]),
            "objects": float(t[3]),
        }

    def describe(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "matching": "one to one (ChEF LAMM_Detection.hungarian_match)"}


class LammDetectionRecall(_LammDetection):
    """LAMM_Detection recall@threshold: objects matched one to one by a box of their class, over objects."""

    name = "lamm_detection_recall"
    columns = (0, 3, 0.0)


class LammDetectionPrecision(_LammDetection):
    """LAMM_Detection prec@threshold: objects matched one to one by a box of their class, over boxes read."""

    name = "lamm_detection_precision"
    columns = (0, 2, 1e-7)


class LammDetectionRecallWithoutClass(_LammDetection):
    """LAMM_Detection recall_wocat@threshold: objects matched one to one by any box, over objects."""

    name = "lamm_detection_recall_wocat"
    columns = (1, 3, 0.0)


class LammDetectionPrecisionWithoutClass(_LammDetection):
    """LAMM_Detection prec_wocat@threshold: objects matched one to one by any box, over boxes read."""

    name = "lamm_detection_precision_wocat"
    columns = (1, 2, 1e-7)
