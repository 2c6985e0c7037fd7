"""Other tools' names for catalogue data (``runspecs/_names/<prefix>.json``), and the variants they ask for.

A tool's dataset name resolves to the catalogue entry reading the same data;
where the table records what the tool sends (``request``), the name reaches the
tool's variant of that entry, ``<prefix>:<name>``, built here once when the
catalogue is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalkit.catalog.specs import DatasetSpec, GenerationSettings


class ForeignRequest(BaseModel):
    """What another tool sends a model for one of its datasets (AU-Harness: its task file, scripts/auharness_tasks.py).

    evalkit's variant of the dataset (``<prefix>:<name>``) is written from it, so
    the tool's name asks what the tool asks, and evalkit's own entry keeps its own prompt.
    """

    model_config = ConfigDict(extra="forbid")

    preprocessor: str = Field(description="The tool's preprocessor, which decides how the user text is made.")
    user_prompt: str = Field("", description="The task's prompt, before the row's text (placeholders filled).")
    instruction_column: str | None = Field(None, description="The row column appended to the prompt (audio tasks).")
    textual_input_column: str | None = Field(None, description="The row column appended in text-only tasks.")
    choices_column: str | None = Field(None, description="The column whose options follow the question.")
    modality: Literal["audio", "text"] = Field("audio", description="text: no audio is sent.")
    long_audio: Literal["chunk", "truncate"] = Field(description="How audio longer than a model's chunk is cut.")
    temperature: float = Field(ge=0, description="The temperature sent (the tool's default where the task has none).")
    max_completion_tokens: int = Field(ge=1, description="The token limit sent, as max_completion_tokens.")


class ForeignDataset(BaseModel):
    """Another tool's dataset name: what that tool reads, and the catalogue entry reading the same data."""

    model_config = ConfigDict(extra="forbid")

    hub: str | None = Field(None, description="What the tool reads: repo[:subset]/split; None for local data.")
    metrics: list[str] = Field(default_factory=list, description="The tool's metrics for it (its metric `all`).")
    evalkit: str | None = Field(None, description="The catalogue entry reading the same data; None: none yet.")
    evalkit_reads: str | None = Field(
        None, description="Set when evalkit's entry of the same name reads another upload of the benchmark."
    )
    modality: str | None = Field(None, description="The tool's modality when not audio (text).")
    request: ForeignRequest | None = Field(
        None, description="What the tool sends a model for it; its variant <prefix>:<name> sends the same."
    )
    transcription_prompt: str | None = Field(
        None,
        description="The prompt the tool's speech-recognition client sends with the audio (KARMA's OpenAIASR); its "
        "variant <prefix>:<name> sends a transcription model the file, the model and this prompt only.",
    )


