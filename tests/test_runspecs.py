"""The shipped runspec catalogue: schema checks and offline column-structure checks.

Hub datasets cannot be downloaded in tests, so every hub entry is paired with a
tiny local fixture that has the same column names and Arrow types as the
published dataset (tests/fixtures/runspec_structures, written by
make_fixtures.py there). Loading that fixture through evalkit's own loader with
the entry's column mapping proves the mapping points at columns that exist and
produces the Sample fields the rest of the pipeline reads.
"""

from __future__ import annotations

import importlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalkit.catalog import resolve_runspec_path

REPO = Path(__file__).resolve().parent.parent
RUNSPECS = REPO / "runspecs"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runspec_structures"
ESPEAK = REPO / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"

# Dataset-entry keys documented in the runspec format (LALMEval keys plus evalkit's),
# and two that evalkit.catalog also accepts: `accented_column` (the accented filter
# reads it) and `extra_columns` ({meta key: column}, e.g. a spoken query's transcript
# for judges, which must not reach the model as text).
ALLOWED_KEYS = {
    "hf_repo",
    "path",
    "subset",
    "split",
    "data_files",
    "media_dir",
    "language",
    "modality",
    "audio_column",
    "image_column",
    "target_column",
    "textual_input_column",
    "instruction_column",
    "additional_instruction_column",
    "id_column",
    "choices_column",
    "accent_column",
    "accented_column",
    "gender_column",
    "speaker_column",
    "duration_column",
    "messages_column",
    "turns_column",
    "extra_columns",
    "image_position",
    "chain_of_thought",
    "chain_of_thought_form",
    "generation",
    "system_prompt",
    "instruction",
    "preprocessor",
    "postprocessor",
    "metrics",
    "long_audio",
    "description",
    "license",
    "url",
    "checked",
    "private",
    "unavailable",
}
REQUIRED_KEYS = {"language"}
TASK_KEYS = {"description", "metrics", "default_metric"}
MODALITIES = {"audio", "text", "audio+text", "image", "image+text"}
LONG_AUDIO = {"chunk", "truncate"}
COLUMN_KEYS = (
    "audio_column",
    "image_column",
    "target_column",
    "textual_input_column",
    "instruction_column",
    "additional_instruction_column",
    "id_column",
    "choices_column",
    "accent_column",
    "accented_column",
    "gender_column",
    "speaker_column",
    "duration_column",
    "messages_column",
    "turns_column",
)
# The metric names evalkit provides (aliases included); the registry is checked too,
# once every metric module exists.
PROJECT_METRICS = {
    # AU-Harness's and ChEF's metrics (issues 33 and 34)
    "bfcl_match_score",
    "cg_classification_accuracy",
    "ch3ef_accuracy",
    "chef_vqa_accuracy",
    "lamm_vqa_accuracy",
    "cider",
    "counting_accuracy",
    "counting_mae",
    "detection_map",
    "detection_mar",
    "fg_classification_accuracy",
    "fg_classification_multiturn_accuracy",
    "fg_classification_multiturn_ppl_accuracy",
    "gsm8k_exact_match",
    "inside_bbox_accuracy",
    "inside_human_bbox_accuracy",
    "joint_goal_accuracy",
    "llm_judge_big_bench_audio",
    "llm_judge_redteaming",
    "mt_bench_llm_judge",
    "slot_accuracy",
    "slot_f1",
    "sql_score",
    "svt_ocr_accuracy",
    "ucmerced_classification_accuracy",
    "lamm_facial_hair_accuracy",
    "lamm_facial_smile_accuracy",
    "chef_caption_bleu4",
    "chef_caption_rouge_l",
    "lamm_classification_accuracy",
    "lamm_detection_recall",
    "lamm_detection_precision",
    "lamm_detection_recall_wocat",
    "lamm_detection_precision_wocat",
    "loglikelihood_accuracy_per_token",
    "winoground_text_score",
    "winoground_image_score",
    "winoground_group_score",
    "winoground_yesno_text_score",
    "winoground_yesno_image_score",
    "winoground_yesno_group_score",
    "karma:exact_match",
    "karma:accuracy",
    "karma:f1",
    "karma:tokenised_f1",
    "karma:wer",
    "karma:cer",
    "karma:bleu",
    "numeric_tolerance",
    "rouge",
    "harm_detection_accuracy",
    "geographic_accuracy",
    "demographic_accuracy",
    "ndcg@k",
    "recall@k",
    "map@k",
    "precision@k",
    "cpwer",
    "wder",
    "speaker_diarization",
    "word_error_rate",
    "wer",
    "cer",
    "bleu",
    "semantic_wer",
    "semantic_cer",
    "entity_wer",
    "chrf",
    "ter",
    "exact_match",
    "accuracy",
    "f1",
    "mcq_accuracy",
    "llm_judge_binary",
    "llm_judge_detailed",
    "rubric_evaluation",
    "json_rubric_evaluation",
    "karma_json_rubric_evaluation",
    "medcasereasoning_diagnostic_accuracy",
    "medcasereasoning_reasoning_recall",
    "answer_rubric_evaluation",
    "query_rubric_evaluation",
    "semantic_wer_metric",
    "bias_disparity",
    "bias_consistency",
    "mme_accuracy",
    "mme_accuracy_plus",
    "stratified_accuracy",
    "tokenised_f1",
    "vqa_accuracy",
    "anls",
    "relaxed_accuracy",
    "pope_f1",
    "pope_accuracy",
    "pope_precision",
    "pope_recall",
    "pope_yes_ratio",
}
TRANSLATION_TASKS = {"speech_translation", "medical_translation"}
ASR_TASKS = {"asr", "medical_asr"}

