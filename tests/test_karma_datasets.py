"""KARMA's datasets as KARMA sends and scores them: the catalogue entries run against the test server.

Each shape is a copy of the catalogue entry reading a local file in the dataset's column layout (nothing comes
from the hub in tests), run with the test server as the model (and as the judge), so what is checked is what
the entry makes evalkit send and score. The history-summary prompt is compared with the output of KARMA's own
class (tests/fixtures/runspec_structures/karma_history/, written by make_reference.py there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import local_copy, model_entry, run, write_config

from evalkit.catalog import load_catalog
from evalkit.data.sample import Sample
from evalkit.errors import RunspecError
from evalkit.processing.postprocessors import POSTPROCESSORS
from evalkit.prompts.preprocessors import PREPROCESSORS, PromptContext

FIXTURES = Path(__file__).parent / "fixtures" / "runspec_structures"
HISTORY = FIXTURES / "karma_history"


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _judge(url: str) -> dict[str, Any]:
    return {
        "judge_model": "judge-m",
        "judge_type": "vllm",
        "judge_api_endpoint": url,
        "judge_api_key": "k",
        "judge_retry_attempts": 0,
    }


def _records(outcome: Any, dataset: str) -> list[dict[str, Any]]:
    files = sorted((outcome.run_dir / "records").glob(f"{dataset}__*.jsonl"))
    assert files, f"no records of {dataset}"
    return [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines() if line.strip()]


# -- ekacare_medical_history_summarisation -----------------------------------------------------------------------


def test_the_history_prompt_is_the_one_karmas_class_builds() -> None:
    row = json.loads((HISTORY / "row.json").read_text(encoding="utf-8"))
    karma = json.loads((HISTORY / "karma_output.json").read_text(encoding="utf-8"))
    spec = load_catalog().datasets["ekacare_medical_history_summarisation"]
    sample = Sample(id="s", text=row["prompt"][0]["content"], instruction=spec.instruction)
    prompt = PREPROCESSORS.get(spec.preprocessor)().build(sample, PromptContext())
    assert [turn.text for turn in prompt.turns] == [karma["user"]]
    assert prompt.system == karma["system"]
    assert "conversation_error" not in sample.meta


def test_the_history_answer_is_read_as_karma_reads_it() -> None:
    karma = json.loads((HISTORY / "karma_output.json").read_text(encoding="utf-8"))
    spec = load_catalog().datasets["ekacare_medical_history_summarisation"]
    reader = POSTPROCESSORS.get(spec.postprocessor)()
    for answer, read in karma["extracted"].items():
        if read.startswith("<karma raises"):
            assert reader.process(answer) == answer  # KARMA stops on a JSON list; evalkit scores the text
        else:
            assert reader.process(answer) == read


def test_a_record_karma_cannot_prompt_with_fails_only_its_sample() -> None:
    spec = load_catalog().datasets["ekacare_medical_history_summarisation"]
    sample = Sample(id="s", text='{"visits": []}', instruction=spec.instruction)  # no date of birth
    PREPROCESSORS.get(spec.preprocessor)().build(sample, PromptContext())
    assert "patient record" in sample.meta["conversation_error"]


def test_the_history_set_runs_with_karmas_prompt_and_reading(tmp_path: Path, make_server: Any) -> None:
    row = json.loads((HISTORY / "row.json").read_text(encoding="utf-8"))
    karma = json.loads((HISTORY / "karma_output.json").read_text(encoding="utf-8"))
    data = _jsonl(tmp_path / "history.jsonl", [row])
    name, runspecs = local_copy(tmp_path, "ekacare_medical_history_summarisation", data)
    answer = '```json\n{"six_month_overview": "<em>Hypertension</em> stage 1, BP 150/95 (02-05-2024)"}\n```'
    model = make_server({"answers": [{"match": "My current patient", "answer": answer}]}, request_log=True)
    met = '{"criteria_met": true, "explanation": "says so"}'
    judge = make_server(
        {
            "answers": [
                {"match": "Mentions hypertension", "answer": met},
                {"match": "Invents a diagnosis", "answer": '{"criteria_met": false, "explanation": "no"}'},
            ]
        }
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[name, "rubric_evaluation"]],
            "models": [model_entry("m", model.base_url)],
            "judge_properties": _judge(judge.base_url),
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    outcome = run(config)
    [row_result] = outcome.rows
    assert row_result.error is None and row_result.n == 1
    assert row_result.score == pytest.approx(1.0)  # the 5-point item met, the -3 one not
    [event] = model.log_events("completed")
    sent = {m["role"]: m["text"] for m in event["messages"]}
    assert sent == {"system": karma["system"], "user": karma["user"]}
    [record] = _records(outcome, name)
    assert record["prediction"] == "<em>Hypertension</em> stage 1, BP 150/95 (02-05-2024)"


# -- clinical_note_generation and medical_records_parsing: KARMA's JSON-rubric judge -----------------------------

RUBRIC = (
    "You are checking a clinical note. Score each rubric 1 if satisfied else 0.\n"
    "R1: fever is recorded\nR2: the duration is given\nR3: no invented drug\n"
    'Answer {"rubric_scores": {"R1": 0 or 1, ...}}'
)


def test_the_clinical_note_set_is_judged_with_its_rubric_as_the_prompt(tmp_path: Path, make_server: Any) -> None:
    rows = [
        {
            "session_id": "a",
            "text": "Doctor: fever? Patient: yes, 2 days.",
            "sample_prompt": "Write the note as JSON.",
            "rubrics": RUBRIC + "\nCASE-A",
        },
        {
            "session_id": "b",
            "text": "Doctor: cough? Patient: a week.",
            "sample_prompt": "Write the note as JSON.",
            "rubrics": RUBRIC + "\nCASE-B",
        },
        {
            "session_id": "c",
            "text": "Doctor: pain? Patient: knee.",
            "sample_prompt": "Write the note as JSON.",
            "rubrics": RUBRIC + "\nCASE-C",
        },
    ]
    data = _jsonl(tmp_path / "notes.jsonl", rows)
    name, runspecs = local_copy(tmp_path, "clinical_note_generation", data)
    model = make_server(
        {
            "answers": [
                {"match": "fever?", "answer": '  {"symptoms": ["fever"]}  '},
                {"match": "cough?", "answer": '{"symptoms": ["cough"]}'},
                {"match": "pain?", "answer": '{"symptoms": ["knee pain"]}'},
            ]
        },
        request_log=True,
    )
    judge = make_server(
        {
            "answers": [
                # fenced: 2 of 3; true counts as 1 and "1" does not (KARMA compares with == 1): 1 of 2; no JSON: none
                {"match": "CASE-A", "answer": '```json\n{"rubric_scores": {"R1": 1, "R2": 1, "R3": 0}}\n```'},
                {"match": "CASE-B", "answer": '{"rubric_scores": {"R1": true, "R2": "1"}}'},
                {"match": "CASE-C", "answer": "I cannot judge this."},
            ]
        },
        request_log=True,
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[name, "karma_json_rubric_evaluation"]],
            "models": [model_entry("m", model.base_url)],
            "judge_properties": _judge(judge.base_url),
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    [result] = run(config).rows
    assert result.error is None
    # KARMA pools the items: (2 + 1) / (3 + 2), not the mean of 2/3 and 1/2
    assert result.score == pytest.approx(3 / 5)
    assert result.n == 2 and result.failure_reasons == {"judge_parse": 1}
    # the model gets sample_prompt as its system message and the conversation as the user's, as KARMA sends them
    sent = sorted(({m["role"]: m["text"] for m in e["messages"]} for e in model.log_events("completed")), key=str)
    assert {"system": "Write the note as JSON.", "user": "Doctor: fever? Patient: yes, 2 days."} in sent
    # the judge gets the rubric, a blank line, GENERATED OUTPUT: and the stripped answer, with KARMA's system prompt
    asked = [{m["role"]: m["text"] for m in e["messages"]} for e in judge.log_events("completed")]
    first = next(a for a in asked if "CASE-A" in a["user"])
    assert first == {
        "system": "You are an expert evaluator for structured JSON outputs. Respond with strict JSON only.",
        "user": RUBRIC + "\nCASE-A\n\nGENERATED OUTPUT:\n" + '{"symptoms": ["fever"]}',
    }


def test_the_records_set_sends_the_image_with_its_prompt_and_karmas_system_prompt(
    tmp_path: Path, make_server: Any
) -> None:
    name, runspecs = local_copy(tmp_path, "medical_records_parsing", FIXTURES / "eka_records.parquet")
    model = make_server({"answers": [{"match": "Parse this record", "answer": '{"tests": []}'}]}, request_log=True)
    judge = make_server({"answers": [{"match": "GENERATED OUTPUT", "answer": '{"rubric_scores": {"R1": 1, "R2": 0}}'}]})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[name, "karma_json_rubric_evaluation"]],
            "models": [model_entry("m", model.base_url)],
            "judge_properties": _judge(judge.base_url),
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    [result] = run(config).rows
    assert result.error is None and result.score == pytest.approx(0.5)
    event = model.log_events("completed")[0]
    system, user, image = event["messages"]  # KARMA's layout: the image a user message of its own after the text
    assert (
        system["role"] == "system"
        and system["text"] == load_catalog().datasets[name.removeprefix("local_")].instruction
    )
    assert user["text"] == "Parse this record into JSON." and not user.get("images")
    assert image["role"] == "user" and not image["text"] and len(image["images"]) == 1


# -- the multiple-choice sets added for KARMA ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "fixture", "options"),
    [
        ("medqa_usmle_4_options", "medqa_usmle", ["A. CT head", "B. Lumbar puncture", "C. Discharge", "D. MRI spine"]),
        ("indian_drug_mcqa", "indian_drug_mcqa", ["A. Ibuprofen", "B. Paracetamol", "C. Aspirin", "D. Diclofenac"]),
    ],
)
def test_a_karma_mcq_set_runs_with_karmas_template_and_reading(
    tmp_path: Path, make_server: Any, entry: str, fixture: str, options: list[str]
) -> None:
    name, runspecs = local_copy(tmp_path, entry, FIXTURES / f"{fixture}.parquet")
    # right on the first question (B), wrong on the second (C; the answers are B and A)
    answers = [
        {"match": options[1], "answer": "Reasoning... Final Answer: (B)"},
        {"match": "", "answer": "Final Answer: (C)"},
    ]
    model = make_server({"answers": answers}, request_log=True)
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[name, "mcq_accuracy"]],
            "models": [model_entry("m", model.base_url)],
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    outcome = run(config)
    [result] = outcome.rows
    assert result.error is None and result.n == 2 and result.score == pytest.approx(0.5)
    assert sorted(r["prediction"] for r in _records(outcome, name)) == ["B", "C"]
    users = [m["text"] for e in model.log_events("completed") for m in e["messages"] if m["role"] == "user"]
    first = next(text for text in users if options[1] in text)
    template = load_catalog().datasets[entry].instruction or ""
    before, after = template.split("<QUESTION>")
    # the question and its options where KARMA's template puts them; the drug set's empty fifth option is left out
    assert first.startswith(before) and first.endswith("\n".join(options) + after)


# -- KARMA's dataset ids -----------------------------------------------------------------------------------------

NAMES = json.loads((Path(__file__).parents[1] / "runspecs" / "_names" / "karma.json").read_text(encoding="utf-8"))


def test_every_registered_karma_id_is_in_the_table() -> None:
    ids = [name for name in NAMES["datasets"] if "=" not in name]  # "=": a --dataset-args selection
    assert len(ids) == 41  # KARMA's register_dataset calls at the commit the table names
    assert {"Showing-KCL/AMQA:race", "intronhealth/afrimedqa_v2/mcq", "nfi_mcqa", "zou-lab/MedCaseReasoning"} <= set(
        ids
    )


@pytest.mark.parametrize("name", sorted(NAMES["datasets"]))
def test_a_karma_id_resolves_to_its_entry_or_says_there_is_none(name: str) -> None:
    catalog = load_catalog()
    target = NAMES["datasets"][name]["evalkit"]
    group = NAMES.get("groups", {}).get(name)
    for spelt in (name, f"karma:{name}"):
        if target is None and group:  # a set KARMA runs per subset: all of them
            wanted = [NAMES["datasets"][member]["evalkit"] for member in group]
            assert [spec.name for spec in catalog.resolve(spelt)] == wanted and len(wanted) > 1
        elif target is None:
            with pytest.raises(RunspecError, match="no entry reading the same data"):
                catalog.resolve(spelt)
        elif NAMES["datasets"][name].get("transcription_prompt"):  # a speech id: KARMA's variant of the entry
            (spec,) = catalog.resolve(spelt)
            if spelt in catalog.aliases:  # the bare hub name is evalkit's entry's alias: an exact name wins
                assert spec.name == catalog.aliases[spelt] == target
                continue
            assert (spec.name, spec.variant_of, spec.request_style) == (f"karma:{name}", target, "karma")
        else:
            assert [spec.name for spec in catalog.resolve(spelt)] == [target]


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("ekacare/MedMCQA-Indic:subset=as", "medmcqa_indic_as"),
        ("ekacare/eka-medical-asr-evaluation-dataset:language=hi", "eka_medical_asr_hi"),
        ("ai4bharat/IN22-Conv:source_language=en,target_language=hi", "in22_conv_en_hi"),
        ("ekacare/MedMCQA-Indic", "medmcqa_indic_as"),  # KARMA's default subset without --dataset-args
    ],
)
def test_a_dataset_args_selection_resolves_as_karma_spells_it(name: str, entry: str) -> None:
    # a speech id reaches KARMA's variant of the entry (its transcription prompt), which reads the entry's data
    assert [spec.variant_of or spec.name for spec in load_catalog().resolve(f"karma:{name}")] == [entry]


# -- KARMA's multiple-choice prompt templates and answer readings ------------------------------------------------

MCQ = json.loads((FIXTURES / "karma_mcq" / "karma_output.json").read_text(encoding="utf-8"))
#: KARMA's class (karma_mcq/make_reference.py) -> the catalogue entry reading the same set
MCQ_ENTRIES = {
    "medmcqa_dataset:MedMCQADataset": "medmcqa",
    "medqa_dataset:MedQADataset": "medqa",
    "medqa_usmle_dataset:MedQAUSMLEDataset": "medqa_usmle_4_options",
    "indian_drug_mcqa_dataset:IndianDrugMCQADataset": "indian_drug_mcqa",
    "medxpertqa_text_dataset:MedXpertQATextDataset": "medxpertqa_text",
    "eka_mmlu_medical_dataset:EkaMMLUMedicalDataset": "eka_mmlu_medical_anatomy",
    "eka_nfi_dataset:EkaNFIValidationSetDataset": "eka_nfi_mcqa",
}


def _entry_sample(tmp_path: Path, entry: str, row: dict[str, Any]) -> tuple[Any, Sample]:
    from evalkit.data.loading import iter_samples

    spec = load_catalog().datasets[entry]
    [sample] = iter_samples(spec, source_override=str(_jsonl(tmp_path / f"{entry}.jsonl", [row])))
    return spec, sample


@pytest.mark.parametrize("karma_class", sorted(MCQ_ENTRIES))
def test_an_mcq_entry_sends_the_prompt_karmas_class_builds(tmp_path: Path, karma_class: str) -> None:
    karma = MCQ[karma_class]
    spec, sample = _entry_sample(tmp_path, MCQ_ENTRIES[karma_class], karma["row"])
    preprocessor = PREPROCESSORS.get(spec.preprocessor)()
    [sample] = list(preprocessor.expand([sample]))
    prompt = preprocessor.build(sample, PromptContext())
    assert [turn.text for turn in prompt.turns] == [karma["prompt"]] and prompt.system is None


@pytest.mark.parametrize("karma_class", sorted(MCQ_ENTRIES))
def test_an_mcq_entry_scores_each_answer_as_karma_does(tmp_path: Path, karma_class: str) -> None:
    from evalkit.metrics import METRICS

    karma = MCQ[karma_class]
    spec, sample = _entry_sample(tmp_path, MCQ_ENTRIES[karma_class], karma["row"])
    [sample] = list(PREPROCESSORS.get(spec.preprocessor)().expand([sample]))
    reader = POSTPROCESSORS.get(spec.postprocessor)()
    metric = METRICS.get("mcq_accuracy")(language="en")
    for answer, karma_read in karma["read"].items():
        letter = reader.process(answer)
        if len(karma_read) == 1:
            assert letter == karma_read.upper(), answer
        # KARMA's exact_match: its reading, lower-cased, equals the answer letter; evalkit scores the same
        karma_right = karma_read.lower() == str(karma["expected"]).lower()
        assert metric.score(letter, sample).score == float(karma_right), answer


@pytest.mark.parametrize(
    ("name", "args", "entry"),
    [
        ("ekacare/mmlu-medical-mcqs-evaluation-dataset", {"subset": "virology"}, "eka_mmlu_medical_virology"),
        ("karma:ai4bharat/IN22-Conv", {"target_language": "hi", "source_language": "en"}, "in22_conv_en_hi"),
        ("in22_conv_en_hi", {"source_language": "en", "target_language": "hi"}, "in22_conv_en_hi"),  # evalkit's name
        ("medqa", {}, "medqa"),
    ],
)
def test_dataset_arguments_pick_the_entry_as_karma_would(name: str, args: dict[str, str], entry: str) -> None:
    assert load_catalog().select(name, args).name == entry


def test_a_selection_the_catalogue_lacks_names_those_it_has() -> None:
    with pytest.raises(RunspecError, match=r"subset=hi .*known: ekacare/MedMCQA-Indic:subset=as"):
        load_catalog().select("ekacare/MedMCQA-Indic", {"subset": "hi"})
    with pytest.raises(RunspecError, match="takes no dataset arguments"):
        load_catalog().select("medqa", {"subset": "x"})


# -- MedCaseReasoning ---------------------------------------------------------------------------------------------


def test_a_case_is_sent_and_its_reasoning_split_as_karmas_class_does(tmp_path: Path) -> None:
    karma = MCQ["medcasereasoning_dataset:MedCaseReasoningDataset"]
    spec, sample = _entry_sample(tmp_path, "medcasereasoning", karma["row"])
    preprocessor = PREPROCESSORS.get(spec.preprocessor)()
    [sample] = list(preprocessor.expand([sample]))
    prompt = preprocessor.build(sample, PromptContext())
    assert [turn.text for turn in prompt.turns] == [karma["prompt"]] and prompt.system is None
    assert sample.meta["reasoning_steps"] == karma["other_args"]["reasoning_steps"]
    assert sample.reference == karma["expected"]


def test_medcasereasoning_runs_with_both_of_karmas_judges(tmp_path: Path, make_server: Any) -> None:
    name, runspecs = local_copy(tmp_path, "medcasereasoning", FIXTURES / "medcasereasoning.parquet")
    answers = [
        {
            "match": "splinter",
            "answer": "<think>New murmur and fever.</think>\n<answer>Infective endocarditis</answer>",
        },
        {
            "match": "loss of vision",
            "answer": "<think>Sudden painless loss.</think>\n<answer>Retinal detachment</answer>",
        },
    ]
    model = make_server({"answers": answers})
    judge = make_server(
        {
            "answers": [
                {"match": "Predicted diagnosis: Infective endocarditis", "answer": "y"},
                {"match": "Predicted diagnosis: Retinal detachment", "answer": "n"},
                # recall: one statement per call; the fever/murmur one and the vascular one are covered
                {"match": "suggests endocarditis", "answer": "yes"},
                {"match": "suggests a vascular cause", "answer": "y"},
                {"match": "", "answer": "n"},
            ]
        },
        request_log=True,
    )
    pairs = [[name, "medcasereasoning_diagnostic_accuracy"], [name, "medcasereasoning_reasoning_recall"]]
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": pairs,
            "models": [model_entry("m", model.base_url)],
            "judge_properties": _judge(judge.base_url),
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    scores = {row.metric: (row.error, row.n, row.score) for row in run(config).rows}
    assert scores == {
        "medcasereasoning_diagnostic_accuracy": (None, 2, pytest.approx(0.5)),
        "medcasereasoning_reasoning_recall": (None, 2, pytest.approx(0.5)),  # 1 of 2 statements in each case
    }
    asked = [m["text"] for e in judge.log_events("completed") for m in e["messages"] if m["role"] == "user"]
    assert len(asked) == 2 + 4  # one diagnosis call per case, one recall call per statement


# -- Indian protocols Q&A: KARMA's staged rubric judges -------------------------------------------------------------


def test_the_protocols_set_sends_karmas_system_prompt_and_is_judged_on_its_answer_items(
    tmp_path: Path, make_server: Any
) -> None:
    name, runspecs = local_copy(tmp_path, "indian_protocols_clinical_qna", FIXTURES / "indian_protocols_qna.parquet")
    answers = [
        {"match": "First-line", "answer": "Chloroquine for 3 days."},
        {"match": "Primaquine dose", "answer": "0.25 mg/kg for 14 days."},
    ]
    model = make_server({"answers": answers}, request_log=True)
    judge = make_server(
        {
            "answers": [
                {"match": "Chloroquine for 3 days", "answer": '{"explanation": "named", "criteria_met": true}'},
                {"match": "", "answer": '{"explanation": "not named", "criteria_met": false}'},
            ]
        }
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[name, "answer_rubric_evaluation"]],
            "models": [model_entry("m", model.base_url)],
            "judge_properties": _judge(judge.base_url),
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    [result] = run(config).rows
    assert result.error is None and result.n == 2 and result.score == pytest.approx(0.5)
    instruction = load_catalog().datasets["indian_protocols_clinical_qna"].instruction
    for event in model.log_events("completed"):
        system, user = event["messages"]
        assert system == {**system, "role": "system", "text": instruction}
        assert user["role"] == "user" and user["text"] in (
            "First-line drug for P. vivax per NVBDCP?",
            "Primaquine dose for P. vivax?",
        )


# -- speech: IndicVoices-R and the denoising-impact set ------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "fixture", "metric", "expected"),
    [
        # two one-word references, the second misheard: corpus WER 1/2
        ("indicvoices_r_hindi", "indicvoices_r", "wer", 0.5),
        # "take paracetamol 650" right, "blood pressure is high" one word wrong: 1 edit / 7 words
        ("denoising_impact_original", "denoising", "wer", 1 / 7),
    ],
)
def test_a_karma_speech_set_sends_its_audio_and_scores_the_transcript(
    tmp_path: Path, make_server: Any, entry: str, fixture: str, metric: str, expected: float
) -> None:
    import pyarrow.parquet as pq

    from evalkit.testing import audio_fingerprint

    rows = pq.read_table(FIXTURES / f"{fixture}.parquet").to_pylist()
    # the first transcript right, the second with one word misheard
    heard = [rows[0]["text"], "शुक्रिया" if fixture == "indicvoices_r" else "blood pressure is low"]
    fingerprints = [audio_fingerprint(row["audio"]["bytes"]) for row in rows]
    rules = [{"audio_fingerprint": fp, "answer": text} for fp, text in zip(fingerprints, heard, strict=True)]
    model = make_server({"answers": rules}, request_log=True)
    name, runspecs = local_copy(tmp_path, entry, FIXTURES / f"{fixture}.parquet")
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[name, metric]],
            "models": [model_entry("m", model.base_url)],
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    [result] = run(config).rows
    assert result.error is None and result.n == 2 and result.score == pytest.approx(expected)
    sent = sorted(fp for e in model.log_events("completed") for fp in e["messages"][-1]["audio_fingerprints"])
    assert sent == sorted(fingerprints)  # each row's own audio, as KARMA sends it


# -- AMQA: one sample per question variant -------------------------------------------------------------------------

AMQA = MCQ["amqa_bias_dataset"]
AMQA_ENTRIES = {
    "AMQABiasDataset": "amqa",
    "AMQARaceBiasDataset": "amqa_race",
    "AMQAGenderBiasDataset": "amqa_gender",
    "AMQASESBiasDataset": "amqa_ses",
}


@pytest.mark.parametrize("karma_class", sorted(AMQA_ENTRIES))
def test_amqa_asks_each_variant_karmas_class_asks_with_its_prompt(tmp_path: Path, karma_class: str) -> None:
    spec, sample = _entry_sample(tmp_path, AMQA_ENTRIES[karma_class], AMQA["row"])
    preprocessor = PREPROCESSORS.get(spec.preprocessor)()
    copies = list(preprocessor.expand([sample]))
    assert [c.meta["variant"] for c in copies] == AMQA["variants"][karma_class]  # no low_income question: skipped
    assert len({c.id for c in copies}) == len(copies) and {c.meta["group"] for c in copies} == {sample.id}
    for copy in copies:
        prompt = preprocessor.build(copy, PromptContext())
        assert [turn.text for turn in prompt.turns] == [AMQA["prompts"][copy.meta["variant"]]]
        assert copy.reference == AMQA["row"]["answer_idx"]


def test_amqa_answers_are_read_as_karma_reads_them() -> None:
    reader = POSTPROCESSORS.get(load_catalog().datasets["amqa"].postprocessor)()
    assert {answer: reader.process(answer) for answer in AMQA["read"]} == AMQA["read"]


def test_amqa_runs_each_variant_and_reports_the_gap_between_them(tmp_path: Path, make_server: Any) -> None:
    name, runspecs = local_copy(tmp_path, "amqa_race", FIXTURES / "amqa.parquet")
    # the white variant of the first question is answered wrong, every other one right
    answers = [
        {"match": "white patient has chest pain", "answer": "B"},
        {"match": "chest pain", "answer": "A"},
        {"match": "cough", "answer": "B"},
    ]
    model = make_server({"answers": answers}, request_log=True)
    pairs = [
        [name, "mcq_accuracy"],
        [name, "bias_disparity", {"variants": ["original", "desensitized", "white", "black"]}],
        [name, "bias_consistency"],
    ]
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": pairs,
            "models": [model_entry("m", model.base_url)],
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    rows = {row.metric: row for row in run(config).rows}
    assert all(row.error is None for row in rows.values())
    assert rows["mcq_accuracy"].n == rows["bias_disparity"].n == 8  # 2 questions x 4 race variants
    assert rows["mcq_accuracy"].score == pytest.approx(7 / 8)
    assert rows["bias_disparity"].score == pytest.approx(0.5)  # white 1/2 against 2/2 for the others
    # the first question's white variant answered otherwise: 1 of 2 questions alike across its variants
    consistency = rows["bias_consistency"]
    assert consistency.score == pytest.approx(0.5) and consistency.details["n_samples"] == 8
    assert consistency.details["race_consistency"] == pytest.approx(0.5)
    assert consistency.details["original_desensitized_consistency"] == 1.0
    assert len(model.log_events("completed")) == 8
