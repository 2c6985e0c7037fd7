"""AU-Harness's question-answering and detection sets (issue 33): their names resolve, and they ask what it asks.

The names are AU-Harness's MNSC PQA/SQA/SDS configs, its Dynamic-SUPERB detection sets, MMAU-mini, Big Bench
Audio (audio and text query) and GSM8K (audio and text). Each resolves to a catalogue entry reading the same hub
repo, config and split; the prompt is the one AU-Harness's preprocessors write (its task's ``user_prompt`` run
straight into the row's question, the choices after ``"\\n Choices: "``); the metrics are its own names.

Runs go against the project's test server, as the model and as the judge, with a local copy of each entry
reading a small file in the hub set's column layout (tests/fixtures/runspec_structures/): nothing comes from the
hub.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from helpers import local_copy, model_entry, run, write_config

from evalkit.catalog import Catalog, ForeignDataset, load_catalog
from evalkit.data.sample import Sample
from evalkit.prompts.auharness.general import auharness_user_text
from evalkit.prompts.preprocessors import PREPROCESSORS, PromptContext
from evalkit.testing import audio_fingerprint

FIXTURES = Path(__file__).parent / "fixtures" / "runspec_structures"

#: AU-Harness's name -> the catalogue entry reading the same data (what runspecs/_names/auharness.json maps)
NAMES = {
    **{f"mnsc_pqa_{k}_{u}_test": f"mnsc_pqa_{k}_{u}_test" for k in ("ar", "gr") for u in ("dialogue", "sentence")},
    **{f"mnsc_sqa_part{p}_test": f"mnsc_sqa_part{p}_test" for p in (3, 4, 5, 6)},
    **{f"mnsc_sds_part{p}_test": f"mnsc_sds_part{p}_test" for p in (3, 4, 5)},
    "SLURP-intent": "slurp_intent",
    "asvspoof": "asvspoof2017_spoof_detection",
    "noise_detection": "ljspeech_gaussian_noise_detection",
    "stuttering_detection": "sep28k_stuttering_detection",
    "voxangeles_phoneme_counting": "voxangeles_phoneme_counting",
    "mmau_mini": "mmau_mini",
    "big_bench_audio_audio_query": "big_bench_audio_audio_query",
    "big_bench_audio_text_query": "big_bench_audio_text_query",
    "gsm8k_audio": "gsm8k_audio",
    "gsm8k_text": "gsm8k_text",
}
#: AU-Harness's groups made only of these sets, which must resolve whole
GROUPS = ("mnsc_sqa", "mnsc_sds", "big_bench_audio", "gsm8k", "spoofing", "phonemes", "voice_disorder")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _hub(text: str) -> tuple[str, str | None, str]:
    """AU-Harness's ``repo[:subset]/split`` as (repo, subset, split)."""
    head, _, split = text.rpartition("/")
    repo, _, subset = head.partition(":")
    return repo, subset or None, split


def _with_mapping(catalog: Catalog) -> Catalog:
    """The catalogue with these names mapped in AU-Harness's table, as the lead applies /tmp/map/h2.json."""
    table = catalog.foreign["auharness"]
    datasets = dict(table.datasets)
    for name, entry in NAMES.items():
        datasets[name] = ForeignDataset(**{**datasets[name].model_dump(), "evalkit": entry})
    mapped = Catalog(**{**catalog.__dict__})
    mapped.foreign = {**catalog.foreign, "auharness": table.model_copy(update={"datasets": datasets})}
    return mapped


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("name", sorted(NAMES))
def test_the_entry_reads_what_auharness_reads(catalog: Catalog, name: str) -> None:
    told = catalog.foreign["auharness"].datasets[name]
    spec = catalog.datasets[NAMES[name]]
    repo, subset, split = _hub(str(told.hub))
    assert (spec.hf_repo, spec.split) == (repo, split)
    if subset is not None:
        assert spec.subset == subset
    # AU-Harness's metric names (its `detailed_judge_prompt` is the detailed judge's prompt key: llm_judge_detailed)
    wanted = {"llm_judge_detailed" if m == "detailed_judge_prompt" else m for m in told.metrics}
    assert wanted <= set(catalog.fitting_metrics(spec))
    assert (spec.modality == "text") == (told.modality == "text")


@pytest.mark.parametrize("name", sorted(NAMES))
def test_each_name_resolves_with_and_without_the_prefix(catalog: Catalog, name: str) -> None:
    mapped = _with_mapping(catalog)
    for written in (name, f"auharness:{name}"):
        assert [(s.variant_of or s.name) for s in mapped.resolve(written)] == [NAMES[name]], written


def test_the_groups_of_these_sets_resolve_whole(catalog: Catalog) -> None:
    mapped = _with_mapping(catalog)
    table = mapped.foreign["auharness"]
    for group in GROUPS:
        wanted = sorted({NAMES[m] for m in table.groups[group]})
        assert sorted((s.variant_of or s.name) for s in mapped.resolve(f"auharness:{group}")) == wanted, group