# Which fixture mirrors each hub dataset's column layout. Keyed by hub id, or by
# (hub id, subset) where one repo holds several layouts. A new hub entry must be
# added here, with a fixture, or test_every_hub_entry_has_a_fixture fails.
FIXTURE_BY_REPO: dict[str | tuple[str, str], str] = {
    # KARMA's datasets added for issue 34 (layouts in karma_remaining_fixtures.py)
    "intronhealth/afrimedqa_v2": "afrimedqa_v2",
    "HFXM/CARES-18K": "cares_18k",
    "microsoft/PatientSafetyBench": "patient_safety_bench",
    "ekacare/medical_calculator_eval": "medical_calculator",
    "openslr/librispeech_asr": "librispeech",
    "fixie-ai/common_voice_17_0": "common_voice",
    "google/fleurs": "fleurs",
    "facebook/voxpopuli": "voxpopuli",
    "hf-audio/esb-datasets-test-only-sorted": "esb",
    "distil-whisper/tedlium-long-form": "tedlium_long_form",
    "CAiRE/ASCEND": "ascend",
    "edinburghcstr/edacc": "edacc",
    "FBK-MT/Speech-MASSIVE": "speech_massive",
    "fixie-ai/covost2": "covost2",
    "DynamicSuperb/SpeakerCounting_LibriTTS-TestClean": "dynamic_superb_speaker_counting",
    "DynamicSuperb/InstrumentSourceClassification_Nsynth": "dynamic_superb",
    "DynamicSuperb/SpoofDetection_ASVspoof2015": "dynamic_superb",
    "DynamicSuperb/SceneFakeDetection_SceneFake": "dynamic_superb",
    "DynamicSuperb/FraudRobocallRecognition_Robocall": "dynamic_superb",
    "DynamicSuperb/FraudRobocallRecognition_Promo": "dynamic_superb",
    "DynamicSuperb/ChildrenSongTranscriptVerification_CSD": "dynamic_superb",
    "DynamicSuperb/HEARPercussionInstrumentsClassification_BeijingOperaPercussion-Fold1": "dynamic_superb",
    "DynamicSuperb/HEAREnvironmentalSoundClassification_ESC50-Fold3": "dynamic_superb",
    "DynamicSuperb/PTBRSpeechRecognition_CORAA": "dynamic_superb",
    # AU-Harness's Dynamic-SUPERB sets (issue 33): file, audio, instruction, label
    "DynamicSuperb/SuperbIC_SLURP-Intent": "dynamic_superb",
    "DynamicSuperb/SpoofDetection_ASVspoof2017": "dynamic_superb",
    "DynamicSuperb/NoiseDetection_LJSpeech_MUSAN-Gaussian": "dynamic_superb",
    "DynamicSuperb/StutteringDetection_SEP28k": "dynamic_superb",
    "DynamicSuperb/PhoneSegmentCounting_VoxAngeles": "dynamic_superb",
    # AU-Harness's QA and math sets (issue 33; tests/fixtures/runspec_structures/auharness_qa_fixtures.py)
    "fixie-ai/big_bench_audio": "big_bench_audio",
    "mistralai/gsm8k_speech": "gsm8k_speech",
    "openai/gsm8k": "gsm8k",
    # MT-Bench (issue 33; tests/fixtures/runspec_structures/mtbench_fixtures.py): turns, reference and audio as lists
    "ServiceNow-AI/mt-bench_audio": "mtbench",
    # BFCL, Spider and SpokenWOZ (issue 33; tests/fixtures/runspec_structures/auharness_structured_fixtures.py)
    "ServiceNow-AI/BFCL_v3_audio": "bfcl_v3_audio",
    "ServiceNow-AI/spider_audio": "spider_audio",
    "pirxus/spokenwoz-whisper": "spokenwoz_whisper",
    # MMAU (lmms-lab's parquet release, now lmms-lab-audio's): question, choices as one JSON-list string, answer text
    "lmms-lab-audio/mmau": "mmau",
    # SAKURA: one repo per track, single- and multi-hop instruction/answer columns
    "SLLM-multi-hop/AnimalQA": "sakura",
    "SLLM-multi-hop/EmotionQA": "sakura",
    "SLLM-multi-hop/GenderQA": "sakura",
    "SLLM-multi-hop/LanguageQA": "sakura",
    # AudioBench releases: context (audio), instruction, answer
    "AudioLLMs/peoples_speech_test_v2": "audiobench",
    "AudioLLMs/peoples_speech_test": "audiobench",
    "AudioLLMs/librispeech_test_clean": "audiobench",
    "AudioLLMs/gigaspeech_test": "audiobench",
    "AudioLLMs/tedlium3_test": "audiobench",
    "AudioLLMs/aishell_asr_zh_test_v1": "audiobench",
    "AudioLLMs/earnings22_test": "audiobench",
    "AudioLLMs/earnings21_test": "audiobench",
    "AudioLLMs/seame_dev_man": "audiobench",
    # AU-Harness's ASR sets (issue 33; tests/fixtures/runspec_structures/auharness_asr_fixtures.py)
    "AudioLLMs/seame_dev_sge": "audiobench",
    "AudioLLMs/gigaspeech2-test": "audiobench",
    "AudioLLMs/tedlium3_long_form_test": "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "ASR-PART1-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "ASR-PART2-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "ASR-PART3-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "ASR-PART4-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "ASR-PART5-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "ASR-PART6-Test"): "audiobench",
    "facebook/multilingual_librispeech": "multilingual_librispeech",
    "edinburghcstr/ami": "ami",
    "AudioLLMs/iemocap_emotion_recognition": "audiobench",
    "AudioLLMs/meld_emotion_test": "audiobench",
    "AudioLLMs/meld_sentiment_test": "audiobench",
    "AudioLLMs/voxceleb_gender_test": "audiobench",
    "AudioLLMs/iemocap_gender_recognition": "audiobench",
    "AudioLLMs/voxceleb_accent_test": "audiobench",
    "AudioLLMs/slue_p2_sqa5_test": "audiobench",
    "AudioLLMs/public_sg_speech_qa_test": "audiobench",
    "AudioLLMs/spoken_squad_test": "audiobench",
    "AudioLLMs/audiocaps_test": "audiobench",
    "AudioLLMs/wavcaps_test": "audiobench",
    "AudioLLMs/clotho_aqa_test": "audiobench",
    "AudioLLMs/audiocaps_qa_test": "audiobench",
    "AudioLLMs/wavcaps_qa_test": "audiobench",
    "AudioLLMs/covost2_en_id_test_v1": "audiobench",
    "AudioLLMs/covost2_en_ta_test_v1": "audiobench",
    "AudioLLMs/covost2_id_en_test_v1": "audiobench",
    "AudioLLMs/covost2_ta_en_test_v2": "audiobench",
    # AudioBench multiple choice: choices is one pre-formatted string
    "AudioLLMs/cn_college_listen_mcq_test": "audiobench_mcq",
    # AU-Harness's MNSC QA/summarisation configs and MMAU-mini (issue 33): AudioBench's layouts
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "PQA-AR-Dialogue-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "PQA-AR-Sentence-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "PQA-GR-Dialogue-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "PQA-GR-Sentence-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "SQA-PART3-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "SQA-PART4-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "SQA-PART5-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "SQA-PART6-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "SDS-PART3-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "SDS-PART4-Test"): "audiobench",
    ("AudioLLMs/Multitask-National-Speech-Corpus-v1-extend", "SDS-PART5-Test"): "audiobench",
    "AudioLLMs/MMAU-mini": "audiobench_mcq",
    "AudioLLMs/dream_tts_mcq_test": "audiobench_mcq",
    "AudioLLMs/mu_chomusic_test": "audiobench_mcq",
    # AudioBench spoken instructions: + speech_instruction
    "AudioLLMs/alpaca_audio_test": "audiobench_speech_instruction",
    "AudioLLMs/openhermes_instruction_test": "audiobench_speech_instruction",
    # VoiceBench: one repo, a layout per subset
    ("hlt-lab/voicebench", "sd-qa"): "voicebench_reference",
    ("hlt-lab/voicebench", "mmsu"): "voicebench_reference",
    ("hlt-lab/voicebench", "openbookqa"): "voicebench_reference",
    ("hlt-lab/voicebench", "bbh"): "voicebench_bbh",
    ("hlt-lab/voicebench", "ifeval"): "voicebench_ifeval",
    ("hlt-lab/voicebench", "alpacaeval"): "voicebench_prompt",
    ("hlt-lab/voicebench", "alpacaeval_full"): "voicebench_prompt",
    ("hlt-lab/voicebench", "alpacaeval_speaker"): "voicebench_prompt",
    ("hlt-lab/voicebench", "commoneval"): "voicebench_prompt",
    ("hlt-lab/voicebench", "wildvoice"): "voicebench_prompt",
    ("hlt-lab/voicebench", "advbench"): "voicebench_prompt",
    # medical (KARMA's datasets; layouts in medical_vision_fixtures.py)
    "openlifescienceai/medqa": "olsai_mcq",
    "openlifescienceai/mmlu_anatomy": "olsai_mcq",
    "openlifescienceai/mmlu_clinical_knowledge": "olsai_mcq",
    "openlifescienceai/mmlu_college_biology": "olsai_mcq",
    "openlifescienceai/mmlu_college_medicine": "olsai_mcq",
    "openlifescienceai/mmlu_professional_medicine": "olsai_mcq",
    "openlifescienceai/pubmedqa": "olsai_pubmedqa",
    "openlifescienceai/medmcqa": "medmcqa",
    "ekacare/MedMCQA-Indic": "medmcqa",
    "ChuGyouk/MedXpertQA": "medxpertqa",
    "flaviagiammarino/vqa-rad": "vqa_image",
    "mdwiratathya/SLAKE-vqa-english": "vqa_image",
    "ai4bharat/IndicVoices": "indicvoices",
    "ekacare/eka-medical-asr-evaluation-dataset": "eka_asr",
    "ekacare/vistaar_small_asr_eval": "vistaar",
    "ai4bharat/IN22-Conv": "in22conv",
    "ekacare/clinical_note_generation_dataset": "eka_structured",
    "ekacare/medical_records_parsing_validation_set": "eka_records",
    "ekacare/ekacare_medical_history_summarisation": "eka_summary",
    "Tonic/Health-Bench-Eval-OSS-2025-07": "healthbench",
    # KARMA datasets added for issue 34 (layouts in karma_fixtures.py)
    "GBaker/MedQA-USMLE-4-options": "medqa_usmle",
    "ekacare/indian_drug_mcqa": "indian_drug_mcqa",
    ("TsinghuaC3I/MedXpertQA", "Text"): "medxpertqa_text",
    "ekacare/mmlu-medical-mcqs-evaluation-dataset": "eka_mmlu",
    "zou-lab/MedCaseReasoning": "medcasereasoning",
    "ai4bharat/indicvoices_r": "indicvoices_r",
    "ekacare/indian_protocols_based_clinical_QnA": "indian_protocols_qna",
    "ekacare/denoising-impact-evaluation-dataset": "denoising",
    "Showing-KCL/AMQA": "amqa",
    "ekacare/Eka_NFI_MCQA": "eka_nfi",
    # vision (layouts from lmms-eval's task files)
    "lmms-lab-encoder/POPE": "pope",
    "lmms-lab-encoder/textvqa": "textvqa",
    "lmms-lab-encoder/DocVQA": "docvqa",
    ("lmms-lab-encoder/DocVQA", "InfographicVQA"): "infovqa",
    "lmms-lab/MMBench_EN": "mmbench",
    "flaviagiammarino/path-vqa": "vqa_image",
    "lmms-lab-encoder/ChartQA": "chartqa",
    "lmms-lab-encoder/ai2d": "ai2d",
    "lmms-lab-encoder/MMMU": "mmmu",
    "MMMU/MMMU": "mmmu",
    "AI4Math/MathVista": "mathvista",
    "lmms-lab-encoder/ScienceQA": "scienceqa",
    "lmms-lab-encoder/RealWorldQA": "realworldqa",
    "echo840/OCRBench": "ocrbench",
    "lmms-lab-encoder/MME": "mme",
}

