"""Multiple choice scored by likelihood (ChEF's PPL inferencer, lm-eval's loglikelihood): no answer is generated.

For each option the engine asks the completions endpoint for the
log-probability of `` <option>`` after the prompt (``echo`` + ``logprobs``)
and passes the per-option sums, token counts and character counts on as the
prediction, a small JSON object, so records keep them and `evalkit rescore`
can switch the normalisation without asking the model again. The chosen
option is the one with the highest score: the raw sum (``loglikelihood_accuracy``),
the mean per token (``..._per_token``) or per character (``..._per_char``, lm-eval's
``acc_norm`` uses bytes; the options here are text, so characters). Ties go to
the first option.

References (evalkit/metrics/references/): ``loglikelihood_accuracy`` is
lm-evaluation-harness's ``acc`` and ``..._per_char`` its ``acc_norm``
(EleutherAI/lm-evaluation-harness, lm_eval/api/task.py,
``ConfigurableTask.process_results`` for ``multiple_choice``: argmax of the
summed log-likelihoods, or of each divided by ``len(choice)``). lm-eval has no
per-token normalisation; ``..._per_token`` is evalkit's own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options
from evalkit.metrics.choice.choice import LETTERS, resolve_reference

T = TypeVar("T")


def option_scores(prediction: str) -> dict[str, list[float]]:
    """The per-option numbers the engine wrote: logprobs, tokens, chars (equal-length lists).

    The engine also writes the ``context`` the options continued, so a record shows what was scored.
    """
    data = json.loads(prediction)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    lists = {key: [float(v) for v in data[key]] for key in ("logprobs", "tokens", "chars")}
    if len({len(v) for v in lists.values()}) != 1 or not lists["logprobs"]:
        raise ValueError("logprobs, tokens and chars must be non-empty lists of one length")
    return lists


def read_options(
    prediction: str, sample: Sample, index_base: int, parse: Callable[[str], T]
) -> tuple[Any, T] | SampleScore:
    """The sample's correct options and ``parse(prediction)``, or the unscored SampleScore saying which failed.

    Every metric over option likelihoods starts so: a reference that names no option is the data's fault
    (unresolvable_reference), a prediction that is not the engine's JSON of option scores the metric's.
    """
    choices = [str(c) for c in sample.meta.get("choices") or []]
    correct = resolve_reference(sample.reference, choices or None, index_base)
    if not correct:
        return SampleScore(None, failure=FailureReason.UNRESOLVABLE_REFERENCE)
    try:
        return correct, parse(prediction)
    except (ValueError, KeyError, TypeError) as error:
        return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": f"prediction: {error}"})


class LoglikelihoodAccuracy(Metric):
    """1 when the option with the highest log-likelihood is a correct one, else 0."""

    name = "loglikelihood_accuracy"
    bounds = (0.0, 1.0)
    scoring: ClassVar[str] = "loglikelihood"
    #: what an option's log-likelihood is divided by before the options are compared
    normalization: ClassVar[str] = "none"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("index_base",))
        super().__init__(language, **options)
        self.index_base = int(options.get("index_base", 0))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        read = read_options(prediction, sample, self.index_base, option_scores)
        if isinstance(read, SampleScore):
            return read
        correct, stats = read
        divisor = {"none": None, "token": stats["tokens"], "char": stats["chars"]}[self.normalization]
        scores = [
            lp / d if divisor is not None and (d := divisor[i]) > 0 else lp for i, lp in enumerate(stats["logprobs"])
        ]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        value = 1.0 if best in correct else 0.0
        return SampleScore(
            value,
            (value, 1.0),
            details={
                "chosen": LETTERS[best] if best < len(LETTERS) else best,
                "correct": sorted(LETTERS[i] for i in correct if i < len(LETTERS)),
                "scores": [round(s, 6) if math.isfinite(s) else None for s in scores],
            },
        )

    def describe(self) -> dict[str, Any]:
        return {"scoring": "loglikelihood of ' <option>' after the prompt", "normalization": self.normalization}


class LoglikelihoodAccuracyPerToken(LoglikelihoodAccuracy):
    """1 when the option with the highest mean log-likelihood per token is a correct one, else 0."""

    name = "loglikelihood_accuracy_per_token"
    normalization = "token"


class LoglikelihoodAccuracyPerChar(LoglikelihoodAccuracy):
    """1 when the option with the highest log-likelihood per character is a correct one, else 0."""

    name = "loglikelihood_accuracy_per_char"
    normalization = "char"
