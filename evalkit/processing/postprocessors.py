"""Postprocessors turn a raw model answer into the prediction a metric scores."""

from __future__ import annotations

import re

from evalkit.registry import Registry

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"^.*?</think>", re.DOTALL | re.IGNORECASE)


class Postprocessor:
    def process(self, text: str) -> str:
        raise NotImplementedError


POSTPROCESSORS: Registry[type[Postprocessor]] = Registry(
    "postprocessor", builtin_modules=("evalkit.processing.postprocessors",)
)


def strip_thinking(text: str) -> str:
    """Drop reasoning blocks: complete <think>...</think> and a dangling prefix ending in </think>."""
    text = _THINK.sub("", text)
    if "</think>" in text.lower():
        text = _OPEN_THINK.sub("", text)
    return text


@POSTPROCESSORS.register("GeneralPostprocessor", "general")
class GeneralPostprocessor(Postprocessor):
    """Strip reasoning blocks and surrounding whitespace; the metric normalizes the rest."""

    def process(self, text: str) -> str:
        return strip_thinking(text).strip()
