"""KARMA's ASR metrics (semantic_wer, semantic_cer, entity_wer, asr_semantic_metric) and processors with arguments.

Every value below is counted by hand from the Hindi sentences, with the arithmetic in the comments.
Words are what remains after Whisper's basic normaliser (punctuation such as the danda । removed);
characters are Unicode code points, spaces included (as jiwer.cer counts them). ज़ is written
decomposed (ज + nukta U+093C), as Whisper's NFKC step leaves it.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, evalkit_cli, model_entry, run, write_config

from evalkit.config import load_config
from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.base import Metric
from evalkit.plan import build_plan
from evalkit.processing.processors import PROCESSORS, build_processors
from evalkit.run.scoring import score_sample
from evalkit.testing import start_test_server

pytest.importorskip("indicnlp", reason="the indic extra: pip install 'evalkit[indic]'")
pytest.importorskip("indic_transliteration", reason="the indic extra: pip install 'evalkit[indic]'")

NUKTA = "\u093c"
JA_NUKTA = "ज" + NUKTA  # ज़
BUKHAR_NUKTA = "बु" + "ख" + NUKTA + "ार"  # बुख़ार

#: (reference, hypothesis) pairs; the comments give plain and semantic word edits / reference words
CASES = [
    # डॉक्टर/डोक्टर (chandra o ॉ vs o ो) and ज़रूरी/जरूरी (nukta): plain 2 S / 5 words; semantic 0 / 5
    (f"डॉक्टर ने {JA_NUKTA}रूरी दवा दी।", "डोक्टर ने जरूरी दवा दी"),
    # मरीज़/मरीज (nukta), २/2 (digit), बुख़ार/बुखार (nukta): plain 3 S / 7 words; semantic 0 / 7
    (f"मरी{JA_NUKTA} को २ दिन से {BUKHAR_NUKTA} है", "मरीज को 2 दिन से बुखार है"),
    # nothing to normalise: है/था is a real substitution in both: 1 S / 4 words
    ("सिर में दर्द है", "सिर में दर्द था"),
    # खाँसी/खांसी (chandrabindu vs anusvara) folds; दवा/दवाई and लिए/लिये stay errors: plain 3 / 6, semantic 2 / 6
    ("उसने दवा खाँसी के लिए ली", "उसने दवाई खांसी के लिये ली"),
]


def _sample(reference: str, index: int = 0, **meta: Any) -> Sample:
    return Sample(id=f"s{index}", reference=reference, meta={"index": index, **meta})


def _corpus(metric: Metric, pairs: list[tuple[str, str]], metas: list[dict[str, Any]] | None = None) -> Any:
    accumulator = ScoreAccumulator(metric)
    for i, (reference, hypothesis) in enumerate(pairs):
        score = metric.score(hypothesis, _sample(reference, i, **((metas or [{}] * len(pairs))[i])))
        assert score.failure is None, score
        accumulator.add(score)
    return accumulator.result()


def _metric(name: str, **options: Any) -> Metric:
    return METRICS.get(name)(language="hi", **options)


def test_semantic_wer_forgives_spelling_variants_that_plain_wer_counts() -> None:
    plain = [_metric("wer").score(h, _sample(r)).score for r, h in CASES]
    semantic = [_metric("semantic_wer").score(h, _sample(r)).score for r, h in CASES]
    assert plain == pytest.approx([2 / 5, 3 / 7, 1 / 4, 3 / 6])
    assert semantic == pytest.approx([0 / 5, 0 / 7, 1 / 4, 2 / 6])
    # where nothing is normalised (case 3) the two are equal
    assert semantic[2] == plain[2]


def test_the_corpus_value_pools_edits_over_reference_words_with_n_and_a_ci() -> None:
    plain = _corpus(_metric("wer"), CASES)
    semantic = _corpus(_metric("semantic_wer"), CASES)
    # plain: (2 + 3 + 1 + 3) / (5 + 7 + 4 + 6) = 9 / 22; semantic: (0 + 0 + 1 + 2) / 22 = 3 / 22
    assert plain.score == pytest.approx(9 / 22)
    assert semantic.score == pytest.approx(3 / 22)
    assert semantic.n == 4 and semantic.ci_method == "bootstrap"
    assert semantic.ci_low <= semantic.score <= semantic.ci_high
    assert semantic.details["edits"] == 3 and semantic.details["reference_words"] == 22
    assert semantic.details["normalizer"].startswith("indic-nlp+digits+whisper-basic")


def test_semantic_cer_counts_characters_after_the_same_normalisation() -> None:
    first, third = CASES[0], CASES[2]
    # case 1, plain: "डॉक्टर ने ज़रूरी दवा दी" is 6+1+2+1+6+1+3+1+2 = 23 characters (ज़ is ज + nukta);
    # the answer differs by ॉ->ो (1 S) and the missing nukta (1 D): 2 / 23
    assert _metric("cer").score(first[1], _sample(first[0])).score == pytest.approx(2 / 23)
    # semantic: the reference becomes "डोक्टर ने जरूरी दवा दी", equal to the answer: 0 / 22
    assert _metric("semantic_cer").score(first[1], _sample(first[0])).score == 0
    # case 3: "सिर में दर्द है" is 3+1+3+1+4+1+2 = 15 characters; है -> था is 2 S: 2 / 15 for both
    assert _metric("cer").score(third[1], _sample(third[0])).score == pytest.approx(2 / 15)
    assert _metric("semantic_cer").score(third[1], _sample(third[0])).score == pytest.approx(2 / 15)


def test_asr_semantic_metric_is_karmas_name_and_reports_the_semantic_cer_too() -> None:
    assert METRICS.canonical("asr_semantic_metric") == "semantic_wer"
    result = _corpus(_metric("asr_semantic_metric"), [CASES[0], CASES[2]])
    # WER (0 + 1) / (5 + 4) = 1/9; CER (0 + 2) / (22 + 15) = 2/37
    assert result.score == pytest.approx(1 / 9)
    assert result.details["semantic_cer"] == pytest.approx(2 / 37)


def test_normalisation_options_can_switch_each_step_off() -> None:
    reference, hypothesis = CASES[1]
    # numerals "keep": only २/2 remains an error: 1 / 7; remove_nuktas false: मरीज़, बुख़ार stay errors: 2 / 7
    assert _metric("semantic_wer", numerals="keep").score(hypothesis, _sample(reference)).score == pytest.approx(1 / 7)
    assert _metric("semantic_wer", remove_nuktas=False).score(hypothesis, _sample(reference)).score == pytest.approx(
        2 / 7
    )
    # सम्बन्ध/संबंध: nasal cluster -> anusvara by default (0 / 1), kept apart with do_nothing (1 / 1)
    assert _metric("semantic_wer").score("संबंध", _sample("सम्बन्ध")).score == 0
    assert _metric("semantic_wer", nasals_mode="do_nothing").score("संबंध", _sample("सम्बन्ध")).score == 1


def test_for_english_semantic_wer_equals_wer() -> None:
    pairs = [("the patient has a fever", "the patient had fever"), ("take two tablets", "take 2 tablets")]
    plain = _corpus(METRICS.get("wer")(language="en"), pairs)
    semantic = _corpus(METRICS.get("semantic_wer")(language="en"), pairs)
    assert semantic.score == plain.score


# -- entity WER ---------------------------------------------------------------------------------------

ENTITY_CASES = [
    # normalised reference: मरीज को पैरासिटामोल 500 मिलीग्राम दें; entity spans "पैरासिटामोल" (1 word) and
    # "500 मिलीग्राम" (2 words); the answer's पेरासिटामोल is 1 S, the rest hits: 1 / 3
    (
        f"मरी{JA_NUKTA} को पैरासिटामोल ५०० मिलीग्राम दें",
        "मरीज को पेरासिटामोल 500 मिलीग्राम दें",
        {"entities": ["पैरासिटामोल", "५०० मिलीग्राम"]},
    ),
    # entities grouped by type (KARMA's medical_entities): "खांसी की दवा" is 3 words, the answer drops
    # खांसी and की: 2 D / 3
    (
        "दिन में दो बार खाँसी की दवा लें",
        "दिन में दो बार दवा लें",
        {"entities": json.dumps({"drugs": ["खाँसी की दवा"], "symptoms": []}, ensure_ascii=False)},
    ),
    # no entity tagged: 0 entity words, weight 0
    ("ठीक है", "ठीक", {}),
    # a tagged entity that is not in the reference: unmatched, 0 entity words
    ("आराम करें", "आराम करें", {"entities": [{"text": "इबुप्रोफेन", "type": "drugs"}]}),
]


def test_entity_wer_counts_errors_on_entity_words_only() -> None:
    metric = _metric("entity_wer")
    scores = [metric.score(h, _sample(r, i, **meta)) for i, (r, h, meta) in enumerate(ENTITY_CASES)]
    assert [s.score for s in scores] == pytest.approx([1 / 3, 2 / 3, 0, 0])
    assert scores[0].details["entities"] == ["पैरासिटामोल", "500 मिलीग्राम"]
    assert scores[3].details["unmatched_entities"] == ["इबुप्रोफेन"]
    # the sentence-level semantic WER of case 1 is 1 / 6: the entity view is stricter
    assert _metric("semantic_wer").score(ENTITY_CASES[0][1], _sample(ENTITY_CASES[0][0])).score == pytest.approx(1 / 6)
    accumulator = ScoreAccumulator(metric)
    for score in scores:
        accumulator.add(score)
    result = accumulator.result()
    # corpus: (1 + 2) / (3 + 3) = 0.5 over n = 4 samples, 2 of which carry entity words
    assert result.score == pytest.approx(0.5) and result.n == 4
    assert result.details["entity_words"] == 6 and result.details["samples_with_entities"] == 2
    assert result.details["unmatched_entities"] == 1


def test_entity_wer_without_any_entity_word_is_nan_not_zero() -> None:
    metric = _metric("entity_wer")
    accumulator = ScoreAccumulator(metric)
    for i, (reference, hypothesis) in enumerate(CASES[:2]):
        accumulator.add(metric.score(hypothesis, _sample(reference, i)))
    result = accumulator.result()
    assert result.n == 2 and math.isnan(result.score) and result.details["entity_words"] == 0


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"nasals_mode": "all"}, "option 'nasals_mode' must be one of"),
        ({"remove_nukta": True}, "unknown option 'remove_nukta' (did you mean \"remove_nuktas\""),
        ({"numerals": "roman"}, "option 'numerals' must be one of ascii, keep"),
        ({"normalize_chandras": 1}, "option 'normalize_chandras' must be true or false"),
    ],
)
def test_bad_metric_options_are_config_errors(options: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _metric("semantic_wer", **options)
    assert needle in str(caught.value)


def test_an_insertion_inside_an_entity_counts_one_at_its_edge_does_not() -> None:
    metric = _metric("entity_wer")
    # "500 मिलीग्राम" (2 words) answered "500 से मिलीग्राम": से is inserted between the entity's words: 1 / 2
    inside = metric.score("500 से मिलीग्राम लें", _sample("५०० मिलीग्राम लें", entities=["५०० मिलीग्राम"]))
    assert inside.score == pytest.approx(1 / 2) and inside.details["insertions"] == 1
    # "अभी" inserted before the entity belongs to the context: 0 / 2
    edge = metric.score("अभी 500 मिलीग्राम लें", _sample("५०० मिलीग्राम लें", entities=["५०० मिलीग्राम"]))
    assert edge.score == 0


def test_entity_wer_reads_the_meta_key_the_option_names() -> None:
    metric = _metric("entity_wer", entities_key="medical_entities")
    score = metric.score("सिर दर्द", _sample("सिर दर्द", medical_entities=["दर्द"]))
    assert score.stats[1] == 1 and score.score == 0
    with pytest.raises(ConfigError, match="entities_key"):
        _metric("entity_wer", entities_key="")


# -- processors -----------------------------------------------------------------------------------------


def test_devanagari_transliterator_with_a_source_scheme_and_auto_detection() -> None:
    itrans = build_processors([{"name": "devanagari_transliterator", "source": "itrans"}], "here", "hi")
    assert itrans("bukhAra hai") == "बुखार है"
    assert itrans("बुखार है") == "बुखार है"  # text already in the target script passes through
    auto = build_processors(["devanagari_transliterator"], "here", "hi")
    # the Kannada word ಜ್ವರ (jvara) becomes ज्वर; the romanised word is left alone
    assert auto("ಜ್ವರ fever") == "ज्वर fever"
    to_iast = build_processors([{"name": "devnagari_transliterator", "target": "iast"}], "here", "hi")
    assert to_iast("बुखार") == "bukhāra"  # KARMA's spelling of the name resolves too


def test_multilingual_text_processor_arguments() -> None:
    text = f"मरी{JA_NUKTA} को २ दिन से बुखार है।"
    default = build_processors(["multilingual_text_processor"], "here", "hi")
    assert default(text) == "मरीज को 2 दिन से बुखार है।"
    chained = build_processors(
        [
            {"name": "multilingual_text_processor", "punctuation": "remove", "numerals": "keep"},
            {"name": "multilingual_text_processor", "numerals": "keep", "glm": {"बुखार": "ज्वर", "दिन": "रोज"}},
        ],
        "here",
        "hi",
    )
    # the first drops the danda and keeps २; the second maps whole words (दिनों would stay): "दिन" -> "रोज"
    assert chained(text) == "मरीज को २ रोज से ज्वर है"
    assert chained("दिनों") == "दिनों"
    keep_nukta = build_processors([{"name": "multilingual_text_processor", "remove_nuktas": False}], "here", "hi")
    assert keep_nukta(f"मरी{JA_NUKTA}") == f"मरी{JA_NUKTA}"


@pytest.mark.parametrize(
    ("entries", "needles"),
    [
        (["devanagari_transliteratr"], ["here[0]", "unknown processor 'devanagari_transliteratr'", '"devanagari_tr']),
        ([{"name": "devanagari_transliterator", "sorce": "itrans"}], ["here[0]", "unknown argument 'sorce'", "source"]),
        ([{"name": "devanagari_transliterator", "source": "itrns"}], ["here[0]", "unknown source scheme", "itrans"]),
        ([{"name": "multilingual_text_processor", "nasals_mode": "all"}], ["here[0]", "nasals_mode", "do_nothing"]),
        ([{"name": "multilingual_text_processor", "remove_nuktas": "yes"}], ["remove_nuktas", "true or false"]),
        ([{"name": "multilingual_text_processor", "glm": ["a"]}], ["glm", "{word: replacement}"]),
        ([{"source": "itrans"}], ["here[0]", "expected a processor name"]),
        ("multilingual_text_processor", ["here", "expected a list of processors"]),
    ],
)
def test_bad_processors_are_config_errors_naming_the_key(entries: Any, needles: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        build_processors(entries, "here", "hi")
    for needle in needles:
        assert needle in str(caught.value)


def test_both_processors_are_registered() -> None:
    names = dict(PROCESSORS.items())
    assert {"multilingual_text_processor", "devanagari_transliterator"} <= names.keys()
    assert PROCESSORS.canonical("devnagari_transliterator") == "devanagari_transliterator"


def test_a_metric_option_processor_rewrites_prediction_and_reference_before_scoring() -> None:
    metric = _metric("wer", processors=[{"name": "devanagari_transliterator", "source": "itrans"}])
    # the answer "bukhAra hai" in ITRANS becomes बुखार है: 0 / 2; plain WER would be 2 / 2
    score, crash = asyncio.run(score_sample(metric, "bukhAra hai", _sample("बुखार है")))
    assert crash is None and score is not None and score.score == 0
    plain, _ = asyncio.run(score_sample(_metric("wer"), "bukhAra hai", _sample("बुखार है")))
    assert plain is not None and plain.score == 1
    with pytest.raises(ConfigError, match="metric 'word_error_rate': option 'processors'"):
        _metric("wer", processors=["no_such_processor"])
    accumulator = ScoreAccumulator(metric)
    accumulator.add(score)
    assert accumulator.result().details["processors"] == [{"name": "devanagari_transliterator", "source": "itrans"}]


def test_without_the_indic_extra_the_metric_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.processing import indic

    monkeypatch.setitem(sys.modules, "indicnlp.normalize.indic_normalize", None)  # import now raises ImportError
    indic.indic_normalizer.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"pip install 'evalkit\[indic\]'"):
            _metric("semantic_wer")
    finally:
        monkeypatch.undo()
        indic.indic_normalizer.cache_clear()


# -- from the runspec and the config ----------------------------------------------------------------------


HINDI_ROWS = [
    # (id, answer the echo server returns, reference, entities)
    ("h1", "डोक्टर ने जरूरी दवा दी", f"डॉक्टर ने {JA_NUKTA}रूरी दवा दी।", ["दवा"]),
    ("h2", "मरीज को 2 दिन से बुखार है", f"मरी{JA_NUKTA} को २ दिन से {BUKHAR_NUKTA} है", [BUKHAR_NUKTA]),
    ("h3", "सिर में दर्द था", "सिर में दर्द है", ["सिर में दर्द"]),
]


def _hindi_set(root: Path, processors: list[Any] | None = None) -> Path:
    """A local Hindi jsonl set; the text input is the answer the echo server gives back."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    with (data / "hindi_asr.jsonl").open("w", encoding="utf-8") as handle:
        for sample_id, answer, reference, entities in HINDI_ROWS:
            row = {"id": sample_id, "heard": answer, "text": reference, "medical_entities": entities}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    specs = root / "runspecs" / "speech_recognition"
    specs.mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "_task": {
            "description": "Hindi transcripts",
            "metrics": ["word_error_rate", "semantic_wer", "semantic_cer", "entity_wer"],
        },
        "hindi_asr": {
            "path": "../../data/hindi_asr.jsonl",
            "language": "hi",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "heard",
            "target_column": "text",
            "extra_columns": {"entities": "medical_entities"},
        },
    }
    if processors is not None:
        spec["hindi_asr"]["processors"] = processors
    (specs / "hindi_asr.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return root / "runspecs"


def test_evalkit_run_reports_the_semantic_metrics_with_n_and_ci(tmp_path: Path) -> None:
    server = start_test_server({"default_answer": "echo"})
    try:
        runspecs = _hindi_set(tmp_path)
        pairs = [
            ["hindi_asr", "word_error_rate"],
            ["hindi_asr", "asr_semantic_metric"],
            ["hindi_asr", "semantic_cer"],
            ["hindi_asr", "entity_wer"],
        ]
        config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)], pairs)
        result = evalkit_cli(["run", str(config), "--quiet"], tmp_path)
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = (tmp_path / "runs").glob("*/results.json")
    rows = {row["metric"]: row for row in json.loads(path.read_text())["results"]}
    # WER: (2 + 3 + 1) / (5 + 7 + 4) = 6/16; semantic: (0 + 0 + 1) / 16 = 1/16
    assert rows["word_error_rate"]["score"] == pytest.approx(6 / 16)
    assert rows["semantic_wer"]["score"] == pytest.approx(1 / 16)
    # semantic CER: the normalised references have 22 (see above), 25 and 15 characters; the second,
    # "मरीज को 2 दिन से बुखार है", is 4+2+1+3+2+5+2 letters/digits + 6 spaces = 25; only है -> था
    # (2 S) is left: 2 / (22 + 25 + 15) = 2/62
    assert rows["semantic_cer"]["score"] == pytest.approx(2 / (22 + 25 + 15))
    # entity WER: दवा hit (0/1), बुख़ार -> बुखार hit after normalising (0/1), "सिर में दर्द" 3 hits: 0 / 5
    assert rows["entity_wer"]["score"] == 0 and rows["entity_wer"]["details"]["entity_words"] == 5
    for row in rows.values():
        assert row["n"] == 3 and row["ci_low"] <= row["score"] <= row["ci_high"]


