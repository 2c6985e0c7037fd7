"""Runspec discovery: dataset name, task (file stem) and category (folder) resolution.

Runspecs are read from, in order: the runspecs that ship with evalkit, the
``runspecs/`` folder beside the config file (the working directory's without
one), and every folder named by the config's ``runspecs_dir``. A dataset name
defined twice with two different definitions is an error, so a private dataset
can never silently shadow a public one; the same definition found twice (the
installed catalogue and a checkout's ``runspecs/``) is read once.

The shipped runspecs live at the top of the repository (``runspecs/``); the
wheel carries them inside the package (``evalkit/runspecs/``, mapped in
``setup.py``), so an installed evalkit finds them there first.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalkit.errors import RunspecError, did_you_mean
from evalkit.util.json_safe import load_json_file

_PACKAGE_DIR = Path(__file__).resolve().parent


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


@dataclass
class Catalog:
    datasets: dict[str, DatasetSpec] = field(default_factory=dict)
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    categories: dict[str, list[str]] = field(default_factory=dict)
    roots: list[Path] = field(default_factory=list)
    #: other names of datasets (alias -> dataset): the names LALMEval and KARMA users type, see dataset_aliases
    aliases: dict[str, str] = field(default_factory=dict)
    #: each dataset's entry as written, to tell the same definition read twice from a conflicting one
    raw_entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: other tools' names by prefix (runspecs/_names/<prefix>.json): ``auharness`` -> AU-Harness's
    foreign: dict[str, ForeignNames] = field(default_factory=dict)

    def all_names(self) -> list[str]:
        """Every name ``resolve`` accepts: datasets, their aliases, tasks and categories."""
        return sorted({*self.datasets, *self.aliases, *self.tasks, *self.categories})

    def resolve(self, name: str, where: str = "") -> list[DatasetSpec]:
        """Datasets selected by a dataset name or alias, a task stem or a category folder."""
        if name in self.datasets:
            return [self.datasets[name]]
        if name in self.aliases:
            return [self.datasets[self.aliases[name]]]
        if name in self.tasks:
            return [self.datasets[d] for d in self.tasks[name].datasets]
        if name in self.categories:
            return [self.datasets[d] for task in self.categories[name] for d in self.tasks[task].datasets]
        tool, _, inner = name.partition(":")
        if inner and tool in self.foreign:
            names = self.foreign[tool]
            if inner in names.datasets or inner in names.groups or self.spelling(name) is None:
                return self.resolve_foreign(tool, inner, where)
        for tool, names in self.foreign.items():
            if name in names.datasets or name in names.groups:
                return self.resolve_foreign(tool, name, where)
        spelled = self.spelling(name)
        if spelled is not None:
            return self.resolve(spelled, where)
        prefix = f"{where}: " if where else ""
        searched = ", ".join(str(root) + ("" if root.is_dir() else " (absent)") for root in self.roots)
        foreign = [n for names in self.foreign.values() for n in (*names.datasets, *names.groups)]
        raise RunspecError(
            f"{prefix}{name!r} is not a dataset, task or category"
            f"{did_you_mean(name, [*self.all_names(), *foreign])}. "
            f"Runspec folders searched: {searched}. Run `evalkit list datasets` to see the catalogue."
        )

    def resolve_foreign(self, tool: str, name: str, where: str = "") -> list[DatasetSpec]:
        """Datasets another tool means by ``name``: one of its datasets, or all of one of its groups.

        A group resolves only whole: running part of it under its name would
        give an average the tool's users cannot compare with theirs.
        """
        names = self.foreign[tool]
        prefix = f"{where}: " if where else ""
        # a dataset the tool runs per language or subset (KARMA's --dataset-args) is, with no entry of its own, the
        # group of its selections: all of them
        if name in names.datasets and (name not in names.groups or names.datasets[name].evalkit is not None):
            return [self._foreign_target(tool, name, prefix)]
        if name in names.groups:
            members = names.groups[name]
            missing = [m for m in members if self._target_name(names, m) is None]
            if missing:
                shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
                raise RunspecError(
                    f"{prefix}{names.tool}'s group {name!r} has {len(members)} datasets and evalkit's catalogue has "
                    f"no entry for {len(missing)} of them ({shown}); name the datasets it has instead "
                    f"(`evalkit info dataset NAME` tells which)"
                )
            found: dict[str, DatasetSpec] = {}
            for member in members:
                spec = self._foreign_target(tool, member, prefix)
                found.setdefault(spec.name, spec)
            return list(found.values())
        raise RunspecError(
            f"{prefix}{name!r} is not a dataset or group name of {names.tool}"
            f"{did_you_mean(name, [*names.datasets, *names.groups])}"
        )

    def _target_name(self, names: ForeignNames, name: str) -> str | None:
        target = names.datasets[name].evalkit
        return target if target is not None and target in self.datasets else None

    def _foreign_target(self, tool: str, name: str, prefix: str) -> DatasetSpec:
        names = self.foreign[tool]
        target = self._target_name(names, name)
        if target is None:
            entry = names.datasets[name]
            reads = f" (it reads {entry.hub})" if entry.hub else " (it reads local data)"
            raise RunspecError(
                f"{prefix}{name!r} is {names.tool}'s dataset{reads}, and evalkit's catalogue has no entry reading "
                f"the same data yet; add one to a runspecs_dir folder, or see `evalkit list datasets` for what there is"
            )
        return self.datasets[target]

    def select(self, name: str, args: dict[str, Any], where: str = "") -> DatasetSpec:
        """The entry another tool's dataset means with the dataset arguments that pick its language or subset.

        KARMA picks MedMCQA-Indic's subset or IN22-Conv's pair with ``--dataset-args``;
        the tool's table names each picking ``<id>:key=value[,key=value]`` (keys in any
        order). ``name`` is the tool's id (prefixed or not) or a catalogue entry one of
        its ids reads; no arguments: the entry the name resolves to.
        """
        prefix = f"{where}: " if where else ""
        if not args:
            found = self.resolve(name, where)
            if len(found) != 1:
                raise RunspecError(f"{prefix}{name!r} is not one dataset: dataset arguments pick within one")
            return found[0]
        wanted = {str(key): str(value) for key, value in args.items()}
        tool, _, inner = name.partition(":")
        tables = {tool: self.foreign[tool]} if inner and tool in self.foreign else self.foreign
        bare = inner if inner and tool in self.foreign else name
        target = self.entry_name(name)
        offered: list[str] = []
        for tool_prefix, names in tables.items():
            for key in names.datasets:
                base, _, picked = key.rpartition(":")
                if "=" not in picked:
                    continue
                base_entry = names.datasets.get(base)
                same_data = target is not None and base_entry is not None and base_entry.evalkit == target
                if base != bare and not same_data:
                    continue
                offered.append(key)
                if dict(part.split("=", 1) for part in picked.split(",")) == wanted:
                    return self._foreign_target(tool_prefix, key, prefix)
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        choices = f"; known: {', '.join(offered)}" if offered else "; it takes no dataset arguments in evalkit"
        raise RunspecError(f"{prefix}{name!r} with {shown} is not a dataset evalkit's catalogue has{choices}")

    def entry_name(self, name: str) -> str | None:
        """The catalogue entry a dataset name means: its own, an alias's, or another tool's dataset name's."""
        found = self._exact_entry(name)
        if found is not None:
            return found
        spelled = self.spelling(name)
        return None if spelled is None else self._exact_entry(spelled)

    def _exact_entry(self, name: str) -> str | None:
        """``entry_name`` for a name spelt exactly as the catalogue or a tool's table spells it."""
        if name in self.datasets:
            return name
        if name in self.aliases:
            return self.aliases[name]
        tool, _, inner = name.partition(":")
        for prefix, names in self.foreign.items():
            key = inner if inner and tool == prefix else name
            if key in names.datasets:
                return self._target_name(names, key)
        return None

    def spelling(self, name: str) -> str | None:
        """The one known name ``name`` matches when case is ignored (``AI2D`` -> ``ai2d``), or None.

        Other tools' users type their tool's capitals (ChEF's ``MMBench``,
        ``POPE_COCO_random``) or none at all; an exact name always wins, and a
        spelling two known names share (``x`` and ``X``) is left unresolved
        rather than guessed. Tried only after every exact lookup has failed.
        """
        wanted = name.casefold()
        known = {*self.all_names()}
        for prefix, names in self.foreign.items():
            for foreign in (*names.datasets, *names.groups):
                known.update((foreign, f"{prefix}:{foreign}"))
        matches = sorted(candidate for candidate in known if candidate.casefold() == wanted and candidate != name)
        if len(matches) == 1:
            return matches[0]
        # ChEF's "MME" and evalkit's "mme" are two spellings of one entry: then it does not matter which is meant
        entries = {self._exact_entry(candidate) for candidate in matches}
        return matches[0] if len(entries) == 1 and None not in entries else None

    def source_notes(self, dataset: str) -> list[str]:
        """Where another tool reads different data under this entry's name, or reads this entry's data by another.

        So ``evalkit info dataset librispeech_test_clean`` says that AU-Harness's
        ``librispeech_test_clean`` is another upload, and which entry reads it.
        """
        notes = []
        for prefix, names in self.foreign.items():
            for name, entry in names.datasets.items():
                if name == dataset and entry.evalkit_reads is not None:
                    other = self._target_name(names, name)
                    offer = (
                        f"entry {other!r} (also `{prefix}:{name}`) reads that upload"
                        if other is not None and other != name
                        else "evalkit has no entry reading that upload yet"
                    )
                    notes.append(
                        f"{names.tool}'s {name!r} reads {entry.hub}; this entry reads {entry.evalkit_reads}, "
                        f"the same benchmark from another upload, so scores may differ row for row; {offer}"
                    )
                elif entry.evalkit == dataset and name != dataset:
                    notes.append(f"{names.tool} calls this dataset {name!r} (`{prefix}:{name}`)")
        return notes

    def fitting_metrics(self, spec: DatasetSpec) -> list[str]:
        if spec.metrics is not None:
            return list(spec.metrics)
        return list(self.tasks[spec.task].metrics)


