"""Seeded text corruptions for robustness runs (ChEF's ``text_crp``): typos in the question, shuffled options.

ChEF perturbs the question text of its ScienceQA_C / MMBench_C copies (the part before "Options:") with a
perturbation object that its repository does not include, so evalkit's typos are its own: each word of three
or more letters gets, with a probability set by the level (5%-30%), one of four character edits (swap two
neighbours, drop one, double one, replace one by a random lowercase letter). ``shuffle_options`` lists a
multiple-choice sample's options in a seeded order and moves the reference with its option (to the option's
new letter), so any MCQ metric scores the shuffled sample as it would the clean one.

Like the image corruptions (:mod:`evalkit.data.image.corrupt`), every random choice comes from the
corruption seed, the corruption's name and the sample id: the same sample is corrupted the same way on
every run, shard and model.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from evalkit.data.audio.corrupt import AUDIO_ALIASES, AUDIO_CORRUPTIONS
from evalkit.data.image.corrupt import DEFAULT_SEVERITY, IMAGE_ALIASES, IMAGE_CORRUPTIONS, sample_seed
from evalkit.data.sample import Sample
from evalkit.prompts.preprocessors import OPTION_KEYS, lettered_options

TEXT_CORRUPTIONS: tuple[str, ...] = ("typos", "shuffle_options")
TEXT_ALIASES = {"typo": "typos", "shuffle": "shuffle_options", "shuffled_options": "shuffle_options"}
_TYPO_RATE = (0.05, 0.1, 0.15, 0.2, 0.3)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def canonical_corruption(name: str) -> str | None:
    """The evalkit name of an image, audio or text corruption (case and aliases folded), None when unknown."""
    folded = name.strip().lower().replace("-", "_").replace(" ", "_")
    folded = IMAGE_ALIASES.get(folded, AUDIO_ALIASES.get(folded, TEXT_ALIASES.get(folded, folded)))
    known = folded in IMAGE_CORRUPTIONS or folded in AUDIO_CORRUPTIONS or folded in TEXT_CORRUPTIONS
    return folded if known else None


def known_corruptions() -> tuple[str, ...]:
    return (*IMAGE_CORRUPTIONS, *AUDIO_CORRUPTIONS, *TEXT_CORRUPTIONS)


def _typo(word: str, rng: random.Random) -> str:
    position = rng.randrange(len(word) - 1)
    edit = rng.randrange(4)
    if edit == 0:  # swap two neighbours
        return word[:position] + word[position + 1] + word[position] + word[position + 2 :]
    if edit == 1:  # drop one
        return word[:position] + word[position + 1 :]
    if edit == 2:  # double one
        return word[: position + 1] + word[position] + word[position + 1 :]
    return word[:position] + rng.choice(_LETTERS) + word[position + 1 :]


def with_typos(text: str, severity: int, rng: random.Random) -> str:
    """``text`` with seeded typos in some words of three or more letters; spacing and punctuation kept."""
    rate = _TYPO_RATE[severity - 1]
    out: list[str] = []
    word: list[str] = []

    def close() -> None:
        if word:
            joined = "".join(word)
            out.append(_typo(joined, rng) if len(joined) >= 3 and rng.random() < rate else joined)
            word.clear()

    for char in text:
        if char.isalpha():
            word.append(char)
        else:
            close()
            out.append(char)
    close()
    return "".join(out)


def _correct_indices(reference: Any, options: list[tuple[str, str]], index_base: int) -> list[int] | None:
    """0-based positions of the reference's options (a letter, an index, an option's text, or a list of these)."""
    if isinstance(reference, (list, tuple)):
        found: list[int] = []
        for item in reference:
            one = _correct_indices(item, options, index_base)
            if one is None:
                return None
            found += one
        return found or None
    if isinstance(reference, bool) or reference is None:
        return None
    letters = [letter.upper() for letter, _ in options]
    if isinstance(reference, int):
        index = reference - index_base
        return [index] if 0 <= index < len(options) else None
    text = str(reference).strip()
    if len(text) == 1 and text.upper() in letters:
        return [letters.index(text.upper())]
    if text.isdigit():
        return _correct_indices(int(text), options, index_base)
    texts = [value.strip() for _, value in options]
    return [texts.index(text)] if texts.count(text) == 1 else None


def shuffled_options(sample: Sample, rng: random.Random, index_base: int = 0) -> tuple[Sample, dict[str, Any]]:
    """The sample with its options in a seeded order and its reference the moved options' letters.

    A sample with fewer than two options, or whose reference names none of them, is kept as it is and says
    why in the returned note (its score is then the clean one's).
    """
    options = lettered_options(sample.meta)
    if len(options) < 2:
        return sample, {"skipped": "fewer than two options"}
    correct = _correct_indices(sample.reference, options, index_base)
    if correct is None:
        return sample, {"skipped": "the reference names no option"}
    order = list(range(len(options)))
    rng.shuffle(order)
    new_place = {old: new for new, old in enumerate(order)}
    letters = [chr(ord("A") + new_place[i]) for i in correct]
    reference: Any = letters if isinstance(sample.reference, (list, tuple)) else letters[0]
    meta = {key: value for key, value in sample.meta.items() if key not in OPTION_KEYS}
    meta["choices"] = [options[old][1] for old in order]
    return replace(sample, reference=reference, meta=meta), {"order": order}


def corrupt_sample(
    sample: Sample, name: str, seed: int, severity: int = DEFAULT_SEVERITY, index_base: int = 0
) -> tuple[Sample, dict[str, Any]]:
    """The sample with text corruption ``name`` applied, and a note for its record (name, level, seed, ...)."""
    own_seed = sample_seed(seed, name, sample.id)
    rng = random.Random(own_seed)
    note: dict[str, Any] = {"name": name, "severity": severity, "seed": own_seed}
    if name == "typos":
        text = with_typos(sample.text, severity, rng) if isinstance(sample.text, str) else sample.text
        turns = (
            [
                replace(turn, text=with_typos(turn.text, severity, rng) if turn.text else turn.text)
                for turn in sample.turns
            ]
            if sample.turns
            else sample.turns
        )
        return replace(sample, text=text, turns=turns), note
    if name == "shuffle_options":
        changed, extra = shuffled_options(sample, rng, index_base)
        return changed, {**note, **extra}
    raise ValueError(f"unknown text corruption {name!r}; known: {', '.join(TEXT_CORRUPTIONS)}")
