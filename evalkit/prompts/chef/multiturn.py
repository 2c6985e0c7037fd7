"""ChEF's multi-turn Omnibenchmark recipes: one question per level of a sample's label chain, each on the image.

Written from OpenGVLab/LAMM at commit ea571363883ceba58a0f724ef197ed7205e07465: ``src/ChEF/scenario/
classification.py`` (``OmnibenchmarkDataset``: ``multi_turn_prefix`` and ``load_ppl_options``),
``src/ChEF/instruction/__init__.py`` (``generate_multiturn_prompt``, ``generate_multiturn_ppl_prompt``),
``prompt.py`` (``fine_grained_classification_multiturn_prompts``) and ``template.py`` (the fine-grained answer
template), and checked against options and prompts from running that code
(tests/fixtures/references/chef_multiturn.json).

ChEF's ``Multi_Direct`` and ``Multi_PPL`` inferencers ask an Omnibenchmark image once per level of its Bamboo
label chain (coarse to fine): turn 0 asks the fine-grained label, turn k says "As the coarse-grained category
label for this image is <level k-1>, ..." with the *gold* label of the level above, never the model's answer.
The turns are independent questions on one image, not a conversation, so each is a sample of its own here:
``<id>#t<k>``, its reference the level's gold label, its meta ``group`` (the sample's id), ``group_size`` (the
chain's length) and ``turn`` (k). Each copy is sent, cached, recorded and sharded as any sample, and
``fg_classification_multiturn_accuracy`` / ``..._ppl_accuracy`` (evalkit/metrics/chef/fine_grained.py) score the
chain from its turns, as MMBench's circular copies are scored from theirs.

Turn 0's question is the dataset's instruction (ChEF's prompt, in the catalogue entry), so a config that sets
another instruction changes it; the later turns' question is ChEF's.

The likelihood recipe also needs each level's options, built as ChEF builds them: for every row of the data file
in order and every level of its chain, the label's "disjoint set" is made the first time the label is met (the
named children of its parent in the Bamboo tree: the parent of the chain's first label is that label's first
father; a name already in an earlier set keeps that set, and a child named again moves to the newer set); then,
with Python's random seeded 0, for every row in file order and every level, the set less the label is shuffled,
its first 3 kept, the label added and those shuffled again. Those random calls run over the *whole* data file,
so the options are computed from the file itself, not from the samples a run keeps after its filters, and a
sample takes its row's (``meta["index"]``). The Bamboo tree (ChEF's
``sensexo_visual_add_academic_add_state_V4.visual.json``) is found beside the data: in the folder the user gives
for the dataset, or where ChEF's own layout keeps it (``<folder>/../../Bamboo/``). A preprocessor is built with
no settings and sees only samples, and the tree belongs with the data it labels, so the folder is where it
is looked for; the folder is the sample's image path less the row's relative image path (the entry maps the
row's ``image`` to ``meta["image_file"]``).

Each option is sent as ChEF's answer for it ("The fine-grained category label for this image is <option>"),
preceded by one more choice, the answer template alone: ChEF scores an option by the mean log-probability of
the option's own tokens after the prompt *and the template* (its models' ``do_ppl``), and the difference of the
two log-likelihoods is exactly that (``FgClassificationMultiturnPplAccuracy`` in
evalkit/metrics/chef/fine_grained.py).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import RunspecError
from evalkit.prompts.preprocessors import PREPROCESSORS, GeneralPreprocessor

#: ChEF's later-turn question (fine_grained_classification_multiturn_prompts[0][1]); {prefix}: the level above
LATER_TURN = (
    "As the coarse-grained category label for this image is {prefix}, what is the fine-grained category label for "
    "this image?"
)
#: ChEF's first-turn question, for a dataset without an instruction (the catalogue entry gives this one)
FIRST_TURN = "What is the fine-grained category label for the object in this image?"
#: ChEF's fine-grained answer template (fine_grained_classification_answer_templates[0]), both turns
ANSWER_TEMPLATE = "The fine-grained category label for this image is {option}"
#: the template with no option: the first choice sent, whose log-likelihood each option's is taken from
TEMPLATE_ALONE = ANSWER_TEMPLATE.split("{option}", 1)[0].rstrip()
#: ChEF's Omnibenchmark ppl_cfg (multiturn_direct.yaml and multiturn_ppl.yaml)
NEGATIVE_OPTIONS = 3
RANDOM_SEED = 0
#: the Bamboo tree's file name and the data file's place in ChEF's OmniBenchmark_Bamboo folder
TREE_FILE = "sensexo_visual_add_academic_add_state_V4.visual.json"
DATA_FILE = "meta_file/Classification_Omnibenchmark.json"
#: the meta key the catalogue entry maps the row's relative image path to
IMAGE_FILE_KEY = "image_file"


def turn_question(chain: list[str], level: int, first: str | None = None) -> str:
    """The question ChEF asks for ``level``: turn 0's (``first``, else ChEF's), then the later turns' with the gold
    label of the level above."""
    if level == 0:
        return first or FIRST_TURN
    return LATER_TURN.format(prefix=chain[level - 1])


def label_chain(sample: Sample) -> list[str] | None:
    """The sample's chain (coarse to fine) when it is a non-empty list of labels, else None."""
    chain = sample.reference
    if isinstance(chain, list) and chain and all(isinstance(label, str) for label in chain):
        return list(chain)
    return None


