"""The metric interface.

Every metric reduces a sample to a small vector of *sufficient statistics*
(e.g. ``(edits, reference_words)`` for WER, n-gram matches for BLEU, or
``(score, 1)`` for a mean). The corpus value is a function of the summed
vector, so an engine never keeps predictions in memory, the headline equals
the reference implementation's corpus score, and a bootstrap CI is a resample
of rows of one small matrix.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from evalkit.data.sample import Sample
from evalkit.data.sample import reference_strings as reference_strings  # its home before samples had one
from evalkit.errors import ConfigError, did_you_mean
from evalkit.metrics.references.reference import Reference
from evalkit.processing.processors import ProcessorChain, build_processors

#: the option every metric takes: text processors applied to prediction and reference before scoring
PROCESSORS_OPTION = "processors"
#: the sample meta key that holds a conversation's answers (``turns_column``), one per turn, as each went into the
#: next turn's history: set per model just before scoring, for a metric that rates every turn (MT-Bench); the
#: prediction stays the last turn's answer, postprocessed
TURN_ANSWERS = "turn_answers"


@dataclass(frozen=True, slots=True)
class Scoring:
    """Which answer a metric is scoring: the dataset, the model that answered and the sample.

    A judge that must be asked once per answer, as a peer tool asks it, even when two answers make the same
    judge request (AU-Harness at a sampling temperature), names its request after this.
    """

    dataset: str
    model: str
    sample_id: str
    metric: str

    def label(self, *more: object) -> str:
        return "\x1f".join(str(part) for part in (self.dataset, self.model, self.sample_id, self.metric, *more))


#: set by the run around each ``ascore`` call (evalkit/run/scoring.py); None outside a run (a metric called directly)
SCORING: ContextVar[Scoring | None] = ContextVar("evalkit_scoring", default=None)

if TYPE_CHECKING:
    import numpy as np


@dataclass(slots=True)
class SampleScore:
    """What a metric says about one sample.

    ``score`` is the per-sample value written to the record; ``stats`` the
    sufficient statistics summed into the corpus value. ``failure`` set means
    the metric itself could not score the sample (e.g. an unparseable judge
    verdict): the sample is counted as failed and excluded, never scored 0.
    """

    score: float | None
    stats: tuple[float, ...] = ()
    details: dict[str, Any] | None = None
    failure: str | None = None


@dataclass(slots=True)
class MetricResult:
    """A corpus-level score with its uncertainty."""

    score: float
    ci_low: float
    ci_high: float
    n: int
    ci_method: str
    details: dict[str, Any] = field(default_factory=dict)


class Metric(ABC):
    """Base class of all metrics; a plugin's subclass registers with ``@METRICS.register(name, *aliases)``."""

    name: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = True
    #: how the 95% CI is computed: "normal" for means of per-sample scores,
    #: "bootstrap" for corpus statistics (WER, BLEU, chrF, ...); the interval is always of what ``corpus``
    #: returns, so a metric that overrides ``corpus`` gets the bootstrap even when it says "normal"
    #: (unless ``corpus_is_mean``); see :func:`ci_method_used`
    ci_method: ClassVar[Literal["normal", "bootstrap"]] = "normal"
    #: True when ``corpus`` is the mean of the per-sample scores (perhaps clipped to ``bounds``), so the
    #: normal interval of the scores is its interval; None: True exactly when ``corpus`` is not overridden
    corpus_is_mean: ClassVar[bool | None] = None
    #: the range a score can take; a normal-approximation CI is clipped to it
    #: (a proportion's interval never reaches below 0 or above 1)
    bounds: ClassVar[tuple[float | None, float | None]] = (None, None)
    #: the metric needs an LLM judge endpoint (set on the engine by the plan)
    needs_judge: ClassVar[bool] = False
    #: how the engine gets the prediction: "generate" (the model's answer) or "loglikelihood"
    #: (each of the sample's choices scored through the completions endpoint; see metrics/choice/likelihood.py)
    scoring: ClassVar[str] = "generate"
    #: the task kinds the metric fits beyond the tasks whose runspecs list it: task names (runspec file
    #: stems, e.g. "asr", "text_qa"), categories (e.g. "speech_recognition") or "*" for every task. A
    #: dataset_metric pair naming the metric on a catalogue dataset of such a task is accepted as is.
    tasks: ClassVar[tuple[str, ...]] = ()
    #: a plugin's reference implementation (shown by `evalkit info metric`); built-ins have theirs in
    #: evalkit/metrics/references/, read without importing the metric
    reference: ClassVar[Reference | None] = None

    def __init__(self, language: str | None = None, **options: Any) -> None:
        self.language = language
        self.options = options
        #: the pair's own processors (option ``processors``), after the dataset's; see evalkit/processing/processors.py
        self.processors: ProcessorChain = build_processors(
            options.get(PROCESSORS_OPTION), f"metric {self.name!r}: option {PROCESSORS_OPTION!r}", language
        )

    @abstractmethod
    def score(self, prediction: str, sample: Sample) -> SampleScore:
        """Score one prediction against ``sample.reference``."""

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        """Async entry point used by the engine; judge metrics override it."""
        return self.score(prediction, sample)

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        """Corpus value(s) from summed statistics; ``totals`` has shape (..., k), the result shape (...).

        It is called with the (k,) vector of the summed statistics for the headline, and for a bootstrap
        CI with (resamples, k) batches of resampled totals (a version that takes one vector only still
        works: it is then called row by row, slower). The default is a mean: stats are ``(score, 1)``.
        """
        import numpy as np  # here, not at the top: a run imports numpy only once results are computed

        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return totals[..., 0] / totals[..., 1]

    def describe(self) -> dict[str, Any]:
        """Settings that determine the score (normalizer, tokenizer, level), for results.json."""
        return {}

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        """Extra corpus-level numbers derived from the summed stats (one row), for results.json."""
        return {}


def ci_method_used(metric: Metric | type[Metric]) -> Literal["normal", "bootstrap"]:
    """The CI method that gives an interval of what ``metric.corpus`` returns.

    "normal" is an interval of the mean of per-sample scores; a metric whose ``corpus`` is something
    else (a ratio of sums, say) and that keeps the default "normal" gets the bootstrap over its
    statistics, so the interval is always around the headline's own statistic.
    """
    if metric.ci_method == "bootstrap":
        return "bootstrap"
    is_mean = metric.corpus_is_mean
    if is_mean is None:
        cls = metric if isinstance(metric, type) else type(metric)
        is_mean = cls.corpus is Metric.corpus
    return "normal" if is_mean else "bootstrap"


def check_options(metric: str, options: dict[str, Any], allowed: tuple[str, ...]) -> None:
    """Reject option names a metric does not know, so a typo in config.yaml is not silently ignored.

    ``processors`` is every metric's option (the base class reads it), so it is always allowed.
    """
    allowed = (*allowed, PROCESSORS_OPTION)
    for key in options:
        if key not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise ConfigError(
                f"metric {metric!r}: unknown option {key!r}{did_you_mean(key, allowed)}. Known options: {known}"
            )
