"""ChEF's likelihood-scored figures: Winoground's text, image and group scores, and Ch3Ef's accuracy.

Written from OpenGVLab/LAMM ``src/ChEF/metric/winoground.py`` (``Winoground_Cap_Metric``) and
``src/ChEF/metric/Ch3Ef.py`` (``Ch3Ef_Metric.ppl_metric``) at commit ea571363883ceba58a0f724ef197ed7205e07465,
checked against tables from running them (tests/fixtures/references/chef_choice.json).

ChEF's PPL inferencer scores each option by the mean log-probability of its tokens after the prompt (its
models' ``do_ppl``); evalkit's likelihood scoring (``scoring = "loglikelihood"``, metrics/choice/likelihood.py) gives
each option's summed log-probability and token count, so the same value is ``logprobs / tokens``.

Winoground (ChEF's ``Winoground_Cap`` shape): one sample per example with its two images, its two captions and
four options in this order: caption 1 - image 1, caption 1 - image 2, caption 2 - image 1, caption 2 - image 2
(s0..s3). ChEF counts the text score when s0 < s2 and s3 < s1, the image score when s0 < s1 and s3 < s2, and the
group score when both. With ChEF's scores (higher = more likely) those comparisons hold when the model prefers
the *mismatched* pairs: the opposite of the Winoground paper's definitions (s0 > s2 and s3 > s1, and so on).
``comparison: chef`` (the default) reproduces ChEF's figures; ``comparison: paper`` gives the paper's.

Ch3Ef: the option ChEF's inferencer picks (the highest score) is right when it is the first option, or the
second when "I don't know." is among the options (Ch3Ef lists the right answer first).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options
from evalkit.metrics.choice.likelihood import option_scores

#: Ch3Ef's abstention option: with it among the options, the first two count as right
CH3EF_ABSTAIN = "I don't know."


def chef_option_scores(prediction: str) -> list[float]:
    """Each option's mean log-probability per token (ChEF's ppl score) from the engine's likelihood JSON."""
    stats = option_scores(prediction)
    scores = []
    for logprob, tokens in zip(stats["logprobs"], stats["tokens"], strict=True):
        if tokens <= 0:
            raise ValueError("an option with no tokens has no mean log-probability")
        scores.append(logprob / tokens)
    return scores


def winoground_scores(scores: list[float], comparison: str = "chef") -> tuple[float, float, float]:
    """(text, image, group) for one example's four option scores s0..s3, ChEF's comparisons or the paper's."""
    s0, s1, s2, s3 = scores
    if comparison == "paper":
        s0, s1, s2, s3 = -s0, -s1, -s2, -s3
    text = float(s0 < s2 and s3 < s1)
    image = float(s0 < s1 and s3 < s2)
    return text, image, float(text and image)


class _Winoground(Metric):
    """One of Winoground's three scores per example; the corpus mean."""

    bounds = (0.0, 1.0)
    scoring: ClassVar[str] = "loglikelihood"
    #: which of (text, image, group) the metric reports
    which: ClassVar[int] = 0

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("comparison",))
        super().__init__(language, **options)
        comparison = options.get("comparison", "chef")
        if comparison not in ("chef", "paper"):
            raise ConfigError(f"metric {self.name!r}: option 'comparison' must be chef or paper, got {comparison!r}")
        self.comparison = str(comparison)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        try:
            scores = chef_option_scores(prediction)
        except (ValueError, KeyError, TypeError) as error:
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": f"prediction: {error}"})
        if len(scores) != 4:
            return SampleScore(
                None,
                failure=FailureReason.METRIC_ERROR,
                details={"error": f"Winoground needs 4 option scores (caption x image), got {len(scores)}"},
            )
        triple = winoground_scores(scores, self.comparison)
        value = triple[self.which]
        return SampleScore(
            value,
            (value, 1.0),
            details={
                "text": triple[0],
                "image": triple[1],
                "group": triple[2],
                "scores": [round(s, 6) for s in scores],
            },
        )

    def describe(self) -> dict[str, Any]:
        return {"comparison": self.comparison, "option_score": "mean log-probability per token (ChEF ppl)"}


class WinogroundText(_Winoground):
    """ChEF Winoground Text: per example, the captions' order for both images as ChEF compares them; the mean."""

    name = "winoground_text_score"
    which = 0


class WinogroundImage(_Winoground):
    """ChEF Winoground Image: per example, the images' order for both captions as ChEF compares them; the mean."""

    name = "winoground_image_score"
    which = 1


class WinogroundGroup(_Winoground):
    """ChEF Winoground Group: per example, both the text and the image score; the mean."""

    name = "winoground_group_score"
    which = 2


class Ch3efAccuracy(Metric):
    """ChEF Ch3Ef_Metric (ppl): 1 when the most likely option is the first, or the second beside "I don't know."."""

    name = "ch3ef_accuracy"
    bounds = (0.0, 1.0)
    scoring: ClassVar[str] = "loglikelihood"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        choices = [str(c) for c in sample.meta.get("choices") or []]
        if not choices:
            return SampleScore(None, failure=FailureReason.NO_CHOICES)
        try:
            scores = chef_option_scores(prediction)
        except (ValueError, KeyError, TypeError) as error:
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": f"prediction: {error}"})
        if len(scores) != len(choices) or any(math.isnan(s) for s in scores):
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": "one score per option"})
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))  # numpy argmax: the first of equal scores
        right = choices[:2] if CH3EF_ABSTAIN in choices else choices[:1]
        value = float(choices[best] in right)
        return SampleScore(value, (value, 1.0), details={"chosen": choices[best]})
