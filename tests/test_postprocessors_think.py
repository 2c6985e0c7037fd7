"""strip_thinking: answers without a tag skip the regex passes and come out exactly as the passes leave them."""

from __future__ import annotations

import pytest

from evalkit.processing.postprocessors import _OPEN_THINK, _THINK, GeneralPostprocessor, strip_thinking


def _by_the_patterns(text: str) -> str:
    """What the two patterns make of ``text``, always run (the form before the tagless shortcut)."""
    text = _THINK.sub("", text)
    if "</think>" in text.lower():
        text = _OPEN_THINK.sub("", text)
    return text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  Paris  ",
        "The answer is B.\n",
        "ﬁne ＡＢＣ ΘΚ",  # non-ASCII, and the Kelvin sign that IGNORECASE matches as k
        "<think>reasoning</think>The answer: 4",
        "<THINK>\nlong\nreasoning\n</Think> 4",
        "dangling reasoning</think> 4",
        "a < b and b > c",
        "<think>never closed",
        "x <think>a</think> y <think>b</think> z",
    ],
)
def test_strip_thinking_is_the_patterns(text: str) -> None:
    assert strip_thinking(text) == _by_the_patterns(text)
    assert GeneralPostprocessor().process(text) == _by_the_patterns(text).strip()


def test_a_tagless_answer_is_the_same_object() -> None:
    text = "no tags here"
    assert strip_thinking(text) is text