ISO_CODE = re.compile(r"^[a-z]{2,3}(-[a-z]{2,3})?$")


# ----------------------------------------------------------------- reading the files


def _runspec_files() -> list[Path]:
    """Runspec files the catalogue reads: <category>/<task>.json, `_`-folders excluded."""
    return sorted(p for p in RUNSPECS.glob("*/*.json") if not p.parent.name.startswith(("_", ".")))


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _entries() -> list[tuple[Path, str, dict[str, Any]]]:
    return [(path, name, entry) for path in _runspec_files() for name, entry in _load(path).items() if name != "_task"]


RUNSPEC_FILES = _runspec_files()
ENTRIES = _entries()


def _entry_id(item: tuple[Path, str, dict[str, Any]]) -> str:
    return item[1]


def _fixture_for(entry: dict[str, Any]) -> str | None:
    repo = entry.get("hf_repo")
    if repo is None:
        return None
    return FIXTURE_BY_REPO.get((repo, entry.get("subset") or ""), FIXTURE_BY_REPO.get(repo))


def _registry_names(module: str, attribute: str, fallback: set[str]) -> set[str]:
    """Names in a registry if its module exists yet, else the names the brief guarantees."""
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError:
        return fallback
    registry = getattr(imported, attribute, None)
    return set(registry.names()) if registry is not None else fallback


