"""ChEF's questions for ScienceQA, MMBench, MMMU and the sets it asks as they are (LAMM's VQA, MME).

Written from OpenGVLab/LAMM ``src/ChEF/scenario/vqa_dataset.py`` (``clean_question``), ``MMBench_dataset.py``,
``MMMU_dataset.py`` (``construct_prompt``), ``LAMM_dataset.py`` and ``MME_dataset.py``, and
``src/ChEF/models/test_gpt.py`` (what its GPT client adds to a request with several images), at commit
ea571363883ceba58a0f724ef197ed7205e07465. ChEF's dataset classes write the question text and its options; the
recipe's prompt template (the entry's instruction, ``<QUESTION>`` standing for ChEF's ``{question}``) is filled
with it. ChEF's names reach these entries, so a model is asked what ChEF asks it; evalkit's own entries for the
same data keep evalkit's prompts.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from evalkit.data.image.values import ImageDecodeError, images_from_cell
from evalkit.data.sample import Sample
from evalkit.prompts.chef.sets import chef_asked, chef_user_prompt
from evalkit.prompts.preprocessors import PREPROCESSORS, Preprocessor, PromptContext
from evalkit.prompts.prompt import Prompt

#: what ChEF's GPT client adds to the text of a request with more than one image
IMAGE_ORDER_NOTE = " The order in which I upload images is the order of the images."
#: cells pandas' read_csv reads as missing by default (ChEF reads MMBench's TSV with it and drops such options)
PANDAS_MISSING = frozenset(
    {
        "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
        "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
    }
)  # fmt: skip
#: MMBench's option columns, as the entry's extra_columns name them
MMBENCH_OPTIONS = (("A", "option_a"), ("B", "option_b"), ("C", "option_c"), ("D", "option_d"), ("E", "option_e"))
#: MMMU's image columns after the first (the entry's image_column), as extra_columns name them
MMMU_MORE_IMAGES = tuple(f"image_{number}" for number in range(2, 8))


def _missing(value: Any) -> bool:
    """A cell ChEF's pandas reading takes for no value."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value in PANDAS_MISSING


def _pandas_text(value: Any) -> str:
    """A cell as ChEF's f-string writes what pandas read (a whole float as ``3.0``, as pandas gives it)."""
    return str(value)


def scienceqa_question(query: str) -> str | None:
    """ChEF's ``clean_question``: ``Question: `` and the question without its context, then its options line.

    None when the query has no ``Options:`` (ChEF's class stops on such a row).
    """
    parts = query.split("Options:")
    if len(parts) < 2:
        return None
    return "Question: " + parts[0].split("Context:")[0] + "Options:" + parts[1] + "\n"


@PREPROCESSORS.register("ChefScienceQAPreprocessor", "chef_scienceqa")
class ChefScienceQAPreprocessor(Preprocessor):
    """ScienceQA as ChEF's basic recipe asks it: LAMM's query less its context, in the recipe's template."""

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        question = scienceqa_question(sample.text or "")
        if question is None:
            sample.meta["conversation_error"] = "the query has no 'Options:', which ChEF's ScienceQA question needs"
            question = sample.text or ""
        return chef_user_prompt(sample, chef_asked(sample, question), context)


@PREPROCESSORS.register("ChefQuestionPreprocessor", "chef_question")
class ChefQuestionPreprocessor(Preprocessor):
    """The row's question as it is, in the recipe's template: ChEF's LAMM VQA sets (the options are in LAMM's
    query already) and MME (the question ends "Please answer yes or no.")."""

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        return chef_user_prompt(sample, chef_asked(sample, sample.text or ""), context)


def mmbench_question(question: str, hint: Any, options: list[tuple[str, str]]) -> str:
    """ChEF's MMBench question: the hint (when there is one), the question, then "There are several options:" and
    one "(A) text" line per option."""
    listed = "There are several options:\n" + "".join(f"({letter}) {text}\n" for letter, text in options)
    if not _missing(hint):
        return f"{_pandas_text(hint)} {question} {listed}"
    return f"{question} {listed}"


@PREPROCESSORS.register("ChefMMBenchPreprocessor", "chef_mmbench")
class ChefMMBenchPreprocessor(Preprocessor):
    """MMBench as ChEF's direct recipe asks it (hint on): the options the row has, listed after the question."""

    builds_choices = True

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            options = [
                (letter, _pandas_text(sample.meta[key]))
                for letter, key in MMBENCH_OPTIONS
                if key in sample.meta and not _missing(sample.meta[key])
            ]
            text = mmbench_question(sample.text or "", sample.meta.get("context"), options)
            yield replace(sample, text=text, meta={**sample.meta, "choices": [option for _, option in options]})

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        return chef_user_prompt(sample, chef_asked(sample, sample.text or ""), context)


def mmmu_question(question: str, question_type: Any, options: list[str]) -> str:
    """MMMU's prompt as ChEF's ``construct_prompt`` writes it (MMMU's own format, no task instruction)."""
    if question_type == "multiple-choice":
        listed = "".join(f"({chr(ord('A') + index)}) {option}\n" for index, option in enumerate(options))
        return f"{question}\n{listed}\nAnswer with the option's letter from the given choices directly."
    return f"{question}\nAnswer the question using a single word or phrase."


@PREPROCESSORS.register("ChefMMMUPreprocessor", "chef_mmmu")
class ChefMMMUPreprocessor(Preprocessor):
    """MMMU as ChEF asks it: every image of the row in order, its options listed, MMMU's answer instruction.

    ChEF's GPT client adds its note on the images' order to a request with more than one image; so does this.
    """

    builds_choices = True

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            meta = {key: value for key, value in sample.meta.items() if key not in MMMU_MORE_IMAGES}
            images = list(sample.images or [])
            try:
                for key in MMMU_MORE_IMAGES:
                    images += images_from_cell(sample.meta.get(key))
            except ImageDecodeError as error:
                meta.setdefault("image_error", f"{key}: {error}")
            try:
                options = [str(option) for option in ast.literal_eval(str(meta.get("options") or "[]"))]
            except (ValueError, SyntaxError):
                meta.setdefault("conversation_error", f"options is not a Python list: {str(meta.get('options'))[:80]}")
                options = []
            kind = meta.get("question_type")
            meta["choices"] = options if kind == "multiple-choice" else []
            text = mmmu_question(sample.text or "", kind, options)
            yield replace(sample, text=text, images=images, meta=meta)

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        text = chef_asked(sample, sample.text or "")
        if len(sample.images or []) > 1:
            text += IMAGE_ORDER_NOTE
        return chef_user_prompt(sample, text, context)