def test_a_run_applies_the_runspec_processors_then_the_metric_options(tmp_path: Path) -> None:
    server = start_test_server({"default_answer": "echo"})
    try:
        # the runspec maps था to है on both sides: h3 "सिर में दर्द था" then matches its reference
        runspecs = _hindi_set(tmp_path, [{"name": "multilingual_text_processor", "glm": {"था": "है"}}])
        transliterate = {"processors": [{"name": "devanagari_transliterator", "source": "itrans"}]}
        pairs = [["hindi_asr", "semantic_wer"], ["hindi_asr", "word_error_rate", transliterate]]
        outcome = run(config_for(tmp_path, runspecs, [model_entry("m", server.base_url)], pairs))
    finally:
        server.stop()
    assert not any(e.error for e in outcome.engines)
    (path,) = (tmp_path / "runs").glob("*/results.json")
    rows = {row["metric"]: row for row in json.loads(path.read_text())["results"]}
    # semantic WER: 0 + 0 + 0 edits over 16 words
    assert rows["semantic_wer"]["score"] == 0 and rows["semantic_wer"]["n"] == 3
    # WER: the multilingual processor (indic-nlp + digits) already folds ॉ, nukta and २ before Whisper's
    # normaliser, and ITRANS transliteration leaves Devanagari as it is: 0 / 16 (plain WER is 6 / 16)
    assert rows["word_error_rate"]["score"] == 0
    assert rows["word_error_rate"]["details"]["processors"] == transliterate["processors"]