_CATALOG: list[Any] = []


def _catalog(load_catalog: Any) -> Any:
    """One catalogue for the whole module: reading ~100 entries per test would only add time."""
    if not _CATALOG:
        _CATALOG.append(load_catalog(cwd=REPO))
    return _CATALOG[0]


# ----------------------------------------------------------------- schema


def test_catalogue_is_not_trivially_empty() -> None:
    categories = {p.parent.name for p in RUNSPEC_FILES}
    assert {"speech_recognition", "paralinguistics", "spoken_language_understanding"} <= categories
    assert len(ENTRIES) >= 60


@pytest.mark.parametrize("path", RUNSPEC_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_runspec_file_is_a_json_object_with_a_task_block(path: Path) -> None:
    data = _load(path)
    assert isinstance(data, dict) and data, f"{path}: expected a non-empty JSON object"
    task = data.get("_task")
    assert isinstance(task, dict), f"{path}: missing the `_task` block"
    assert set(task) <= TASK_KEYS, f"{path}: unknown `_task` keys {set(task) - TASK_KEYS}"
    assert isinstance(task.get("description"), str) and task["description"].strip()
    metrics = task.get("metrics")
    assert isinstance(metrics, list) and metrics and all(isinstance(m, str) for m in metrics)
    assert task.get("default_metric") in metrics, f"{path}: default_metric must be one of the task's metrics"
    assert len(data) > 1, f"{path}: a task file needs at least one dataset"


@pytest.mark.parametrize("item", ENTRIES, ids=_entry_id)
def test_entry_keys(item: tuple[Path, str, dict[str, Any]]) -> None:
    path, name, entry = item
    assert re.fullmatch(r"[a-z0-9][a-z0-9_]*", name), f"{path}: dataset name {name!r} should be snake_case"
    assert set(entry) <= ALLOWED_KEYS, f"{path}: {name}: unknown keys {sorted(set(entry) - ALLOWED_KEYS)}"
    assert set(entry) >= REQUIRED_KEYS, f"{path}: {name}: missing {sorted(REQUIRED_KEYS - set(entry))}"
    if "unavailable" in entry:  # data that cannot be had: the entry only says why
        assert isinstance(entry["unavailable"], str) and entry["unavailable"].strip(), f"{path}: {name}: say why"
        assert not {"hf_repo", "path", "private"} & set(entry), f"{path}: {name}: an unavailable entry has no source"
        assert entry.get("description") and entry.get("url"), f"{path}: {name}: say what the data was and where"
        return
    if entry.get("private"):  # a licensed corpus: the user's config gives its path (dataset_paths)
        assert "hf_repo" not in entry and "path" not in entry, f"{path}: {name}: a private entry names no source"
    else:
        assert ("hf_repo" in entry) != ("path" in entry), f"{path}: {name}: needs exactly one of hf_repo / path"
    if "hf_repo" in entry:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", entry["hf_repo"]), f"{name}: hf_repo must be owner/name"
    assert entry.get("modality", "audio") in MODALITIES
    assert entry.get("long_audio", "chunk") in LONG_AUDIO
    for key in COLUMN_KEYS:
        if key in entry:
            assert isinstance(entry[key], str) and entry[key], f"{name}.{key} must be a column name"
    extra = entry.get("extra_columns", {})
    assert isinstance(extra, dict) and all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in extra.items()
    )
    standard = {"language", "index", "accent", "accented", "gender", "speaker", "duration", "choices"}
    assert not (set(extra) & standard), f"{name}: extra_columns would overwrite standard meta keys"
    modality = entry.get("modality", "audio")
    if modality == "audio":
        # the preprocessor sends any textual input along with the audio; an audio-only
        # task (e.g. a spoken query) must not leak its transcript that way
        assert "textual_input_column" not in entry, f"{name}: audio-only, but maps a textual input"
    if modality == "audio+text":
        assert "textual_input_column" in entry, f"{name}: audio+text needs textual_input_column"
    # a turns_column conversation carries each turn's text or audio itself (MT-Bench's audio and text variants)
    if "audio" in modality:
        assert "audio_column" in entry or "turns_column" in entry, f"{name}: an audio dataset needs audio_column"
    else:
        assert "audio_column" not in entry, f"{name}: a text dataset must not send audio"
        # ChEF's basic recipes ask an image by the instruction alone (its prompt is the whole question)
        asked_by_instruction = "image_column" in entry and bool(entry.get("instruction"))
        assert {"textual_input_column", "messages_column", "turns_column"} & set(entry) or asked_by_instruction, (
            f"{name}: a text dataset needs textual_input_column (or a messages_column or turns_column conversation)"
        )
    # a dataset-given conversation (messages_column) already tells the model what to answer; AU-Harness's prompt
    # (AuHarnessPreprocessor) is its task's user_prompt and the text input, and a text-only question needs no prompt
    auharness_text = entry.get("preprocessor") == "AuHarnessPreprocessor" and modality == "text"
    assert (
        entry.get("instruction")
        or entry.get("instruction_column")
        or entry.get("messages_column")
        or (auharness_text and entry.get("textual_input_column"))
        or entry.get("preprocessor") == "MultiturnPreprocessor"  # MT-Bench's turns are the questions themselves
        or entry.get("preprocessor") == "BfclPreprocessor"  # BFCL's _no_prompt: the request's tools say what to do
    ), f"{name}: the model needs to be told what to do (instruction or instruction_column)"
    for key in ("description", "license", "url", "instruction"):
        if key in entry:
            assert isinstance(entry[key], str) and entry[key].strip()