class ForeignNames(BaseModel):
    """Another tool's names for catalogue data (``runspecs/_names/<prefix>.json``): its datasets and its groups.

    Its users type these names; evalkit's own names win where both exist, and
    ``<prefix>:<name>`` always means the tool's (AU-Harness's ``emotion_recognition``
    is three datasets, evalkit's task of that name more).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    about: str = Field("", alias="_about", description="Where the table was written from.")
    tool: str = Field(description="The tool's name as its users know it, e.g. AU-Harness.")
    datasets: dict[str, ForeignDataset] = Field(
        default_factory=dict, description="The tool's dataset names -> what each reads and evalkit's entry for it."
    )
    groups: dict[str, list[str]] = Field(
        default_factory=dict, description="The tool's folder names (categories, tasks, groups) -> its dataset names."
    )


#: AU-Harness preprocessors whose user text is the task's prompt, then the row's column and choices, run together
#: (AuHarnessPreprocessor writes it). CallHome's is its prompt alone (a call or a turn has no instruction column),
#: which the same form writes: the prompt's final newline dropped, as AU-Harness's Jinja rendering drops it
_JOINED_PREPROCESSORS = ("GeneralPreprocessor", "Covost2Preprocessor", "CallhomePreprocessor")
#: AU-Harness preprocessors whose text evalkit writes with a preprocessor of AU-Harness's shape: the task's prompt,
#: then fixed words (spoken question) or the row's question (written one)
_SPOKEN_QUESTION_PREPROCESSORS = {
    "VoiceBenchPreprocessor": "AuHarnessVoiceBenchPreprocessor",
    "BigBenchAudioPreprocessor": "AuHarnessBigBenchAudioPreprocessor",
}
#: AU-Harness preprocessors whose turns the entry's own preprocessor writes, with AU-Harness's settings per sample
_OWN_TURNS_PREPROCESSORS = {"MultiturnPreprocessor": "AuHarnessMultiturnPreprocessor"}
#: the rest (BFCL, Spider, SpokenWOZ): the entry's own preprocessor writes AU-Harness's text


def variant_name(prefix: str, name: str) -> str:
    """The catalogue name of another tool's variant of a dataset: what the tool's own name resolves to."""
    return f"{prefix}:{name}"


def variants(
    datasets: Mapping[str, DatasetSpec], prefix: str, names: ForeignNames
) -> Iterator[tuple[str, str, Callable[[DatasetSpec], DatasetSpec]]]:
    """One variant per tool dataset with a ``request``: its name, the entry whose data it reads, and how to make it.

    The variant is made from that entry once (the catalogue makes it when it is
    first read), so a run pays nothing per request for it. It is kept out of the
    task lists: ``evalkit list`` and evalkit's own task and category names select
    evalkit's entries, the tool's names its variants. Only the names in
    ``datasets`` are read here, never an entry.
    """
    for name, entry in names.datasets.items():
        if not entry.evalkit or entry.evalkit not in datasets:
            continue
        if entry.transcription_prompt is not None:
            yield variant_name(prefix, name), entry.evalkit, partial(_heard, prefix, name, entry)
        elif entry.request is not None:
            yield variant_name(prefix, name), entry.evalkit, partial(_asked, prefix, name, entry, entry.request)


def _heard(prefix: str, name: str, entry: ForeignDataset, heard: DatasetSpec) -> DatasetSpec:
    """A transcription variant: the file, the model and the tool's prompt, as KARMA's OpenAIASR sends them."""
    return heard.model_copy(
        update={
            "name": variant_name(prefix, name),
            "variant_of": heard.name,
            "instruction": entry.transcription_prompt,
            "system_prompt": None,
            "request_style": "karma",
        }
    )


def _asked(prefix: str, name: str, entry: ForeignDataset, request: ForeignRequest, base: DatasetSpec) -> DatasetSpec:
    """The entry asked what the tool asks (its ``request``)."""
    update: dict[str, Any] = {
        "name": variant_name(prefix, name),
        "variant_of": base.name,
        "long_audio": request.long_audio,
        "system_prompt": None,
        "request_style": prefix if prefix == "auharness" else "evalkit",
        "generation": GenerationSettings(
            temperature=request.temperature,
            max_tokens=request.max_completion_tokens,
            token_key="max_completion_tokens",
        ),
    }
    if request.preprocessor in _JOINED_PREPROCESSORS:
        appended = request.textual_input_column if request.modality == "text" else request.instruction_column
        if entry.evalkit_reads is not None and entry.evalkit == name:
            appended = None  # another upload: its columns are not the tool's (README: Coming from AU-Harness)
        modality = "text" if request.modality == "text" else "audio+text" if appended else "audio"
        update.update(
            preprocessor="AuHarnessPreprocessor",
            instruction=request.user_prompt,
            instruction_column=None,
            textual_input_column=appended,
            choices_column=request.choices_column,
            modality=modality,
            prompt_pool=None,
            prompt_choice=None,
            in_context=None,
        )
    elif request.preprocessor in _SPOKEN_QUESTION_PREPROCESSORS:
        update.update(
            preprocessor=_SPOKEN_QUESTION_PREPROCESSORS[request.preprocessor],
            instruction=request.user_prompt,
            instruction_column=None,
            textual_input_column=request.instruction_column if request.modality == "text" else None,
            choices_column=None,
            prompt_pool=None,
            prompt_choice=None,
            in_context=None,
        )
    elif request.preprocessor in _OWN_TURNS_PREPROCESSORS:
        update["preprocessor"] = _OWN_TURNS_PREPROCESSORS[request.preprocessor]
    return base.model_copy(update=update)
