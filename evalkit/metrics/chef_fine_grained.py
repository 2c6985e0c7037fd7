"""ChEF's fine-grained classification (``FG_Classification``, Omnibenchmark), single-turn and generated.

Written from OpenGVLab/LAMM ``src/ChEF/metric/classification.py`` (``FG_Classification.weighted_ACC_single``
with ``ppl: False``) at commit ea571363883ceba58a0f724ef197ed7205e07465, and checked against its output on the
cases of tests/fixtures/references/chef_fg_classification.json.

A sample's reference is its label chain, coarse to fine (Omnibenchmark's Bamboo ``chain``). The answer earns
the depth of the finest level whose name it contains (case-sensitive substring, as ChEF), over the chain's
length. ChEF also sets the depth to a level when the answer names a sibling of that level in the Bamboo tree;
it compares the tree's node *ids* (not names) with the answer, so this fires only for an answer that contains a
Bamboo id. With the ``bamboo_tree`` option (the path of ChEF's Bamboo JSON, ``id2name`` / ``father2child`` /
``child2father``) the check is made exactly as ChEF makes it; without it, it is left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options


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