@pytest.mark.parametrize("item", ENTRIES, ids=_entry_id)
def test_language_is_a_normalised_code(item: tuple[Path, str, dict[str, Any]]) -> None:
    path, name, entry = item
    language = entry["language"]
    assert ISO_CODE.fullmatch(language), f"{path}: {name}: language {language!r} is not a lower-case ISO code"
    languages = pytest.importorskip("evalkit.languages", reason="evalkit.languages is not written yet")
    assert languages.normalize_language(language) == language, f"{name}: {language!r} is not in normalised form"
    task = path.stem
    if task in TRANSLATION_TASKS:
        source, target = languages.split_pair(language)
        assert target is not None and source != target, f"{name}: translation needs a '<src>-<tgt>' pair"
    else:
        assert "-" not in language, f"{name}: only translation datasets use a language pair"


def test_asr_entries_say_what_to_do_with_long_audio() -> None:
    asr = [(name, e) for path, name, e in ENTRIES if path.stem in ASR_TASKS]
    assert asr
    for name, entry in asr:
        assert entry.get("long_audio") in LONG_AUDIO, f"{name}: ASR entries set long_audio explicitly"


def test_dataset_names_are_unique_across_files() -> None:
    seen: dict[str, Path] = {}
    for path in RUNSPEC_FILES:
        # json.loads keeps the last of duplicate keys; catch duplicates inside one file too
        pairs = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=lambda kv: kv)
        names = [k for k, _ in pairs if k != "_task"]
        assert len(names) == len(set(names)), f"{path}: a dataset name appears twice in the file"
        for name in names:
            assert name not in seen, f"{name} is defined in both {seen[name]} and {path}"
            seen[name] = path


