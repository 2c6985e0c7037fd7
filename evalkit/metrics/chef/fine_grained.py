"""ChEF's fine-grained classification (``FG_Classification``, Omnibenchmark): single turn, and multi turn.

Written from OpenGVLab/LAMM ``src/ChEF/metric/classification.py`` (``FG_Classification.weighted_ACC_single``
with ``ppl: False``) at commit ea571363883ceba58a0f724ef197ed7205e07465, and checked against its output on the
cases of tests/fixtures/references/chef_fg_classification.json.

A sample's reference is its label chain, coarse to fine (Omnibenchmark's Bamboo ``chain``). The answer earns
the depth of the finest level whose name it contains (case-sensitive substring, as ChEF), over the chain's
length. ChEF also sets the depth to a level when the answer names a sibling of that level in the Bamboo tree;
it compares the tree's node *ids* (not names) with the answer, so this fires only for an answer that contains a
Bamboo id. With the ``bamboo_tree`` option (the path of ChEF's Bamboo JSON, ``id2name`` / ``father2child`` /
``child2father``) the check is made exactly as ChEF makes it; without it, it is left out.

ChEF's default Omnibenchmark recipes ask one turn per level instead (``weighted_ACC_multi``): generated
(``fg_classification_multiturn_accuracy``) or by likelihood (``fg_classification_multiturn_ppl_accuracy``), at
the end of this module.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options
from evalkit.metrics.choice.likelihood import option_scores

if TYPE_CHECKING:
    import numpy as np


class BambooTree:
    """The parts of ChEF's Bamboo label tree its sibling check reads: a name's node, a node's children."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.name_to_id: dict[str, str] = {}
        for node, names in data["id2name"].items():
            for name in names:
                self.name_to_id[name] = node  # ChEF keeps the last node of a name given to several
        self.children: dict[str, list[str]] = data["father2child"]

    @classmethod
    def read(cls, path: str, metric: str) -> BambooTree:
        """The tree at ``path``; ConfigError naming the option when it is not ChEF's Bamboo JSON."""
        try:
            data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
            return cls(data)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ConfigError(
                f"metric {metric!r}: option 'bamboo_tree': {path!r} is not a readable Bamboo tree JSON with "
                f"id2name, father2child and child2father ({type(error).__name__}: {error})"
            ) from None

    def sibling_named(self, parent_name: str, answer: str) -> bool:
        """Whether the answer contains the id of a child of ``parent_name``'s node (ChEF's ``share_father``)."""
        node = self.name_to_id.get(parent_name)
        return node is not None and any(child in answer for child in self.children.get(node, []))


def weighted_depth(chain: list[str], answer: str, tree: BambooTree | None = None) -> float:
    """ChEF's weighted_ACC_single: the depth the answer reaches down the chain, over the chain's length."""
    depth = 0
    for level, label in enumerate(chain):
        if label in answer:
            depth = level + 1
        elif tree is not None and level > 0 and tree.sibling_named(chain[level - 1], answer):
            # ChEF also checks level 0 (against the parent of the chain's last node), where it can only set 0 again
            depth = level
    return depth / len(chain)


class FgClassificationAccuracy(Metric):
    """ChEF FG_Classification (single turn): how deep down the label chain the answer names a level, 0-1."""

    name = "fg_classification_accuracy"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("bamboo_tree",))
        super().__init__(language, **options)
        path = options.get("bamboo_tree")
        if path is not None and not isinstance(path, str):
            raise ConfigError(f"metric {self.name!r}: option 'bamboo_tree' must be a file path, got {path!r}")
        self.tree = BambooTree.read(path, self.name) if path else None

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        chain = sample.reference
        if not isinstance(chain, list) or not chain or not all(isinstance(label, str) for label in chain):
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        value = weighted_depth(chain, prediction or "", self.tree)
        return SampleScore(value, (value, 1.0), details={"levels": round(value * len(chain))})

    def describe(self) -> dict[str, Any]:
        return {"recipe": "single turn, generated", "sibling_check": self.tree is not None}


# -- the multi-turn recipes ----------------------------------------------------------------------------------
#
# Written from FG_Classification.weighted_ACC_multi (inference_type multiturn; ppl False for ChEF's Multi_Direct
# recipe, True for Multi_PPL) at the same commit, and checked against its output on the samples of
# tests/fixtures/references/chef_multiturn.json. A chain's turns arrive as separate samples (<id>#t<k>, made by the
# chef_multiturn / chef_multiturn_ppl preprocessors, evalkit/prompts/chef/multiturn.py); a turn is right when its
# gold label is a substring of the answer (direct) or of the option chosen (ppl), and the chain earns the depth
# of its leading run of right turns over its length. ChEF's direct recipe also looks for a sibling at the first
# wrong turn, but only to set the depth it already has (the number of turns before it): it changes nothing.
# The figure is a statistic of chains: the accumulator keeps each turn's row with its chain (group_of) and
# reduces a complete chain's rows to one (group_rows); a chain with a failed turn is counted as failed, never as
# wrong (ChEF has no failed turns: its chain would stop at the first wrong one, whatever follows).


