"""AU-Harness's user message, written as its GeneralPreprocessor writes it (``AuHarnessPreprocessor``).

AU-Harness builds one user text per sample by plain concatenation, with no
separator: the task's ``user_prompt``, then the sample's text input (text-only
tasks) or its instruction column, then ``"\\n Choices: "`` and the options
joined by spaces (a task with a ``choices_column``), the whole stripped. So a
``user_prompt`` that ends without a newline runs straight into the row's
question ("...explanations.Is this speech..."). evalkit's GeneralPreprocessor
joins the parts with blank lines instead, which is another prompt; the
runspecs of AU-Harness's datasets name this preprocessor so that a model is
asked exactly what AU-Harness asks it, and scores stay comparable.

A runspec maps AU-Harness's task config onto evalkit's fields:

* ``instruction``: its ``user_prompt``, kept verbatim (a YAML block keeps its
  final newline, and that newline is part of the prompt);
* ``textual_input_column``: the column it appends, its ``instruction_column``
  for audio tasks, its ``textual_input_column`` for text-only ones;
* ``choices_column``: its ``choices_column``.

Config add-ons (evalkit's ``filters.add_ons``) follow the text after a blank
line, as for every preprocessor.
"""

from __future__ import annotations

from evalkit.data.sample import Sample
from evalkit.prompts.preprocessors import PREPROCESSORS, GeneralPreprocessor, PromptContext
from evalkit.prompts.prompt import Prompt, PromptTurn

#: what AU-Harness puts between the instruction and the options (general_preprocessor.py)
CHOICES_LEAD = "\n Choices: "


def auharness_user_text(sample: Sample) -> str:
    """The user text AU-Harness's GeneralPreprocessor writes for ``sample`` (rules in the module docstring)."""
    text = sample.instruction or ""
    if isinstance(sample.text, str):
        text += sample.text
    if "choices" in sample.meta and sample.meta["choices"] is not None:
        choices = sample.meta["choices"]
        listed = " ".join(str(c) for c in choices) if isinstance(choices, list) else str(choices)
        text += CHOICES_LEAD + listed
    return text.strip()


@PREPROCESSORS.register("AuHarnessPreprocessor", "auharness")
class AuHarnessPreprocessor(GeneralPreprocessor):
    """The prompt, then the text input or the row's instruction, then the choices, run together as AU-Harness does."""

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        text = auharness_user_text(sample)
        sent = "\n\n".join(part.strip() for part in (text, *context.add_ons) if part and part.strip())
        turn = PromptTurn(text=sent or None, audio=sample.audio, images=list(sample.images or []))
        return Prompt(turns=[turn], system=context.system_prompt)
