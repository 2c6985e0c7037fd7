"""BLEU/chrF/TER from summed per-sample stats equal sacrebleu's corpus scores."""

from __future__ import annotations

import random

import numpy as np
import pytest
import sacrebleu

from evalkit.data.sample import Sample
from evalkit.metrics.table import METRICS
from evalkit.metrics.text.bleu import bleu_tokenizer_for, reference_streams

VOCAB = [
    "The",
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    ".",
    ",",
    "!",
    "?",
    "quickly",
    "house",
    "red",
    "blue",
    "runs",
    "jumped",
    "over",
    "lazy",
    "fox",
    "I",
    "you",
    "it's",
    "U.S.",
    "$5",
    "(maybe)",
    "don't",
    "Hello",
    "world;",
    "3.5",
    "km",
    "well-known",
    '"quoted"',
]


def _perturb(rng: random.Random, words: list[str]) -> list[str]:
    out = []
    for w in words:
        roll = rng.random()
        if roll < 0.1:
            continue
        out.append(rng.choice(VOCAB) if roll < 0.25 else w)
        if rng.random() < 0.05:
            out.append(rng.choice(VOCAB))
    return out


def _corpus(seed: int = 0, count: int = 200) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    hyps, refs = [], []
    for _ in range(count):
        base = [rng.choice(VOCAB) for _ in range(rng.randint(0, 20))]
        hyps.append(" ".join(_perturb(rng, base)))
        refs.append([" ".join(_perturb(rng, base)) for _ in range(rng.choice([1, 1, 1, 2, 3]))])
    return hyps, refs


def _ours(name: str, hyps: list[str], refs: list[list[str]], language: str = "en", **options: object):
    metric = METRICS.get(name)(language=language, **options)
    scores = [
        metric.score(h, Sample(id=str(i), reference=r if len(r) > 1 else r[0]))
        for i, (h, r) in enumerate(zip(hyps, refs))
    ]
    rows = np.array([s.stats for s in scores])
    return float(metric.corpus(rows.sum(axis=0))), metric, rows, scores


@pytest.mark.parametrize(
    ("name", "reference", "kwargs"),
    [
        ("bleu", sacrebleu.corpus_bleu, {}),
        ("chrf", sacrebleu.corpus_chrf, {}),
        ("chrf++", sacrebleu.corpus_chrf, {"word_order": 2}),
        ("ter", sacrebleu.corpus_ter, {}),
    ],
)
def test_corpus_scores_equal_sacrebleu_multi_reference(name: str, reference, kwargs) -> None:
    hyps, refs = _corpus(0)
    ours, metric, _, _ = _ours(name, hyps, refs)
    expected = reference(hyps, reference_streams(refs), **kwargs).score
    assert ours == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert 1.0 < ours < 100.0 or name == "ter"
    assert "nrefs:var" in metric.describe()["signature"]


@pytest.mark.parametrize(
    ("name", "reference"),
    [("bleu", sacrebleu.corpus_bleu), ("chrf", sacrebleu.corpus_chrf), ("ter", sacrebleu.corpus_ter)],
)
def test_corpus_scores_equal_sacrebleu_single_reference(name: str, reference) -> None:
    hyps, refs = _corpus(1)
    refs = [r[:1] for r in refs]
    ours, metric, _, _ = _ours(name, hyps, refs)
    assert ours == pytest.approx(reference(hyps, reference_streams(refs)).score, rel=1e-12, abs=1e-12)
    assert "nrefs:1|" in metric.describe()["signature"]


@pytest.mark.parametrize("smooth_method", ["exp", "none", "floor", "add-k"])
@pytest.mark.parametrize("effective_order", [False, True])
def test_bleu_smoothing_variants(smooth_method: str, effective_order: bool) -> None:
    hyps, refs = _corpus(2, 30)
    ours, _, _, _ = _ours("bleu", hyps, refs, smooth_method=smooth_method, effective_order=effective_order)
    expected = sacrebleu.corpus_bleu(
        hyps, reference_streams(refs), smooth_method=smooth_method, use_effective_order=effective_order
    ).score
    assert ours == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_sample_scores_are_sentence_scores() -> None:
    hyps, refs = _corpus(3, 40)
    _, _, _, bleu = _ours("bleu", hyps, refs)
    _, _, _, chrf = _ours("chrf", hyps, refs)
    for h, r, b, c in zip(hyps, refs, bleu, chrf):
        assert b.score == pytest.approx(sacrebleu.sentence_bleu(h, r).score, rel=1e-12, abs=1e-12)
        assert c.score == pytest.approx(sacrebleu.sentence_chrf(h, r).score, rel=1e-12, abs=1e-12)


def test_corpus_is_vectorized_over_rows() -> None:
    hyps, refs = _corpus(4, 60)
    for name in ("bleu", "chrf", "ter"):
        _, metric, rows, _ = _ours(name, hyps, refs)
        rng = np.random.default_rng(0)
        batch = np.stack([rows[rng.integers(0, len(rows), len(rows))].sum(axis=0) for _ in range(7)])
        values = metric.corpus(batch)
        assert values.shape == (7,)
        for i in range(7):
            assert values[i] == float(metric.corpus(batch[i]))


def test_tokenizer_by_language() -> None:
    assert bleu_tokenizer_for("en") == "13a"
    assert bleu_tokenizer_for(None) == "13a"
    assert bleu_tokenizer_for("zh-CN") == "zh"
    assert bleu_tokenizer_for("en-zh") == "zh"
    assert bleu_tokenizer_for("th") == "char"
    assert bleu_tokenizer_for("ja") in ("ja-mecab", "char")
    assert bleu_tokenizer_for("ko") in ("ko-mecab", "char")
    assert METRICS.get("bleu")(language="en", tokenize="intl").describe()["tokenizer"] == "intl"


@pytest.mark.parametrize(("language", "tokenize"), [("zh", "zh"), ("th", "char")])
def test_spaceless_bleu_equals_sacrebleu_with_that_tokenizer(language: str, tokenize: str) -> None:
    rng = random.Random(5)
    alphabet = (
        list("我你他是的了在有人这中大来上国个到说") if language == "zh" else list("กขคงจฉชซญดตถทนบปผพฟมยรลวสหอฮ")
    )
    refs = ["".join(rng.choice(alphabet) for _ in range(rng.randint(3, 25))) for _ in range(80)]
    hyps = ["".join(c for c in r if rng.random() > 0.15) for r in refs]
    ours, metric, _, _ = _ours("bleu", hyps, [[r] for r in refs], language=language)
    assert metric.describe()["tokenizer"] == tokenize
    assert ours == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], tokenize=tokenize).score, rel=1e-12)
    assert ours > 10


def test_ter_character_split_for_thai() -> None:
    metric = METRICS.get("ter")(language="th")
    assert metric.describe()["pre_tokenize"] == "char"
    score = metric.score("กขค", Sample(id="1", reference="กขคง"))
    assert score.stats == (1.0, 4.0)


def test_bleu_family_flags() -> None:
    assert METRICS.get("ter").higher_is_better is False
    assert METRICS.get("bleu").higher_is_better is True
    for name in ("bleu", "chrf", "ter"):
        assert METRICS.get(name).ci_method == "bootstrap"
