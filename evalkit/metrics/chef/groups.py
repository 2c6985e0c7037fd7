"""ChEF's figures over groups of samples: MMBench's circular accuracy and MME's acc+.

Written from OpenGVLab/LAMM ``src/ChEF/metric/vqa.py`` (``MMBenchVQA.metric_func`` and ``eval_sub_data``,
``MMEVQA.metric_func``) at commit ea571363883ceba58a0f724ef197ed7205e07465 and checked against tables from
running them (tests/fixtures/references/chef_groups.json).

- MMBench circular evaluation: MMBench's data already holds each question several times with its options
  rotated (the copies' ``index`` is the question's plus a multiple of 1,000,000: evalkit's ``mmbench_en_dev``
  reads them as separate samples, id = index). A question counts right only when every copy is answered right
  (ChEF's option reading, :func:`evalkit.metrics.chef.choice.chef_option`); its vanilla figure is the question's
  first copy alone.
- MME acc+: MME asks two yes/no questions per image; an image counts when two of its answers are right (ChEF
  counts the moment an image's second right answer comes, so an image with three questions counts once at two).

Both are statistics of groups, not of samples: the corpus value is the mean over groups of a 0/1 outcome, and
its interval is the normal interval over *groups* (the copies of one question, the two questions of one image,
are not independent draws; the groups are). The functions below compute them from scored members, as ChEF
does; the metrics (``mmbench_circular_accuracy``, ``mmbench_vanilla_accuracy``, ``mme_accuracy_plus``) give the
same figures in a run: each scores one sample and says which group it belongs to (``group_of``), and the run's
accumulator (:mod:`evalkit.metrics.accumulator`) keeps a group key per row, per model, and reduces the members'
rows to one row per complete group (``group_rows``) before the corpus value and its interval over groups. A
group with a failed member is counted as failed, never as wrong.

The rotated copies come from the data (MMBench's own file, ids index + k * 1,000,000) or from evalkit's
``CircularMultipleChoicePreprocessor`` (ids ``<id>#c<k>``, group ``<id>``, in evalkit/prompts/preprocessors.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings
from evalkit.metrics.chef.choice import CHOICE_LETTERS, chef_option, mme_reading
from evalkit.metrics.choice.choice import option_columns, resolve_reference

if TYPE_CHECKING:
    import numpy as np

#: MMBench's circular copies: index = question index + k * 1,000,000
CIRCULAR_STRIDE = 1_000_000


@dataclass(frozen=True)
class GroupFigure:
    """A statistic over groups: the mean of each group's 0/1 outcome, and its normal 95% interval over groups."""

    score: float
    ci_low: float
    ci_high: float
    #: number of groups
    n: int
    #: per-group outcomes, by group key
    outcomes: dict[str, float] = field(default_factory=dict)


def group_figure(outcomes: dict[str, float]) -> GroupFigure:
    """Mean of per-group outcomes with a normal interval over groups, clipped to [0, 1]."""
    n = len(outcomes)
    if n == 0:
        return GroupFigure(math.nan, math.nan, math.nan, 0, {})
    values = list(outcomes.values())
    mean = sum(values) / n
    if n < 2:
        return GroupFigure(mean, math.nan, math.nan, n, dict(outcomes))
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = 1.959963984540054 * math.sqrt(variance / n)
    return GroupFigure(mean, max(0.0, mean - half), min(1.0, mean + half), n, dict(outcomes))


@dataclass(frozen=True)
class CircularMember:
    """One circular copy of an MMBench question as scored: its id (MMBench's index), answer, options, right option."""

    id: int
    answer: str
    choices: list[str]
    #: 0-based index of the right option among ``choices``
    correct: int


def _right(member: CircularMember, content_only: bool) -> bool | None:
    """True/False when an option is read from the answer; None when none is (ChEF counts that as wrong)."""
    letter = chef_option(member.answer, member.choices, content_only)
    if letter is None:
        return None
    return letter == CHOICE_LETTERS[member.correct]


def mmbench_circular(members: Iterable[CircularMember], content_only: bool = False) -> tuple[GroupFigure, GroupFigure]:
    """(vanilla, circular) accuracy as ChEF's MMBenchVQA computes them.

    Members are taken in id order; a question's group is every member whose id modulo 1,000,000 equals the
    first member's id. As in ChEF, a question whose first copy in the data is itself a rotated one (its
    original row missing) finds no members by that rule and counts as right in the circular figure.
    """
    ordered = sorted(members, key=lambda m: m.id)
    vanilla: dict[str, float] = {}
    circular: dict[str, float] = {}
    for first in ordered:
        key = str(first.id % CIRCULAR_STRIDE)
        if key in circular:
            continue
        vanilla[key] = float(_right(first, content_only) is True)
        group = [m for m in ordered if m.id % CIRCULAR_STRIDE == first.id]
        circular[key] = float(all(_right(m, content_only) is True for m in group))
    return group_figure(vanilla), group_figure(circular)


@dataclass(frozen=True)
class MmeMember:
    """One MME question as scored: its image (the group), the answer and the yes/no label."""

    image: str
    answer: str
    label: str


def mme_accuracy_plus(members: Iterable[MmeMember]) -> GroupFigure:
    """MME acc+ as ChEF's MMEVQA prints ``overall_plus``: images with two right answers over all images."""
    right: dict[str, int] = {}
    for member in members:
        right.setdefault(member.image, 0)
        if mme_reading(member.answer) == member.label.lower():
            right[member.image] += 1
    return group_figure({image: float(count >= 2) for image, count in right.items()})


