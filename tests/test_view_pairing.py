"""The comparison page's paired test, paired through the index and held as arrays (evalkit.view.pairing).

Each test writes real run folders, builds their real SQLite indexes and asks a
real :class:`Viewer`; the figures are checked against the report's own paired
test over the same records (:func:`evalkit.report.paired.paired_comparison`,
what the viewer computed before), number for number. The records are made
awkward on purpose: failures on one side or both, a score that is not a
number, repeated sample ids, samples on one side only, rows missing, stats
rows missing or of two widths, records in another order in each run.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.report.compare import metric_options
from evalkit.report.paired import paired_comparison
from evalkit.view import index as view_index
from evalkit.view.queries import changed_samples
from evalkit.view.runs import find_pair
from evalkit.view.viewer import Viewer

RUN_A = "20261201-100000_aaaaaa"
RUN_B = "20261201-110000_bbbbbb"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    yield
    view_index.stop_builds()


def _record(sid: str, model: str, row: int | None, score: Any, **extra: Any) -> dict[str, Any]:
    head = {"sample_id": sid, "model": model, "dataset": "speech", "metric": extra.pop("metric"), "row": row}
    return {**head, "reference": f"ref {sid}", "prediction": f"{model} says {sid} {score}", "score": score, **extra}


def _write_run(root: Path, run_id: str, metric: str, records: list[dict[str, Any]], models: list[str]) -> None:
    run = root / run_id
    (run / "records").mkdir(parents=True)
    lines = "".join(json.dumps(r) + "\n" for r in records)
    (run / "records" / f"speech__{metric}.jsonl").write_text(lines)
    manifest = {
        "run_id": run_id,
        "status": "finished",
        "models": models,
        "config": {"dataset_metric": [["speech", metric]]},
    }
    (run / "run.json").write_text(json.dumps(manifest))


def _wer_records(rng: random.Random, models: list[str], n: int, *, shift: float) -> list[dict[str, Any]]:
    """WER records (score = errors / words, stats [errors, words]) with every awkward case the report meets."""
    out = []
    for i in range(n):
        sid = f"s{i:04d}"
        row = None if i % 17 == 5 else i
        for model in models:
            if model == models[-1] and i % 23 == 3:
                continue  # a sample this model never got to: on one side only
            words = rng.randint(3, 12)
            errors = max(0, min(words, rng.randint(0, 4) + (1 if rng.random() < shift else 0)))
            rec = _record(sid, model, row, errors / words, metric="word_error_rate", stats=[errors, words])
            if i % 11 == 2 and model == models[0]:
                rec.update(score=None, failure="timeout", error="timed out", stats=[])
            if i % 13 == 4:
                rec.update(score=None, failure="http_500", stats=[])  # fails on every side
            if i % 19 == 7 and model == models[-1]:
                rec.update(score="n/a")  # not a number: a failure ("no_score")
            out.append(rec)
    return out


def _viewer_and_reference(
    root: Path, a: str, b: str, metric: str, model_a: str, model_b: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the viewer's comparison says, and the report's paired test of the same records (lists as counts)."""
    viewer = Viewer([root])
    found = viewer.compare(f"{a}:{model_a}", f"{b}:{model_b}", f"speech/{metric}")
    records = [
        [json.loads(line) for line in (root / run / "records" / f"speech__{metric}.jsonl").read_text().splitlines()]
        for run in (a, b)
    ]
    manifest = json.loads((root / a / "run.json").read_text())
    options = metric_options(manifest, "speech", metric)
    expected = paired_comparison(
        records[0], records[1], metric, model_a=model_a, model_b=model_b, options=options
    ).as_dict()
    for key in ("changed", "failed_only_a", "failed_only_b"):
        expected[key] = len(expected[key])
    return found["statistics"], expected


