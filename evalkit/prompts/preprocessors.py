"""Preprocessors turn a Sample into a Prompt; registered by name for runspecs."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from evalkit.data.sample import Sample
from evalkit.prompts.preprocessor_table import BUILTIN_PREPROCESSORS
from evalkit.prompts.prompt import Prompt, PromptTurn
from evalkit.registry import Registry


@dataclass(slots=True)
class PromptContext:
    """Prompt settings resolved for one engine (dataset) before it starts.

    ``system_prompt`` is the default; ``system_by_model`` holds model-specific
    system prompts, applied per model when requests are built. ``add_ons`` are
    texts appended to every instruction. The ``*_names`` fields are the names
    from config.yaml the texts came from, written to each record.
    """

    system_prompt: str | None = None
    system_by_model: dict[str, str | None] = field(default_factory=dict)
    add_ons: list[str] = field(default_factory=list)
    add_on_names: list[str] = field(default_factory=list)
    system_prompt_names: list[str] = field(default_factory=list)
    #: the templates of the dataset's ``prompt_pool`` from the run's prompt library (None: the package's pools)
    pool: list[str] | None = None


class Preprocessor:
    """Base class: override ``build``. No version enters the cache key: the prompt itself does."""

    #: whether ``expand`` gives each sample its ``choices`` (from several columns): likelihood scoring needs no
    #: choices_column then
    builds_choices: bool = False

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        raise NotImplementedError

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        """The samples that are sent, from the dataset's (after the filters, before a shard is taken): as they are.

        A preprocessor that asks one row several times (circular evaluation) yields one sample per request.
        """
        yield from samples

    def example(self, sample: Sample, context: PromptContext) -> tuple[PromptTurn, str]:
        """An in-context example: the sample's question as a user turn, its reference as the answer."""
        prompt = self.build(sample, context)
        reference = sample.reference[0] if isinstance(sample.reference, list) and sample.reference else sample.reference
        return prompt.turns[0], "" if reference is None else str(reference)


#: built-ins come lazily from their table (a lookup imports one family's module); plugins register with
#: ``@PREPROCESSORS.register(name, *aliases)``, as the built-in classes still do (the table's own entries)
PREPROCESSORS: Registry[type[Preprocessor]] = Registry("preprocessor", lazy=BUILTIN_PREPROCESSORS)


def join_parts(*parts: str | None) -> str | None:
    """The non-empty parts of a prompt text, stripped, one blank line apart (None when none is left)."""
    kept = [p.strip() for p in parts if p and p.strip()]
    return "\n\n".join(kept) if kept else None


@PREPROCESSORS.register("GeneralPreprocessor", "general")
class GeneralPreprocessor(Preprocessor):
    """Instruction (+ add-ons), then the textual input, then the audio; multi-turn as given.

    The sample's images go with the first user turn; where they stand
    against its text is the dataset's ``image_position``, applied when the
    request is written.
    """

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        instruction = join_parts(sample.instruction, *context.add_ons)
        if sample.messages:
            # a dataset-given conversation: its last (user) message is the turn asked, with the instruction
            # and the images; the messages before it go as they are
            *earlier, last = sample.messages
            text = join_parts(instruction, last["content"]) if instruction else last["content"]
            turn = PromptTurn(text=text, images=list(sample.images or []))
            return Prompt(turns=[turn], system=context.system_prompt, history=[dict(m) for m in earlier])
        if sample.turns:
            turns = [PromptTurn(text=t.text, audio=t.audio) for t in sample.turns]
            if instruction:
                first = turns[0]
                turns[0] = PromptTurn(text=join_parts(instruction, first.text), audio=first.audio)
            if sample.images:
                turns[0].images = list(sample.images)
            return Prompt(turns=turns, system=context.system_prompt)
        text = join_parts(instruction, sample.text if isinstance(sample.text, str) else None)
        turn = PromptTurn(text=text, audio=sample.audio, images=list(sample.images or []))
        return Prompt(turns=[turn], system=context.system_prompt)


#: what AU-Harness writes beside a recording that comes with no text (models/model.py, _handle_multi_turn)
SPOKEN_TURN_TEXT = "Please respond to the audio."


@PREPROCESSORS.register("MultiturnPreprocessor", "multiturn")
class MultiturnPreprocessor(GeneralPreprocessor):
    """AU-Harness's MT-Bench turns: as GeneralPreprocessor, a spoken turn without text asked to be answered.

    AU-Harness sends a recording alone with the words "Please respond to the audio." as its text part; the
    same words here keep the audio variant's requests (and so its answers and scores) comparable.
    """

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        prompt = super().build(sample, context)
        for turn in prompt.turns:
            if turn.audio is not None and not (turn.text and turn.text.strip()):
                turn.text = SPOKEN_TURN_TEXT
        return prompt


#: meta keys a runspec can map option columns to (``extra_columns``) when a dataset keeps one column per option
OPTION_KEYS = tuple(f"option_{letter}" for letter in "abcdefghijklmnopqrstuvwxyz")


