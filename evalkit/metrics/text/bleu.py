"""BLEU, chrF (chrF++) and TER as sacrebleu computes them, from per-sample sufficient statistics.

sacrebleu already reduces a corpus to per-segment statistics and sums them;
evalkit keeps that split. ``score`` asks sacrebleu for one segment's
statistics (its own tokenizer, n-gram counting and multi-reference rules), so
the rows are exactly sacrebleu's. ``corpus`` re-implements only the final
formula, vectorized over any number of rows of summed statistics, with the same
floating-point operations in the same order, so the headline equals
``sacrebleu.corpus_bleu`` / ``corpus_chrf`` / ``corpus_ter`` and a bootstrap can
evaluate a thousand resampled corpora at once.

Several references: a list reference is passed to sacrebleu as that
segment's references. A corpus with varying reference counts is what
sacrebleu scores when the shorter reference streams are padded with ``None``
(see :func:`reference_streams`); the signature then says ``nrefs:var``.

Per-sample scores (written to records) are sentence BLEU with effective order
(sacrebleu's ``sentence_bleu``), sentence chrF and sentence TER. Scores are on
sacrebleu's 0-100 scale.

Tokenizer for BLEU by target language, unless the ``tokenize`` option is set:
zh -> "zh"; ja -> "ja-mecab" and ko -> "ko-mecab" when sacrebleu can build
them (``sacrebleu[ja]`` / ``sacrebleu[ko]`` installed), else "char"; other
spaceless languages (th, lo, km, my, yue, bo) -> "char"; everything else "13a".
TER for zh/ja/yue defaults to ``normalized`` + ``asian_support`` (CJK split into
characters); for th/lo/km/my/bo text is split into characters before scoring
(recorded as ``pre_tokenize: "char"``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.languages import SPACELESS, normalize_language, target_language
from evalkit.metrics.base import (
    Metric,
    SampleScore,
    check_options,
    reference_strings,
)

_LOG_ZERO = -9999999999.0  # what sacrebleu's my_log returns for log(0)
_CJK_TER = frozenset({"zh", "ja", "yue"})


#: sacrebleu's tokenizers memoise up to 65,536 lines (an lru_cache on the class). Each segment is scored once
#: here, so the cache only made memory grow with the dataset (~6 MiB over 15,000 BLEU samples in the soak
#: benchmark); it is emptied every this many segments
_TOKENIZER_CACHE_SEGMENTS = 2048


def _clear_tokenizer_cache(metric: Any) -> None:
    """Empty the tokenizer's memo and those of the tokenizers it wraps (13a wraps a regexp tokenizer)."""
    tokenizer = getattr(metric, "tokenizer", None)
    for part in [tokenizer, *getattr(tokenizer, "__dict__", {}).values()]:
        method = next((vars(k)["__call__"] for k in type(part).__mro__ if "__call__" in vars(k)), None)
        clear = getattr(method, "cache_clear", None)
        if callable(clear):
            clear()


@cache
def _tokenizer_available(name: str) -> bool:
    try:
        BLEU(tokenize=name)
    except Exception:  # sacrebleu raises RuntimeError/ImportError when MeCab is missing
        return False
    return True


def bleu_tokenizer_for(language: str | None) -> str:
    """The sacrebleu tokenizer name for text in ``language`` (the target of a pair)."""
    lang = target_language(language) if language else None
    if lang == "zh":
        return "zh"
    if lang == "ja":
        return "ja-mecab" if _tokenizer_available("ja-mecab") else "char"
    if lang == "ko":
        return "ko-mecab" if _tokenizer_available("ko-mecab") else "char"
    if lang in SPACELESS:
        return "char"
    return "13a"


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-sample reference lists -> sacrebleu's reference streams, short lists padded with None."""
    width = max((len(refs) for refs in references), default=0)
    return [[refs[i] if i < len(refs) else None for refs in references] for i in range(width)]