def test_two_runs_give_the_report_s_figures_number_for_number(tmp_path: Path) -> None:
    rng = random.Random(5)
    first = _wer_records(rng, ["m1", "m2"], 240, shift=0.0)
    second = _wer_records(rng, ["m1", "m2"], 240, shift=0.4)
    first.append(_record("s0010", "m1", 10, 0.9, metric="word_error_rate", stats=[9, 10]))  # a repeat: not used
    rng.shuffle(second)  # another order of the same samples: the pairing is by id, ordered by row then id
    _write_run(tmp_path, RUN_A, "word_error_rate", first, ["m1", "m2"])
    _write_run(tmp_path, RUN_B, "word_error_rate", second, ["m1", "m2"])
    for model_a, model_b in (("m1", "m1"), ("m2", "m2"), ("m1", "m2")):
        found, expected = _viewer_and_reference(tmp_path, RUN_A, RUN_B, "word_error_rate", model_a, model_b)
        assert found == expected  # every figure: statistic, CI, p-values, counts, notes
    assert found["statistic"] == "corpus" and found["n_paired"] > 150 and found["changed"] > 0
    assert found["failed_only_a"] and found["failed_only_b"] and found["failed_both"] and found["only_in_a"]
    assert found["improved"] + found["worsened"] == found["changed"]


def test_two_models_of_a_0_1_metric_get_mcnemar_s_test_as_the_report_does(tmp_path: Path) -> None:
    rng = random.Random(8)
    records = []
    for i in range(300):
        for model, right in (("small", 0.55), ("large", 0.7)):
            score = 1.0 if rng.random() < right else 0.0
            records.append(_record(f"q{i}", model, i, score, metric="exact_match", stats=[score, 1.0]))
    _write_run(tmp_path, RUN_A, "exact_match", records, ["small", "large"])
    found, expected = _viewer_and_reference(tmp_path, RUN_A, RUN_A, "exact_match", "small", "large")
    assert found == expected
    assert found["test"] == "McNemar exact" and found["mcnemar"]["b_only"] > found["mcnemar"]["a_only"]


def test_records_without_stats_or_with_two_widths_fall_back_to_the_mean_as_the_report_does(tmp_path: Path) -> None:
    rng = random.Random(3)
    old = [_record(f"s{i}", m, i, rng.random(), metric="word_error_rate") for i in range(60) for m in ("x", "y")]
    _write_run(tmp_path, RUN_A, "word_error_rate", old, ["x", "y"])
    found, expected = _viewer_and_reference(tmp_path, RUN_A, RUN_A, "word_error_rate", "x", "y")
    assert found == expected and found["statistic"] == "mean"
    # the first stats row met has another width than every paired one (its sample failed on the other side)
    odd = [_record("s0", "x", 0, 0.5, metric="word_error_rate", stats=[1, 2, 3])]
    odd.append(_record("s0", "y", 0, None, metric="word_error_rate", failure="timeout"))
    for i in range(1, 40):
        for m in ("x", "y"):
            errors, words = rng.randint(0, 3), rng.randint(4, 9)
            odd.append(_record(f"s{i}", m, i, errors / words, metric="word_error_rate", stats=[errors, words]))
    _write_run(tmp_path, RUN_B, "word_error_rate", odd, ["x", "y"])
    found, expected = _viewer_and_reference(tmp_path, RUN_B, RUN_B, "word_error_rate", "x", "y")
    assert found == expected and found["statistic"] == "corpus" and found["failed_only_b"] == 1
    odd[5]["stats"] = [1, 2, 3]  # now two widths among the paired rows
    (tmp_path / RUN_B).rename(tmp_path / "gone")
    _write_run(tmp_path, RUN_B, "word_error_rate", odd, ["x", "y"])
    found, expected = _viewer_and_reference(tmp_path, RUN_B, RUN_B, "word_error_rate", "x", "y")
    assert found == expected and found["statistic"] == "mean"


def _speech_index(tmp_path: Path) -> tuple[Viewer, Any]:
    """A viewer over ``tmp_path`` and the index state of RUN_A's speech x word_error_rate pair."""
    viewer = Viewer([tmp_path])
    run = viewer.catalog.get(RUN_A)
    assert run is not None
    pair = find_pair(run, "speech", "word_error_rate")
    assert pair is not None
    return viewer, viewer.sources(run, pair).index


