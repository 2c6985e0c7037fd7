"""BFCL's function-calling questions asked as AU-Harness asks them (``BfclPreprocessor``).

ServiceNow-AI/BFCL_v3_audio keeps, per row, ``question`` (a JSON list of the
user's turns, one for these subsets), ``tools`` (BFCL's function
descriptions, JSON), ``reference`` (BFCL's possible answer, JSON:
``[{function: {parameter: [allowed values]}}]``), ``id`` (``simple_12``) and
the spoken question; the runspec maps ``question`` to the sample's text (text
tasks) or to ``meta["question_cell"]`` (audio tasks, whose question is
spoken), ``tools`` to ``meta["functions"]`` and ``reference`` to the
reference. AU-Harness (preprocessors/bfcl_preprocessor.py) asks
it in two ways, and so does this preprocessor:

* **with its prompt** (a runspec ``instruction``: AU-Harness's ``user_prompt``):
  one user text, the prompt, then ``"Here is a list of functions in JSON
  format that you can invoke.\\n"``, the functions as ``json.dumps(indent=4)``
  and a newline; a text task adds a blank line and the question. No tools go
  with the request; the model writes its calls as JSON;
* **without it** (``_no_prompt``: no instruction): the functions go as the
  request's ``tools`` (:func:`evalkit.prompts.auharness.openai_tools.openai_tools`) and
  the user message is the audio alone, or, for a text task, the ``question``
  cell exactly as the dataset holds it (the JSON list text, brackets and
  quotes included: AU-Harness sends the raw cell). The answer is the model's
  ``tool_calls`` (see :mod:`evalkit.clients.tool_calls`).

A task is a text task when its samples have no audio (its runspec names no
``audio_column``). AU-Harness renders the text through Jinja, which drops one
final newline; evalkit drops it too (evalkit/prompts/auharness/jinja_newline.py).

In :meth:`BfclPreprocessor.expand`, as AU-Harness does before asking:
function names have every ``.`` written ``_`` (in the descriptions and in the
answer key, where a short name ``factorial`` is first completed to the
description's ``math.factorial``), because the model is shown and answers
with the underscored names; a row whose question is not exactly one
turn, or is empty, is left out (AU-Harness skips it too); the sample's meta
gets ``functions`` (the renamed descriptions, BFCL's types, for
``bfcl_match_score``), ``question`` (the turn's text) and ``category`` (from
the id, so the metric checks as BFCL's checker does for that category), and
the reference becomes the renamed answer key as JSON. A row whose tools or
answer key are not JSON is left out too (AU-Harness stops there), with a
warning naming it.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from evalkit.data.sample import Sample
from evalkit.prompts.auharness.jinja_newline import without_final_newline
from evalkit.prompts.auharness.openai_tools import openai_tools, underscored
from evalkit.prompts.preprocessors import PREPROCESSORS, Preprocessor, PromptContext
from evalkit.prompts.prompt import Prompt, PromptTurn

log = logging.getLogger("evalkit")

#: what AU-Harness writes between its prompt and the functions
FUNCTIONS_LEAD = "Here is a list of functions in JSON format that you can invoke.\n"
#: BFCL's test categories, read from a sample id such as ``parallel_multiple_7``
CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")
#: where an audio task's runspec puts the question cell (a text task's is the sample's text)
QUESTION_KEY = "question_cell"


class BfclRowError(ValueError):
    """A row AU-Harness would not ask: its question is not one turn, or its tools or answer key are not JSON."""


def _decoded(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise BfclRowError(f"{what} is neither JSON nor a Python literal: {value[:120]!r}") from None


def single_turn(question: Any) -> str:
    """The one turn of a BFCL question cell (a list of turns, or its JSON text)."""
    turns = _decoded(question, "the question")
    if not isinstance(turns, list) or len(turns) != 1:
        raise BfclRowError(f"the question has {len(turns) if isinstance(turns, list) else 'no list of'} turns, not 1")
    if not turns[0]:
        raise BfclRowError("the question is empty")
    return turns[0] if isinstance(turns[0], str) else json.dumps(turns[0])


def renamed_functions(functions: Any) -> list[dict[str, Any]]:
    """The function descriptions with dotted names underscored (a copy)."""
    described = _decoded(functions, "the tools")
    if isinstance(described, dict):
        described = [described]
    if not isinstance(described, list) or not all(isinstance(f, dict) and "name" in f for f in described):
        raise BfclRowError("the tools are not a list of function descriptions")
    return [{**f, "name": underscored(str(f["name"]))} for f in described]


def renamed_answer_key(reference: Any, functions: Any) -> list[dict[str, Any]]:
    """BFCL's possible answer with each name completed to its description's (a short one) and underscored."""
    answers = _decoded(reference, "the reference")
    described = _decoded(functions, "the tools")
    if isinstance(described, dict):
        described = [described]
    if not isinstance(answers, list) or not all(isinstance(a, dict) and len(a) == 1 for a in answers):
        raise BfclRowError("the reference is not BFCL's possible answer, [{function: {parameter: [values]}}]")
    names = [str(f.get("name", "")) for f in described if isinstance(f, dict)] if isinstance(described, list) else []
    renamed = []
    for answer in answers:
        ((name, arguments),) = answer.items()
        full = next((n for n in names if n.split(".")[-1] == name), name)
        renamed.append({underscored(full): arguments})
    return renamed


def category_of(sample_id: Any) -> str | None:
    """BFCL's category of an id such as ``parallel_multiple_7``; None when it names none of them."""
    head = str(sample_id).rpartition("_")[0]
    return head if head in CATEGORIES else None


@PREPROCESSORS.register("BfclPreprocessor", "bfcl")
class BfclPreprocessor(Preprocessor):
    """BFCL asked as AU-Harness asks it: functions in the prompt (with an instruction) or as tools (without)."""

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            try:
                question = single_turn(sample.text if sample.text is not None else sample.meta.get(QUESTION_KEY))
                raw_tools = sample.meta.get("functions")
                functions = renamed_functions(raw_tools)
                answers = renamed_answer_key(sample.reference, raw_tools)
            except BfclRowError as error:
                log.warning("BFCL row %s left out, as AU-Harness leaves it out: %s", sample.id, error)
                continue
            meta = {**sample.meta, "functions": functions, "question": question}
            category = category_of(sample.id)
            if category is not None:
                meta["category"] = category
            yield replace(sample, reference=json.dumps(answers), meta=meta)

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        functions: list[dict[str, Any]] = sample.meta.get("functions") or []
        spoken = sample.audio is not None
        tools: list[dict[str, Any]] = []
        text: str | None
        if sample.instruction:
            shown = sample.instruction + FUNCTIONS_LEAD + json.dumps(functions, indent=4) + "\n"
            if not spoken:
                shown = f"{shown}\n\n{sample.meta.get('question', '')}"
            text = without_final_newline(shown)
        else:
            tools = openai_tools(functions)
            text = None if spoken else without_final_newline(str(sample.text or ""))
        sent = "\n\n".join(part for part in (text, *context.add_ons) if part) or None
        turn = PromptTurn(text=sent, audio=sample.audio)
        return Prompt(turns=[turn], system=context.system_prompt, tools=tools)