def test_task_names_are_unique_across_categories() -> None:
    stems = [p.stem for p in RUNSPEC_FILES]
    assert len(stems) == len(set(stems)), "a task file name is used in two categories"


@pytest.mark.parametrize("item", [i for i in ENTRIES if "path" in i[2]], ids=_entry_id)
def test_local_paths_exist(item: tuple[Path, str, dict[str, Any]]) -> None:
    path, name, entry = item
    target = resolve_runspec_path(path, entry["path"])
    if target == ESPEAK.resolve() and not target.exists():
        pytest.skip("the shipped espeak speech set is not committed yet")
    assert target.exists(), f"{path}: {name}.path -> {target} does not exist"


def test_processors_are_registered() -> None:
    preprocessors = _registry_names("evalkit.prompts.preprocessors", "PREPROCESSORS", {"GeneralPreprocessor"})
    postprocessors = _registry_names("evalkit.processing.postprocessors", "POSTPROCESSORS", {"GeneralPostprocessor"})
    for path, name, entry in ENTRIES:
        assert entry.get("preprocessor", "GeneralPreprocessor") in preprocessors, f"{path}: {name}.preprocessor"
        assert entry.get("postprocessor", "GeneralPostprocessor") in postprocessors, f"{path}: {name}.postprocessor"


