"""cpwer against meeteval, wder against DiarizationLM, mcq_accuracy against its table of cases.

meeteval and diarizationlm are packages, so the tests call them on generated
cases (random turns with substitutions, deletions, insertions, speaker swaps,
digits, punctuation, Unicode, empty answers, unlabelled answers, more answer
speakers than reference speakers) and compare per sample and for the corpus.
lmms-eval's MMMU parser is a script in a repository: its readings are recorded
in tests/fixtures/references/mcq_accuracy.json with where they came from.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.choice.choice import LETTERS, read_choice
from evalkit.metrics.speech.diarization import diarizationlm_alignment, diarizationlm_words

meeteval_wer = pytest.importorskip("meeteval.wer")
_DLM_REASON = (
    "the WDER reference: pip install --no-deps diarizationlm==0.1.5 && pip install word-levenshtein numba "
    "(as .ci/run does; its own dependencies include tensorflow, which the metrics do not use)"
)


@pytest.fixture()
def dlm_metrics() -> Any:
    """DiarizationLM's metrics module; only the WDER tests skip without it (cpWER and mcq need only meeteval)."""
    return pytest.importorskip("diarizationlm.metrics", reason=_DLM_REASON)


FIXTURES = Path(__file__).parent / "fixtures" / "references"

VOCABULARY = [
    "hello", "Hello", "hello,", "world", "World.", "yes", "Yes!", "no", "no?", "one", "two", "three", "twelve",
    "12", "3.5", "1,000", "50%", "5kg", "$20", "it's", "it’s", "well-known", "don't", "...", "-", '"quoted"',
    "café", "Café", "naïve", "Straße", "STRASSE", "日本語", "ΣΟΦΟΣ", "σοφος", "Ἀθῆναι", "e-mail", "U.S.", "ok_ay",
    "i", "I", "the", "a", "mr.", "Mr", "(aside)", "[noise]", "hmm", "uh", "Zoë", "😊",
]  # fmt: skip
LABELS = [lambda k: "ABCDEFGH"[k], lambda k: f"Speaker {k + 1}", lambda k: f"[SPEAKER_{k:02d}]", lambda k: f"spk{k}"]

Turn = tuple[int, str]  # (speaker number, text)


def _perturb(rng: random.Random, words: list[str]) -> list[str]:
    out = []
    for word in words:
        roll = rng.random()
        if roll < 0.1:
            continue  # deletion
        if roll < 0.2:
            out.append(rng.choice(VOCABULARY))  # substitution
        elif roll < 0.3:
            out.extend([word, rng.choice(VOCABULARY)])  # insertion
        elif roll < 0.38:
            out.append(word.upper() if rng.random() < 0.5 else word.strip(".,!?"))  # case, punctuation
        else:
            out.append(word)
    return out