@pytest.mark.parametrize("name", sorted(NAMES))
def test_the_shipped_table_maps_the_name(catalog: Catalog, name: str) -> None:
    """Needs runspecs/_names/auharness.json to carry the mapping (the lead applies it from /tmp/map/h2.json)."""
    if catalog.foreign["auharness"].datasets[name].evalkit is None:
        pytest.skip("runspecs/_names/auharness.json does not map this name yet")
    assert catalog.foreign["auharness"].datasets[name].evalkit == NAMES[name]
    for written in (name, f"auharness:{name}"):
        assert [(s.variant_of or s.name) for s in catalog.resolve(written)] == [NAMES[name]], written


# ---------------------------------------------------------------- the prompt AU-Harness writes


def _build(catalog: Catalog, entry: str, sample: Sample, add_ons: list[str] | None = None) -> str | None:
    spec = catalog.datasets[entry]
    preprocessor = PREPROCESSORS.get(spec.preprocessor)()
    prompt = preprocessor.build(sample, PromptContext(add_ons=add_ons or []))
    [turn] = prompt.turns
    return turn.text


def test_a_prompt_runs_into_the_rows_question_with_no_separator(catalog: Catalog) -> None:
    spec = catalog.datasets["asvspoof2017_spoof_detection"]
    question = "Is this recording bona fide or spoofed? Answer bonafide or spoof."
    sample = Sample(id="x", instruction=spec.instruction, text=question, meta={})
    assert spec.instruction and spec.instruction.endswith("explanations.")
    assert _build(catalog, spec.name, sample) == spec.instruction + question  # "...explanations.Is this ..."


def test_a_block_prompt_keeps_its_newline_before_the_question(catalog: Catalog) -> None:
    spec = catalog.datasets["mnsc_pqa_gr_dialogue_test"]
    sample = Sample(id="x", instruction=spec.instruction, text="What is the gender of speaker 2?", meta={})
    assert _build(catalog, spec.name, sample) == (f"{str(spec.instruction).rstrip()}\nWhat is the gender of speaker 2?")


@pytest.mark.parametrize(
    ("choices", "listed"),
    [(["(A) cat", "(B) dog"], "(A) cat (B) dog"), ("(A) cat\n(B) dog", "(A) cat\n(B) dog")],
)
def test_choices_follow_the_question_as_auharness_lists_them(catalog: Catalog, choices: Any, listed: str) -> None:
    sample = Sample(id="x", instruction="Which animal is heard?", meta={"choices": choices})
    assert _build(catalog, "mmau_mini", sample) == f"Which animal is heard?\n Choices: {listed}"


def test_the_text_query_is_the_question_alone_and_add_ons_follow(catalog: Catalog) -> None:
    sample = Sample(id="x", text="  Is 7 prime?  ", meta={})
    assert _build(catalog, "big_bench_audio_text_query", sample) == "Is 7 prime?"
    assert _build(catalog, "big_bench_audio_text_query", sample, ["Be brief."]) == "Is 7 prime?\n\nBe brief."
    gsm8k = catalog.datasets["gsm8k_text"]
    assert auharness_user_text(Sample(id="y", instruction=gsm8k.instruction, text="Q?", meta={})) == (
        "Solve the following math problem step by step. Put your final answer inside \\boxed{}.\nQ?"
    )


# ---------------------------------------------------------------- end to end, one run per shape


def _judge(url: str) -> dict[str, Any]:
    return {"judge_model": "judge-m", "judge_type": "vllm", "judge_api_endpoint": url, "judge_api_key": "k"}


def _run(tmp_path: Path, entry: str, fixture: str, metric: str, model: Any, judge: Any = None) -> Any:
    name, runspecs = local_copy(tmp_path, entry, FIXTURES / f"{fixture}.parquet")
    config: dict[str, Any] = {
        "dataset_metric": [[name, metric]],
        "models": [model_entry("m", model.base_url)],
        "runspecs_dir": str(runspecs),
        "output_dir": str(tmp_path / "runs"),
    }
    if judge is not None:
        config["judge_properties"] = _judge(judge.base_url)
    [result] = run(write_config(tmp_path / "config.yaml", config)).rows
    return result


def _rows(fixture: str) -> list[dict[str, Any]]:
    return pq.read_table(FIXTURES / f"{fixture}.parquet").to_pylist()


def _user(event: dict[str, Any]) -> dict[str, Any]:
    [user] = [m for m in event["messages"] if m["role"] == "user"]
    return user


