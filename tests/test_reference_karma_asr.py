"""semantic_wer, semantic_cer and entity_wer against KARMA's asr_semantic_metric, run on the same cases.

The expected values in tests/fixtures/references/semantic_wer.json and entity_wer.json were produced
by running KARMA's own code (eka-care/KARMA-OpenMedEvalKit; the fixture's ``source`` names the commit,
files, functions and command). They are unrounded: KARMA's ``evaluate`` was run with the module's
``round`` shadowed; ``karma_reported`` is what KARMA prints (3 decimals).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.base import Metric

FIXTURES = Path(__file__).parent / "fixtures" / "references"
SEMANTIC = json.loads((FIXTURES / "semantic_wer.json").read_text(encoding="utf-8"))
ENTITY = json.loads((FIXTURES / "entity_wer.json").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = SEMANTIC["cases"]


def _metric(name: str, language: str, **options: Any) -> Metric:
    return METRICS.get(name)(language=language, **options)


def _id(case: dict[str, Any]) -> str:
    return f"{case['language']}:{case['reference']!s:.30}|{case['prediction']:.30}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_each_case_equals_karma(case: dict[str, Any]) -> None:
    sample = Sample(id="s", reference=case["reference"])
    wer = _metric("semantic_wer", case["language"]).score(case["prediction"], sample)
    cer = _metric("semantic_cer", case["language"]).score(case["prediction"], sample)
    if "error" in case:  # KARMA's aligner raised and KARMA skipped the utterance: a failed sample here
        assert wer.failure == cer.failure == FailureReason.METRIC_ERROR
        return
    assert wer.failure is None and cer.failure is None
    assert wer.score == pytest.approx(case["semantic_wer"], abs=1e-12)
    assert cer.score == pytest.approx(case["semantic_cer"], abs=1e-12)
    assert [g[:3] for g in wer.details["alignment"]] == case["groups"]
    edits, words, *_, subs, dels, ins, matches = wer.stats[:2] + wer.stats[4:]
    assert (words, subs, dels, ins, matches) == (
        case["reference_words"],
        case["substitutions"],
        case["deletions"],
        case["insertions"],
        case["matches"],
    )
    assert edits == subs + dels + ins
    for name, scored in (("semantic_wer", wer), ("semantic_cer", cer)):
        assert scored.score is not None and abs(scored.score - case["karma_reported"][name]) <= 0.0005 + 1e-12


@pytest.mark.parametrize("language", ["en", "hi"])
def test_the_corpus_pools_counts_as_karma_does(language: str) -> None:
    expected = SEMANTIC["corpus"][language]
    results = {}
    for name in ("semantic_wer", "semantic_cer"):
        metric = _metric(name, language)
        accumulator = ScoreAccumulator(metric)
        for i, case in enumerate(c for c in CASES if c["language"] == language):
            accumulator.add(metric.score(case["prediction"], Sample(id=str(i), reference=case["reference"])))
        results[name] = result = accumulator.result()
        assert result.score == pytest.approx(expected[name], abs=1e-12)
        assert abs(result.score - expected["karma_reported"][name]) <= 0.0005 + 1e-12
        assert result.n == expected["n"] and result.ci_method == "bootstrap"
        assert result.ci_low <= result.score <= result.ci_high
    # semantic_wer reports KARMA's other figure, the pooled semantic CER, in its details (and the reverse)
    assert results["semantic_wer"].details["semantic_cer"] == pytest.approx(expected["semantic_cer"], abs=1e-12)
    assert results["semantic_cer"].details["semantic_wer"] == pytest.approx(expected["semantic_wer"], abs=1e-12)


def test_the_issues_examples() -> None:
    # सिर दर्द / सिरदर्द: one group of two reference words, a match: 0 (plain WER: 2 / 2)
    assert _metric("semantic_wer", "hi").score("सिरदर्द", Sample(id="s", reference="सिर दर्द")).score == 0
    # 1000mg said as words: 0; "mg" for "1000 milligrams": 1 substitution (one group) over 2 words
    en = _metric("semantic_wer", "en")
    assert en.score("take one thousand milligram daily", Sample(id="s", reference="take 1000mg daily")).score == 0
    assert en.score("mg", Sample(id="s", reference="1000 milligrams")).score == pytest.approx(0.5)


def test_asr_semantic_metric_is_karmas_name() -> None:
    assert METRICS.canonical("asr_semantic_metric") == "semantic_wer"


def test_a_language_karma_has_no_aligner_for_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="English and Hindi only"):
        _metric("semantic_wer", "fr")
    assert _metric("semantic_cer", "hi_IN").describe()["aligner"] == "hi"
    assert METRICS.get("semantic_wer")(language=None).describe()["aligner"] == "en"  # KARMA's default
    with pytest.raises(ConfigError, match="cer_threshold"):
        _metric("semantic_wer", "en", cer_threshold=2)


# -- entity (keyword) WER ---------------------------------------------------------------------------------


def _entity_result(name: str, **options: Any) -> tuple[list[Any], Any]:
    spec = ENTITY["sets"][name]
    metric = _metric("entity_wer", spec["language"], **options)
    accumulator = ScoreAccumulator(metric)
    scores = []
    for i, case in enumerate(spec["cases"]):
        sample = Sample(id=str(i), reference=case["reference"], meta={"entities": case["entities"]})
        scored = metric.score(case["prediction"], sample)
        scores.append(scored.score)
        accumulator.add(scored)
    return scores, accumulator.result()


@pytest.mark.parametrize("name", sorted(ENTITY["sets"]))
def test_entity_wer_per_sample_equals_karma_on_a_one_sample_dataset(name: str) -> None:
    scores, _ = _entity_result(name)
    for score, case in zip(scores, ENTITY["sets"][name]["cases"], strict=True):
        if case["entity_wer"] is None:  # KARMA computes none without a keyword
            assert score is None
        else:
            assert score == pytest.approx(case["entity_wer"], abs=1e-12)
            assert abs(score - case["karma_reported"]) <= 0.0005 + 1e-12


@pytest.mark.parametrize("name", sorted(ENTITY["sets"]))
def test_entity_wer_corpus_with_the_dataset_keyword_list_equals_karma(name: str) -> None:
    spec = ENTITY["sets"][name]
    _, result = _entity_result(name, entity_words=spec["dataset_keywords"])
    assert result.score == pytest.approx(spec["corpus"]["entity_wer"], abs=1e-12)
    assert result.ci_method == "bootstrap" and result.ci_low <= result.score <= result.ci_high


@pytest.mark.parametrize("name", sorted(ENTITY["sets"]))
def test_entity_wer_corpus_by_default(name: str) -> None:
    spec = ENTITY["sets"][name]
    _, result = _entity_result(name)
    if name.endswith("_disjoint"):  # no sample says another's keyword: each sample's own list is KARMA's
        assert result.score == pytest.approx(spec["corpus"]["entity_wer"], abs=1e-12)
    else:  # a keyword tagged in one sample is counted in another only with the dataset-wide list
        assert result.score < spec["corpus"]["entity_wer"]


def test_entity_wer_without_any_keyword_is_nan_and_with_unaligned_keywords_zero() -> None:
    metric = _metric("entity_wer", "en")
    accumulator = ScoreAccumulator(metric)
    accumulator.add(metric.score("a b", Sample(id="a", reference="a b", meta={})))
    assert math.isnan(accumulator.result().score)  # KARMA: no entity_wer at all
    # "fever," is the token; the keyword read at the offsets is "fever": never a one-word group: 0 (KARMA's 0.0)
    scored = metric.score(
        "fever", Sample(id="b", reference="fever, cold", meta={"entities": "[['fever', 'symptoms', [[0, 5]]]]"})
    )
    assert scored.score == 0 and scored.stats[1] == 0 and scored.stats[2] == 1


def test_entity_shapes_beyond_karmas_string_give_the_same_keywords() -> None:
    metric = _metric("entity_wer", "en", entities_key="medical_entities")
    reference, prediction = "give paracetamol 500mg twice", "give paracetemol five hundred milligram twice"
    shapes: list[Any] = [
        "[['paracetamol', 'drugs', [[5, 16]]], ['500mg', 'dosage', [[17, 22]]]]",
        [["paracetamol", "drugs", [[5, 16]]], ["500mg", "dosage", [[17, 22]]]],
        ["paracetamol", "500mg"],
        [{"text": "paracetamol", "type": "drugs"}, {"text": "500mg"}],
        {"drugs": ["paracetamol"], "dosage": ["500mg"]},
        json.dumps({"drugs": ["paracetamol"], "dosage": ["500mg"]}),
    ]
    for shape in shapes:
        scored = metric.score(prediction, Sample(id="s", reference=reference, meta={"medical_entities": shape}))
        assert scored.score == pytest.approx(0.5), shape  # paracetemol: 1 substitution; 500mg: a match
    broken = metric.score(prediction, Sample(id="s", reference=reference, meta={"medical_entities": [["a", "b", [1]]]}))
    assert broken.failure == FailureReason.METRIC_ERROR
    with pytest.raises(ConfigError, match="entities_key"):
        _metric("entity_wer", "en", entities_key="")
    with pytest.raises(ConfigError, match="entity_words"):
        _metric("entity_wer", "en", entity_words=[1])


@pytest.mark.parametrize("name", ["semantic_wer", "semantic_cer", "entity_wer"])
def test_the_alignment_runs_off_the_event_loop(name: str) -> None:
    """The alignment is quadratic (0.05-0.5 s a sample): scored on the loop it would stall every engine's requests."""
    import asyncio
    import threading

    metric = METRICS.get(name)(language="en")
    scored_in: list[int] = []
    original = metric.score

    def recording(prediction: str, sample: Sample) -> Any:
        scored_in.append(threading.get_ident())
        return original(prediction, sample)

    metric.score = recording  # type: ignore[method-assign]

    async def main() -> Any:
        return await metric.ascore("the patient took five mg", Sample(id="s", reference="the patient took 5 mg"))

    assert asyncio.run(main()) is not None
    assert scored_in and scored_in[0] != threading.get_ident()
