"""ChEF's row selections and prompts for SEED-Bench, SEED-Bench-2 and Winoground.

Written from OpenGVLab/LAMM ``src/ChEF/scenario/SEED_Bench_dataset.py``, ``SEED_Bench2_dataset.py`` and
``Winoground_dataset.py`` at commit ea571363883ceba58a0f724ef197ed7205e07465. ChEF's dataset classes drop rows
in code (SEED-Bench keeps image questions only, SEED-Bench-2 three of its six data types), gather the options
from four columns (dropping SEED-Bench-2's empty ones) and build Winoground's options and questions from its
captions and images. A catalogue entry reads every row of the local download, so these preprocessors do in
``expand`` what ChEF's classes do (a re-score reads the same samples) and send ChEF's question text; the
options are scored by their likelihood, as ChEF's PPL recipes for these sets do.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalkit.data.sample import Image, Sample
from evalkit.prompts.preprocessors import PREPROCESSORS, Preprocessor, PromptContext
from evalkit.prompts.prompt import Prompt, PromptTurn

#: the option columns SEED-Bench and SEED-Bench-2 keep their four options in (read as extra_columns)
SEED_OPTION_KEYS = ("choice_a", "choice_b", "choice_c", "choice_d")
#: SEED-Bench-2's data types ChEF asks (its other three need image generation or interleaved input)
SEED2_DATA_TYPES = ("Multiple Images", "Video", "Single Image")
#: Winoground_Cap's four options, in the order ChEF's metric compares them (caption x image)
WINOGROUND_CAP_OPTIONS = (
    "Caption 1 matches the Image 1",
    "Caption 1 matches the Image 2",
    "Caption 2 matches the Image 1",
    "Caption 2 matches the Image 2",
)
#: ChEF's seed for Winoground's caption and image swaps (random.seed(2023), one randint(1, 2) per example)
WINOGROUND_SEED = 2023


def chef_user_prompt(sample: Sample, text: str, context: PromptContext) -> Prompt:
    """One user message with the sample's images and ``text`` as ChEF builds it; the run's add-ons follow after a
    blank line."""
    kept = [part.strip() for part in (text, *context.add_ons) if part and part.strip()]
    sent = ("\n\n".join(kept) or text) if context.add_ons else text
    return Prompt(turns=[PromptTurn(text=sent, images=list(sample.images or []))], system=context.system_prompt)


#: where the question goes in an entry's instruction: ChEF's prompt templates are '{question}' plus a suffix
QUESTION = "<QUESTION>"


def chef_asked(sample: Sample, question: str) -> str:
    """ChEF's prompt template (the entry's instruction, e.g. ``<QUESTION>The answer for the question is``) filled."""
    return (sample.instruction or QUESTION).replace(QUESTION, question)


def _seed_question(sample: Sample) -> str:
    """ChEF's SEED-Bench question, ``Question: <q>`` and ``Answer:`` on the next line, in the recipe's template."""
    return chef_asked(sample, "Question: " + (sample.text or "") + "\nAnswer:")


@PREPROCESSORS.register("ChefSeedBenchPreprocessor", "chef_seedbench")
class ChefSeedBenchPreprocessor(Preprocessor):
    """SEED-Bench as ChEF asks it: image questions only, its four options as the choices, the letter as answer."""

    builds_choices = True

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            if sample.meta.get("data_type") != "image":
                continue
            choices = [str(sample.meta.get(key)) for key in SEED_OPTION_KEYS]
            yield replace(sample, meta={**sample.meta, "choices": choices})

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        return chef_user_prompt(sample, _seed_question(sample), context)


def _cc3m_images(images: list[Image], data_id: Any) -> list[Image]:
    """SEED-Bench-2's cc3m rows name files under image/cc3m-image, not image/SEED-Bench-2-image (the media_dir)."""
    names = [str(name) for name in (data_id if isinstance(data_id, list) else [data_id])]
    moved = []
    for image, name in zip(images, names, strict=False):
        path = str(image.path or "")
        if not path.endswith(name):
            moved.append(image)
            continue
        media = Path(path[: len(path) - len(name)])
        moved.append(Image(path=str(media.parent / "cc3m-image" / name)))
    return moved


