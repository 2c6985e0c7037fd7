"""The scale table (evalkit/config/foreign/reporting.py AUHARNESS_SCALE) against AU-Harness's own numbers.

For every metric name of AU-Harness's that the table lists, evalkit's corpus value of that metric on a fixture's
cases, times the table's factor and printed as an AU-Harness config's tables print it (two decimals), equals the
figure AU-Harness prints for those cases. The figures are those AU-Harness's own metric classes returned when the
fixtures were made (tests/fixtures/references/: auharness_*.json and the tables its reference tests share),
except where a fixture holds the per-sample verdicts only (bfcl_match_score: BFCL's checker, which AU-Harness
calls; sql_score on the cases where evalkit's read-only execution agrees; instruction_following: IFEval's four
accuracies; mt_bench_llm_judge: judge ratings), where AU-Harness's figure is computed from them by its own
formula (metrics/*.py, quoted beside each). A metric added to the table without a case here fails the test.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalkit.config.foreign.auharness import auharness_metric
from evalkit.config.foreign.reporting import AUHARNESS_SCALE
from evalkit.data.sample import Sample, Turn
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.auharness.text import smart_round
from evalkit.metrics.base import TURN_ANSWERS
from evalkit.report.results import ResultRow
from evalkit.report.tables import fmt_shown

pytest.importorskip("num2words", reason="AU-Harness's normalisation needs num2words (the auharness extra)")

REFERENCES = Path(__file__).parent / "fixtures" / "references"


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REFERENCES / f"{name}.json").read_text("utf-8"))
    return data


def _corpus(name: str, scored: list[Any], **options: Any) -> float:
    """evalkit's corpus value of ``name`` (AU-Harness's name, as its config means it) over scored samples."""
    acc = ScoreAccumulator(METRICS.get(auharness_metric(name))(language="en", **options))
    for one in scored:
        acc.add(one)
    score = acc.result().score
    assert score is not None
    return score


def _plain(name: str, cases: list[tuple[str, Sample]], language: str = "en", **options: Any) -> float:
    metric = METRICS.get(auharness_metric(name))(language=language, **options)
    acc = ScoreAccumulator(metric)
    for answer, sample in cases:
        acc.add(metric.score(answer, sample))
    score = acc.result().score
    assert score is not None
    return score


# ---------------------------------------------------------------- one case per metric: (evalkit's value, AU-Harness's)

Case = Callable[[pytest.MonkeyPatch, Path], tuple[float, float]]


def _word_error_rate(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
    wer = _fixture("auharness_word_error_rate")
    cases = [(c["answer"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(wer["cases"])]
    return _plain("word_error_rate", cases), wer["all"]["overall_wer"]


def _bleu(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
    spec = _fixture("auharness_bleu")["sets"]["de"]
    assert spec["task_name"] == "covost2_en_de"
    cases = [(c["answer"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(spec["cases"])]
    return _plain("bleu", cases, language="en-de"), spec["corpus"]


def _meteor(monkeypatch: pytest.MonkeyPatch, _: Path) -> tuple[float, float]:
    pytest.importorskip("nltk", reason="meteor needs nltk (the auharness extra)")
    from test_reference_meteor import StubWordNet

    from evalkit.metrics.auharness import translation_models

    monkeypatch.setattr(translation_models, "wordnet_corpus", StubWordNet)
    table = _fixture("auharness_meteor")
    cases = [(c["answer"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(table["cases"])]
    return _plain("meteor", cases), table["corpus"]


def _bertscore(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[float, float]:
    from test_reference_auharness_text import _overlap

    module = types.ModuleType("bert_score")
    module.score = lambda cands, refs, **_: ([0.0], [0.0], [_overlap(cands[0], refs[0])])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bert_score", module)
    (tmp_path / "bert").mkdir()
    table = _fixture("auharness_bertscore")
    cases = [(c["answer"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(table["cases"])]
    return _plain("bertscore", cases, model=str(tmp_path / "bert")), table["corpus"]


def _comet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[float, float]:
    from test_reference_auharness_text import _CometModel

    from evalkit.metrics.auharness import translation_models

    module = types.ModuleType("comet")
    module.load_from_checkpoint = lambda path: _CometModel([])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "comet", module)
    translation_models._comet_model.cache_clear()
    (tmp_path / "model.ckpt").write_bytes(b"weights")
    table = _fixture("auharness_comet")
    cases = [
        (c["answer"], Sample(id=str(i), reference=c["reference"], meta={"source": c["source"]}))
        for i, c in enumerate(table["cases"])
    ]
    try:
        return _plain("comet", cases, language="de-en", checkpoint=str(tmp_path / "model.ckpt")), table["corpus"]
    finally:
        translation_models._comet_model.cache_clear()


def _judge(name: str) -> Case:
    def case(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
        from test_reference_auharness_judges import FIXTURE, _score

        scored = [_score(name, i, c)[0] for i, c in enumerate(FIXTURE[name]["cases"])]
        return _corpus(name, scored), FIXTURE[name]["overall"][name]

    return case


def _mt_bench(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
    """Two conversations rated by a scripted judge (tests/test_mtbench.py's); AU-Harness's figure by its formula:
    llm_judge.py MtbenchLLMJudgeMetric, smart_round(sum(turn ratings) * 10 / turns, 2) per conversation, and
    smart_round(their mean, 2) for the corpus."""
    from test_mtbench import ScriptedJudge

    end = "\n\n<|The End of Assistant A's Conversation with User|>"
    conversations = [(["q1", "q2"], ["a", "b"], [9, 4]), (["q1", "q2", "q3"], ["c", "d", "e"], [3, 3, 1])]
    scored = []
    for questions, answers, ratings in conversations:
        judge = ScriptedJudge({f"{a}{end}": f"[[{r}]]" for a, r in zip(answers, ratings)})
        metric = METRICS.get("mt_bench_llm_judge")(language="en", judge=judge)
        turns = [Turn(text=q) for q in questions]
        sample = Sample(id="x", turns=turns, meta={"category": "writing", TURN_ANSWERS: answers})
        scored.append(asyncio.run(metric.ascore(answers[-1], sample)))
    overalls = [smart_round(sum(r) * 10 / len(r), 2) for _, _, r in conversations]
    return _corpus("mt_bench_llm_judge", scored), smart_round(sum(overalls) / len(overalls), 2)


def _gsm8k(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
    table = _fixture("gsm8k_exact_match")
    cases = [(c["response"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(table["cases"])]
    return _plain("gsm8k_exact_match", cases), table["corpus"]["gsm8k_exact_match"]


def _dialogue(name: str) -> Case:
    def case(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
        from test_reference_dialogue_state import FIXTURE, _sample

        cases = [(c["response"], _sample(i, c)) for i, c in enumerate(FIXTURE["cases"])]
        return _plain(name, cases), FIXTURE["corpus"][name]

    return case


def _diarization(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
    table = _fixture("diarization_metrics")
    cases = [(c["answer"], Sample(id=str(i), reference=c["reference"])) for i, c in enumerate(table["cases"])]
    figures = {corpus["overall_wder"] for corpus in table["corpora"]}  # the same under every hash seed
    (figure,) = figures
    return _plain("diarization_metrics", cases), figure


def _instruction_following(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
    """IFEval's four accuracies of the fixture's cases; AU-Harness's figure by voice_bench_ifeval_score.py: each
    smart_round(accuracy * 100, 2), then ``final`` = smart_round(their mean, 2)."""
    for module in ("langdetect", "nltk", "punkt"):
        pytest.importorskip(module, reason="pip install 'evalkit[ifeval]'")
    table = _fixture("instruction_following")
    cases = [
        (c["response"], Sample(id=str(i), reference=c["instruction_id_list"], meta={"kwargs": c["kwargs"]}))
        for i, c in enumerate(table["cases"])
    ]
    four = [smart_round(value * 100.0, 2) for value in table["corpus"].values()]
    return _plain("instruction_following", cases), smart_round(sum(four) / len(four), 2)


def _sql(_: pytest.MonkeyPatch, tmp_path: Path) -> tuple[float, float]:
    """Spider answers on the fixture's databases, the cases where evalkit's read-only execution agrees with
    AU-Harness's (the others are a documented difference); AU-Harness's figure by sql_score.py:
    smart_round(execution accuracy * 100, 2), which over every case is the fixture's overall_exec_accuracy."""
    import sqlite3

    table = _fixture("sql_score")
    for db_id, script in table["databases"].items():
        (tmp_path / db_id).mkdir()
        with sqlite3.connect(tmp_path / db_id / f"{db_id}.sqlite") as connection:
            connection.executescript(script)
        connection.close()
    every = table["cases"]
    assert (
        smart_round(100.0 * sum(c["exec"] for c in every) / len(every), 2) == table["corpus"]["overall_exec_accuracy"]
    )
    agreeing = [c for c in every if "evalkit_exec" not in c]
    cases = [(c["answer"], Sample(id=str(i), reference=f"{c['gold']}\t{c['db_id']}")) for i, c in enumerate(agreeing)]
    figure = smart_round(100.0 * sum(c["exec"] for c in agreeing) / len(agreeing), 2)
    return _plain("sql_score", cases, database_dir=str(tmp_path)), figure


def _bfcl(_: pytest.MonkeyPatch, __: Path) -> tuple[float, float]:
    """BFCL's checker's verdicts (the fixture's); AU-Harness's figure by bfcl_metric.py:
    smart_round(sum(record scores) * 100 / n, 2)."""
    from test_reference_bfcl_match_score import CASES, _score

    scored = [_score(c) for c in CASES]
    return _corpus("bfcl_match_score", scored), smart_round(sum(c["valid"] for c in CASES) * 100.0 / len(CASES), 2)


CASES: dict[str, Case] = {
    "word_error_rate": _word_error_rate,
    "bleu": _bleu,
    "meteor": _meteor,
    "bertscore": _bertscore,
    "comet": _comet,
    **{name: _judge(name) for name in ("llm_judge_binary", "llm_judge_detailed", "llm_judge_redteaming")},
    **{name: _judge(name) for name in ("llm_judge_big_bench_audio", "llm_judge_callhome")},
    "mt_bench_llm_judge": _mt_bench,
    "gsm8k_exact_match": _gsm8k,
    "instruction_following": _instruction_following,
    "sql_score": _sql,
    "bfcl_match_score": _bfcl,
    "diarization_metrics": _diarization,
    **{name: _dialogue(name) for name in ("joint_goal_accuracy", "slot_accuracy", "slot_f1")},
}


def test_every_metric_of_the_table_has_a_case() -> None:
    assert set(CASES) == set(AUHARNESS_SCALE)


@pytest.mark.parametrize("name", sorted(AUHARNESS_SCALE))
def test_the_reported_score_is_the_number_auharness_prints(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    value, printed = CASES[name](monkeypatch, tmp_path)
    row = ResultRow(
        dataset="d", task="t", category="c", metric=auharness_metric(name), model="m", score=value,
        ci_low=None, ci_high=None, n=1, n_failed=0, failure_rate=0.0, unreliable=False, seconds=0.0,
        reported_as={"tool": "AU-Harness", "dataset": "d", "metric": name, "scale": AUHARNESS_SCALE[name]},
    )  # fmt: skip
    shown, _, _ = row.scaled()
    assert fmt_shown(shown, row) == f"{printed:.2f}", (name, value, AUHARNESS_SCALE[name], printed)