# -- the metrics a run uses ---------------------------------------------------------------------------------


def _circular_member(sample: Sample) -> tuple[str, int | None, int]:
    """(question key, copies that make it whole or None, this copy's number) of an MMBench-shaped sample.

    evalkit's circular copies say so in their meta (``group``, ``group_size``, ``circular``); MMBench's own
    copies are known by their id, index + k * 1,000,000 (k = 0: the question as first written); any other
    sample is a question of its own.
    """
    meta = sample.meta
    if meta.get("group") is not None:
        size = meta.get("group_size")
        return str(meta["group"]), int(size) if isinstance(size, int) else None, int(meta.get("circular") or 0)
    try:
        number = int(str(sample.id))
    except ValueError:
        return str(sample.id), 1, 0
    return str(number % CIRCULAR_STRIDE), None, number // CIRCULAR_STRIDE


class MmbenchCircularAccuracy(Metric):
    """MMBench circular accuracy (ChEF MMBenchVQA): a question counts right only when every rotated copy is."""

    name = "mmbench_circular_accuracy"
    bounds = (0.0, 1.0)
    #: the corpus value is the mean over groups of ``group_rows``' first column: a normal interval over groups
    corpus_is_mean = True

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("content_only",))
        super().__init__(language, **options)
        self.content_only = bool(options.get("content_only", False))

    def group_of(self, sample: Sample) -> tuple[str, int | None]:
        key, size, _ = _circular_member(sample)
        return key, size

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        choices = sample.meta.get("choices")
        if choices is None:
            choices = option_columns(sample.meta) or None
        if not isinstance(choices, (list, tuple)) or not choices:
            return SampleScore(None, failure=FailureReason.NO_CHOICES)
        options = [str(c) for c in choices]
        correct = resolve_reference(sample.reference, options)
        if len(correct) != 1:
            return SampleScore(None, failure=FailureReason.UNRESOLVABLE_REFERENCE)
        letter = chef_option(prediction or "", options, self.content_only)
        right = float(letter is not None and CHOICE_LETTERS.find(letter) in correct)
        copy = _circular_member(sample)[2]
        # stats: right, 1, the copy's number (the vanilla figure takes each question's copy 0)
        return SampleScore(right, (right, 1.0, float(copy)), details={"option": letter, "copy": copy})

    def group_rows(self, rows: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
        """(1 when every copy is right, 1) per question.

        As ChEF, a question without its first copy (MMBench data whose original row is missing) counts right:
        ChEF gathers a question's copies from its first row's id and finds none.
        """
        import numpy as np

        right = np.ones(count)
        np.minimum.at(right, codes, rows[:, 0])
        has_first = np.zeros(count)
        np.maximum.at(has_first, codes, (rows[:, 2] == 0).astype(float))
        right[has_first == 0] = 1.0
        return np.stack([right, np.ones(count)], axis=1)

    def describe(self) -> dict[str, Any]:
        return {
            "reading": "ChEF Answer_Extractor",
            "content_only": self.content_only,
            "grouped_by": "question (its rotated copies)",
        }


class MmbenchVanillaAccuracy(MmbenchCircularAccuracy):
    """MMBench vanilla accuracy (ChEF MMBenchVQA): each question's first copy alone, over the same questions."""

    name = "mmbench_vanilla_accuracy"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("content_only",))
        super().__init__(language, **options)

    def group_rows(self, rows: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
        """(the lowest-numbered copy's outcome, 1) per question: ChEF's first copy in id order."""
        import numpy as np

        order = np.lexsort((rows[:, 2], codes))  # by question, then by copy number
        first = np.ones(len(order), dtype=bool)
        first[1:] = codes[order][1:] != codes[order][:-1]
        picked = order[first]
        right = np.zeros(count)
        right[codes[picked]] = rows[picked, 0]
        return np.stack([right, np.ones(count)], axis=1)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "grouped_by": "question (its first copy)"}


#: meta keys naming an MME question's image, in the order they are tried (the dataset maps one of them)
MME_IMAGE_KEYS = ("group", "image_id", "image_path", "question_id")


class MmeAccuracyPlus(Metric):
    """MME acc+ (ChEF MMEVQA overall_plus): an image counts when two of its questions are answered right."""

    name = "mme_accuracy_plus"
    bounds = (0.0, 1.0)
    corpus_is_mean = True

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def group_of(self, sample: Sample) -> tuple[str, int | None] | None:
        """The image: the first of ``MME_IMAGE_KEYS`` in the meta, else the first image's file; else no group."""
        for key in MME_IMAGE_KEYS:
            value = sample.meta.get(key)
            if value not in (None, ""):
                return str(value), None
        for image in sample.images or []:
            path = getattr(image, "path", None)
            if path:
                return str(path), None
        return None

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        labels = reference_strings(sample.reference)
        if not labels:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        reading = mme_reading(prediction or "")
        right = float(reading == labels[0].lower())
        return SampleScore(right, (right, 1.0), details={"reading": reading})

    def group_rows(self, rows: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
        """(1 when at least two answers of the image are right, 1) per image."""
        import numpy as np

        right = np.bincount(codes, weights=rows[:, 0], minlength=count)
        return np.stack([(right >= 2).astype(float), np.ones(count)], axis=1)

    def describe(self) -> dict[str, Any]:
        return {"reading": "ChEF MMEVQA yes/no", "grouped_by": "image"}
