"""What evalkit sends for KARMA's dataset ids, per sample, against what KARMA's own classes build.

KARMA's side is tests/fixtures/references/karma_requests.json (made by make_karma_requests.py there: each id's
class run at the pinned commit on the rows of the entry's structure fixture, and KARMA's OpenAILLM.preprocess
turning the items into request bodies). evalkit's side is a real run of the catalogue entry reading the same
rows against the test server, whose request log is compared (scripts/peer_requests.py, the same code that
writes the audit table).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import doc_section

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "references" / "karma_requests.json").read_text(encoding="utf-8"))
_SPEC = importlib.util.spec_from_file_location("peer_requests", ROOT / "scripts" / "peer_requests.py")
assert _SPEC and _SPEC.loader
peer_requests: Any = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(peer_requests)

#: a representative set: MCQ templates, a multi-turn rubric set with its system prompt, JSON-rubric sets with a
#: per-sample system prompt and an image, a row-filtered safety set, a case-reasoning set, AMQA's variants, and the
#: KARMA variants of evalkit's own entries (KARMA's prompt; each image a user message of its own after the text)
AGREE = [
    "openlifescienceai/medqa",
    "ekacare/mmlu-medical-mcqs-evaluation-dataset",
    "TsinghuaC3I/MedXpertQA",
    "Tonic/Health-Bench-Eval-OSS-2025-07",
    "ekacare/clinical_note_generation_dataset",
    "ekacare/medical_records_parsing_validation_set",
    "HFXM/CARES-18K",
    "zou-lab/MedCaseReasoning",
    "Showing-KCL/AMQA:race",
    "flaviagiammarino/vqa-rad",
    "mdwiratathya/SLAKE-vqa-english",
    "ChuGyouk/MedXpertQA",
    "openlifescienceai/pubmedqa",
]
#: ids whose request still differs from KARMA's, each listed with its reason in docs/karma.md ("KARMA ids whose request
#: still differs"): none today; an id added here must be named there
DIFFER: dict[str, tuple[str, ...]] = {}
#: KARMA ids that reach a KARMA variant of an evalkit entry, and the evalkit entry that keeps evalkit's own prompt
VARIANTS = {
    "flaviagiammarino/vqa-rad": ("karma_vqa_rad", "vqa_rad"),
    "mdwiratathya/SLAKE-vqa-english": ("karma_slake", "slake"),
    "ChuGyouk/MedXpertQA": ("karma_medxpertqa_mm", "medxpertqa_mm"),
    "openlifescienceai/pubmedqa": ("karma_pubmedqa", "pubmedqa"),
}


def _compared(name: str) -> dict[str, Any]:
    record = FIXTURE["ids"][name]
    ours = peer_requests.evalkit_requests(peer_requests.karma_entry(name), ROOT / record["rows"])
    return dict(peer_requests.compare(record["requests"], ours))


def test_the_fixture_records_where_it_came_from() -> None:
    reference = FIXTURE["reference"]
    assert reference["repository"] == "eka-care/KARMA-OpenMedEvalKit"
    assert re.fullmatch(r"[0-9a-f]{40}", reference["commit"])
    assert {"file", "shim", "command"} <= set(reference)


@pytest.mark.parametrize("name", AGREE)
def test_evalkit_sends_what_karmas_class_builds(name: str) -> None:
    result = _compared(name)
    assert result["peer_n"] == result["evalkit_n"] > 0
    assert (result["text"], result["system"], result["shape"]) == (True, True, True), result["first_difference"]


@pytest.mark.parametrize("name", sorted(DIFFER))
def test_a_listed_difference_is_still_the_one_listed(name: str) -> None:
    result = _compared(name)
    differing = tuple(key for key in ("text", "system", "shape") if not result[key])
    assert differing == DIFFER[name], result["first_difference"]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_karma_id_reaches_its_variant_and_evalkits_entry_keeps_its_prompt(name: str) -> None:
    """The KARMA variant sends KARMA's request; evalkit's own entry, run on the same rows, still sends another."""
    variant, own = VARIANTS[name]
    assert peer_requests.karma_entry(name) == variant
    record = FIXTURE["ids"][name]
    ours = peer_requests.evalkit_requests(own, ROOT / record["rows"])
    result = peer_requests.compare(record["requests"], ours)
    assert result["evalkit_n"] > 0 and not result["text"]


def test_the_docs_list_every_id_that_still_differs() -> None:
    section = doc_section("KARMA ids whose request still differs")
    for name in DIFFER:
        assert f"`{name}`" in section, name


#: KARMA's speech ids: KARMA sends their audio to its ASR model classes; OpenAIASR's request is recorded
SPEECH = sorted(name for name, record in FIXTURE["ids"].items() if record.get("transcriptions"))


def test_the_speech_ids_are_recorded() -> None:
    assert SPEECH == [
        "ai4bharat/IndicVoices",
        "ekacare/denoising-impact-evaluation-dataset",
        "ekacare/eka-medical-asr-evaluation-dataset",
        "ekacare/vistaar_small_asr_eval",
    ]


@pytest.mark.parametrize("name", SPEECH)
def test_a_speech_id_sends_a_transcription_model_what_karmas_openai_asr_sends(name: str) -> None:
    """The file, the model and KARMA's prompt: no language, response_format or temperature."""
    record = FIXTURE["ids"][name]
    entry = peer_requests.karma_entry(name)
    ours = peer_requests.evalkit_requests(entry, ROOT / record["rows"], transcription=True)
    result = peer_requests.compare_transcriptions(record["transcriptions"], ours)
    assert result["peer_n"] == result["evalkit_n"] > 0
    assert (result["fields"], result["filename"]) == (True, True), result["first_difference"]
    assert {key for request in ours for key in request["form"]} == {"model", "prompt"}


def test_evalkits_own_speech_entry_keeps_its_transcription_form() -> None:
    """evalkit's entry (the variant's base) still sends the language and its response format, and no prompt."""
    record = FIXTURE["ids"]["ai4bharat/IndicVoices"]
    base = peer_requests.karma_entry("ai4bharat/IndicVoices").split(":", 1)[0]
    assert base == "karma"
    ours = peer_requests.evalkit_requests("indicvoices_hindi", ROOT / record["rows"], transcription=True)
    assert ours and all({"language", "response_format"} <= set(r["form"]) and "prompt" not in r["form"] for r in ours)