def _used_metrics() -> dict[str, list[str]]:
    """metric name -> the places (file: dataset) that name it."""
    used: dict[str, list[str]] = {}
    for path in RUNSPEC_FILES:
        data = _load(path)
        for metric in data["_task"]["metrics"]:
            used.setdefault(metric, []).append(f"{path.relative_to(REPO)}: _task")
        for name, entry in data.items():
            for metric in entry.get("metrics", []) if name != "_task" else []:
                used.setdefault(metric, []).append(f"{path.relative_to(REPO)}: {name}")
    return used


def test_metric_names_are_ones_evalkit_provides() -> None:
    """Catches typos even before every metric module exists: only the project's metric names are allowed."""
    for metric, places in _used_metrics().items():
        assert metric in PROJECT_METRICS, f"unknown metric {metric!r} in {places}"


def test_metrics_are_registered() -> None:
    from evalkit.metrics import METRICS

    try:
        known = set(METRICS.names())
    except ModuleNotFoundError as error:
        pytest.skip(f"metric modules are not all written yet ({error.name}); registry not checked")
    used = _used_metrics()
    missing = sorted(set(used) - known)
    not_yet = [m for m in missing if m in PROJECT_METRICS]
    assert not (set(missing) - PROJECT_METRICS), f"unknown metrics: {sorted(set(missing) - PROJECT_METRICS)}"
    if not_yet:
        pytest.skip(f"metric modules not available yet for {not_yet}; the other names are registered")


def test_entry_metrics_suit_their_task() -> None:
    """Per-dataset overrides only narrow the task's list, so task-level selection stays meaningful."""
    for path in RUNSPEC_FILES:
        data = _load(path)
        task_metrics = set(data["_task"]["metrics"])
        for name, entry in data.items():
            if name != "_task" and "metrics" in entry:
                assert entry["metrics"], f"{name}: an empty metrics override selects nothing"
                assert set(entry["metrics"]) <= task_metrics, f"{name}: metrics not listed in the task"


def test_catalogue_loads_through_evalkit() -> None:
    from evalkit.catalog import load_catalog

    catalog = load_catalog(cwd=REPO)
    assert {name for _, name, _ in ENTRIES} <= set(catalog.datasets)
    for path, name, entry in ENTRIES:
        spec = catalog.datasets[name]
        assert spec.task == path.stem and spec.category == path.parent.name
        assert spec.language == entry["language"]
    asr = catalog.resolve("asr")
    assert {s.name for s in asr} == {n for p, n, _ in ENTRIES if p.stem == "asr"}
    assert catalog.tasks["asr"].metrics and catalog.tasks["asr"].description


# ----------------------------------------------------------------- structure


def test_every_hub_entry_has_a_fixture() -> None:
    missing = [name for _, name, entry in ENTRIES if "hf_repo" in entry and _fixture_for(entry) is None]
    assert not missing, f"hub entries without a structure fixture in FIXTURE_BY_REPO: {missing}"
    for fixture in set(FIXTURE_BY_REPO.values()):
        assert (FIXTURES / f"{fixture}.parquet").exists(), f"fixture {fixture}.parquet is missing"


def _assert_audio_decodes(audio: Any, where: str) -> None:
    assert audio is not None, f"{where}: no audio"
    assert audio.data, f"{where}: the audio struct lost its bytes"
    data, rate = sf.read(io.BytesIO(audio.data))
    assert rate > 0 and len(data) > 0, f"{where}: audio bytes do not decode"


class _Row(dict):  # type: ignore[type-arg]
    """A raw fixture row that also answers dotted paths (``data.Question``, ``prompt.0.content``) as the loader does."""

    def __getitem__(self, key: str) -> Any:
        if dict.__contains__(self, key) or "." not in key:
            return dict.__getitem__(self, key)
        value: Any = dict(self)
        for part in key.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
        return value


def _assert_images_decode(value: Any, where: str) -> None:
    """An image cell (the hub's {bytes, path} struct) or a list of them holds bytes PIL can open."""
    from PIL import Image

    cells = value if isinstance(value, list) else [value]
    assert cells and all(isinstance(c, dict) and c.get("bytes") for c in cells), f"{where}: no image bytes"
    for cell in cells:
        with Image.open(io.BytesIO(cell["bytes"])) as image:
            assert image.size[0] > 0, f"{where}: image does not decode"


