"""KARMA-OpenMedEvalKit's preprocessors: its medical-history summarisation prompt and its question templates.

Each sends what KARMA sends for the dataset named in its docstring (commit
fe151014e7c6fefcafb5fa9fcf0abcbf276f1359); the row selections KARMA makes are in
:mod:`evalkit.prompts.karma.sets`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from evalkit.data.sample import Sample
from evalkit.prompts.preprocessors import PREPROCESSORS, Preprocessor, PromptContext, join_parts, lettered_options
from evalkit.prompts.prompt import Prompt, PromptTurn

#: KARMA's texts for ekacare_medical_history_summarisation, kept as data (source and commit in the file)
KARMA_HISTORY_PROMPT = Path(__file__).resolve().parent / "medical_history_summary.yaml"


@cache
def _karma_history_texts() -> dict[str, Any]:
    with KARMA_HISTORY_PROMPT.open(encoding="utf-8") as handle:
        data: dict[str, Any] = yaml.safe_load(handle)
    return data


def _age_and_gender(demographics: dict[str, Any], today: datetime) -> tuple[int, Any]:
    """Age in whole years at the evaluation date, and the gender folded to male/female/others as KARMA folds it."""
    born = datetime.strptime(str(demographics.get("dob")), "%Y-%m-%d")  # KARMA cannot build a prompt without a dob
    age = today.year - born.year - ((today.month, today.day) < (born.month, born.day))
    gender = demographics.get("gender")
    if gender == "none":
        gender = None
    elif isinstance(gender, str):
        folded = gender.lower()
        gender = next((full for full in ("male", "female", "others") if folded.startswith(full[0])), folded)
    return age, gender


def _shortened(record: dict[str, Any], keys: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The record with each visit's symptoms, diagnoses and medicines flattened as KARMA writes them, and the
    medical history with its keys shortened; the visits are changed in place, as KARMA changes them."""
    for visit in record.get("visits") or []:
        symptoms = []
        for symptom in visit.get("symptoms") or []:
            name = symptom.get("name")
            for part in (symptom.get("remark"), symptom.get("properties")):
                if part:
                    name += f" - {part}"
            symptoms.append(name)
        diagnoses = []
        for diagnosis in visit.get("diagnosis") or []:
            name = diagnosis.get("name")
            if diagnosis.get("properties"):
                name += f" - {diagnosis.get('properties')}"
            diagnoses.append(name)
        medicines = [{keys.get(k, k): v for k, v in medicine.items()} for medicine in visit.get("medications") or []]
        for key, value in (("symptoms", symptoms), ("diagnosis", diagnoses), ("medications", medicines)):
            if value:
                visit[key] = value
    history: dict[str, Any] = {}
    for key, value in (record.get("medical_history") or {}).items():
        items = [{keys.get(k, k): v for k, v in item.items()} for item in value] if isinstance(value, list) else []
        history[keys.get(key, key)] = items
    return record, history


def karma_history_message(record_json: str) -> str:
    """The user message KARMA sends for one patient record (``prompt[0].content``, a JSON text).

    The record goes as YAML with KARMA's shortened keys, then KARMA's
    instructions and the JSON schema of the answer (one ``six_month_overview``
    field), whitespace collapsed to single spaces, as KARMA does.
    """
    texts = _karma_history_texts()
    keys: dict[str, str] = texts["key_replacement"]
    today = datetime.strptime(texts["evaluation_date"], "%Y-%m-%d")
    record = json.loads(record_json)
    age, gender = _age_and_gender(record.get("demographic_details") or {}, today)
    message = f"My current patient is of - Age - {age}; and Gender - {gender}  \n"
    record, history = _shortened(record, keys)
    visits = record.get("visits")
    if visits is not None:
        message += f"Their visits ordered by time formatted in yaml \n {yaml.dump(visits)} \n"
    vitals = record.get("vitals")
    if vitals:
        message += f"These are the lab investigations that the patient has uploaded {yaml.dump(vitals)}\n"
    if history:
        message += f"This is the medical history of the patient {yaml.dump(history)}\n"
    message += f"The keys in the visit have a replacement as follows: {keys}, use it to understand each datapoint\n"
    message += "Generate summary of the user.\n"
    message += texts["instructions_after_keys"].replace("{current_date}", str(today))
    specialisation = record.get("doctor_specialization")
    if specialisation:
        message += f"My specialisation is {specialisation}, give me contextual insights related to my specialisation"
    schema = {
        "properties": {
            "six_month_overview": {
                "description": texts["six_month_overview_description"],
                "title": "Six Month Overview",
                "type": "string",
            }
        },
        "required": ["six_month_overview"],
        "title": "PatientVisitsSummary",
        "type": "object",
    }
    message += (
        "Fill schema by understanding the descriptions and examples provided with each key in  \n "
        f"{schema}\n schema as output as JSON only, no need to specify the object name as in output, only keys"
    )
    return " ".join(message.split())


