"""MT-Bench's conversations asked as AU-Harness asks them: each category answered at its own temperature.

AU-Harness sends every turn of an MT-Bench question at the temperature its
category calls for (models/model.py, ``_handle_multi_turn``, from the table in
utils/constants.py, MT-Bench's own FastChat values), whatever the task file's
``generation_kwargs`` say: 0.7 for writing and roleplay, 0.1 for STEM and the
humanities, 0 for the rest. The turns themselves are MultiturnPreprocessor's; a
category outside the table keeps the dataset's temperature.

(AU-Harness keeps that temperature in its request handler, which all of a
model's samples share, so with several samples in flight a turn can go out at
another sample's category's temperature. Here each sample's turns carry their
own, which is what AU-Harness sends one sample at a time.)
"""

from __future__ import annotations

from evalkit.data.sample import Sample
from evalkit.prompts.preprocessors import PREPROCESSORS, MultiturnPreprocessor, PromptContext
from evalkit.prompts.prompt import Prompt

#: MT-Bench's answer temperature per question category, as AU-Harness sends it
CATEGORY_TEMPERATURE: dict[str, float] = {
    "writing": 0.7,
    "roleplay": 0.7,
    "extraction": 0.0,
    "math": 0.0,
    "coding": 0.0,
    "reasoning": 0.0,
    "stem": 0.1,
    "humanities": 0.1,
    "arena-hard-200": 0.0,
}


@PREPROCESSORS.register("AuHarnessMultiturnPreprocessor", "auharness_multiturn")
class AuHarnessMultiturnPreprocessor(MultiturnPreprocessor):
    """MultiturnPreprocessor's turns, every one sent at the temperature of the sample's ``category``."""

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        prompt = super().build(sample, context)
        temperature = CATEGORY_TEMPERATURE.get(str(sample.meta.get("category")))
        if temperature is not None:
            prompt.generation = {"temperature": temperature}
        return prompt
