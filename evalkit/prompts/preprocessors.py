"""Preprocessors turn a Sample into a Prompt; registered by name for runspecs."""

from __future__ import annotations

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
