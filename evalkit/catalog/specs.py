"""What a runspec says: a dataset entry (DatasetSpec), a task, their generation settings and checked records.

The schema of the files under ``runspecs/<category>/<task>.json``, and where
their local ``path`` points; the catalogue (``evalkit.catalog``) reads the
files into these.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalkit.errors import RunspecError

#: the evalkit package folder (this module lives in evalkit/catalog/)
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _shipped_runspecs() -> Path:
    """The catalogue that ships with evalkit: inside the installed package, else the checkout's top-level folder."""
    packaged = _PACKAGE_DIR / "runspecs"
    return packaged if packaged.is_dir() else _PACKAGE_DIR.parent / "runspecs"


SHIPPED_RUNSPECS = _shipped_runspecs()

#: a runspec ``path`` inside an installed Python package: ``pkg://<package>/<path in the package>``
PACKAGE_PATH_PREFIX = "pkg://"


def resolve_runspec_path(runspec_file: str | Path, path: str) -> Path:
    """A runspec's local ``path``: relative to the runspec file, or ``pkg://package/...`` inside a package.

    The ``pkg://`` form lets a runspec name data that ships in a package
    (evalkit's speech set: ``pkg://evalkit/assets/speech/espeak_en/data.parquet``),
    wherever the runspec and the package are installed.
    """
    if not path.startswith(PACKAGE_PATH_PREFIX):
        return (Path(runspec_file).parent / path).resolve()
    package, _, inner = path[len(PACKAGE_PATH_PREFIX) :].partition("/")
    try:
        found = importlib.util.find_spec(package) if package.isidentifier() else None
    except (ImportError, ValueError):
        found = None
    locations = list(found.submodule_search_locations or []) if found is not None else []
    if not locations:
        raise RunspecError(f"{runspec_file}: path {path!r}: {package!r} is not an installed Python package")
    return (Path(locations[0]) / inner).resolve()


class GenerationSettings(BaseModel):
    """A task's or dataset's default generation parameters (below the config's overrides and the model's own)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(
        None,
        ge=0,
        description="Default sampling temperature, used when neither a config rule nor the model sets one (a dataset's "
        "value before its task's); absent everywhere: 0.",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="Default most tokens generated per answer, used when neither a config rule nor the model sets it; "
        "absent everywhere: not sent.",
    )
    top_p: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Default nucleus-sampling probability mass (0 < top_p <= 1), used when neither a config rule nor "
        "the "
        "model sets it; absent everywhere: not sent.",
    )
    seed: int | None = Field(
        None,
        description="Default sampling seed, used when neither a config rule nor the model sets it; absent "
        "everywhere: not sent.",
    )
    send_temperature: bool | None = Field(
        None,
        description="false: when neither a config rule nor the model sets a temperature, none is sent (the server's "
        "default applies), as ChEF's GPT client sends none; absent or true: the fallback temperature 0 is sent.",
    )
    token_key: Literal["max_tokens", "max_completion_tokens"] | None = Field(
        None,
        description="The request key the token limit is sent under: max_tokens (absent: the default) or "
        "max_completion_tokens (what AU-Harness sends).",
    )


class CheckedRecord(BaseModel):
    """Provenance of a hub entry: where and when its repo, config, split, columns and licence were checked."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        description="The page that was read for the check (dataset card, file tree, viewer), an https URL."
    )
    date: str = Field(description="When the check was made, as an ISO date (YYYY-MM-DD).")
    what: str = Field(
        description="What was compared with the hub and what matched, what was fixed, what could not be confirmed."
    )