def bleu_from_stats(
    totals: np.ndarray,
    max_ngram_order: int = 4,
    smooth_method: str = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> np.ndarray:
    """sacrebleu's ``BLEU.compute_bleu`` over rows ``[sys_len, ref_len, correct_1..N, total_1..N]``."""
    t = np.asarray(totals, dtype=float)
    order = max_ngram_order
    if smooth_value is None:
        smooth_value = BLEU.SMOOTH_DEFAULTS[smooth_method]
    sys_len, ref_len = t[..., 0], t[..., 1]
    correct = t[..., 2 : 2 + order].copy()
    total = t[..., 2 + order : 2 + 2 * order].copy()
    any_correct = (correct != 0).any(axis=-1)

    short = (sys_len < ref_len) & (sys_len > 0)
    ratio = np.divide(ref_len, sys_len, out=np.zeros_like(sys_len), where=short)
    bp = np.where(sys_len < ref_len, np.where(short, np.exp(1 - ratio), 0.0), 1.0)

    alive = np.ones_like(sys_len, dtype=bool)  # not yet hit sacrebleu's `break` on a zero total
    eff = np.full_like(sys_len, float(order))
    smooth = np.ones_like(sys_len)
    precisions = []
    for n in range(1, order + 1):
        c, tot = correct[..., n - 1], total[..., n - 1]
        if smooth_method == "add-k" and n > 1:
            c = c + smooth_value
            tot = tot + smooth_value
        alive = alive & (tot != 0)
        if effective_order:
            eff = np.where(alive, float(n), eff)
        safe_tot = np.where(alive, tot, 1.0)
        zero = c == 0
        if smooth_method == "exp":
            smooth = np.where(alive & zero, smooth * 2, smooth)
            p_zero = 100.0 / (smooth * safe_tot)
        elif smooth_method == "floor":
            p_zero = 100.0 * smooth_value / safe_tot
        else:
            p_zero = np.zeros_like(safe_tot)
        p = np.where(zero, p_zero, 100.0 * c / safe_tot)
        precisions.append(np.where(alive, p, 0.0))

    log_sum = np.zeros_like(sys_len)
    for n, p in enumerate(precisions, start=1):
        log_p = np.log(np.where(p == 0, 1.0, p))
        term = np.where(p == 0, _LOG_ZERO, log_p)
        log_sum = np.where(n <= eff, log_sum + term, log_sum)
    score = bp * np.exp(log_sum / eff)
    return np.where(any_correct, score, 0.0)


def chrf_from_stats(
    totals: np.ndarray, char_order: int = 6, word_order: int = 0, beta: int = 2, eps_smoothing: bool = False
) -> np.ndarray:
    """sacrebleu's ``CHRF._compute_f_score`` over rows of ``[hyp, ref, match]`` triples per order."""
    t = np.asarray(totals, dtype=float)
    eps = 1e-16
    factor = beta**2
    shape = t.shape[:-1]
    score = np.zeros(shape)
    avg_prec = np.zeros(shape)
    avg_rec = np.zeros(shape)
    effective = np.zeros(shape)
    for i in range(char_order + word_order):
        n_hyp, n_ref, n_match = t[..., 3 * i], t[..., 3 * i + 1], t[..., 3 * i + 2]
        prec = np.where(n_hyp > 0, n_match / np.where(n_hyp > 0, n_hyp, 1.0), eps)
        rec = np.where(n_ref > 0, n_match / np.where(n_ref > 0, n_ref, 1.0), eps)
        denom = factor * prec + rec
        safe = np.where(denom > 0, denom, 1.0)
        score = score + np.where(denom > 0, (1 + factor) * prec * rec / safe, eps)
        both = (n_hyp > 0) & (n_ref > 0)
        avg_prec = np.where(both, avg_prec + prec, avg_prec)
        avg_rec = np.where(both, avg_rec + rec, avg_rec)
        effective = effective + both
    if eps_smoothing:
        return 100 * score / (char_order + word_order)
    has = effective > 0
    avg_prec = np.where(has, avg_prec / np.where(has, effective, 1.0), 0.0)
    avg_rec = np.where(has, avg_rec / np.where(has, effective, 1.0), 0.0)
    nonzero = (avg_prec + avg_rec) != 0
    f = (1 + factor) * avg_prec * avg_rec
    f = f / np.where(nonzero, factor * avg_prec + avg_rec, 1.0)
    return np.where(nonzero, 100 * f, 0.0)


def ter_from_stats(totals: np.ndarray) -> np.ndarray:
    """sacrebleu's TER from rows ``[edits, average_reference_length]`` (empty refs: 100 if any edit)."""
    t = np.asarray(totals, dtype=float)
    edits, ref_len = t[..., 0], t[..., 1]
    rate = np.where(ref_len > 0, edits / np.where(ref_len > 0, ref_len, 1.0), np.where(edits > 0, 1.0, 0.0))
    return 100 * rate


class _SacreMetric(Metric):
    """Shared plumbing: one sacrebleu object per evalkit metric, segment stats from it."""

    ci_method = "bootstrap"
    allowed_options: tuple[str, ...] = ()

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, self.allowed_options)
        language = normalize_language(language) if language else None
        super().__init__(language, **options)
        self.output_language = target_language(language)
        self._sacre = self._build()
        self._ref_counts: set[int] = set()
        self._lock = threading.Lock()
        self._segments = 0

    def _build(self) -> Any:
        raise NotImplementedError

    def _prepare(self, text: str) -> str:
        return text

    def segment_stats(self, prediction: str, references: list[str]) -> list[float]:
        """sacrebleu's statistics for one segment (hypothesis against its references)."""
        hyp = self._prepare(prediction or "")
        refs = [self._prepare(r) for r in references]
        with self._lock:  # sacrebleu metric objects keep a little state (num_refs)
            rows = self._sacre._extract_corpus_statistics([hyp], [[r] for r in refs])
            self._segments += 1
            if self._segments % _TOKENIZER_CACHE_SEGMENTS == 0:
                _clear_tokenizer_cache(self._sacre)
        return [float(x) for x in rows[0]]

    def sentence_score(self, stats: list[float]) -> float:
        return float(self.corpus(np.asarray(stats)))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        stats = self.segment_stats(prediction, references)
        self._ref_counts.add(len(references))
        return SampleScore(self.sentence_score(stats), tuple(stats))

    def signature(self) -> str:
        """sacrebleu's reproducibility signature (nrefs from the samples scored so far)."""
        counts = self._ref_counts
        self._sacre.num_refs = next(iter(counts)) if len(counts) == 1 else (-1 if counts else 1)
        return self._sacre.get_signature().format()

    def describe(self) -> dict[str, Any]:
        return {"language": self.language, "signature": self.signature()}