@PREPROCESSORS.register("ChefSeedBench2Preprocessor", "chef_seedbench2")
class ChefSeedBench2Preprocessor(Preprocessor):
    """SEED-Bench-2 as ChEF asks it: three data types, the options stripped with empty ones dropped, the answer
    the right option's letter among those left."""

    builds_choices = True

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            if sample.meta.get("data_type") not in SEED2_DATA_TYPES:
                continue
            options = [str(sample.meta.get(key) or "").strip() for key in SEED_OPTION_KEYS]
            letter = str(sample.reference or "").strip()
            if letter not in ("A", "B", "C", "D"):
                continue  # ChEF cannot read such a row either (its index() raises)
            answer = options["ABCD".index(letter)]
            choices = [option for option in options if option != ""]
            reference = "ABCD"[choices.index(answer)] if answer in choices else None
            images = sample.images
            if sample.meta.get("data_source") == "cc3m" and images:
                images = _cc3m_images(images, sample.meta.get("data_id"))
            yield replace(sample, reference=reference, images=images, meta={**sample.meta, "choices": choices})

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        return chef_user_prompt(sample, _seed_question(sample), context)


def _winoground_images(sample: Sample) -> list[Image]:
    """The example's two images, ``images/<image_0>.png`` and ``images/<image_1>.png``, as ChEF opens them."""
    first = (sample.images or [Image(path="")])[0]
    path = Path(str(first.path or ""))
    return [Image(path=f"{path}.png"), Image(path=str(path.parent / f"{sample.meta.get('image_1')}.png"))]


@PREPROCESSORS.register("ChefWinogroundCapPreprocessor", "chef_winoground_cap")
class ChefWinogroundCapPreprocessor(Preprocessor):
    """ChEF's Winoground_Cap: one question per example with both images, both captions and four options."""

    builds_choices = True

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            captions = sample.meta.get("caption_0"), sample.meta.get("caption_1")
            text = f"Caption 1: {captions[0]}.\nCaption 2: {captions[1]}\n"
            meta = {**sample.meta, "choices": list(WINOGROUND_CAP_OPTIONS)}
            yield replace(sample, text=text, images=_winoground_images(sample), reference=None, meta=meta)

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        return chef_user_prompt(sample, chef_asked(sample, sample.text or ""), context)


#: ChEF's four Winoground questions per example: (caption, image) asked, and the answer for an unswapped pair
WINOGROUND_PAIRS = ((0, 0, "Yes"), (0, 1, "No"), (1, 0, "No"), (1, 1, "Yes"))


@PREPROCESSORS.register("ChefWinogroundPreprocessor", "chef_winoground")
class ChefWinogroundPreprocessor(Preprocessor):
    """ChEF's Winoground: per example, its captions or its images swapped by ChEF's seeded draw, then four Yes/No
    questions, one per caption-image pair, each shown both images.

    ChEF draws ``random.randint(1, 2)`` once per line of examples.jsonl after ``random.seed(2023)``: 1 swaps the
    captions, 2 the images. The draw for a row is taken by its place in the file, so a filtered run asks each
    kept example as ChEF does. The answers stay ChEF's (Yes for caption 1 - image 1 and caption 2 - image 2 as
    asked, after the swap), as do the ids (example id x 4 + pair).
    """

    builds_choices = True

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        rng = random.Random(WINOGROUND_SEED)
        draws: list[int] = []
        for place, sample in enumerate(samples):
            index = sample.meta.get("index", place)
            while len(draws) <= index:
                draws.append(rng.randint(1, 2))
            shuffle = draws[index]
            captions = [sample.meta.get("caption_0"), sample.meta.get("caption_1")]
            images = _winoground_images(sample)
            if shuffle & 1:
                captions.reverse()
            if shuffle & 2:
                images.reverse()
            question = f"Caption 1: {captions[0]}.\nCaption 2: {captions[1]}\n"
            main_id = int(sample.meta.get("main_id", sample.id))
            for number, (caption, image, answer) in enumerate(WINOGROUND_PAIRS):
                text = question + f"Does the Caption {caption + 1} match the Image {image + 1}?"
                meta = {**sample.meta, "choices": ["Yes", "No"], "main_id": main_id, "shuffle": shuffle}
                meta["pair"] = f"c{caption}i{image}"
                yield replace(
                    sample, id=str(main_id * 4 + number), text=text, images=list(images), reference=answer, meta=meta
                )

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        return chef_user_prompt(sample, chef_asked(sample, sample.text or ""), context)
