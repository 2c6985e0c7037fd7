"""AU-Harness's text metrics under AU-Harness's names against AU-Harness's own classes, per sample and corpus.

tests/fixtures/references/auharness_{word_error_rate,bleu,bertscore,comet}.json come from running AU-Harness's
metric classes as its engine loads them (tests/fixtures/references/make_auharness_text.py; each "reference" block
names the commit, the shim and the command). bert_score and comet were stand-in modules there (their models cannot
be had here): the same stand-ins are given to evalkit, so what is compared is what reaches them and how their
values are rounded and averaged. meteor has its own file (tests/test_reference_meteor.py).
"""

from __future__ import annotations

import json
import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.auharness import translation_models
from evalkit.metrics.auharness.text import smart_round, warn_english_normalisation

pytest.importorskip("num2words", reason="AU-Harness's normalisation needs num2words (the auharness extra)")

REFERENCES = Path(__file__).parent / "fixtures" / "references"


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REFERENCES / f"auharness_{name}.json").read_text("utf-8"))
    return data


WER = _fixture("word_error_rate")
BLEU = _fixture("bleu")
BERTSCORE = _fixture("bertscore")
COMET = _fixture("comet")


@pytest.mark.parametrize("fixture", [WER, BLEU, BERTSCORE, COMET], ids=["wer", "bleu", "bertscore", "comet"])
def test_each_fixture_says_where_it_came_from(fixture: dict[str, Any]) -> None:
    ref = fixture["reference"]
    assert ref["repository"] == "ServiceNow/AU-Harness" and len(ref["commit"]) == 40
    assert {"file", "run_with", "shim", "command"} <= set(ref)


# --- word_error_rate ------------------------------------------------------------------------------------------------


def _wer(language: str) -> Any:
    return METRICS.get("auharness:word_error_rate")(language=language)


@pytest.mark.parametrize("case", WER["cases"], ids=lambda c: f"{c['language']}:{c['reference'][:24]!r}")
def test_word_error_rate_scores_each_pair_as_au_harness(case: dict[str, Any]) -> None:
    scored = _wer(case["language"]).score(case["answer"], Sample(id="1", reference=case["reference"]))
    assert scored.details is not None
    assert scored.details["normalized_reference"] == case["normalized_reference"]
    assert scored.details["normalized_prediction"] == case["normalized_answer"]
    assert scored.stats[:2] == (case["incorrect"], case["total"])
    assert scored.score == pytest.approx(case["wer"], abs=1e-12)


def _wer_corpus(cases: list[dict[str, Any]], language: str) -> tuple[float, dict[str, Any]]:
    metric = _wer(language)
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(cases):
        acc.add(metric.score(case["answer"], Sample(id=str(i), reference=case["reference"])))
    result = acc.result()
    return result.score, result.details


@pytest.mark.parametrize("language", sorted(WER["by_language"]))
def test_word_error_rate_overall_and_average_are_au_harness_figures_per_language(language: str) -> None:
    expected = WER["by_language"][language]
    assert expected["metric_language"] == "en"  # AU-Harness's loader never passes the task's language
    score, details = _wer_corpus([c for c in WER["cases"] if c["language"] == language], language)
    assert smart_round(score * 100, 2) == expected["overall_wer"]
    assert smart_round(details["overall_wer"] * 100, 2) == expected["overall_wer"]
    assert smart_round(details["average_sample_wer"] * 100, 2) == expected["average_sample_wer"]


def test_word_error_rate_over_every_case() -> None:
    score, details = _wer_corpus(WER["cases"], "en")
    assert smart_round(score * 100, 2) == WER["all"]["overall_wer"]
    assert smart_round(details["average_sample_wer"] * 100, 2) == WER["all"]["average_sample_wer"]


def test_evalkit_word_error_rate_stays_evalkits_own_beside_au_harness() -> None:
    """The issue's case: the same pair is 0 errors by evalkit's definition and half the words by AU-Harness's."""
    sample = Sample(id="1", reference="mister brown paid twenty one dollars")
    assert METRICS.get("word_error_rate")(language="en").score("Mr. Brown paid $21", sample).score == 0.0
    assert _wer("en").score("Mr. Brown paid $21", sample).score == 0.5