def turn_copies(sample: Sample, options: list[list[str]] | None = None) -> list[Sample]:
    """The sample once per level of its chain (``<id>#t<k>``); with ``options`` (one list per level) the choices
    ChEF's likelihood recipe scores. A sample without a chain goes as it is (the metric fails it)."""
    chain = label_chain(sample)
    if chain is None:
        return [sample]
    copies = []
    for level, label in enumerate(chain):
        meta = dict(sample.meta)
        meta.update(group=sample.id, group_size=len(chain), turn=level)
        if options is not None:
            meta["options"] = list(options[level])
            meta["choices"] = [TEMPLATE_ALONE] + [ANSWER_TEMPLATE.format(option=o) for o in options[level]]
        copies.append(
            replace(
                sample,
                id=f"{sample.id}#t{level}",
                reference=label,
                instruction=turn_question(chain, level, sample.instruction),
                meta=meta,
            )
        )
    return copies


# -- the options, as ChEF builds them ------------------------------------------------------------------------


def chef_level_options(
    chains: list[list[str]], tree: dict[str, Any], negatives: int = NEGATIVE_OPTIONS, seed: int = RANDOM_SEED
) -> list[list[list[str]]]:
    """Every row's options per level, as ChEF's ``OmnibenchmarkDataset.load_ppl_options`` draws them.

    ``tree`` is the Bamboo JSON (``id2name``, ``father2child``, ``child2father``). A label the tree does not
    place raises KeyError naming it (ChEF stops there too).
    """
    id2name: dict[str, list[str]] = tree["id2name"]
    father2child: dict[str, list[str]] = tree["father2child"]
    child2father: dict[str, list[str]] = tree["child2father"]
    name2id: dict[str, str] = {}
    for node, names in id2name.items():
        for name in names:
            name2id[name] = node  # a name given to several nodes keeps the last, as ChEF's dict does

    def named(node: str) -> bool:
        """A node ChEF offers: it has a name, and that name leads back to it."""
        return node in id2name and name2id.get(id2name[node][0]) == node

    sets: list[list[str]] = []
    set_of: dict[str, int] = {}
    for chain in chains:
        for level, label in enumerate(chain):
            if label in set_of:
                continue
            members = [label]
            set_of[label] = len(sets)
            parent = child2father[name2id[label]][0] if level == 0 else name2id[chain[level - 1]]
            for child in father2child[parent]:
                if not named(child) or child == name2id[label]:
                    continue
                members.append(id2name[child][0])
                set_of[id2name[child][0]] = len(sets)
            sets.append(members)
    draw = random.Random(seed)  # the same stream as ChEF's random.seed(seed) and random.shuffle
    rows = []
    for chain in chains:
        levels = []
        for label in chain:
            others = list(sets[set_of[label]])
            others.remove(label)
            draw.shuffle(others)
            picked = others[:negatives] + [label]
            draw.shuffle(picked)
            levels.append(picked)
        rows.append(levels)
    return rows