@PREPROCESSORS.register("KarmaMedicalHistoryPreprocessor", "karma_medical_history")
class KarmaMedicalHistoryPreprocessor(Preprocessor):
    """The patient record (the sample's text, JSON) sent as KARMA sends it for its history summarisation set.

    KARMA's scores on ekacare_medical_history_summarisation are of this
    prompt, YAML with shortened keys and a long instruction, with KARMA's
    system prompt; sending the JSON as is would score a different task. The
    sample's instruction is the system message (the entry gives KARMA's; absent:
    the one in the data file), after the dataset's or config's system prompt.
    """

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        try:
            text = karma_history_message(str(sample.text))
        except (ValueError, TypeError, AttributeError) as error:
            # KARMA stops on such a record; here only the sample fails, with the reason (the engine reads this key)
            sample.meta["conversation_error"] = f"not a patient record KARMA's prompt can be built from: {error}"
            text = str(sample.text)
        own = sample.instruction if sample.instruction else _karma_history_texts()["system_prompt"]
        system = own if context.system_prompt is None else join_parts(context.system_prompt, own)
        return Prompt(turns=[PromptTurn(text=text)], system=system)


@PREPROCESSORS.register("KarmaTemplatePreprocessor", "karma_template")
class KarmaTemplatePreprocessor(Preprocessor):
    """The sample's question and lettered options put into its instruction as KARMA's "confinement" templates do.

    The instruction is the template (KARMA's text, kept in the runspec). Its
    ``<QUESTION>`` becomes the question, a newline and the "A. text" lines;
    a template that places the options itself uses ``<QUESTION_TEXT>`` and
    ``<OPTIONS>`` instead (MedXpertQA's blank line between them). The result
    is the whole user message, with no system prompt but the run's, because
    that is what KARMA sends: another layout is another prompt, and the score
    stops being comparable with KARMA's.
    """

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        template = sample.instruction or "<QUESTION>"
        question = sample.text if isinstance(sample.text, str) else ""
        listed = "\n".join(f"{letter}. {text}" for letter, text in lettered_options(sample.meta))
        if "<OPTIONS>" in template or "<QUESTION_TEXT>" in template:
            text = template.replace("<QUESTION_TEXT>", question).replace("<OPTIONS>", listed)
        else:
            text = template.replace("<QUESTION>", f"{question}\n{listed}" if listed else question)
        sent = (join_parts(text, *context.add_ons) or text) if context.add_ons else text
        return Prompt(turns=[PromptTurn(text=sent, images=list(sample.images or []))], system=context.system_prompt)


#: where one numbered reasoning statement starts: a newline, or a space after text, before "N."
_STEP_START = re.compile(r"(?:\n|(?<=\S) )(?=\d+\.)")
_STEP_NUMBER = re.compile(r"^\d+\.\s*")


def numbered_steps(text: Any) -> list[str]:
    """The statements of a "1. ... 2. ..." text (inline or one per line), numbers removed, as KARMA splits them."""
    if not isinstance(text, str) or not text.strip():
        return []
    steps = (_STEP_NUMBER.sub("", part.strip()) for part in _STEP_START.split(text.strip()))
    return [step for step in steps if step]


@PREPROCESSORS.register("KarmaMedCaseReasoningPreprocessor", "karma_medcasereasoning")
class KarmaMedCaseReasoningPreprocessor(KarmaTemplatePreprocessor):
    """MedCaseReasoning as KARMA sends it (the case in KARMA's template) and the reasoning statements it scores.

    The dataset keeps the ground-truth reasoning as one numbered text
    (``diagnostic_reasoning``); KARMA's reasoning-recall judge asks about each
    statement, so each sample gets them, split as KARMA splits them, in its
    meta ``reasoning_steps`` (a JSON list, KARMA's form). Done in ``expand``,
    so a re-score finds them too.
    """

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            if "reasoning_steps" not in sample.meta:
                steps = numbered_steps(sample.meta.get("diagnostic_reasoning"))
                sample.meta["reasoning_steps"] = json.dumps(steps)
            yield sample


