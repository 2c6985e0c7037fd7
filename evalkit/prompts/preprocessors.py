"""Preprocessors turn a Sample into a Prompt; registered by name for runspecs."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from evalkit.data.sample import Sample
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

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        raise NotImplementedError

    def example(self, sample: Sample, context: PromptContext) -> tuple[PromptTurn, str]:
        """An in-context example: the sample's question as a user turn, its reference as the answer."""
        prompt = self.build(sample, context)
        reference = sample.reference[0] if isinstance(sample.reference, list) and sample.reference else sample.reference
        return prompt.turns[0], "" if reference is None else str(reference)


PREPROCESSORS: Registry[type[Preprocessor]] = Registry(
    "preprocessor", builtin_modules=("evalkit.prompts.preprocessors",)
)


def _join(*parts: str | None) -> str | None:
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
        instruction = _join(sample.instruction, *context.add_ons)
        if sample.messages:
            # a dataset-given conversation: its last (user) message is the turn asked, with the instruction
            # and the images; the messages before it go as they are
            *earlier, last = sample.messages
            text = _join(instruction, last["content"]) if instruction else last["content"]
            turn = PromptTurn(text=text, images=list(sample.images or []))
            return Prompt(turns=[turn], system=context.system_prompt, history=[dict(m) for m in earlier])
        if sample.turns:
            turns = [PromptTurn(text=t.text, audio=t.audio) for t in sample.turns]
            if instruction:
                first = turns[0]
                turns[0] = PromptTurn(text=_join(instruction, first.text), audio=first.audio)
            if sample.images:
                turns[0].images = list(sample.images)
            return Prompt(turns=turns, system=context.system_prompt)
        text = _join(instruction, sample.text if isinstance(sample.text, str) else None)
        turn = PromptTurn(text=text, audio=sample.audio, images=list(sample.images or []))
        return Prompt(turns=[turn], system=context.system_prompt)


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
            first.text = _join(f"Context: {passage}" if passage else None, first.text, listed)
        return prompt