def test_the_english_normalisation_of_other_text_is_said_once_naming_evalkits_metric(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warn_english_normalisation.cache_clear()
    with caplog.at_level(logging.WARNING, logger="evalkit"):
        _wer("en")
        assert not caplog.records
        for language in ("hi", "hi", "ta"):
            _wer(language).score("नमस्ते", Sample(id="1", reference="नमस्ते"))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2  # once for Hindi, once for Tamil: never per sample
    assert "'auharness:word_error_rate' on hi text" in said[0] and "evalkit's own 'word_error_rate'" in said[0]
    warn_english_normalisation.cache_clear()


# --- bleu -----------------------------------------------------------------------------------------------------------

#: the language each AU-Harness task name means (evalkit reads the tokenizer from it)
BLEU_LANGUAGES = {"covost2_de_en": "de-en", "covost2_en_zh-CN": "en-zh", "covost2_en_de": "en-de"}


@pytest.mark.parametrize("key", sorted(BLEU["sets"]))
def test_bleu_is_au_harness_figure_per_sample_and_corpus(key: str) -> None:
    spec = BLEU["sets"][key]
    metric = METRICS.get("auharness:bleu")(language=BLEU_LANGUAGES[spec["task_name"]])
    assert metric.tokenizer == spec["tokenizer"]
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(spec["cases"]):
        scored = metric.score(case["answer"], Sample(id=str(i), reference=case["reference"]))
        assert scored.details is not None
        assert scored.details["normalized_prediction"] == case["normalized_answer"]
        assert scored.details["normalized_reference"] == case["normalized_reference"]
        assert scored.score == pytest.approx(case["sentence_bleu"], abs=1e-9)
        acc.add(scored)
    assert smart_round(acc.result().score, 2) == spec["corpus"]


def test_bleu_stays_evalkits_own_beside_au_harness() -> None:
    """The issue's case: 100 by AU-Harness's definition (both normalised), about 30 by evalkit's own."""
    sample = Sample(id="1", reference="I have three apples.")
    ours = METRICS.get("bleu")(language="en").score("I have 3 apples.", sample).score
    theirs = METRICS.get("auharness:bleu")(language="en").score("I have 3 apples.", sample).score
    assert theirs == pytest.approx(100.0) and ours is not None and ours < 50


def test_bleu_tokenizer_zh_only_for_a_translation_into_chinese() -> None:
    warn_english_normalisation.cache_clear()
    assert METRICS.get("auharness:bleu")(language="zh").tokenizer == "13a"  # an ASR set: AU-Harness's 13a
    assert METRICS.get("auharness:bleu")(language="zh-en").tokenizer == "13a"
    assert METRICS.get("auharness:bleu")(language="en-zh").tokenizer == "zh"
    warn_english_normalisation.cache_clear()


# --- bertscore and comet through the fixtures' stand-ins ------------------------------------------------------------


def _overlap(one: str, other: str) -> float:
    """The stand-ins' score, as make_auharness_text.py defines it: the share of ``one``'s words in ``other``."""
    words = one.split()
    return sum(w in other.split() for w in words) / len(words) if words else 0.0


def test_bertscore_calls_rounds_and_averages_as_au_harness(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []
    module = types.ModuleType("bert_score")

    def score(cands: list[str], refs: list[str], **options: Any) -> tuple[list[float], list[float], list[float]]:
        calls.append({"cands": cands, "refs": refs, **options})
        return [0.0], [0.0], [_overlap(cands[0], refs[0])]

    module.score = score  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bert_score", module)
    model_dir = tmp_path / "bert-base-multilingual-cased"
    model_dir.mkdir()
    metric = METRICS.get("bertscore")(language="en", model=str(model_dir))
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(BERTSCORE["cases"]):
        scored = metric.score(case["answer"], Sample(id=str(i), reference=case["reference"]))
        assert scored.score is not None and scored.score * 100 == pytest.approx(case["score"], abs=1e-9)
        acc.add(scored)
    theirs = BERTSCORE["calls"]
    assert [(c["cands"], c["refs"]) for c in calls] == [(c["cands"], c["refs"]) for c in theirs]
    assert {c["model_type"] for c in theirs} == {translation_models.BERTSCORE_MODEL}
    assert smart_round(acc.result().score * 100, 2) == BERTSCORE["corpus"]


class _CometModel:
    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    def predict(self, data: list[dict[str, str]], batch_size: int, gpus: int) -> Any:
        self.seen.append({"data": data, "batch_size": batch_size, "gpus": gpus})
        return types.SimpleNamespace(scores=[_overlap(d["mt"], d["ref"]) for d in data])


def test_comet_sends_and_averages_as_au_harness(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[Any] = []
    module = types.ModuleType("comet")
    module.load_from_checkpoint = lambda path: _CometModel(seen)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "comet", module)
    translation_models._comet_model.cache_clear()
    checkpoint = tmp_path / "model.ckpt"
    checkpoint.write_bytes(b"weights")
    metric = METRICS.get("comet")(language="de-en", checkpoint=str(checkpoint))
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(COMET["cases"]):
        sample = Sample(id=str(i), reference=case["reference"], meta={"source": case["source"]})
        scored = metric.score(case["answer"], sample)
        assert scored.score == pytest.approx(case["score"], abs=1e-12)
        acc.add(scored)
    (theirs,) = COMET["calls"]
    assert [s["data"][0] for s in seen] == theirs["data"]  # AU-Harness sends them all at once, batch size 1
    assert {(s["batch_size"], s["gpus"]) for s in seen} == {(theirs["batch_size"], theirs["gpus"])}
    assert smart_round(acc.result().score * 100, 2) == COMET["corpus"]
    translation_models._comet_model.cache_clear()
