"""ChEF's chain of thought: the model reasons about the question first, then answers it with that reasoning in view.

ChEF (OpenGVLab/LAMM ``src/ChEF/instruction/__init__.py``, ``InstructionHandler.generate_CoT_prompt``, commit
ea571363883ceba58a0f724ef197ed7205e07465) first generates up to 256 tokens for the question followed by a line
"Let's think step by step.", then asks its usual query again with the same images, the reasoning placed
where the model's answer begins (its models' ``CoT_answer_list``), and scores the reasoning joined to the
answer. A chat API has no such prefix, so evalkit sends the same two steps as a conversation: the reasoning
request is the first user turn (with the question's images and audio), the model's reasoning its answer, and
the question again the second user turn. The second answer alone is scored (an answer extractor reading the
reasoning would find the options it weighs); the reasoning is kept in the record.

ChEF's GPT client (``models/test_gpt.py``) ignores ``CoT_answer_list``: it sends the reasoning request and then the
usual query as two requests of their own, each with the images, and ChEF scores the reasoning joined to the answer.
A dataset's ``chain_of_thought_form: separate`` asks that way (:func:`reasoning_request`), so a ChEF name sends
what ChEF sends to a chat API.
"""

from __future__ import annotations

from dataclasses import replace

from evalkit.prompts.prompt import Prompt, PromptTurn

#: ChEF's reasoning instruction, the line after the question
REASONING_PROMPT = "Let's think step by step."
#: ChEF's max_new_tokens for the reasoning (generate_CoT_prompt's default)
REASONING_MAX_TOKENS = 256


def with_reasoning_turn(prompt: Prompt) -> Prompt:
    """``prompt`` with a reasoning turn before its last turn; the last turn's media move to the reasoning turn.

    The media are shown once, with the reasoning request, and stay in the conversation's history for the
    answer, as ChEF shows them to both steps.
    """
    last = prompt.turns[-1]
    text = f"{last.text}\n{REASONING_PROMPT}" if last.text else REASONING_PROMPT
    reasoning = PromptTurn(text=text, audio=last.audio, images=list(last.images))
    answer = PromptTurn(text=last.text or "")
    info = {**prompt.info, "chain_of_thought": REASONING_PROMPT}
    return replace(prompt, turns=[*prompt.turns[:-1], reasoning, answer], info=info)


def reasoning_request(prompt: Prompt) -> Prompt:
    """``prompt`` with the reasoning line after its last turn's text: the first of ChEF's two separate requests.

    The turn keeps its media, so the reasoning request shows the images the answer request shows again.
    """
    last = prompt.turns[-1]
    text = f"{last.text}\n{REASONING_PROMPT}" if last.text else REASONING_PROMPT
    info = {**prompt.info, "chain_of_thought": REASONING_PROMPT}
    return replace(prompt, turns=[*prompt.turns[:-1], replace(last, text=text)], info=info)


def without_reasoning_turn(prompt: Prompt) -> Prompt:
    """The prompt :func:`with_reasoning_turn` was made from, less its media: what likelihood scoring continues."""
    turns = prompt.turns
    return replace(prompt, turns=[*turns[:-2], turns[-1]]) if len(turns) >= 2 else prompt


def reasoning_only(prompt: Prompt) -> Prompt:
    """The reasoning request alone (earlier turns kept): what a likelihood-scored sample asks before its options."""
    return replace(prompt, turns=prompt.turns[:-1]) if len(prompt.turns) >= 2 else prompt


def context_with_reasoning(context: str, reasoning: str, cue: str = "Answer:") -> str:
    """A likelihood context with the model's reasoning after the question, before the answer cue.

    ChEF's PPL inferencer with CoT scores each option after the query and the generated reasoning (the
    reasoning where the model's answer begins, then its answer template); here the reasoning goes on its own
    line after the question, and the options continue the usual cue.
    """
    head = context[: -len(cue)] if context.endswith(cue) else context + "\n"
    return f"{head}{reasoning.strip()}\n{cue}"