def _check_samples(spec: Any, source: Path) -> None:
    """Load ``source`` with the entry's mapping and compare every mapped field with the raw row."""
    from evalkit.data.loading import iter_samples

    if source.suffix == ".parquet":
        rows = pq.read_table(source).to_pylist()
    else:
        rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    samples = list(iter_samples(spec, source_override=str(source)))
    assert len(samples) == len(rows) > 0
    where = f"{spec.name} <- {source.name}"
    rows = [_Row(row) for row in rows]
    for sample, row in zip(samples, rows):
        if spec.image_column:
            _assert_images_decode(row[spec.image_column], f"{where}: {spec.image_column}")
        assert sample.meta["language"] == spec.language
        if spec.audio_column:
            _assert_audio_decodes(sample.audio, where)
        else:
            assert sample.audio is None, f"{where}: a text dataset produced audio"
        if spec.target_column:
            assert sample.reference == row[spec.target_column] and sample.reference not in (None, "", [])
        if spec.textual_input_column:
            assert isinstance(sample.text, str) and sample.text == row[spec.textual_input_column]
        else:
            assert sample.text is None, f"{where}: unmapped text reached the prompt"
        if spec.instruction_column:
            assert sample.instruction == row[spec.instruction_column] and sample.instruction
        else:
            assert sample.instruction == spec.instruction
        if spec.messages_column:
            given = [{"role": m["role"], "content": m["content"]} for m in row[spec.messages_column]]
            assert sample.messages == given and given[-1]["role"] == "user", f"{where}: messages"
        else:
            assert sample.messages is None
        if spec.id_column:
            assert sample.id == str(row[spec.id_column])
        if spec.turns_column:  # a conversation: one turn per item, each spoken turn's audio decodes
            assert sample.turns and len(sample.turns) == len(row[spec.turns_column]), f"{where}: turns"
            for turn in sample.turns:
                if turn.text is None:
                    _assert_audio_decodes(turn.audio, f"{where}: turn audio")
        else:
            assert sample.turns is None
        for key in ("accent", "accented", "gender", "speaker", "duration", "choices"):
            column = getattr(spec, f"{key}_column")
            if column:
                assert sample.meta[key] == row[column], f"{where}: meta[{key!r}]"
            else:
                assert key not in sample.meta
        for key, column in spec.extra_columns.items():
            assert sample.meta[key] == row[column], f"{where}: extra meta[{key!r}]"


def _hub_entries() -> list[tuple[Path, str, dict[str, Any]]]:
    return [item for item in ENTRIES if "hf_repo" in item[2]]


@pytest.mark.parametrize("item", _hub_entries(), ids=_entry_id)
def test_hub_entry_maps_onto_its_fixture(item: tuple[Path, str, dict[str, Any]]) -> None:
    from evalkit.catalog import load_catalog

    _, name, entry = item
    fixture = _fixture_for(entry)
    assert fixture is not None, f"{name}: no fixture mapped"
    spec = _catalog(load_catalog).datasets[name]
    _check_samples(spec, FIXTURES / f"{fixture}.parquet")


@pytest.mark.parametrize("item", [i for i in ENTRIES if "path" in i[2]], ids=_entry_id)
def test_local_entry_loads(item: tuple[Path, str, dict[str, Any]]) -> None:
    from evalkit.catalog import load_catalog

    path, name, entry = item
    spec = _catalog(load_catalog).datasets[name]
    target = resolve_runspec_path(path, entry["path"])
    if target == ESPEAK.resolve():
        # the espeak layout is checked against its fixture always, and against the real file once it ships
        _check_samples(spec, FIXTURES / "espeak_en.parquet")
        if not target.exists():
            pytest.skip("the shipped espeak speech set is not committed yet")
    _check_samples(spec, target)


def test_espeak_accent_instruction_lists_every_accent_in_the_set() -> None:
    """The accent prompt offers a closed list; it must cover the labels the shipped set really uses."""
    if not ESPEAK.exists():
        pytest.skip("the shipped espeak speech set is not committed yet")
    accents = set(pq.read_table(ESPEAK, columns=["accent"]).column("accent").to_pylist())
    instruction = _load(RUNSPECS / "paralinguistics" / "accent_recognition.json")["espeak_en_accent"]["instruction"]
    offered = {a.strip().rstrip(".") for a in instruction.split("Choose one of:")[1].split(".")[0].split(",")}
    assert accents <= offered, f"accents missing from the instruction: {sorted(accents - offered)}"


def test_basic_qa_is_small_and_well_formed() -> None:
    rows = [
        json.loads(line) for line in (RUNSPECS / "_data" / "basic_qa.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert 20 <= len(rows) <= 40
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        assert set(row) == {"id", "question", "answers"}
        assert row["question"].endswith("?")
        assert row["answers"] and all(isinstance(a, str) and a.strip() for a in row["answers"])
