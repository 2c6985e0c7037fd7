"""exact_match normalization, SQuAD F1 and multiple-choice answer extraction."""

from __future__ import annotations

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.metrics.choice.choice import extract_choice, resolve_reference
from evalkit.metrics.table import METRICS
from evalkit.metrics.text.exact_match import normalize_answer
from evalkit.metrics.text.text_overlap import squad_tokens, token_f1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris", "paris"),
        ('  "Paris." ', "paris"),
        ("ＰＡＲＩＳ", "paris"),  # full-width forms (NFKC)
        ("Straße", "strasse"),  # casefold
        ("new\t york\n city", "new york city"),
        ("(U.S.)", "u.s"),
        ("$5.00", "$5.00"),  # symbols stay
        ("«Oui»", "oui"),
        ("...", ""),
        ("3.5", "3.5"),
    ],
)
def test_exact_match_normalization(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_exact_match_metric() -> None:
    metric = METRICS.get("accuracy")()
    assert metric.name == "exact_match"
    assert metric.score("paris!", Sample(id="1", reference="Paris")).score == 1.0
    assert metric.score("Lyon", Sample(id="1", reference=["Paris", "lyon"])).score == 1.0
    assert metric.score("Paris, France", Sample(id="1", reference="Paris")).score == 0.0
    assert metric.score("x", Sample(id="1", reference=None)).failure == "no reference"
    strict = METRICS.get("exact_match")(normalize=False)
    assert strict.score("paris", Sample(id="1", reference="Paris")).score == 0.0
    assert strict.score(" Paris ", Sample(id="1", reference="Paris")).score == 1.0


def test_squad_f1() -> None:
    assert squad_tokens("The Eiffel Tower, Paris!") == ["eiffel", "tower", "paris"]
    # SQuAD deletes exactly ASCII punctuation: "$" goes, "«»" stay, and there is no NFKC
    assert squad_tokens("$5.00 «Oui» Ｘ") == ["500", "«oui»", "ｘ"]
    assert token_f1(["eiffel", "tower"], ["eiffel", "tower", "paris"]) == pytest.approx(0.8)
    assert token_f1([], []) == 1.0
    assert token_f1([], [], both_empty=0.0) == 0.0  # MLQA's f1_score
    assert token_f1(["a"], []) == 0.0
    metric = METRICS.get("f1")(language="en")
    score = metric.score("the Eiffel tower", Sample(id="1", reference=["Louvre", "Eiffel Tower in Paris"]))
    assert score.score == pytest.approx(2 / 3)  # P = 1, R = 2/4
    assert score.stats == (pytest.approx(2 / 3), 1.0)
    # other languages follow MLQA: its German articles are der/die/das/ein..., not "the a"
    assert METRICS.get("f1")(language="de").score("the a", Sample(id="1", reference="the a")).score == 1.0
    assert METRICS.get("f1")(language="de").score("der Hund", Sample(id="1", reference="Hund")).score == 1.0
    # Chinese: MLQA's mixed segmentation, one token per ideograph
    zh = METRICS.get("f1")(language="zh")
    assert zh.score("北京市", Sample(id="1", reference="北京")).score == pytest.approx(0.8)


def test_meteor_is_registered_as_au_harness_computes_it() -> None:
    """AU-Harness's `meteor` is offered now (issue 33); without WordNet data it is refused, never scored otherwise:
    tests/test_metric_translation_models.py and tests/test_reference_meteor.py test it."""
    assert METRICS.canonical("meteor") == "meteor" and "meteor" in METRICS


CHOICES = ["London", "Paris", "Berlin", "Madrid"]


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("B", "B"),
        ("b", "B"),
        ("(B)", "B"),
        ("B.", "B"),
        ("**C**", "C"),
        ("The answer is (B)", "B"),
        ("Answer: b", "B"),
        ("answer: b because London is not in France", "B"),
        ("The correct answer is: C) Berlin", "C"),
        ("Final answer: **D**", "D"),
        ("Option D is correct", "D"),
        ("I choose A", "A"),
        ("Answer:\n\nB", "B"),
        ("A is wrong, B is wrong, so the answer is C.", "C"),
        ("The answer is E. Actually, the answer is B", "B"),  # E is not an option; last explicit wins
        ("Let me think. (A) no. (C) yes.", "C"),
        ("B) Paris", "B"),
        ("It is not A, it is B", "B"),
        ("I would go with C", "C"),
        ("Paris", "B"),
        ("paris.", "B"),
        ("The capital of France is Paris.", "B"),
        ("The answer is a city in France", None),
        ("A city in France", None),
        ("London or Paris", None),
        ("I think A or B", None),  # a hedge: no answer (lmms-eval reads B)
        ("Either A or B", None),
        ("It is between B and C", None),
        ("A and/or B", None),
        ("A, B", None),
        ("Both A and C are correct", None),
        ("Between A and B, I'd go with B", "B"),  # the hedge is resolved
        ("E", None),
        ("", None),
        ("I don't know", None),
    ],
)
def test_extract_choice(response: str, expected: str | None) -> None:
    index = extract_choice(response, CHOICES)
    assert (None if index is None else "ABCD"[index]) == expected


def test_extract_choice_prefers_the_longer_option_text() -> None:
    assert extract_choice("It is dark red, clearly", ["red", "dark red", "blue"]) == 1
    assert extract_choice("The answer is (F)", None) == 5


def test_resolve_reference() -> None:
    assert resolve_reference("B", CHOICES) == {1}
    assert resolve_reference("c", CHOICES) == {2}
    assert resolve_reference(1, CHOICES) == {1}
    assert resolve_reference("1", CHOICES, index_base=1) == {0}
    assert resolve_reference("paris", CHOICES) == {1}
    assert resolve_reference(["A", "Berlin"], CHOICES) == {0, 2}
    assert resolve_reference("Rome", CHOICES) == set()
    assert resolve_reference(7, CHOICES) == set()
    assert resolve_reference("(D)", None) == {3}


def test_mcq_metric() -> None:
    metric = METRICS.get("multiple_choice_accuracy")()
    sample = Sample(id="1", reference=1, meta={"choices": CHOICES})
    good = metric.score("The answer is (B).", sample)
    assert good.score == 1.0 and good.stats == (1.0, 1.0)
    assert good.details == {"extracted": "B", "correct": ["B"], "reading": "an answer statement"}
    hedge = metric.score("I think A or B", sample)  # naming two options is no answer, not the last one named
    assert hedge.score == 0.0 and hedge.details == {
        "extracted": None,
        "correct": ["B"],
        "reading": "a hedge between A, B",
    }
    assert metric.score("A", sample).score == 0.0
    assert metric.score("no idea", sample).score == 0.0
    assert metric.score("B", Sample(id="2", reference="Rome", meta={"choices": CHOICES})).failure == (
        "unresolvable reference"
    )
    one_based = METRICS.get("mcq_accuracy")(index_base=1)
    assert one_based.score("A", Sample(id="3", reference=1, meta={"choices": CHOICES})).score == 1.0


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="index_base"):
        METRICS.get("mcq_accuracy")(index_bse=1)