def _case(rng: random.Random) -> tuple[list[Turn], list[Turn], bool]:
    """(reference turns, answer turns, whether the answer is written without labels)."""
    n_ref = rng.randint(1, 4)
    reference = [
        (rng.randrange(n_ref), " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(0 if k else 1, 8))))
        for k in range(rng.randint(1, 6))
    ]
    kind = rng.random()
    if kind < 0.06:
        return reference, [], False  # empty answer
    swap = list(range(8))
    rng.shuffle(swap)  # the answer names speakers its own way
    answer = []
    for speaker, text in reference:
        words = _perturb(rng, text.split())
        if rng.random() < 0.15:  # a turn given to another speaker, possibly one the reference does not have
            speaker = rng.randrange(n_ref + 2)
        if words and rng.random() < 0.15:  # a turn split between two speakers
            cut = rng.randrange(len(words) + 1)
            answer += [(swap[speaker], " ".join(words[:cut])), (swap[(speaker + 1) % 6], " ".join(words[cut:]))]
        else:
            answer.append((swap[speaker], " ".join(words)))
    if rng.random() < 0.1:
        answer.append((swap[n_ref + 1], " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 4)))))
    unlabelled = kind > 0.9
    if unlabelled:
        answer = [(0, " ".join(text for _, text in answer))]
    return reference, answer, unlabelled


def _render(rng: random.Random, turns: list[Turn], unlabelled: bool) -> str:
    if unlabelled:
        return turns[0][1] if turns else ""
    label = rng.choice(LABELS)
    return "\n".join(f"{label(speaker)}: {text}" for speaker, text in turns)


def _reference_value(rng: random.Random, turns: list[Turn]) -> Any:
    if rng.random() < 0.5:
        return [{"speaker": f"S{speaker}", "text": text} for speaker, text in turns]
    return "\n".join(f"Speaker {speaker + 1}: {text}" for speaker, text in turns)


def _by_speaker(turns: list[Turn]) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    for speaker, text in turns:
        out.setdefault(f"s{speaker}", []).append(text)
    return {speaker: " ".join(texts) for speaker, texts in out.items()}


def _dlm_strings(turns: list[Turn]) -> tuple[str, str]:
    """DiarizationLM's input: the words and, one a word, 1-based speaker numbers."""
    numbers: dict[int, int] = {}
    words, speakers = [], []
    for speaker, text in turns:
        for word in text.split():
            words.append(word)
            speakers.append(str(numbers.setdefault(speaker, len(numbers) + 1)))
    return " ".join(words), " ".join(speakers)


def _generated(seed: int, n: int) -> list[tuple[list[Turn], list[Turn], bool, Sample, str]]:
    rng = random.Random(seed)
    cases = []
    for k in range(n):
        reference, answer, unlabelled = _case(rng)
        sample = Sample(id=str(k), reference=_reference_value(rng, reference))
        cases.append((reference, answer, unlabelled, sample, _render(rng, answer, unlabelled)))
    return cases


HAND_MADE: list[tuple[list[Turn], list[Turn]]] = [
    # the issue's case: spoken digits across words stay words (Whisper's normaliser made "12" of them)
    ([(0, "one two three"), (1, "four five")], [(0, "one two three"), (1, "four five")]),
    ([(0, "call me at one two"), (1, "ok")], [(1, "call me at 12"), (0, "ok")]),
    # more answer speakers than reference speakers, and the reverse
    ([(0, "a b c d")], [(0, "a b"), (1, "c"), (2, "d")]),
    ([(0, "a b"), (1, "c d"), (2, "e f")], [(0, "a b c d e f")]),
    # equal-cost alignments: which words pair is the reference's tie-break
    ([(0, "a b"), (1, "c")], [(0, "b c"), (1, "d")]),
    ([(0, "x y z"), (1, "x y z")], [(1, "y z x"), (0, "z x y")]),
    # punctuation-only and case-only differences
    ([(0, "Hello, world."), (1, "...")], [(0, "hello world"), (1, "…")]),
    ([(0, "ΣΟΦΟΣ Straße"), (1, "it's")], [(1, "σοφος strasse"), (0, "it’s")]),
    # a long conversation, the answer drifting out of step
    (
        [(k % 2, " ".join(VOCABULARY[(k * 7 + i) % len(VOCABULARY)] for i in range(9))) for k in range(40)],
        [((k + 1) % 3, " ".join(VOCABULARY[(k * 7 + i + 1) % len(VOCABULARY)] for i in range(8))) for k in range(41)],
    ),
]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cpwer_equals_meeteval_per_sample_and_for_the_corpus(seed: int) -> None:
    metric = METRICS.get("cpwer")(language="en")
    cases = _generated(seed, 60)
    cases += [(r, a, False, Sample(id=f"h{k}", reference=_reference_value(random.Random(k), r)), "") for k, (r, a) in
              enumerate(HAND_MADE)]  # fmt: skip
    expected, stats = [], []
    for reference, answer, unlabelled, sample, text in cases:
        text = text or _render(random.Random(0), answer, unlabelled)
        hypothesis = {"s0": answer[0][1]} if unlabelled else _by_speaker(answer)
        want = meeteval_wer.cp_word_error_rate(_by_speaker(reference), hypothesis)
        got = metric.score(text, sample)
        assert got.stats == (float(want.errors), float(want.length)), (sample.reference, text, want)
        assert got.score == pytest.approx(want.error_rate)
        expected.append(want)
        stats.append(got.stats)
    corpus = meeteval_wer.combine_error_rates(*expected)
    assert corpus.error_rate == sum(expected).error_rate
    assert float(metric.corpus(np.sum(stats, axis=0))) == pytest.approx(corpus.error_rate, rel=1e-12)


def test_cpwer_keeps_spoken_digits_apart_by_default_and_whisper_is_an_option() -> None:
    sample = Sample(id="d", reference=[{"speaker": "A", "text": "one two"}, {"speaker": "B", "text": "three"}])
    assert METRICS.get("cpwer")(language="en").score("A: one two\nB: three", sample).stats == (0.0, 3.0)
    whisper = METRICS.get("cpwer")(language="en", normalizer="english")
    assert whisper.describe() == {"normalizer": "whisper-english"}
    assert whisper.score("A: one two\nB: three", sample).stats == (0.0, 2.0)  # "one two" -> "12": one word
    meeteval_style = METRICS.get("cpwer")(normalizer="lower,rm(.?!,)")
    assert meeteval_style.score("A: One, two!\nB: three.", sample).stats == (0.0, 3.0)
    with pytest.raises(ValueError, match="unknown normalizer"):
        METRICS.get("cpwer")(normalizer="chime6")


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_wder_equals_diarizationlm_per_sample_and_for_the_corpus(seed: int, dlm_metrics: Any) -> None:
    metric = METRICS.get("wder")(language="en")
    cases = _generated(seed, 60)
    cases += [(r, a, False, Sample(id=f"h{k}", reference=_reference_value(random.Random(k), r)), "") for k, (r, a) in
              enumerate(HAND_MADE)]  # fmt: skip
    utterances, stats = [], []
    for reference, answer, unlabelled, sample, text in cases:
        text = text or _render(random.Random(0), answer, unlabelled)
        got = metric.score(text, sample)
        ref_text, ref_spk = _dlm_strings(reference)
        hyp_text, hyp_spk = _dlm_strings(answer)
        if not hyp_text.split():  # DiarizationLM raises on an empty answer; evalkit: 0 wrong of 0 aligned words
            assert got.stats == (0.0, 0.0)
            continue
        want = dlm_metrics.compute_utterance_metrics(hyp_text, ref_text, hyp_spk=hyp_spk, ref_spk=ref_spk)
        assert got.stats == (float(want.wder_sub), float(want.wder_total)), (sample.reference, text, want)
        assert got.score == pytest.approx(want.wder_sub / want.wder_total)
        utterances.append(dict(utterance_id=sample.id, hyp_text=hyp_text, ref_text=ref_text, hyp_spk=hyp_spk,
                               ref_spk=ref_spk))  # fmt: skip
        stats.append(got.stats)
    corpus = dlm_metrics.compute_metrics_on_json_dict({"utterances": utterances})
    assert float(metric.corpus(np.sum(stats, axis=0))) == pytest.approx(corpus["WDER"], rel=1e-12)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_the_alignment_and_the_normalisation_are_diarizationlm_s(dlm_metrics: Any) -> None:
    from diarizationlm import levenshtein  # the package's own Python implementation (the C++ one is used by metrics)
    from diarizationlm.utils import normalize_text

    rng = random.Random(7)
    for _ in range(300):
        ref = [rng.choice("abcd") for _ in range(rng.randint(1, 9))]
        hyp = [rng.choice("abcd") for _ in range(rng.randint(1, 9))]
        _, align = dlm_metrics.levenshtein.levenshtein_with_edits(" ".join(ref), " ".join(hyp))
        assert diarizationlm_alignment(ref, hyp) == [(i, j) for i, j in align if i != -1 and j != -1]
        _, align = levenshtein.levenshtein_with_edits(" ".join(ref), " ".join(hyp))
        assert diarizationlm_alignment(ref, hyp) == [(i, j) for i, j in align if i != -1 and j != -1]
    for text in [" ".join(rng.choice(VOCABULARY) for _ in range(12)) for _ in range(50)] + ['... "-" _ ’ ΣΑΣ']:
        assert diarizationlm_words(text) == normalize_text(text).split()


def test_diarizationlm_s_own_cpwer_is_another_quantity(dlm_metrics: Any) -> None:
    """Why evalkit's cpwer is meeteval's: DiarizationLM drops the words of speakers left without a partner."""
    ref_text, ref_spk = _dlm_strings([(0, "a b"), (1, "c d"), (2, "e f")])
    hyp_text, hyp_spk = _dlm_strings([(0, "a b c d e f")])
    dlm = dlm_metrics.compute_utterance_metrics(hyp_text, ref_text, hyp_spk=hyp_spk, ref_spk=ref_spk)
    meeteval = meeteval_wer.cp_word_error_rate({"0": "a b", "1": "c d", "2": "e f"}, {"x": "a b c d e f"})
    assert (dlm.cpwer_insert + dlm.cpwer_delete + dlm.cpwer_sub, dlm.cpwer_total) == (4, 2)
    assert (meeteval.errors, meeteval.length) == (8, 6)
    sample = Sample(id="c", reference="A: a b\nB: c d\nC: e f")
    assert METRICS.get("cpwer")().score("a b c d e f", sample).stats == (8.0, 6.0)


# --- mcq_accuracy --------------------------------------------------------------------------------------------------

MCQ = json.loads((FIXTURES / "mcq_accuracy.json").read_text(encoding="utf-8"))


def test_the_mcq_table_records_its_source() -> None:
    assert {"repository", "commit", "file", "function", "command"} <= set(MCQ["source"])
    assert len(MCQ["cases"]) >= 30


@pytest.mark.parametrize("case", MCQ["cases"], ids=[c["id"] for c in MCQ["cases"]])
def test_mcq_case(case: dict[str, Any]) -> None:
    choices = case["choices"]
    index, how = read_choice(case["response"], choices)
    assert (None if index is None else LETTERS[index]) == case["evalkit"], how
    if case["lmms_eval"] == "random" and case["evalkit"] is None:  # lmms-eval read nothing and picked at random
        assert case["difference"] == "no_answer_random"
    elif case["evalkit"] != case["lmms_eval"]:
        assert case["difference"] in MCQ["differences"]  # every disagreement is one of the documented classes
    else:
        assert "difference" not in case
    sample = Sample(id=case["id"], reference=case["reference"], meta={"choices": choices})
    score = METRICS.get("mcq_accuracy")().score(case["response"], sample)
    correct = case["reference"] if isinstance(case["reference"], list) else [case["reference"]]
    assert score.score == float(case["evalkit"] in correct)
    assert score.details is not None and score.details["reading"] == how


def test_mcq_corpus_is_the_mean() -> None:
    metric = METRICS.get("mcq_accuracy")()
    scores = []
    for case in MCQ["cases"]:
        sample = Sample(id=case["id"], reference=case["reference"], meta={"choices": case["choices"]})
        scores.append(metric.score(case["response"], sample).stats)
    total = np.sum(scores, axis=0)
    assert float(metric.corpus(total)) == pytest.approx(MCQ["corpus"]["evalkit_accuracy"])
