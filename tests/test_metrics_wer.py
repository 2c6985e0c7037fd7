"""WER/CER: corpus values equal jiwer's on the same normalized text."""

from __future__ import annotations

import random

import jiwer
import numpy as np
import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.metrics.table import METRICS
from evalkit.processing.normalizers import asr_normalizer

WORDS = [
    "the",
    "a",
    "cat",
    "Dog",
    "sat",
    "on",
    "mat,",
    "Mr.",
    "Smith",
    "paid",
    "$20",
    "colour",
    "it's",
    "hello",
    "world!",
    "quickly",
    "2",
    "two",
]
HANZI = list("我你他是的了在有人这中大来上国个到说们为子和")


def _pairs(seed: int, count: int, alphabet: list[str], joiner: str) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        ref = [rng.choice(alphabet) for _ in range(rng.randint(1, 18))]
        hyp = []
        for token in ref:
            roll = rng.random()
            if roll < 0.08:
                continue  # deletion
            hyp.append(rng.choice(alphabet) if roll < 0.16 else token)
            if rng.random() < 0.05:
                hyp.append(rng.choice(alphabet))  # insertion
        pairs.append((joiner.join(ref), joiner.join(hyp)))
    return pairs


def _corpus(metric_name: str, language: str, pairs: list[tuple[str, str]]) -> tuple[float, object]:
    metric = METRICS.get(metric_name)(language=language)
    rows = np.array([metric.score(h, Sample(id=str(i), reference=r)).stats for i, (r, h) in enumerate(pairs)])
    return float(metric.corpus(rows.sum(axis=0))), metric


def test_corpus_wer_equals_jiwer_on_normalized_text() -> None:
    pairs = _pairs(1, 200, WORDS, " ")
    value, metric = _corpus("wer", "en", pairs)
    _, norm = asr_normalizer("en")
    expected = jiwer.wer([norm(r) for r, _ in pairs], [norm(h) for _, h in pairs])
    assert value == pytest.approx(expected, rel=1e-12)
    assert 0.05 < value < 0.6
    assert metric.describe() == {"normalizer": "whisper-english", "level": "word", "language": "en"}


def test_corpus_cer_equals_jiwer_cer() -> None:
    pairs = _pairs(2, 200, WORDS, " ")
    value, metric = _corpus("cer", "english", pairs)
    _, norm = asr_normalizer("en")
    expected = jiwer.cer([norm(r) for r, _ in pairs], [norm(h) for _, h in pairs])
    assert value == pytest.approx(expected, rel=1e-12)
    assert metric.describe()["level"] == "character"


def test_spaceless_language_switches_to_cer() -> None:
    pairs = _pairs(3, 200, HANZI, "")
    # arbitrary spaces and punctuation in the hypothesis must not count
    pairs = [(r, " ".join(h[i : i + 3] for i in range(0, len(h), 3)) + "。") for r, h in pairs]
    value, metric = _corpus("word_error_rate", "zh-CN", pairs)
    assert metric.describe() == {"normalizer": "whisper-basic-nospace", "level": "character", "language": "zh"}
    _, norm = asr_normalizer("zh")
    normalized_hyps = [norm(h) for _, h in pairs]
    assert all(" " not in h and "。" not in h for h in normalized_hyps)
    expected = jiwer.cer([norm(r) for r, _ in pairs], normalized_hyps)
    assert value == pytest.approx(expected, rel=1e-12)


def test_english_normalization_removes_formatting_errors() -> None:
    metric = METRICS.get("wer")(language="en")
    score = metric.score("mister smith paid twenty dollars", Sample(id="1", reference="Mr. Smith paid $20."))
    assert score.score == 0.0
    assert score.stats == (0.0, 4.0, 0.0, 1.0)


def test_sample_stats_and_mean_sample_rate() -> None:
    metric = METRICS.get("wer")(language="en", normalizer="none")
    a = metric.score("a b x", Sample(id="1", reference="a b c d"))  # 1 sub + 1 del
    b = metric.score("y", Sample(id="2", reference="y"))
    assert a.stats == (2.0, 4.0, 0.5, 1.0)
    totals = np.array([a.stats, b.stats]).sum(axis=0)
    assert float(metric.corpus(totals)) == pytest.approx(2 / 5)
    assert metric.corpus_details(totals)["mean_sample_rate"] == pytest.approx(0.25)


def test_empty_reference_counts_insertions_only() -> None:
    metric = METRICS.get("wer")(language="en", normalizer="none")
    empty = metric.score("two words", Sample(id="1", reference=""))
    assert empty.stats[:2] == (2.0, 0.0)
    assert empty.score == 2.0  # edits / max(reference words, 1), as jiwer gives for one pair
    both = metric.score("", Sample(id="2", reference=""))
    assert both.stats[:2] == (0.0, 0.0) and both.score == 0.0
    normal = metric.score("a b", Sample(id="3", reference="a b"))
    totals = np.array([empty.stats, both.stats, normal.stats]).sum(axis=0)
    assert float(metric.corpus(totals)) == pytest.approx(jiwer.wer(["", "", "a b"], ["two words", "", "a b"]))


def test_list_reference_uses_the_first() -> None:
    metric = METRICS.get("wer")(language="en")
    score = metric.score("hello world", Sample(id="1", reference=["goodbye world", "hello world"]))
    assert score.score == 0.5


def test_missing_reference_is_a_failure() -> None:
    metric = METRICS.get("wer")(language="en")
    assert metric.score("x", Sample(id="1", reference=None)).failure == "no reference"


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match='did you mean "normalizer"'):
        METRICS.get("wer")(language="en", normaliser="basic")
    assert METRICS.get("wer")(language="de").describe()["normalizer"] == "whisper-basic"
    assert METRICS.get("wer")(language="hi").describe()["normalizer"] == "whisper-basic-marks"
    assert METRICS.get("wer")(language="en", level="character").level == "character"
    metric = METRICS.get("wer")
    assert metric.higher_is_better is False and metric.ci_method == "bootstrap"


@pytest.mark.parametrize(("language", "kind"), [("en", "auto"), ("fr", "auto"), ("hi", "auto"), ("zh", "auto")])
def test_a_normalizer_that_remembers_texts_answers_as_the_library_does(language: str, kind: str) -> None:
    """Asked again, or with a text too long to keep, it gives what whisper-normalizer gives for that text."""
    from whisper_normalizer.basic import BasicTextNormalizer
    from whisper_normalizer.english import EnglishTextNormalizer

    name, norm = asr_normalizer(language, kind)
    library = {
        "whisper-english": lambda: EnglishTextNormalizer(),
        "whisper-basic": lambda: BasicTextNormalizer(split_letters=False),
        "whisper-basic-marks": lambda: BasicTextNormalizer(split_letters=False, preserve_marks=True),
    }[name.removesuffix("-nospace")]()
    texts = ["Mr. Smith paid $20.", "ok", "It's 5 o'clock; twenty-five [noise] dollars!", "नमस्ते दुनिया", "你好，世界。"]
    texts += ["Colour, 1,000 (sic) times. " * 100]  # over the remembered length
    for _ in range(2):
        for text in texts:
            expected = library(text)
            assert norm(text) == ("".join(expected.split()) if name.endswith("-nospace") else expected)