class Bleu(_SacreMetric):
    """Corpus BLEU (sacrebleu defaults: exp smoothing, 4-grams, language-chosen tokenizer).

    Options: ``tokenize``, ``lowercase``, ``smooth_method``, ``smooth_value``,
    ``max_ngram_order``, ``effective_order`` (corpus-level; off as in sacrebleu).
    """

    name = "bleu"
    allowed_options: tuple[str, ...] = (
        "tokenize",
        "lowercase",
        "smooth_method",
        "smooth_value",
        "max_ngram_order",
        "effective_order",
    )

    def _build(self) -> BLEU:
        o = self.options
        self.tokenizer = str(o.get("tokenize") or bleu_tokenizer_for(self.output_language))
        self.max_ngram_order = int(o.get("max_ngram_order", 4))
        self.smooth_method = str(o.get("smooth_method", "exp"))
        self.smooth_value = o.get("smooth_value")
        self.effective_order = bool(o.get("effective_order", False))
        if self.smooth_method not in BLEU.SMOOTH_DEFAULTS:
            raise ValueError(f"bleu: smooth_method must be one of {', '.join(BLEU.SMOOTH_DEFAULTS)}")
        return BLEU(
            lowercase=bool(o.get("lowercase", False)),
            tokenize=self.tokenizer,
            smooth_method=self.smooth_method,
            smooth_value=self.smooth_value,
            max_ngram_order=self.max_ngram_order,
            effective_order=self.effective_order,
            force=True,
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        return bleu_from_stats(
            totals, self.max_ngram_order, self.smooth_method, self.smooth_value, self.effective_order
        )

    def sentence_score(self, stats: list[float]) -> float:
        # sacrebleu.sentence_bleu: effective order, so short sentences are not all zero
        return float(
            bleu_from_stats(np.asarray(stats), self.max_ngram_order, self.smooth_method, self.smooth_value, True)
        )

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        n = self.max_ngram_order
        correct, total = t[2 : 2 + n], t[2 + n : 2 + 2 * n]
        precisions = [float(100 * c / x) if x else 0.0 for c, x in zip(correct, total)]
        return {"precisions": precisions, "sys_len": int(t[0]), "ref_len": int(t[1])}

    def describe(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer, **super().describe()}


class ChrF(_SacreMetric):
    """Corpus chrF (sacrebleu defaults: character 6-grams, beta 2, whitespace ignored).

    Options: ``char_order``, ``word_order`` (2 = chrF++), ``beta``, ``lowercase``,
    ``whitespace``, ``eps_smoothing``.
    """

    name = "chrf"
    default_word_order = 0
    allowed_options = ("char_order", "word_order", "beta", "lowercase", "whitespace", "eps_smoothing")

    def _build(self) -> CHRF:
        o = self.options
        self.char_order = int(o.get("char_order", CHRF.CHAR_ORDER))
        self.word_order = int(o.get("word_order", self.default_word_order))
        self.beta = int(o.get("beta", CHRF.BETA))
        self.eps_smoothing = bool(o.get("eps_smoothing", False))
        return CHRF(
            char_order=self.char_order,
            word_order=self.word_order,
            beta=self.beta,
            lowercase=bool(o.get("lowercase", False)),
            whitespace=bool(o.get("whitespace", False)),
            eps_smoothing=self.eps_smoothing,
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        return chrf_from_stats(totals, self.char_order, self.word_order, self.beta, self.eps_smoothing)


class ChrFPlusPlus(ChrF):
    """chrF++: chrF with word uni- and bigrams (``word_order=2``)."""

    name = "chrf++"
    default_word_order = 2


class Ter(_SacreMetric):
    """Corpus TER (sacrebleu's Tercom re-implementation), 0-100, lower is better.

    Options: ``normalized``, ``no_punct``, ``asian_support``, ``case_sensitive``.
    """

    name = "ter"
    higher_is_better = False
    allowed_options = ("normalized", "no_punct", "asian_support", "case_sensitive")

    def _build(self) -> TER:
        o = self.options
        cjk = self.output_language in _CJK_TER
        self.pre_tokenize = "char" if self.output_language in SPACELESS - _CJK_TER else None
        return TER(
            normalized=bool(o.get("normalized", cjk)),
            no_punct=bool(o.get("no_punct", False)),
            asian_support=bool(o.get("asian_support", cjk)),
            case_sensitive=bool(o.get("case_sensitive", False)),
        )

    def _prepare(self, text: str) -> str:
        if self.pre_tokenize == "char":
            return " ".join("".join(text.split()))
        return text

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        return ter_from_stats(totals)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        return {"edits": float(t[0]), "ref_length": float(t[1])}

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self.pre_tokenize:
            out["pre_tokenize"] = self.pre_tokenize
        return out