class DatasetSpec(BaseModel):
    """One dataset entry of a runspec file, plus where it was found."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(
        "", description="The dataset's name: its key in the runspec file (set by the loader, not written in the entry)."
    )
    task: str = Field("", description="The task: the runspec file's stem, e.g. asr (set by the loader).")
    category: str = Field(
        "", description="The category: the runspec file's folder, e.g. speech_recognition (set by the loader)."
    )
    file: str = Field(
        "",
        description="Path of the runspec file the entry was read from; local paths resolve against it (set by the "
        "loader).",
    )

    hf_repo: str | None = Field(
        None,
        description="Hugging Face hub id of the dataset, e.g. openslr/librispeech_asr; give exactly one of hf_repo "
        "and path.",
    )
    path: str | None = Field(
        None,
        description="A local dataset file or folder (parquet, jsonl, json, csv, tsv, or an audio folder), relative "
        "to the runspec file, or pkg://<package>/<path> inside an installed Python package; give exactly one of "
        "hf_repo and path.",
    )
    revision: str | None = Field(
        None,
        description="The hub dataset's git revision that is read (a commit sha, tag or branch), so a rerun reads the "
        "same data; absent: the main branch as it is at run time. Only with hf_repo.",
    )
    subset: str | None = Field(
        None, description="The hub dataset's configuration (subset) name; absent: its default configuration."
    )
    split: str = Field("test", description="The split that is evaluated (default test).")
    data_files: str | list[str] | None = Field(
        None,
        description="File patterns to read: passed to the hub loader, or globs in a local folder; absent: the "
        "dataset's own "
        "files (a local folder: *.parquet, *.jsonl, *.csv).",
    )
    media_dir: str | None = Field(
        None,
        description="Folder, relative to the local data, holding the files that the rows' relative audio and "
        "image paths name: a Common Voice release keeps its clips in `clips/` beside `test.tsv`, whose `path` "
        "column gives only the file name; absent: the data file's own folder.",
    )
    language: str = Field(
        description="Mandatory: the language of the data, a code or a name (en, english), or a source-target pair for "
        "translation (en-de); the target language decides how metrics tokenize and what filters.language matches."
    )
    modality: Literal["audio", "text", "audio+text", "image", "image+text", "audio+image"] = Field(
        "audio",
        description="What the model is given: audio (default), text, audio+text, image, image+text or audio+image; "
        "used to list and select datasets (evalkit list --modality), not to build prompts.",
    )
    audio_column: str | None = Field(
        None, description="Column holding each sample's audio; absent: the samples have no audio."
    )
    image_column: str | None = Field(
        None,
        description="Column holding each sample's image or list of images: a file path (relative to the data file), "
        "raw bytes, or a Hugging Face Image feature ({bytes, path}); absent: the samples have no image.",
    )
    image_position: Literal["before", "after", "messages_after"] = Field(
        "before",
        description="Where a sample's images stand in its user message: before (default) the question text, as "
        "most vision-language models are trained, or after it; messages_after sends the text alone and then each "
        "image as a user message of its own (KARMA's OpenAI client's layout).",
    )
    target_column: str | None = Field(
        None,
        description="Column holding the reference answer (a text or a list of accepted texts); absent: no reference.",
    )
    textual_input_column: str | None = Field(
        None, description="Column holding text input placed after the instruction (e.g. a question); absent: none."
    )
    instruction_column: str | None = Field(
        None,
        alias="additional_instruction_column",
        description="Column holding a per-sample instruction (also written additional_instruction_column, LALMEval's "
        "name); "
        "an empty value falls back to `instruction`. Absent: `instruction` for every sample.",
    )
    id_column: str | None = Field(None, description="Column holding each sample's id; absent: <dataset>-<row number>.")
    choices_column: str | None = Field(
        None,
        description="Column holding the list of answer options, lettered A, B, ... by the multiple-choice metric; "
        "absent: "
        "only letters can be read from answers.",
    )
    accent_column: str | None = Field(
        None,
        description="Column holding the speaker's accent label, used by filters.accented (standard US/UK labels "
        "count as "
        "non-accented) and reported as a result group; absent: none.",
    )
    accented_column: str | None = Field(
        None,
        description="Column holding a true/false accented flag, which filters.accented prefers to accent_column; "
        "absent: none.",
    )
    gender_column: str | None = Field(
        None, description="Column holding the speaker's gender, reported as a result group; absent: none."
    )
    speaker_column: str | None = Field(
        None, description="Column holding a speaker id, reported as a result group; absent: none."
    )
    duration_column: str | None = Field(
        None,
        description="Column holding the audio's length in seconds, used by filters.length_filter and the "
        "audio-length result "
        "groups; absent: measured from the audio.",
    )
    turns_column: str | None = Field(
        None,
        description='Column holding a multi-turn conversation, a list of {"text", "audio"} user turns sent in order, '
        "or a list of texts or of audio values (text-only or spoken turns); absent: one turn per sample.",
    )
    messages_column: str | None = Field(
        None,
        description='Column holding a dataset-given conversation: an OpenAI-style list of {"role", "content"} '
        "messages (system, user, assistant) whose last message is the user's; sent as is in one request, after "
        "the system prompt (the conversation's own leading system messages join it) and before the answer; a bad "
        "cell fails only its sample (`conversation`). Not with turns_column or textual_input_column. Absent: none.",
    )
    extra_columns: dict[str, str] = Field(
        default_factory=dict,
        description='More columns copied into the sample\'s meta as {meta key: column}, e.g. {"rubrics": '
        '"rubric_items"} '
        "for judges and metrics, never shown to the model (default none).",
    )
    instruction: str | None = Field(
        None,
        description="The instruction given with every sample whose instruction column is empty or absent; absent: "
        "none.",
    )
    preprocessor: str = Field(
        "GeneralPreprocessor",
        description="Registered preprocessor that turns a sample into a prompt (evalkit list preprocessors; default "
        "GeneralPreprocessor: instruction, text input, then audio).",
    )
    postprocessor: str = Field(
        "GeneralPostprocessor",
        description="Registered postprocessor applied to answers before scoring (evalkit list postprocessors; default "
        "GeneralPostprocessor: drop <think> blocks, strip whitespace).",
    )
    processors: list[str | dict[str, Any]] = Field(
        default_factory=list,
        description="Text processors applied in order to the answer (after the postprocessor) and the reference "
        'before scoring, each a name or {"name": ..., argument: value} (evalkit list processors), e.g. '
        '[{"name": "devanagari_transliterator", "source": "itrans"}]; a metric\'s `processors` option adds its own '
        "after these. Default none.",
    )
    metrics: list[str] | None = Field(
        None, description="The metrics that fit this dataset, replacing its task's list; absent: the task's metrics."
    )
    long_audio: Literal["chunk", "truncate"] = Field(
        "chunk",
        description="What happens to audio longer than a model's chunk_size: chunk (default) asks one request per "
        "piece and "
        "joins the answers with spaces; truncate sends only the first chunk_size seconds.",
    )
    generation: GenerationSettings | None = Field(
        None,
        description="Default generation parameters for this dataset, above the task's `_task.generation` and below the "
        "config and the model; absent: the task's.",
    )
    request_style: Literal["evalkit", "auharness", "karma"] = Field(
        "evalkit",
        description="How requests are written: evalkit (default), auharness (a text-only user message as a "
        "one-part list; a transcription form with only the file and the model, as AU-Harness sends them) or karma "
        "(a transcription form of the file, the model and the sample's instruction as its prompt, as KARMA's "
        "OpenAIASR sends it; chat requests as evalkit writes them).",
    )
    variant_of: str | None = Field(
        None,
        description="Set on another tool's variant of an entry (auharness:<name>): the entry whose data it reads; "
        "its dataset_paths key is that entry's.",
    )
    system_prompt: str | None = Field(
        None,
        description="The system message of every request of this dataset, before the config's filters.system_prompts; "
        "absent: only the config's (none by default).",
    )
    prompt_pool: str | None = Field(
        None,
        description="Name of a pool of instruction templates (evalkit/prompts/pools.yaml) that replaces each sample's "
        "instruction; absent: the dataset's own instruction.",
    )
    prompt_choice: str | int | None = Field(
        None,
        description="Which template of prompt_pool is used: an index (0-based), or random (the default), a draw "
        "seeded by "
        "filters.seed and the sample id.",
    )
    in_context: dict[str, Any] | None = Field(
        None,
        description="In-context examples shown before each sample: {split or path, k (default 1), choice "
        "(first | random, seeded | similar, alias topk_text: BM25 over the texts | topk_img: nearest images by "
        "cosine of 16x16 thumbnails, needs image_column; default first), embedding_model (topk_img: a CLIP-class "
        "model path or hub id instead of thumbnails, needs the local extra), pool_size (default 100)}; absent: none.",
    )
    chain_of_thought: bool = Field(
        False,
        description="ChEF's chain of thought: each sample is asked twice, first with \"Let's think step by step.\" "
        "after its question (up to 256 tokens of reasoning), then, with that exchange in the conversation, the "
        "question again; the second answer is scored. Also a dataset_metric option (chain_of_thought: true).",
    )
    chain_of_thought_form: Literal["conversation", "separate"] = Field(
        "conversation",
        description="How chain_of_thought asks: conversation (default) asks the question again after the reasoning "
        "exchange and scores the second answer; separate sends the question again as a request of its own, with its "
        "images and without the reasoning, and scores the reasoning followed by the answer, as ChEF's GPT client "
        "and ChEF's metrics do. Likelihood scoring always uses the conversation form.",
    )
    corruption: dict[str, Any] | None = Field(
        None,
        description="Set by the plan for a robustness variant (dataset_metric option corruptions): {name, "
        "severity, seed, clean: the clean dataset's name}; the variant's name is <clean>@<name>. Not written in "
        "runspecs.",
    )
    description: str | None = Field(
        None, description="What the dataset is, shown by evalkit list and evalkit info; absent: empty."
    )
    license: str | None = Field(
        None, description="The dataset's licence as its publisher states it, for the catalogue; absent: unknown."
    )
    url: str | None = Field(
        None, description="Web page of the dataset (card or paper), for the catalogue; absent: none."
    )
    private: bool = Field(
        False,
        description="True for a licensed corpus evalkit cannot ship or download (CallHome): the entry has no "
        "`path` or `hf_repo`; the user names the data in the config, `dataset_paths: {NAME: PATH}`. Default false.",
    )
    unavailable: str | None = Field(
        None,
        description="Why the data cannot be had at all (withdrawn from the hub, never public, behind terms that no "
        "public copy meets): the entry exists so that its name resolves and says so; selecting it alone is a config "
        "error quoting this reason, and a task or category selection leaves it out. Such an entry has no `hf_repo` "
        "or `path`. Absent: the data can be read.",
    )
    checked: CheckedRecord | None = Field(
        None, description="Provenance: the hub page this entry was checked against, when, and what was checked."
    )

    @model_validator(mode="before")
    @classmethod
    def _accept_both_instruction_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "instruction_column" in data and "additional_instruction_column" not in data:
            data = dict(data)
            data["additional_instruction_column"] = data.pop("instruction_column")
        return data

    @model_validator(mode="after")
    def _one_prompt_shape(self) -> DatasetSpec:
        if self.messages_column is not None:
            for other in ("turns_column", "textual_input_column", "in_context"):
                if getattr(self, other) is not None:
                    raise ValueError(
                        f"`messages_column` gives the whole conversation: it cannot be combined with `{other}`"
                    )
        return self

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if self.unavailable is not None:
            if self.hf_repo is not None or self.path is not None or self.private:
                raise ValueError(
                    "an `unavailable` dataset has no data to read: it takes no `hf_repo`, `path` or `private`"
                )
            return self
        if self.private:
            if self.hf_repo is not None:
                raise ValueError("a `private` dataset is read from a path the user gives, not from `hf_repo`")
            return self
        if (self.hf_repo is None) == (self.path is None):
            raise ValueError("needs exactly one of `hf_repo` (a hub dataset) or `path` (a local file or folder)")
        if self.revision is not None and self.hf_repo is None:
            raise ValueError("`revision` pins a hub dataset: it needs `hf_repo`")
        return self

    @property
    def source_label(self) -> str:
        """Where the data comes from, as listings show it: the hub id, ``private``, ``unavailable`` or ``local``."""
        if self.unavailable is not None:
            return "unavailable"
        return self.hf_repo or ("private" if self.private else "local")

    @property
    def source(self) -> str:
        """The hub id, or the local path resolved against the runspec file (or a package, ``pkg://``)."""
        if self.hf_repo is not None:
            return self.hf_repo
        if self.path is None:  # unavailable, or private before the config gives its path
            return self.source_label
        return str(resolve_runspec_path(self.file, str(self.path)))


@dataclass
class TaskSpec:
    """A task: one runspec file stem, its ``_task`` block and its datasets.

    A dataclass built by the loader, not validated input, so its field
    descriptions live in ``metadata["description"]`` (pydantic's ``Field``
    does not apply here).
    """

    name: str = field(metadata={"description": "The task's name: its runspec file's stem, e.g. asr."})
    category: str = field(
        metadata={"description": "The category: the folder of the task's runspec file, e.g. speech_recognition."}
    )
    file: str = field(metadata={"description": "Path of the first runspec file that defined the task."})
    description: str = field(
        default="",
        metadata={"description": "What the task measures, from `_task.description`; empty when the file gives none."},
    )
    metrics: list[str] = field(
        default_factory=list,
        metadata={
            "description": "The metrics that fit the task's datasets, from `_task.metrics` of every file of the task; "
            "empty: any metric is accepted."
        },
    )
    default_metric: str | None = field(
        default=None,
        metadata={
            "description": "The metric used when a dataset of the task is run without one (`_task.default_metric`); "
            "None: the first fitting metric."
        },
    )
    datasets: list[str] = field(
        default_factory=list, metadata={"description": "Names of the task's datasets, in file order."}
    )
    generation: GenerationSettings = field(
        default_factory=GenerationSettings,
        metadata={
            "description": "The task's default generation parameters (`_task.generation`), below the dataset's own."
        },
    )