def test_an_audio_query_sends_auharness_prompt_with_the_audio_and_is_judged(tmp_path: Path, make_server: Any) -> None:
    rows = _rows("dynamic_superb")
    fingerprints = [audio_fingerprint(r["audio"]["bytes"]) for r in rows]
    # the first clip answered right, the second wrong; the judge tells them apart by the candidate's words
    answers = ["bonafide", "bonafide, surely"]
    model = make_server(
        {"answers": [{"audio_fingerprint": fp, "answer": a} for fp, a in zip(fingerprints, answers, strict=True)]},
        request_log=True,
    )
    judge = make_server(
        {
            "answers": [
                {"match": "re:\\[Candidate response\\]\\s*bonafide, surely", "answer": '{"verdict": 0}'},
                {"match": "[Candidate response]", "answer": '{"verdict": 1}'},
            ]
        },
        request_log=True,
    )
    result = _run(tmp_path, "asvspoof2017_spoof_detection", "dynamic_superb", "llm_judge_binary", model, judge)
    assert result.error is None and result.n == 2 and result.score == pytest.approx(0.5)
    prompt = load_catalog().datasets["asvspoof2017_spoof_detection"].instruction
    sent = [_user(e) for e in model.log_events("completed")]
    assert sorted(fp for u in sent for fp in u["audio_fingerprints"]) == sorted(fingerprints)
    assert {u["text"] for u in sent} == {f"{prompt}{rows[0]['instruction']}"}
    assert len(judge.log_events("completed")) == 2


def test_an_audio_query_with_choices_lists_them_as_auharness_does(tmp_path: Path, make_server: Any) -> None:
    rows = _rows("audiobench_mcq")
    model = make_server({"answers": [{"match": "Which instrument leads?", "answer": "(A) piano"}]}, request_log=True)
    judge = make_server({"answers": [{"match": "[Candidate response]", "answer": '{"verdict": 1}'}]})
    result = _run(tmp_path, "mmau_mini", "audiobench_mcq", "llm_judge_binary", model, judge)
    assert result.error is None and result.n == 2
    texts = sorted(_user(e)["text"] for e in model.log_events("completed"))
    assert texts == sorted(f"{r['instruction']}\n Choices: {r['choices']}" for r in rows)


def test_a_text_query_sends_the_transcript_alone_and_the_big_bench_judge_reads_it(
    tmp_path: Path, make_server: Any
) -> None:
    rows = _rows("big_bench_audio")
    model = make_server({"answers": [{"match": "How many instruments", "answer": "Four."}]}, request_log=True)
    judge = make_server(
        {
            "answers": [
                {"match": "candidate: Four.", "answer": "CORRECT"},
                {"match": "candidate:", "answer": "INCORRECT"},
            ]
        },
        request_log=True,
    )
    result = _run(tmp_path, "big_bench_audio_text_query", "big_bench_audio", "llm_judge_big_bench_audio", model, judge)
    assert result.error is None and result.n == 2 and result.score == pytest.approx(0.5)
    sent = [_user(e) for e in model.log_events("completed")]
    assert sorted(u["text"] for u in sent) == sorted(r["transcript"] for r in rows)
    assert not [fp for u in sent for fp in u.get("audio_fingerprints") or []]  # text only: no audio
    judged = sorted(_user(e)["text"].rpartition("\nreference: ")[2] for e in judge.log_events("completed"))
    # AU-Harness's reference: the (transcript, official answer) pair as Python prints it
    assert judged == sorted(repr((r["transcript"], r["official_answer"])) for r in rows)


@pytest.mark.parametrize(("entry", "fixture"), [("gsm8k_text", "gsm8k"), ("gsm8k_audio", "gsm8k_speech")])
def test_gsm8k_is_scored_on_the_boxed_number(tmp_path: Path, make_server: Any, entry: str, fixture: str) -> None:
    rows = _rows(fixture)
    prompt = load_catalog().datasets[entry].instruction
    assert prompt is not None
    if entry == "gsm8k_text":  # right on the first problem, wrong on the second
        rules = [
            {"match": "Tom has 3 apples", "answer": "3 + 4 = 7, so \\boxed{7}"},
            {"match": "A box holds", "answer": "\\boxed{50}"},
        ]
    else:
        fps = [audio_fingerprint(r["audio"]["bytes"]) for r in rows]
        rules = [
            {"audio_fingerprint": fps[0], "answer": "\\boxed{7}"},
            {"audio_fingerprint": fps[1], "answer": "\\boxed{50}"},
        ]
    model = make_server({"answers": rules}, request_log=True)
    result = _run(tmp_path, entry, fixture, "gsm8k_exact_match", model)
    assert result.error is None and result.n == 2 and result.score == pytest.approx(0.5)
    texts = sorted(_user(e)["text"] for e in model.log_events("completed"))
    if entry == "gsm8k_text":
        assert texts == sorted(f"{prompt}{r['question']}" for r in rows)  # the prompt's newline, then the problem
    else:
        assert texts == [prompt.strip()] * 2
