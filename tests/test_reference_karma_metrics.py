"""asr_metric, semantic_wer_metric, rouge, numeric_tolerance, silence_accuracy, harm_detection_accuracy and
general_text_processor against KARMA's own classes, run on tables of cases.

tests/fixtures/references/karma_*.json: made by tests/fixtures/references/make_karma_fixtures.py, which imports
KARMA's metric and processor classes from its repository at the commit each table's "reference" block names and
calls them as KARMA's Benchmark.compute_metrics does (one case alone for the per-sample value, all cases for the
corpus).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.table import metric_infos
from evalkit.processing.processors import build_processors

REFERENCES = Path(__file__).parent / "fixtures" / "references"


def _table(name: str) -> dict[str, Any]:
    return json.loads((REFERENCES / f"karma_{name}.json").read_text(encoding="utf-8"))


ASR = _table("asr_metric")
ROUGE = _table("rouge")
NUMERIC = _table("numeric_tolerance")
SILENCE = _table("silence_accuracy")
HARM = _table("harm_detection_accuracy")
PROCESSOR = _table("general_text_processor")
SEMANTIC = _table("semantic_wer_metric")
TABLES = (ASR, ROUGE, NUMERIC, SILENCE, HARM, PROCESSOR, SEMANTIC)


def _corpus(name: str, scored: list[tuple[str, Sample]], **options: Any) -> Any:
    metric = METRICS.get(name)(language="en", **options)
    acc = ScoreAccumulator(metric)
    for prediction, sample in scored:
        acc.add(metric.score(prediction, sample))
    return acc.result()


def test_each_table_says_where_it_came_from_and_is_not_one_sided() -> None:
    for table in TABLES:
        ref = table["reference"]
        assert ref["repository"] == "eka-care/KARMA-OpenMedEvalKit" and len(ref["commit"]) == 40 and ref["command"]
    assert len({c["wer"] for c in ASR["cases"]}) > 3
    assert {c["score"] for c in NUMERIC["cases"]} == {0.0, 1.0}
    assert {c["score"] for c in SILENCE["cases"]} == {0.0, 1.0}
    assert {c["score"] for c in HARM["cases"]} == {0.0, 1.0}
    assert metric_infos()["asr_metric"].reference.version.startswith("commit " + ASR["reference"]["commit"])


# -- asr_metric ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ASR["cases"], ids=lambda c: c["reference"][:24])
def test_asr_metric_per_utterance_is_karmas(case: dict[str, Any]) -> None:
    scored = METRICS.get("asr_metric")(language="en").score(
        case["prediction"], Sample(id="x", reference=case["reference"])
    )
    assert scored.score == pytest.approx(case["wer"], abs=1e-12)
    assert scored.details["cer"] == pytest.approx(case["cer"], abs=1e-12)


def test_asr_metric_corpus_is_karmas_pooled_wer_and_cer() -> None:
    pairs = [(c["prediction"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(ASR["cases"])]
    result = _corpus("asr_metric", pairs)
    assert result.score == pytest.approx(ASR["corpus"]["wer"], abs=1e-12)
    assert result.details["cer"] == pytest.approx(ASR["corpus"]["cer"], abs=1e-12)
    assert result.ci_method == "bootstrap" and result.ci_low <= result.score <= result.ci_high


def test_asr_metric_refuses_empty_references_and_options() -> None:
    metric = METRICS.get("asr_metric")(language="en")
    assert metric.score("words", Sample(id="e", reference="  ")).failure == FailureReason.NO_REFERENCE
    assert metric.score("words", Sample(id="n", reference=None)).failure == FailureReason.NO_REFERENCE
    with pytest.raises(ConfigError, match="unknown option"):
        METRICS.get("asr_metric")(language="en", normalizer="none")


@pytest.mark.parametrize("case", SEMANTIC["cases"], ids=lambda c: c["reference"][:24])
def test_semantic_wer_metric_per_pair_is_karmas(case: dict[str, Any]) -> None:
    metric = METRICS.get("semantic_wer_metric")(language="en")
    scored = metric.score(case["prediction"], Sample(id="x", reference=case["reference"]))
    assert scored.details == {
        "normalized_reference": case["normalized_reference"],
        "normalized_prediction": case["normalized_prediction"],
    }
    assert scored.score == pytest.approx(case["wer"], abs=1e-12)


def test_semantic_wer_metric_corpus_is_karmas() -> None:
    pairs = [(c["prediction"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(SEMANTIC["cases"])]
    result = _corpus("semantic_wer_metric", pairs)
    assert result.score == pytest.approx(SEMANTIC["corpus"], abs=1e-12)
    assert result.ci_method == "bootstrap" and result.ci_low <= result.score <= result.ci_high


def test_semantic_wer_metric_refuses_other_languages_and_empty_references() -> None:
    with pytest.raises(ConfigError, match="English only.*transliteration.*semantic_wer"):
        METRICS.get("semantic_wer_metric")(language="hi")
    metric = METRICS.get("semantic_wer_metric")(language="en")
    assert metric.score("x", Sample(id="e", reference=" ")).failure == FailureReason.NO_REFERENCE
    # nothing left of the reference once punctuation goes: jiwer (and KARMA) stop, evalkit fails the sample
    assert metric.score("x", Sample(id="p", reference="...")).failure == FailureReason.METRIC_ERROR


# -- rouge --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ROUGE["cases"], ids=lambda c: c["reference"][:24] or "empty")
def test_rouge_per_pair_is_karmas(case: dict[str, Any]) -> None:
    scored = METRICS.get("rouge")(language="en").score(case["prediction"], Sample(id="x", reference=case["reference"]))
    for kind in ("rouge1", "rouge2", "rougeL"):
        assert scored.details[kind] == pytest.approx(case[kind], abs=1e-12)
    assert scored.score == scored.details["rougeL"]


def test_rouge_corpus_is_the_mean_karmas_bootstrap_median_estimates() -> None:
    pairs = [(c["prediction"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(ROUGE["cases"])]
    result = _corpus("rouge", pairs, rouge_type="rouge1")
    for kind in ("rouge1", "rouge2", "rougeL"):
        mean = sum(c[kind] for c in ROUGE["cases"]) / len(ROUGE["cases"])
        assert result.details[kind] == pytest.approx(mean, abs=1e-12)
        assert result.details[kind] == pytest.approx(ROUGE["corpus_bootstrap_mid_seed0"][kind], abs=0.01)
    assert result.score == result.details["rouge1"]
    assert 0 <= result.ci_low <= result.score <= result.ci_high <= 1


def test_rouge_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="rouge_types"):
        METRICS.get("rouge")(language="en", rouge_types=["rouge9"])
    with pytest.raises(ConfigError, match="rouge_type"):
        METRICS.get("rouge")(language="en", rouge_types=["rouge1"], rouge_type="rougeL")
    plain = METRICS.get("rouge")(language="en", use_stemmer=False).score("runs", Sample(id="s", reference="running"))
    stemmed = METRICS.get("rouge")(language="en").score("runs", Sample(id="s", reference="running"))
    assert (plain.score, stemmed.score) == (0.0, 1.0)


# -- numeric_tolerance, silence_accuracy, harm_detection_accuracy --------------------------------------


def _numeric_sample(i: int, case: dict[str, Any]) -> Sample:
    meta = {} if case["tolerance"] is None else {"tolerance": case["tolerance"]}
    return Sample(id=str(i), reference=case["reference"], meta=meta)


@pytest.mark.parametrize("i", range(len(NUMERIC["cases"])))
def test_numeric_tolerance_per_answer_is_karmas(i: int) -> None:
    case = NUMERIC["cases"][i]
    scored = METRICS.get("numeric_tolerance")(language="en").score(case["prediction"], _numeric_sample(i, case))
    assert scored.score == case["score"]


def test_numeric_tolerance_corpus_is_karmas() -> None:
    pairs = [(c["prediction"], _numeric_sample(i, c)) for i, c in enumerate(NUMERIC["cases"])]
    assert _corpus("numeric_tolerance", pairs).score == pytest.approx(NUMERIC["corpus"]["numeric_tolerance"])


@pytest.mark.parametrize("case", SILENCE["cases"], ids=lambda c: repr(c["prediction"]))
def test_silence_accuracy_per_transcript_is_karmas(case: dict[str, Any]) -> None:
    assert (
        METRICS.get("silence_accuracy")(language="en").score(case["prediction"], Sample(id="s")).score == case["score"]
    )


def test_silence_accuracy_corpus_is_karmas() -> None:
    pairs = [(c["prediction"], Sample(id=str(i))) for i, c in enumerate(SILENCE["cases"])]
    assert _corpus("silence_accuracy", pairs).score == pytest.approx(SILENCE["corpus"])


def _harm_samples() -> list[tuple[str, Sample]]:
    return [
        (c["prediction"], Sample(id=str(i), reference="x", meta={"is_harmful": c["is_harmful"]}))
        for i, c in enumerate(HARM["cases"])
    ]


def test_harm_detection_accuracy_per_answer_corpus_and_confusion_are_karmas() -> None:
    metric = METRICS.get("harm_detection_accuracy")(language="en")
    for (prediction, sample), case in zip(_harm_samples(), HARM["cases"]):
        assert metric.score(prediction, sample).score == case["score"]
    result = _corpus("harm_detection_accuracy", _harm_samples())
    karma = HARM["corpus"]
    assert round(result.score, 4) == karma["harm_detection_accuracy"]
    for key in ("true_positives", "true_negatives", "false_positives", "false_negatives", "total_harmful"):
        assert result.details[key] == karma[key]
    for key in ("true_positive_rate", "true_negative_rate", "false_positive_rate", "false_negative_rate"):
        assert round(result.details[key], 4) == karma[key]


def test_harm_detection_reads_the_flag_named_by_harm_field() -> None:
    metric = METRICS.get("harm_detection_accuracy")(language="en", harm_field="unsafe")
    assert metric.score("This is unsafe", Sample(id="h", meta={"unsafe": True, "is_harmful": False})).score == 1.0


# -- general_text_processor ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", PROCESSOR["cases"], ids=lambda c: ",".join(c["arguments"]) or "defaults")
def test_general_text_processor_is_karmas(case: dict[str, Any]) -> None:
    chain = build_processors([{"name": "general_text_processor", **case["arguments"]}], "test")
    assert [chain(text) for text in case["texts"]] == case["processed"]


def test_general_text_processor_arguments_are_checked() -> None:
    with pytest.raises(ConfigError, match="use_punc.*true or false"):
        build_processors([{"name": "general_text_processor", "use_punc": "yes"}], "cfg")
    with pytest.raises(ConfigError, match="unknown argument"):
        build_processors([{"name": "general_text_processor", "lowercase": True}], "cfg")
