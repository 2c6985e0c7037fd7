"""Sample -> Prompt for one engine: the preprocessor plus the runspec's prompt variants.

One place decides what a sample is asked, so the engine and anything that
predicts its requests (the dry run) build the same prompt: the instruction
template drawn from the runspec's ``prompt_pool``, the in-context examples,
and ``prompt.info`` (what shaped the prompt, written to every record).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from evalkit.catalog import DatasetSpec
from evalkit.data.sample import Sample
from evalkit.prompts import examples as icl
from evalkit.prompts.library import check_prompt_choice, instruction_for
from evalkit.prompts.preprocessors import Preprocessor, PromptContext
from evalkit.prompts.prompt import Prompt


class PromptAssembler:
    """Builds every sample's prompt for one dataset; holds no per-sample state.

    ``example_pool`` is the in-context pool (:func:`evalkit.prompts.examples.load_pool`,
    loaded once per engine); examples are asked with the same instruction
    template as the sample they precede.
    """

    def __init__(
        self,
        spec: DatasetSpec,
        preprocessor: Preprocessor,
        context: PromptContext,
        seed: int = 0,
        example_pool: Sequence[Sample] = (),
    ) -> None:
        check_prompt_choice(spec, {spec.prompt_pool: context.pool} if context.pool and spec.prompt_pool else None)
        self.spec = spec
        self.preprocessor = preprocessor
        self.context = context
        self.seed = seed
        # kept as the ExamplePool it is: its text index / image vectors are built once, not per sample
        self.example_pool = example_pool if isinstance(example_pool, icl.ExamplePool) else icl.ExamplePool(example_pool)
        base: dict[str, Any] = {}
        if context.add_on_names:
            base["add_ons"] = list(context.add_on_names)
        if context.system_prompt_names:
            base["system_prompts"] = list(context.system_prompt_names)
        self._base_info = base

    def build(self, sample: Sample, query: Any = icl.UNSET) -> tuple[Prompt, list[Sample]]:
        """The sample's prompt and the examples shown before it (their ids are in ``prompt.info``).

        ``query``: the sample's image vector for ``topk_img`` (:func:`evalkit.prompts.examples.query_vector`,
        made in a worker thread); made here when not given.
        """
        info: dict[str, Any] = dict(self._base_info)
        template: str | None = None
        if self.spec.prompt_pool is not None:
            template, index = instruction_for(self.spec, sample.id, self.seed, self.context.pool)
            sample = dataclasses.replace(sample, instruction=template)
            info["pool"] = self.spec.prompt_pool
            info["template"] = index
        prompt = self.preprocessor.build(sample, self.context)
        chosen: list[Sample] = []
        if self.example_pool:
            chosen = icl.choose(self.spec, self.example_pool, sample, self.seed, query)
            if template is not None:
                chosen = [dataclasses.replace(example, instruction=template) for example in chosen]
            prompt.examples = [self.preprocessor.example(example, self.context) for example in chosen]
            info["examples"] = [example.id for example in chosen]
            info["example_choice"] = icl.choice_name(self.spec)
            if info["example_choice"] == "topk_img":
                info["example_embedding"] = icl.embedding_name(self.example_pool)
        prompt.info.update(info)
        return prompt, chosen