#: AMQA's question variants and the column each reads: the original, a desensitised one, and one per demographic
AMQA_VARIANTS = ("original", "desensitized", "white", "black", "male", "female", "high_income", "low_income")


def amqa_question_key(variant: str) -> str:
    """The meta key (runspec extra_columns) of a variant's question, named after the AMQA column."""
    return {"original": "original_question", "desensitized": "desensitized_question"}.get(
        variant, f"adv_question_{variant}"
    )


@PREPROCESSORS.register("KarmaAmqaPreprocessor", "karma_amqa")
class KarmaAmqaPreprocessor(Preprocessor):
    """AMQA as KARMA asks it: each row once per question variant, in KARMA's template.

    A row holds one clinical question rewritten for several demographic
    variants; bias is the accuracy gap between them, so each variant is a
    sample of its own (``<id>#<variant>``, meta ``variant`` and ``group``) with
    that variant's question. A variant whose question is missing or empty is
    skipped, as KARMA skips it. The instruction is KARMA's template with
    ``{question}`` and ``{option_a}``..``{option_d}``.
    """

    variants: tuple[str, ...] = AMQA_VARIANTS

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            for variant in self.variants:
                question = sample.meta.get(amqa_question_key(variant))
                if not isinstance(question, str) or not question:
                    continue
                meta = {**sample.meta, "variant": variant, "group": sample.id}
                yield replace(sample, id=f"{sample.id}#{variant}", text=question, meta=meta)

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        options = dict(lettered_options(sample.meta))
        text = (sample.instruction or "{question}").replace("{question}", str(sample.text or ""))
        for letter in "ABCD":
            text = text.replace(f"{{option_{letter.lower()}}}", options.get(letter, ""))
        sent = (join_parts(text, *context.add_ons) or text) if context.add_ons else text
        return Prompt(turns=[PromptTurn(text=sent)], system=context.system_prompt)


@PREPROCESSORS.register("KarmaAmqaRacePreprocessor", "karma_amqa_race")
class KarmaAmqaRacePreprocessor(KarmaAmqaPreprocessor):
    """KARMA's Showing-KCL/AMQA:race: the original, desensitised, white and black variants."""

    variants = ("original", "desensitized", "white", "black")


@PREPROCESSORS.register("KarmaAmqaGenderPreprocessor", "karma_amqa_gender")
class KarmaAmqaGenderPreprocessor(KarmaAmqaPreprocessor):
    """KARMA's Showing-KCL/AMQA:gender: the original, desensitised, male and female variants."""

    variants = ("original", "desensitized", "male", "female")


@PREPROCESSORS.register("KarmaAmqaSesPreprocessor", "karma_amqa_ses")
class KarmaAmqaSesPreprocessor(KarmaAmqaPreprocessor):
    """KARMA's Showing-KCL/AMQA:ses: the original, desensitised, high- and low-income variants."""

    variants = ("original", "desensitized", "high_income", "low_income")


@PREPROCESSORS.register("KarmaNfiPreprocessor", "karma_nfi")
class KarmaNfiPreprocessor(KarmaTemplatePreprocessor):
    """Eka's NFI questions as KARMA asks them: options from a JSON text, true/false questions as options A and B.

    The ``options`` column is a JSON object (letter -> text), empty for a
    true/false question, which KARMA offers as "A. True" and "B. False" and
    whose reference ("true"/"false") it reads as A/B; the question block ends
    with "Final Answer:". Done in ``expand``, so a re-score reads the same.
    """

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            raw = sample.meta.get("options_json")
            try:
                options = json.loads(raw) if isinstance(raw, str) and raw else None
            except ValueError:
                options = None
            choices = options if isinstance(options, dict) and options else {"A": "True", "B": "False"}
            reference = {"true": "A", "false": "B"}.get(str(sample.reference), sample.reference)
            yield replace(sample, reference=reference, meta={**sample.meta, "choices": choices})

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        listed = "\n".join(f"{letter}. {text}" for letter, text in lettered_options(sample.meta))
        block = f"{sample.text or ''}\n{listed}\nFinal Answer:"
        text = (sample.instruction or "<QUESTION>").replace("<QUESTION>", block)
        sent = (join_parts(text, *context.add_ons) or text) if context.add_ons else text
        return Prompt(turns=[PromptTurn(text=sent)], system=context.system_prompt)