def _runspec_files(root: Path) -> Iterable[Path]:
    for path in sorted(root.glob("*/*.json")):
        if path.parent.name.startswith(("_", ".")):
            continue
        yield path


def _read_runspec(path: Path) -> dict[str, Any]:
    data = load_json_file(path, RunspecError)  # duplicate keys and deep nesting refused, one line naming the file
    if not isinstance(data, dict):
        raise RunspecError(f"{path}: expected a JSON object mapping dataset names to entries")
    return data


def _format_runspec_error(error: ValidationError, path: Path, name: str) -> str:
    lines = []
    known = list(DatasetSpec.model_fields) + ["additional_instruction_column"]
    for item in error.errors():
        loc = ".".join(str(p) for p in item["loc"])
        if item["type"] == "extra_forbidden":
            lines.append(f"{path}: {name}.{loc}: unknown key{did_you_mean(str(item['loc'][-1]), known)}")
        elif item["type"] == "missing":
            lines.append(f"{path}: {name}.{loc}: missing mandatory key")
        else:
            where = f"{name}.{loc}" if loc else name
            lines.append(f"{path}: {where}: {item['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def default_roots(extra_dirs: Iterable[str | Path] = (), cwd: Path | None = None) -> list[Path]:
    roots: list[Path] = []
    for candidate in [SHIPPED_RUNSPECS, (cwd or Path.cwd()) / "runspecs", *map(Path, extra_dirs)]:
        resolved = candidate.resolve()
        if resolved not in roots:
            roots.append(resolved)
    return roots


def load_catalog(extra_dirs: Iterable[str | Path] = (), cwd: Path | None = None) -> Catalog:
    """Read every runspec; ``extra_dirs`` must exist (they come from the user's config)."""
    extra = [Path(d) for d in extra_dirs]
    for directory in extra:
        if not directory.is_dir():
            raise RunspecError(f"runspecs_dir: {directory} is not a folder")
    catalog = Catalog(roots=default_roots(extra, cwd))
    for root in catalog.roots:
        if not root.is_dir():
            continue
        for path in _runspec_files(root):
            _add_file(catalog, path)
        for path in sorted((root / "_names").glob("*.json")):
            _add_foreign(catalog, path)
    catalog.aliases = dataset_aliases(catalog)
    return catalog


def _add_foreign(catalog: Catalog, path: Path) -> None:
    """Read another tool's name table; the same table found twice (installed and checkout) is read once."""
    try:
        names = ForeignNames.model_validate(_read_runspec(path))
    except ValidationError as error:
        raise RunspecError(_format_runspec_error(error, path, path.stem)) from None
    known = catalog.foreign.get(path.stem)
    if known is not None and known != names:
        raise RunspecError(f"{path}: another table of {path.stem!r} names was read first, with other contents")
    catalog.foreign[path.stem] = names


def dataset_aliases(catalog: Catalog) -> dict[str, str]:
    """The names other tools give catalogue datasets, derived from each entry's hub coordinates.

    - the hub repo id, and its last part, for a repo that only one entry reads, whatever its subset
      (``AudioLLMs/alpaca_audio_test``, ``alpaca_audio_test``, ``ChuGyouk/MedXpertQA``: LALMEval's and
      KARMA's names);
    - LALMEval's ``<subset>_<split>_<audio|text>`` for an audio or text entry with a subset and a split
      (``sd-qa_ind_s_audio``); when several entries would share one, the entry of a repo read several times
      keeps it (``hi_test_audio`` stays Common Voice's, not a single-entry Hindi set's).

    An alias never shadows a dataset, task or category name, and one two entries
    would share is left out rather than guessed.
    """
    taken = {*catalog.datasets, *catalog.tasks, *catalog.categories}
    repo_users: dict[str, int] = {}
    for spec in catalog.datasets.values():
        if spec.hf_repo:
            repo_users[spec.hf_repo] = repo_users.get(spec.hf_repo, 0) + 1
    candidates: dict[str, set[str]] = {}
    for name, spec in catalog.datasets.items():
        names = []
        if spec.hf_repo:
            # the repo id even for an entry with a subset: KARMA names MedXpertQA or IndicVoices by repo alone;
            # a repo that several entries read gets no repo alias (below)
            names += [spec.hf_repo, spec.hf_repo.rsplit("/", 1)[-1]]
            if spec.subset and spec.split and spec.modality in ("audio", "text", "audio+text"):
                names.append(f"{spec.subset}_{spec.split}_{'text' if spec.modality == 'text' else 'audio'}")
        for alias in names:
            candidates.setdefault(alias, set()).add(name)
    out = {}
    for alias, owners in candidates.items():
        if len(owners) > 1:
            # a subset-form name ("hi_test_audio") wanted by several entries goes to the one whose repo several
            # entries read: an entry whose repo is read once is named by its repo id already
            shared = {o for o in owners if repo_users[str(catalog.datasets[o].hf_repo)] > 1}
            owners = shared if len(shared) == 1 else owners
        if alias in taken or len(owners) != 1:
            continue
        owner = next(iter(owners))
        repo = catalog.datasets[owner].hf_repo
        if repo and alias in (repo, repo.rsplit("/", 1)[-1]) and repo_users[repo] != 1:
            continue
        out[alias] = owner
    return out


def _add_file(catalog: Catalog, path: Path) -> None:
    data = _read_runspec(path)
    task_name, category = path.stem, path.parent.name
    task_meta = data.pop("_task", {}) or {}
    if not isinstance(task_meta, dict):
        raise RunspecError(f"{path}: _task: expected an object with description and metrics")
    try:
        generation = GenerationSettings.model_validate(task_meta.get("generation") or {})
    except ValidationError as error:
        raise RunspecError(_format_runspec_error(error, path, "_task.generation")) from None
    task = catalog.tasks.get(task_name)
    if task is None:
        task = TaskSpec(
            name=task_name,
            category=category,
            file=str(path),
            description=str(task_meta.get("description", "")),
            metrics=list(task_meta.get("metrics", [])),
            default_metric=task_meta.get("default_metric"),
            generation=generation,
        )
        catalog.tasks[task_name] = task
        catalog.categories.setdefault(category, []).append(task_name)
    elif task.category != category:
        raise RunspecError(f"{path}: task {task_name!r} is also defined in category {task.category!r} ({task.file})")
    else:
        for metric in task_meta.get("metrics", []):
            if metric not in task.metrics:
                task.metrics.append(metric)
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise RunspecError(f"{path}: {name}: expected an object of dataset properties")
        if name in catalog.datasets:
            known = catalog.datasets[name]
            if known.task == task_name and known.category == category and catalog.raw_entries.get(name) == entry:
                continue  # the same definition read twice (installed catalogue and a checkout): not a conflict
            raise RunspecError(
                f"{path}: dataset {name!r} is already defined differently in {known.file}; dataset names must be unique"
            )
        try:
            spec = DatasetSpec.model_validate(
                {**entry, "name": name, "task": task_name, "category": category, "file": str(path)}
            )
        except ValidationError as error:
            raise RunspecError(_format_runspec_error(error, path, name)) from None
        catalog.datasets[name] = spec
        catalog.raw_entries[name] = entry
        task.datasets.append(name)