def find_tree(folder: Path) -> Path | None:
    """The Bamboo tree beside the data: in ``folder``, else where ChEF's layout keeps it (``../../Bamboo/``)."""
    for candidate in (folder / TREE_FILE, folder.parent.parent / "Bamboo" / TREE_FILE):
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=4)
def _options_of(data_file: str, tree_file: str, stamps: tuple[float, float]) -> tuple[list[list[str]], list[Any]]:
    """(chains, options) of every row of ``data_file``: read once per process and file version (``stamps``)."""
    try:
        rows = json.loads(Path(data_file).read_text(encoding="utf-8"))
        chains = [row["chain"] for row in rows]
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise RunspecError(
            f"{data_file}: not ChEF's Omnibenchmark data (a JSON list of rows with a 'chain'): {error}"
        ) from None
    try:
        tree = json.loads(Path(tree_file).read_text(encoding="utf-8"))
        return chains, chef_level_options(chains, tree)
    except (OSError, ValueError, TypeError, AttributeError) as error:
        raise RunspecError(
            f"{tree_file}: not ChEF's Bamboo tree JSON (id2name, father2child, child2father): {error}"
        ) from None
    except KeyError as error:
        raise RunspecError(
            f"{tree_file}: the Bamboo tree does not place {error} (a label of {data_file}, or its father); ChEF "
            "builds the options from this tree and stops there too"
        ) from None


def data_folder(sample: Sample) -> Path | None:
    """The folder the sample's relative image path starts from (the dataset's folder), or None when unknown."""
    relative = sample.meta.get(IMAGE_FILE_KEY)
    path = sample.images[0].path if sample.images else None
    if not isinstance(relative, str) or not relative or os.path.isabs(relative) or not path:
        return None
    parts = len(Path(relative).parts)
    full = Path(path)
    if full.parts[-parts:] != Path(relative).parts:
        return None
    return full.parents[parts - 1]


@PREPROCESSORS.register("ChefMultiturnPreprocessor", "chef_multiturn")
class ChefMultiturnPreprocessor(GeneralPreprocessor):
    """ChEF's Multi_Direct recipe: each level of the label chain asked as its own sample (``<id>#t<k>``).

    The copies are built as GeneralPreprocessor builds a sample: the turn's question, then the image.
    """

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            yield from turn_copies(sample)


@PREPROCESSORS.register("ChefMultiturnPplPreprocessor", "chef_multiturn_ppl")
class ChefMultiturnPplPreprocessor(GeneralPreprocessor):
    """ChEF's Multi_PPL recipe: each level asked as its own sample, with that level's options as ChEF draws them.

    The options come from the data file and the Bamboo tree in the dataset's folder (module docstring); a folder
    without the tree, or a data file whose row does not hold the sample's chain, stops the pair with a message
    naming the file.
    """

    #: the copies carry their choices (the plan's likelihood check asks a dataset without a choices column)
    builds_choices = True

    def __init__(self) -> None:
        self._folder: Path | None = None

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        for sample in samples:
            chain = label_chain(sample)
            if chain is None:
                yield sample
                continue
            self._folder = self._folder or data_folder(sample)
            if self._folder is None and sample.meta.get("image_error"):
                yield from turn_copies(sample)  # no image to find the folder by: the engine fails it for the image
                continue
            yield from turn_copies(sample, self._row_options(sample, chain))

    def _row_options(self, sample: Sample, chain: list[str]) -> list[list[str]]:
        """The options of the sample's row, per level."""
        folder = self._folder
        if folder is None:
            raise RunspecError(
                f"sample {sample.id}: ChEF's likelihood recipe finds the Bamboo tree in the dataset's folder, known "
                f"from the image path and meta {IMAGE_FILE_KEY!r} (the row's relative image path; the entry maps it "
                "with extra_columns); this sample has no such pair"
            )
        tree = find_tree(folder)
        if tree is None:
            raise RunspecError(
                f"{folder}: ChEF's Bamboo tree {TREE_FILE} is neither in the dataset's folder nor in "
                f"{folder.parent.parent / 'Bamboo'} (ChEF's layout); put it (or a link to it) in {folder}"
            )
        data = folder / DATA_FILE
        if not data.is_file():
            raise RunspecError(f"{data}: ChEF's Omnibenchmark data file is not in the dataset's folder {folder}")
        chains, options = _options_of(str(data), str(tree), (data.stat().st_mtime, tree.stat().st_mtime))
        index = sample.meta.get("index")
        if not isinstance(index, int) or not 0 <= index < len(chains) or chains[index] != chain:
            raise RunspecError(
                f"{data}: row {index} does not hold sample {sample.id}'s chain {chain}; the options are drawn over "
                "this file's rows in order, so the dataset must be read from it"
            )
        return [list(level) for level in options[index]]
