"""ChEF's Winoground figures for its four-question recipe: text, image and group scores over each example's four
Yes/No questions.

Written from OpenGVLab/LAMM ``src/ChEF/metric/winoground.py`` (``Winoground_Metric``) at commit
ea571363883ceba58a0f724ef197ed7205e07465. ChEF's Winoground scenario asks each example four times (one question
per caption-image pair, after a seeded swap of its captions or its images: evalkit.prompts.chef.sets); the
metric takes each question's "Yes" score (the mean log-probability per token of the first option, ChEF's
``ppl_results[0]``), puts the four back in the order of the unswapped pairs (caption 1 - image 1, caption 1 -
image 2, caption 2 - image 1, caption 2 - image 2) and compares them as ChEF's Winoground_Cap metric does
(:func:`evalkit.metrics.chef.likelihood.winoground_scores`, ChEF's comparisons or, with ``comparison: paper``,
the paper's).

The figures are statistics of examples: each question scores one sample (1 when its likelier option is its
answer, kept for the record) and names its example (``group_of``); the run's accumulator reduces the four
members to one row per example (``group_rows``), and the interval is over examples. An example with a failed
question is counted as failed, never as wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options
from evalkit.metrics.chef.likelihood import chef_option_scores, winoground_scores

if TYPE_CHECKING:
    import numpy as np

#: a question's pair as asked ("c<caption>i<image>") -> its place among the four, before the swap is undone
PAIRS = {"c0i0": 0, "c0i1": 1, "c1i0": 2, "c1i1": 3}


def unswapped_place(pair: str, shuffle: int) -> int:
    """Where ChEF's metric puts a question's score once the swap is undone: a caption swap (shuffle & 1) exchanges
    the captions, an image swap (shuffle & 2) the images."""
    caption, image = divmod(PAIRS[pair], 2)
    caption ^= shuffle & 1
    image ^= (shuffle >> 1) & 1
    return 2 * caption + image


class _WinogroundYesNo(Metric):
    """One of Winoground's three scores per example from its four Yes/No questions; the mean over examples."""

    bounds = (0.0, 1.0)
    scoring: ClassVar[str] = "loglikelihood"
    #: the corpus value is the mean over examples of ``group_rows``' first column
    corpus_is_mean = True
    #: which of (text, image, group) the metric reports
    which: ClassVar[int] = 0

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("comparison",))
        super().__init__(language, **options)
        comparison = options.get("comparison", "chef")
        if comparison not in ("chef", "paper"):
            raise ConfigError(f"metric {self.name!r}: option 'comparison' must be chef or paper, got {comparison!r}")
        self.comparison = str(comparison)

    def group_of(self, sample: Sample) -> tuple[str, int | None]:
        return str(sample.meta.get("main_id", sample.id)), 4

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        pair, shuffle = sample.meta.get("pair"), sample.meta.get("shuffle")
        if pair not in PAIRS or not isinstance(shuffle, int):
            return SampleScore(
                None,
                failure=FailureReason.METRIC_ERROR,
                details={"error": "a Winoground question needs its pair and shuffle (preprocessor chef_winoground)"},
            )
        try:
            scores = chef_option_scores(prediction)
        except (ValueError, KeyError, TypeError) as error:
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": f"prediction: {error}"})
        if len(scores) != 2:
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": "needs Yes and No scores"})
        place = unswapped_place(str(pair), shuffle)
        likelier = "Yes" if scores[0] >= scores[1] else "No"
        right = float(likelier == sample.reference)
        # stats: right, 1, the unswapped place, the Yes score (group_rows compares the four Yes scores)
        return SampleScore(right, (right, 1.0, float(place), scores[0]), details={"place": place, "yes": scores[0]})

    def group_rows(self, rows: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
        """(the example's text, image or group score, 1) per example, from its four Yes scores in unswapped order."""
        import numpy as np

        placed = np.zeros((count, 4))
        placed[codes, rows[:, 2].astype(int)] = rows[:, 3]
        outcome = np.array([winoground_scores(list(four), self.comparison)[self.which] for four in placed])
        return np.stack([outcome.reshape(count), np.ones(count)], axis=1)

    def describe(self) -> dict[str, Any]:
        return {
            "comparison": self.comparison,
            "option_score": "the Yes option's mean log-probability per token (ChEF ppl_results[0])",
            "grouped_by": "example (its four questions)",
        }


class WinogroundYesNoText(_WinogroundYesNo):
    """ChEF Winoground_Metric Text: per example, the captions' order for both images from its four questions."""

    name = "winoground_yesno_text_score"
    which = 0


class WinogroundYesNoImage(_WinogroundYesNo):
    """ChEF Winoground_Metric Image: per example, the images' order for both captions from its four questions."""

    name = "winoground_yesno_image_score"
    which = 1


class WinogroundYesNoGroup(_WinogroundYesNo):
    """ChEF Winoground_Metric Group: per example, both the text and the image score from its four questions."""

    name = "winoground_yesno_group_score"
    which = 2