def turn_of(sample: Sample) -> tuple[str, int, int] | None:
    """(chain key, turn, chain length) of a turn sample: its meta (group, turn, group_size), else its id."""
    meta = sample.meta
    group, size, turn = meta.get("group"), meta.get("group_size"), meta.get("turn")
    if turn is None and "#t" in sample.id:  # a re-score from records alone keeps group and size, not the turn
        head, _, tail = sample.id.rpartition("#t")
        turn = int(tail) if tail.isdigit() else None
        group = group if group is not None else head
    if group is None or not isinstance(size, int) or not isinstance(turn, int) or not 0 <= turn < size:
        return None
    return str(group), turn, size


class FgClassificationMultiturnAccuracy(Metric):
    """ChEF FG_Classification (multi turn, generated): the leading run of right turns over the chain's length, 0-1."""

    name = "fg_classification_multiturn_accuracy"
    bounds = (0.0, 1.0)
    #: the corpus value is the mean over chains of group_rows' first column: a normal interval over chains
    corpus_is_mean = True

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def group_of(self, sample: Sample) -> tuple[str, int | None] | None:
        found = turn_of(sample)
        return None if found is None else (found[0], found[2])

    def answer(self, prediction: str, sample: Sample) -> tuple[str, dict[str, Any]] | SampleScore:
        """The text the turn's label is looked for in, and what to record about it."""
        return prediction or "", {}

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        found = turn_of(sample)
        if found is None:
            return SampleScore(
                None,
                failure=FailureReason.METRIC_ERROR,
                details={
                    "error": "not a turn of a label chain (meta group, group_size, turn): the dataset needs "
                    "the chef_multiturn or chef_multiturn_ppl preprocessor"
                },
            )
        label = sample.reference
        if not isinstance(label, str) or not label:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        read = self.answer(prediction, sample)
        if isinstance(read, SampleScore):
            return read
        text, details = read
        _, turn, length = found
        right = float(label in text)
        # stats: right, 1, the turn, the chain's length (group_rows finds the first wrong turn from them)
        return SampleScore(right, (right, 1.0, float(turn), float(length)), details={"turn": turn, **details})

    def group_rows(self, rows: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
        """(depth of the leading right turns / chain length, 1) per chain."""
        import numpy as np

        length = np.zeros(count)
        np.maximum.at(length, codes, rows[:, 3])
        # a right turn stops nothing (its stop is the chain's end); a wrong one stops the run at its own turn
        stops = np.where(rows[:, 0] > 0, rows[:, 3], rows[:, 2])
        depth = np.full(count, np.inf)
        np.minimum.at(depth, codes, stops)
        return np.stack([depth / length, np.ones(count)], axis=1)

    def describe(self) -> dict[str, Any]:
        return {"recipe": "multi turn, generated (ChEF Multi_Direct)", "grouped_by": "sample (its chain's turns)"}


class FgClassificationMultiturnPplAccuracy(FgClassificationMultiturnAccuracy):
    """ChEF FG_Classification (multi turn, likelihood): the leading run of turns whose likeliest option is right."""

    name = "fg_classification_multiturn_ppl_accuracy"
    scoring: ClassVar[str] = "loglikelihood"

    def answer(self, prediction: str, sample: Sample) -> tuple[str, dict[str, Any]] | SampleScore:
        """The option ChEF's Multi_PPL picks: the highest mean log-probability of the option's tokens after the
        answer template, numpy's argmax (the first of equal scores).

        The engine scored the template alone first (choice 0), then ChEF's answer for each option; an option's
        tokens are those its answer has beyond the template's, and their log-probability the difference.
        """
        options = sample.meta.get("options")
        if not isinstance(options, list) or not options:
            return SampleScore(None, failure=FailureReason.NO_CHOICES)
        try:
            stats = option_scores(prediction)
        except (ValueError, KeyError, TypeError) as error:
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": f"prediction: {error}"})
        logprobs, tokens = stats["logprobs"], stats["tokens"]
        if len(logprobs) != len(options) + 1:
            return SampleScore(
                None,
                failure=FailureReason.METRIC_ERROR,
                details={"error": f"{len(logprobs)} choices scored, expected the template and {len(options)} options"},
            )
        scores = []
        for logprob, count in zip(logprobs[1:], tokens[1:], strict=True):
            extra = count - tokens[0]
            if extra <= 0:
                return SampleScore(
                    None,
                    failure=FailureReason.METRIC_ERROR,
                    details={"error": "an option added no token to the answer template"},
                )
            scores.append((logprob - logprobs[0]) / extra)
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return str(options[best]), {
            "chosen": options[best],
            "scores": [round(s, 6) if math.isfinite(s) else None for s in scores],
        }

    def describe(self) -> dict[str, Any]:
        return {
            "recipe": "multi turn, likelihood (ChEF Multi_PPL)",
            "grouped_by": "sample (its chain's turns)",
            "option_score": "mean log-probability of the option's tokens after ChEF's answer template",
        }