def lettered_options(meta: dict[str, object]) -> list[tuple[str, str]]:
    """The sample's options as (letter, text): ``meta["choices"]`` (a list, or a {letter: text} mapping), else
    the ``option_a``, ``option_b``, ... values (an absent, empty or "nan" one ends the list)."""
    choices = meta.get("choices")
    if isinstance(choices, str):  # MMMU keeps its options as the text of a Python list
        try:
            choices = ast.literal_eval(choices)
        except (ValueError, SyntaxError):
            choices = None
    if isinstance(choices, dict):
        return [(str(k), str(v)) for k, v in choices.items() if v is not None]
    if isinstance(choices, (list, tuple)):
        return [(chr(ord("A") + i), str(c)) for i, c in enumerate(choices[:26])]
    options = []
    for key in OPTION_KEYS:
        value = meta.get(key)
        if _absent(value):
            break
        options.append((key[-1].upper(), str(value)))
    return options


def _absent(value: object) -> bool:
    """No value: None, blank, or the text "nan" that MMBench's exports leave in unused option and hint cells."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "nan"))


@PREPROCESSORS.register("MultipleChoicePreprocessor", "mcq")
class MultipleChoicePreprocessor(GeneralPreprocessor):
    """As GeneralPreprocessor, with the sample's options listed as "A. text" lines after the question.

    A ``context`` in the sample's meta (a text or a list of passages, e.g.
    PubMedQA's abstract) comes first, as "Context: ...".

    For datasets that keep the options outside the question text (MedMCQA's
    opa..opd, MedQA's Options struct, a choices list): the model must see them
    to answer with a letter, and mcq_accuracy reads the letters back.
    """

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        prompt = super().build(sample, context)
        options = lettered_options(sample.meta)
        passage = sample.meta.get("context")
        if isinstance(passage, (list, tuple)):
            passage = "\n".join(str(c) for c in passage if not _absent(c))
        if _absent(passage):
            passage = None
        if prompt.turns and (options or passage):
            listed = "\n".join(f"{letter}. {text}" for letter, text in options)
            first = prompt.turns[0]
            first.text = join_parts(f"Context: {passage}" if passage else None, first.text, listed)
        return prompt


def _reference_index(reference: object, options: list[tuple[str, str]]) -> int | None:
    """The 0-based index of the right option: a letter, a 0-based index, or an option's exact text; else None."""
    if isinstance(reference, (list, tuple)) and len(reference) == 1:
        reference = reference[0]
    if isinstance(reference, bool) or reference is None:
        return None
    letters = [letter.upper() for letter, _ in options]
    if isinstance(reference, int):
        return reference if 0 <= reference < len(options) else None
    text = str(reference).strip()
    if text.upper() in letters and len(text) == 1:
        return letters.index(text.upper())
    if text.isdigit():
        return _reference_index(int(text), options)
    texts = [value.strip() for _, value in options]
    return texts.index(text) if texts.count(text) == 1 else None


def circular_variants(sample: Sample) -> list[Sample]:
    """MMBench's circular evaluation: the sample once per rotation of its options, the reference rotated along.

    Copy k lists the options starting from the (k+1)-th (A-B-C-D, B-C-D-A, ...); its id is ``<id>#c<k>``, its
    meta says ``group`` (the sample id), ``group_size`` (the number of options) and ``circular`` (k), and its
    reference is the letter where the right option now stands. A sample with fewer than two options, or whose
    reference names no single option, is sent once as it is (a circular metric then scores it as a question of
    its own, or fails it as unresolvable).
    """
    options = lettered_options(sample.meta)
    right = _reference_index(sample.reference, options) if len(options) >= 2 else None
    if right is None:
        return [sample]
    texts = [text for _, text in options]
    size = len(texts)
    copies = []
    for k in range(size):
        meta = {key: value for key, value in sample.meta.items() if key not in OPTION_KEYS}
        meta.update(choices=texts[k:] + texts[:k], group=sample.id, group_size=size, circular=k)
        letter = chr(ord("A") + (right - k) % size)
        copies.append(replace(sample, id=f"{sample.id}#c{k}", reference=letter, meta=meta))
    return copies


@PREPROCESSORS.register("CircularMultipleChoicePreprocessor", "mcq_circular")
class CircularMultipleChoicePreprocessor(MultipleChoicePreprocessor):
    """MultipleChoicePreprocessor with MMBench's circular evaluation: each question asked once per option rotation.

    Every copy is a sample of its own (``<id>#c<k>``), so it is sent, cached, recorded and sharded as any
    sample; ``mmbench_circular_accuracy`` counts a question right only when all its copies are.
    """

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            yield from circular_variants(sample)


@PREPROCESSORS.register("InstructionAsSystemPreprocessor", "instruction_as_system")
class InstructionAsSystemPreprocessor(GeneralPreprocessor):
    """The sample's instruction sent as the system message, the rest as GeneralPreprocessor sends it.

    For sets whose per-sample prompt is a system prompt where their reference
    tool sends it (KARMA's clinical_note_generation: ``sample_prompt`` as the
    system message, the conversation as the user's): the same words in the
    user turn are another prompt. The dataset's or config's system prompt, when
    set, goes first, before the sample's.
    """

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        instruction = sample.instruction
        prompt = super().build(replace(sample, instruction=None), context)
        prompt.system = instruction if context.system_prompt is None else join_parts(context.system_prompt, instruction)
        return prompt
