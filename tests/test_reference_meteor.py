"""meteor against AU-Harness's MeteorScore, both given the same small WordNet stand-in.

tests/fixtures/references/meteor.json: AU-Harness's MeteorScore run on 11 pairs with NLTK's WordNet replaced by a
synonym table (WordNet is NLTK data no package registry ships, so neither run can have it here); its "reference"
block names the commit, the shim and the command. AU-Harness rounds each sample to 3 places; evalkit does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.auharness import translation_models

pytest.importorskip("nltk", reason="meteor needs nltk (the auharness extra)")
pytest.importorskip("num2words", reason="meteor needs num2words (the auharness extra)")

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "meteor.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = FIXTURE["cases"]


class _Lemma:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


class _Synset:
    def __init__(self, words: list[str]) -> None:
        self._words = words

    def lemmas(self) -> list[_Lemma]:
        return [_Lemma(w) for w in self._words]


class StubWordNet:
    """The reader interface NLTK's METEOR uses (synsets -> lemmas -> name), over the fixture's synonym table."""

    def synsets(self, word: str) -> list[_Synset]:
        return [_Synset(group) for group in FIXTURE["synonyms"] if word in group]


@pytest.fixture()
def meteor(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(translation_models, "wordnet_corpus", StubWordNet)
    return METRICS.get("meteor")(language="en")


def test_the_fixture_says_where_it_came_from(meteor: Any) -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "ServiceNow/AU-Harness" and len(ref["commit"]) == 40 and "stub" in ref["shim"]
    assert len({case["score"] for case in CASES}) >= 6


@pytest.mark.parametrize("i", range(len(CASES)))
def test_each_pair_scores_as_au_harness(i: int, meteor: Any) -> None:
    case = CASES[i]
    scored = meteor.score(case["answer"], Sample(id=str(i), reference=case["reference"]))
    assert scored.score == pytest.approx(case["score"], abs=0.0005)  # AU-Harness rounds each to 3 places


def test_the_corpus_is_au_harness_figure_over_100(meteor: Any) -> None:
    acc = ScoreAccumulator(meteor)
    for i, case in enumerate(CASES):
        acc.add(meteor.score(case["answer"], Sample(id=str(i), reference=case["reference"])))
    assert acc.result().score * 100 == pytest.approx(FIXTURE["corpus"], abs=0.05)
