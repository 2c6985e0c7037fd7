"""The medical and vision catalogue: KARMA's datasets by the names KARMA users type, images wired, options shown.

KARMA users name datasets by hub repo id (``karma eval --datasets
openlifescienceai/pubmedqa``); each of KARMA's datasets that evalkit can express
must resolve to an entry of the ``medical`` category under that id. The hub
cannot be reached in tests, so the prompt and scoring paths the entries rely on
(dotted column paths into nested structs, options listed after the question,
letters scored against them) run on the structure fixtures and on hand-made rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.catalog import DatasetSpec, load_catalog
from evalkit.data.loading import iter_samples
from evalkit.data.sample import Sample
from evalkit.errors import RunspecError
from evalkit.metrics import METRICS
from evalkit.prompts.preprocessors import PREPROCESSORS, PromptContext

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runspec_structures"

#: KARMA's Supported Resources table (20 datasets), by hub id
KARMA_DATASETS = [
    "ChuGyouk/MedXpertQA",
    "Tonic/Health-Bench-Eval-OSS-2025-07",
    "ai4bharat/IN22-Conv",
    "ai4bharat/IndicVoices",
    "ekacare/MedMCQA-Indic",
    "ekacare/clinical_note_generation_dataset",
    "ekacare/eka-medical-asr-evaluation-dataset",
    "ekacare/ekacare_medical_history_summarisation",
    "ekacare/medical_records_parsing_validation_set",
    "ekacare/vistaar_small_asr_eval",
    "flaviagiammarino/vqa-rad",
    "mdwiratathya/SLAKE-vqa-english",
    "openlifescienceai/medmcqa",
    "openlifescienceai/medqa",
    "openlifescienceai/mmlu_anatomy",
    "openlifescienceai/mmlu_clinical_knowledge",
    "openlifescienceai/mmlu_college_biology",
    "openlifescienceai/mmlu_college_medicine",
    "openlifescienceai/mmlu_professional_medicine",
    "openlifescienceai/pubmedqa",
]
#: KARMA datasets given entries later (issue 34); runspecs/_names/karma.json lists every KARMA id
KARMA_ADDED = [
    "GBaker/MedQA-USMLE-4-options",
    "ekacare/indian_drug_mcqa",
    "TsinghuaC3I/MedXpertQA",
    "zou-lab/MedCaseReasoning",
    *["ekacare/mmlu-medical-mcqs-evaluation-dataset"] * 12,  # one entry per subset
    *["ai4bharat/IndicVoices"] * 14,  # the languages beyond Hindi that evalkit has codes for
    "ai4bharat/indicvoices_r",
    "ekacare/indian_protocols_based_clinical_QnA",
    "ekacare/denoising-impact-evaluation-dataset",
    *["Showing-KCL/AMQA"] * 4,  # all variants, and race, gender, SES
    "ekacare/Eka_NFI_MCQA",
    *["intronhealth/afrimedqa_v2"] * 3,  # KARMA's open, MCQ and harm selections of AfriMed-QA
    "HFXM/CARES-18K",
    "microsoft/PatientSafetyBench",
    "ekacare/medical_calculator_eval",
    # KARMA's prompts for data evalkit also asks with its own: the KARMA id reaches the variant (issue 41)
    "flaviagiammarino/vqa-rad",
    "mdwiratathya/SLAKE-vqa-english",
    "ChuGyouk/MedXpertQA",
    "openlifescienceai/pubmedqa",
]


@pytest.fixture(scope="module")
def catalog():  # type: ignore[no-untyped-def]
    return load_catalog(cwd=REPO)


@pytest.mark.parametrize("repo", KARMA_DATASETS)
def test_karma_hub_id_resolves_to_a_medical_entry(catalog, repo: str) -> None:  # type: ignore[no-untyped-def]
    (spec,) = catalog.resolve(repo)
    assert spec.category == "medical" and spec.hf_repo == repo
    assert spec.checked is not None and repo in (spec.checked.url + spec.checked.what)


def test_all_20_karma_datasets_and_nothing_else_are_medical(catalog) -> None:  # type: ignore[no-untyped-def]
    medical = [spec.hf_repo for spec in catalog.resolve("medical") if spec.hf_repo is not None]  # hub entries
    assert len(KARMA_DATASETS) == 20 and sorted(medical) == sorted(KARMA_DATASETS + KARMA_ADDED)


def test_healthbench_sends_its_conversation_and_scores_by_rubric(catalog) -> None:  # type: ignore[no-untyped-def]
    (spec,) = catalog.resolve("Tonic/Health-Bench-Eval-OSS-2025-07")
    assert (spec.split, spec.messages_column, spec.id_column) == ("oss_eval", "prompt", "prompt_id")
    assert spec.extra_columns == {"rubrics": "rubrics", "example_tags": "example_tags"}
    assert catalog.fitting_metrics(spec) == ["rubric_evaluation"]


def test_vision_has_at_least_15_image_entries(catalog) -> None:  # type: ignore[no-untyped-def]
    vision = catalog.resolve("vision")
    assert len(vision) >= 15
    for spec in vision:
        assert spec.image_column and spec.modality in ("image", "image+text"), spec.name
        assert spec.textual_input_column or spec.instruction, f"{spec.name}: the question must reach the model"
    listed = {spec.hf_repo for spec in vision}
    for repo in (
        "lmms-lab-encoder/POPE",
        "lmms-lab-encoder/DocVQA",
        "lmms-lab-encoder/ChartQA",
        "lmms-lab-encoder/textvqa",
        "AI4Math/MathVista",
    ):
        assert repo in listed


def test_every_image_entry_names_a_metric_that_fits(catalog) -> None:  # type: ignore[no-untyped-def]
    expected = {"docvqa_val": "anls", "chartqa": "relaxed_accuracy", "textvqa_val": "vqa_accuracy", "pope": "pope_f1"}
    for name, metric in expected.items():
        assert catalog.fitting_metrics(catalog.datasets[name])[0] == metric
    for spec in [*catalog.resolve("vision"), *catalog.resolve("medical")]:
        for metric in catalog.fitting_metrics(spec):
            assert metric in METRICS.names(), f"{spec.name}: {metric}"


def _prompt_text(spec: DatasetSpec, fixture: str) -> list[tuple[str, Sample]]:
    preprocessor = PREPROCESSORS.get(spec.preprocessor)()
    samples = list(iter_samples(spec, source_override=str(FIXTURES / f"{fixture}.parquet")))
    return [(preprocessor.build(s, PromptContext()).turns[0].text or "", s) for s in samples]


def test_nested_medqa_row_becomes_a_lettered_question_scored_by_letter(catalog) -> None:  # type: ignore[no-untyped-def]
    [(text, sample), _] = _prompt_text(catalog.datasets["medqa"], "olsai_mcq")
    # KARMA's template (the entry's instruction) around the question and its options
    assert "Question: Which nerve supplies the deltoid?\nA. Axillary\nB. Radial\nC. Ulnar\nD. Median Response" in text
    assert sample.reference == "A" and sample.meta["choices"] == {
        "A": "Axillary",
        "B": "Radial",
        "C": "Ulnar",
        "D": "Median",
    }
    metric = METRICS.get("mcq_accuracy")(language="en")
    assert metric.score("The answer is (A).", sample).score == 1.0
    assert metric.score("Radial", sample).score == 0.0
    assert metric.score("axillary", sample).score == 1.0  # an option's text, read through the {letter: text} mapping


def test_pubmedqa_context_comes_before_the_question(catalog) -> None:  # type: ignore[no-untyped-def]
    [(text, _), _] = _prompt_text(catalog.datasets["pubmedqa"], "olsai_pubmedqa")
    assert text.index("Context: Statins were given before surgery.\nAF fell.") < text.index("Do statins reduce AF?")
    assert text.endswith("A. yes\nB. no\nC. maybe")


def test_option_columns_are_listed_and_scored(catalog) -> None:  # type: ignore[no-untyped-def]
    [(text, sample), _] = _prompt_text(catalog.datasets["medmcqa"], "medmcqa")
    assert "Question: Vitamin deficient in scurvy?\nA. A\nB. B12\nC. C\nD. D Response" in text
    assert sample.reference == 2  # cop, 0-based: C
    metric = METRICS.get("mcq_accuracy")(language="en")
    assert metric.score("C", sample).score == 1.0 and metric.score("B12", sample).score == 0.0


def test_mmmu_options_written_as_a_python_list_are_parsed(catalog) -> None:  # type: ignore[no-untyped-def]
    [(text, sample), _] = _prompt_text(catalog.datasets["mmmu_val"], "mmmu")
    assert text.endswith("<image 1> Which drug is shown?\n\nA. Aspirin\nB. Ibuprofen")
    assert METRICS.get("mcq_accuracy")(language="en").score("Aspirin", sample).score == 1.0


def test_a_dotted_column_is_a_path_only_when_no_column_has_that_name(tmp_path: Path) -> None:
    rows = [{"data": {"Q": "nested"}, "data.Q": "flat", "turns": [{"content": "first"}]}]
    source = tmp_path / "rows.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    spec = DatasetSpec.model_validate(
        {
            "name": "t",
            "path": str(source),
            "language": "en",
            "modality": "text",
            "textual_input_column": "data.Q",
            "target_column": "turns.0.content",
            "file": str(tmp_path / "x.json"),
        }
    )
    (sample,) = iter_samples(spec)
    assert sample.text == "flat" and sample.reference == "first"
    bad = spec.model_copy(update={"target_column": "turns.3.content"})
    with pytest.raises(RunspecError, match=r"target_column: column 'turns.3.content' is not in the data"):
        list(iter_samples(bad))


def test_a_task_default_metric_fits_every_entry_of_the_task(catalog) -> None:  # type: ignore[no-untyped-def]
    """`evalkit run --dataset NAME` uses the task's default metric, or the entry's first where it narrows them."""
    from evalkit.config.pairs import default_metrics
    from evalkit.metrics import METRICS

    narrowed = []
    for spec in [*catalog.resolve("vision"), *catalog.resolve("medical")]:
        chosen = default_metrics(catalog, spec.name, METRICS)
        assert chosen and set(chosen) <= set(catalog.fitting_metrics(spec)), f"{spec.name}: {chosen} does not fit"
        if catalog.tasks[spec.task].default_metric not in catalog.fitting_metrics(spec):
            narrowed.append(spec.name)
    assert "chef_omnibenchmark_multiturn" in narrowed  # its entry lists the multi-turn metric only


def test_mmbench_nan_cells_are_treated_as_absent(catalog) -> None:  # type: ignore[no-untyped-def]
    """MMBench's exports write "nan" in unused option and hint cells: they must not become options or context."""
    [(first, sample), (second, _)] = _prompt_text(catalog.datasets["mmbench_en_dev"], "mmbench")
    assert first.endswith("What is the weather?\n\nA. sunny\nB. rainy") and "nan" not in first
    assert second.index("Context: A farm photo.") < second.index("Which animal is shown?")
    assert second.endswith("A. cat\nB. dog\nC. cow\nD. hen")
    metric = METRICS.get("mcq_accuracy")(language="en")
    assert metric.score("A", sample).score == 1.0 and metric.score("C", sample).score == 0.0