def test_runspec_processors_and_metric_option_processors_plan_and_bad_ones_name_the_file(tmp_path: Path) -> None:
    good = [{"name": "multilingual_text_processor", "punctuation": "remove"}]
    runspecs = _hindi_set(tmp_path / "good", good)
    per_metric = {"processors": [{"name": "devanagari_transliterator", "source": "itrans"}]}
    config = config_for(
        tmp_path / "good",
        runspecs,
        [model_entry("m", "http://127.0.0.1:9/v1")],
        [["hindi_asr", "semantic_wer", per_metric], ["hindi_asr", "entity_wer"]],
    )
    engines = build_plan(load_config(config)).engines
    assert engines[0].options == per_metric and engines[0].dataset.processors == good

    bad_runspecs = _hindi_set(tmp_path / "bad", [{"name": "devanagari_transliterator", "target": "klingon"}])
    bad = config_for(
        tmp_path / "bad", bad_runspecs, [model_entry("m", "http://127.0.0.1:9/v1")], [["hindi_asr", "semantic_wer"]]
    )
    result = evalkit_cli(["validate", str(bad)], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "hindi_asr.json: hindi_asr.processors[0]" in result.stderr and "'klingon'" in result.stderr

    bad_option = write_config(
        tmp_path / "good" / "bad_option.yaml",
        {
            "dataset_metric": [
                [
                    "hindi_asr",
                    "semantic_wer",
                    {"processors": [{"name": "multilingual_text_processor", "numerals": "roman"}]},
                ]
            ],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "runspecs_dir": str(runspecs),
        },
    )
    result = evalkit_cli(["validate", str(bad_option)], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "dataset_metric[0]" in result.stderr and "numerals" in result.stderr and "'roman'" in result.stderr


def test_runspec_processors_apply_before_the_metric_options_processors(tmp_path: Path) -> None:
    from evalkit.plan import dataset_processors

    runspecs = _hindi_set(tmp_path, [{"name": "multilingual_text_processor", "glm": {"ज्वर": "बुखार"}}])
    config = config_for(
        tmp_path,
        runspecs,
        [model_entry("m", "http://127.0.0.1:9/v1")],
        [["hindi_asr", "word_error_rate", {"processors": [{"name": "devanagari_transliterator", "source": "itrans"}]}]],
    )
    (engine,) = build_plan(load_config(config)).engines
    metric = METRICS.get(engine.metric)(language="hi", **engine.options)
    chain = dataset_processors(engine.dataset)
    # "jvara hai": the dataset's GLM sees ITRANS (no change), then the metric's transliterator makes ज्वर है;
    # the reference बुखार है goes through the same chain; ज्वर/बुखार differ: 1 / 2
    score, _ = asyncio.run(score_sample(metric, "jvara hai", _sample("बुखार है"), chain))
    assert score is not None and score.score == pytest.approx(1 / 2)
    # the Devanagari answer ज्वर है is mapped by the GLM to बुखार है first: 0 / 2
    score, _ = asyncio.run(score_sample(metric, "ज्वर है", _sample("बुखार है"), chain))
    assert score is not None and score.score == 0


def test_the_semantic_metrics_fit_the_catalogues_hindi_asr_sets_and_entity_wer_only_where_listed() -> None:
    from evalkit.catalog import load_catalog
    from evalkit.plan import declared_fit

    spec = load_catalog([]).datasets["fleurs_hi_in"]
    assert declared_fit("semantic_wer", spec) and declared_fit("semantic_cer", spec)
    assert not declared_fit("entity_wer", spec)


def test_evalkit_list_shows_the_metrics_and_the_processors(tmp_path: Path) -> None:
    metrics = evalkit_cli(["list", "metrics", "--format", "json"], tmp_path)
    assert metrics.returncode == 0, metrics.stderr
    by_name = {row["name"]: row for row in json.loads(metrics.stdout)}
    assert {"semantic_wer", "semantic_cer", "entity_wer"} <= by_name.keys()
    assert "asr_semantic_metric" in by_name["semantic_wer"]["aliases"]
    processors = evalkit_cli(["list", "processors", "--format", "json"], tmp_path)
    assert processors.returncode == 0, processors.stderr
    rows = {row["name"]: row for row in json.loads(processors.stdout)}
    assert [a.split(":")[0] for a in rows["devanagari_transliterator"]["arguments"]] == ["source", "target"]
    assert "glm" in [a.split(":")[0] for a in rows["multilingual_text_processor"]["arguments"]]