def test_an_index_that_names_other_records_is_set_aside_and_the_files_give_the_figures(tmp_path: Path) -> None:
    rng = random.Random(11)
    _write_run(tmp_path, RUN_A, "word_error_rate", _wer_records(rng, ["m1", "m2"], 80, shift=0.3), ["m1", "m2"])
    _, state = _speech_index(tmp_path)
    with sqlite3.connect(state.db) as db:  # the cache's index, edited: m1's rows point at m2's lines
        db.execute("UPDATE rec SET off = (SELECT off FROM rec r WHERE r.id = rec.id + 1) WHERE model = 'm1'")
    db.close()
    found, expected = _viewer_and_reference(tmp_path, RUN_A, RUN_A, "word_error_rate", "m1", "m2")
    assert found == expected and found["n_paired"] > 40
    assert not state.db.exists()  # set aside: the next page builds it anew


def _changes_by_hand(records: list[dict[str, Any]], model_a: str, model_b: str) -> list[tuple[str, Any, Any]]:
    """The changed samples as the listing defines them: in both (first record of each id), score differs (a
    failure counts), failures first, then the biggest change, then A's file order."""

    def first(model: str) -> dict[str, tuple[int, Any]]:
        seen: dict[str, tuple[int, Any]] = {}
        for line, r in enumerate(records):
            score = r["score"] if isinstance(r["score"], (int, float)) else None
            if r["model"] == model:
                seen.setdefault(r["sample_id"], (line, score))
        return seen

    a, b = first(model_a), first(model_b)
    both = [(sid, a[sid], b[sid][1]) for sid in a if sid in b]
    changed = [(sid, line, x, y) for sid, (line, x), y in both if x != y]
    changed.sort(
        key=lambda c: (-((c[2] is None) + (c[3] is None)), -abs(c[3] - c[2]) if None not in c[2:] else 0, c[1])
    )
    return [(sid, x, y) for sid, _, x, y in changed]


def test_the_changed_samples_listing_pages_through_every_change_in_its_order(tmp_path: Path) -> None:
    rng = random.Random(2)
    records = _wer_records(rng, ["m1", "m2"], 150, shift=0.5)
    _write_run(tmp_path, RUN_A, "word_error_rate", records, ["m1", "m2"])
    viewer, state = _speech_index(tmp_path)
    whole = changed_samples(state, "m1", state, "m2", limit=1000)
    expected = _changes_by_hand(records, "m1", "m2")
    assert [(r["sample_id"], r["score_a"], r["score_b"]) for r in whole["rows"]] == expected
    assert whole["changed"] == len(expected) > 20
    paged = []
    for offset in range(0, whole["changed"], 7):
        page = changed_samples(state, "m1", state, "m2", limit=7, offset=offset)
        assert page["changed"] == whole["changed"] and len(page["rows"]) <= 7
        paged += page["rows"]
    assert paged == whole["rows"]
    found = viewer.compare(f"{RUN_A}:m1", f"{RUN_A}:m2", "speech/word_error_rate", limit=5, offset=10)
    assert found["rows"] == whole["rows"][10:15] and found["changed"] == len(expected)


def test_sides_without_a_sample_in_common_say_so_as_the_report_does(tmp_path: Path) -> None:
    records = [_record(f"s{i}", "m1", i, 0.5, metric="word_error_rate", stats=[1, 2]) for i in range(10)]
    records += [_record(f"s{i}", "m2", i, 0.25, metric="word_error_rate", stats=[1, 4]) for i in range(10, 25)]
    records.append(_record("s3", "m1", 3, 0.0, metric="word_error_rate", stats=[0, 2]))  # a repeat
    _write_run(tmp_path, RUN_A, "word_error_rate", records, ["m1", "m2"])
    found, expected = _viewer_and_reference(tmp_path, RUN_A, RUN_A, "word_error_rate", "m1", "m2")
    assert found == expected
    assert (found["n_paired"], found["only_in_a"], found["only_in_b"]) == (0, 10, 15) and found["diff"] is None