def test_info_dataset_accepts_the_hub_id_a_karma_user_types(catalog) -> None:  # type: ignore[no-untyped-def]
    from evalkit.cli.info import dataset_info

    info = dataset_info("openlifescienceai/pubmedqa", catalog)
    assert info["name"] == "karma_pubmedqa" and info["category"] == "medical"
    assert info["checked"]["url"].startswith("https://huggingface.co/datasets/openlifescienceai/pubmedqa")


def test_a_medqa_layout_runs_end_to_end_with_options_in_the_prompt(tmp_path: Path, make_server) -> None:  # type: ignore[no-untyped-def]
    """The shipped MedQA mapping, on a local copy of its layout, through `evalkit run` against a loopback server.

    The server answers only when the options reached it ("B. Radial" is in the prompt), so a
    prompt without them would score nothing; both answer (A) after "Final Answer:", as KARMA's template asks:
    right for the first question, wrong for the second.
    """
    import shutil
    import subprocess
    import sys

    from helpers import model_entry, write_config

    folder = tmp_path / "runspecs" / "medical_local"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "olsai_mcq.parquet", tmp_path / "medqa_rows.parquet")
    shipped = json.loads((REPO / "runspecs" / "medical" / "medical_mcq.json").read_text(encoding="utf-8"))
    entry = {k: v for k, v in shipped["medqa"].items() if k not in ("hf_repo", "checked", "url")}
    (folder / "local_mcq.json").write_text(
        json.dumps({"_task": shipped["_task"], "medqa_local": {**entry, "path": "../../medqa_rows.parquet"}}),
        encoding="utf-8",
    )
    server = make_server(
        {
            "answers": [
                {"match": "deltoid?\nA. Axillary\nB. Radial", "answer": "Final Answer: (A)"},
                {"match": "anaphylaxis?\nA. Atropine\nB. Adrenaline", "answer": "Final Answer: **(A)**"},
            ]
        },
        request_log=True,
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["medqa_local", "mcq_accuracy"]],
            "models": [model_entry("m", server.base_url)],
            "runspecs_dir": str(tmp_path / "runspecs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", "-c", str(config), "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "runs").glob("*_*")
    (row,) = json.loads((run_dir / "results.json").read_text())["results"]
    assert row["score"] == 0.5 and row["n"] == 2 and row["n_failed"] == 0
    texts = [e["messages"][-1]["text"] for e in server.log_events("completed")]
    assert len(texts) == 2 and all(t.startswith(MCQ_INSTRUCTION) for t in texts)


MCQ_INSTRUCTION = "Instructions: The following are multiple choice questions about medical knowledge."
