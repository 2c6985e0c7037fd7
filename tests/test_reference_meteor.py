"""meteor against AU-Harness's MeteorScore, both given the same small WordNet stand-in.

tests/fixtures/references/meteor.json (11 pairs) and auharness_meteor.json (16 pairs: numbers, contractions, Hindi;
made by make_auharness_text.py): AU-Harness's MeteorScore run with NLTK's WordNet replaced by a synonym table (WordNet
is NLTK data no package registry ships, so neither run can have it here); each "reference" block names the commit,
the shim and the command. AU-Harness rounds each sample to 3 places before the mean, and so does evalkit's meteor.
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

REFERENCES = Path(__file__).parent / "fixtures" / "references"
FIXTURE = json.loads((REFERENCES / "meteor.json").read_text("utf-8"))
MORE = json.loads((REFERENCES / "auharness_meteor.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = FIXTURE["cases"]
assert MORE["synonyms"] == FIXTURE["synonyms"]  # one stand-in serves both tables


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


@pytest.mark.parametrize("case", CASES + MORE["cases"], ids=lambda c: repr(c["reference"][:24]))
def test_each_pair_scores_as_au_harness(case: dict[str, Any], meteor: Any) -> None:
    scored = meteor.score(case["answer"], Sample(id="1", reference=case["reference"]))
    assert scored.score == case["score"]  # rounded to 3 places, as AU-Harness rounds each sample


@pytest.mark.parametrize("table", [FIXTURE, MORE], ids=["meteor", "auharness_meteor"])
def test_the_corpus_is_au_harness_figure_over_100(table: dict[str, Any], meteor: Any) -> None:
    acc = ScoreAccumulator(meteor)
    for i, case in enumerate(table["cases"]):
        acc.add(meteor.score(case["answer"], Sample(id=str(i), reference=case["reference"])))
    assert round(acc.result().score * 100 * 100) / 100 == table["corpus"]  # AU-Harness's smart_round(x 100, 2)
