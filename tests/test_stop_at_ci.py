"""``stop_at_ci``: a pair that stops once its 95% CI is as narrow as asked, and intervals that stay honest.

Real runs against the project's test server (echo answers: two questions in three have themselves as
reference, so exact_match is about 2/3), real records, run.json and results.json; the statistics through the
real rule (:func:`reached`, :func:`round_size`) and the real interval (:meth:`ScoreAccumulator.headline`).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, config_for, evalkit_cli, model_entry, run, text_set

from benchmarks.stop_coverage import candidate, simulate
from evalkit.config import load_config
from evalkit.config.stopping import StopRule
from evalkit.errors import ConfigError
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.ci import Z95
from evalkit.plan import build_plan
from evalkit.run.merge import merge
from evalkit.run.shard import Shard
from evalkit.run.stopping.at_ci import (
    MIN_EACH,
    VARIANCE_Z,
    next_block,
    order_key,
    reached,
    round_size,
    wilson_variance,
)

N = 2000
H = 0.06
#: BLEU is on sacrebleu's 0-100 scale: so is its stop_at_ci
BLEU_H = 8.0
SEED = 0


def _results(run_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    return {(r["dataset"], r["metric"], r["model"]): r for r in rows}


def _records(run_dir: Path, name: str = "synth_qa__exact_match.jsonl") -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records" / name).read_text().splitlines()]


def _seeded_order(ids: list[str], seed: int = SEED, dataset: str = "synth_qa") -> list[str]:
    """The pair's order computed here from its definition: SHA-256 keys of (seed, dataset, id), then file order."""
    return [i for _, _, i in sorted((order_key(seed, dataset, i), pos, i) for pos, i in enumerate(ids))]


ALL_IDS = [f"s{i:05d}" for i in range(N)]


# -- the statistics -----------------------------------------------------------------------------------------


def test_stopping_on_the_ci_width_keeps_coverage_at_95_percent() -> None:
    """1,000 runs of a known rate: the reported intervals cover it 95% of the time, within the simulation's error."""
    found = simulate(0.7, StopRule(0.05), runs=1000, seed=7)
    assert found.stopped == found.runs  # every run stopped by the rule, none by running out of samples
    # never before the n a fixed design needs (1.96² p(1-p) / H² = 323), and not far past it
    assert 323 <= found.n_mean <= 323 * 1.35, found.n_mean
    assert found.half_median <= 0.05
    assert abs(found.rate - 0.95) <= 3 * found.error, (found.rate, found.error)
    assert abs(found.rate - found.fixed_rate) <= 3 * found.difference_error, (found.rate, found.fixed_rate)


def test_near_1_stopping_covers_as_the_same_interval_at_a_fixed_n() -> None:
    """Rate 0.9 at ±0.05, where an extreme early score makes a narrow interval: stopping costs no coverage.

    The control is the same interval over fresh answers at each run's own n; the first version of the rule
    (the reported width alone) fails this very check, so it can fail.
    """
    rule = StopRule(0.05)
    found = simulate(0.9, rule, runs=1000, seed=7)
    assert found.stopped == found.runs
    assert found.rate >= found.fixed_rate - 3 * found.difference_error, (found.rate, found.fixed_rate)
    plain = simulate(0.9, rule, runs=1000, seed=7, stop=candidate("plain", rule))
    assert plain.rate < plain.fixed_rate - 3 * plain.difference_error, (plain.rate, plain.fixed_rate)


def test_the_coverage_check_fails_a_rule_that_stops_on_the_score() -> None:
    """The same check on a rule that stops once the score looks 'significant' (the interval leaves 0.5): it fails.

    So the test above could fail: a rule that looks at the estimate, not only at its precision, breaks coverage.
    """
    rule = StopRule(0.05)

    def on_the_score(accumulator: ScoreAccumulator, seed: int) -> bool:
        if accumulator.n < rule.min_samples:
            return False
        _, low, high, _ = accumulator.headline(seed)
        return reached(accumulator, rule, seed) is not None or not low <= 0.5 <= high

    found = simulate(0.5, rule, runs=1000, seed=7, stop=on_the_score)
    assert found.rate < 0.95 - 3 * found.error, found.rate
    assert found.rate < found.fixed_rate - 3 * found.difference_error, (found.rate, found.fixed_rate)


def _scored(right: int, wrong: int) -> ScoreAccumulator:
    from evalkit.metrics import METRICS
    from evalkit.metrics.base import SampleScore

    accumulator = ScoreAccumulator(METRICS.get("exact_match")())
    for score in [1.0] * right + [0.0] * wrong:
        accumulator.add(SampleScore(score))
    return accumulator


def test_a_zero_width_interval_never_stops_a_pair() -> None:
    """Forty right answers in a row give the interval [1, 1]: no precision at all, so the pair goes on."""
    accumulator = _scored(40, 0)
    assert accumulator.headline(0)[1:3] == (1.0, 1.0)
    assert reached(accumulator, StopRule(0.05), 0) is None


def test_a_right_or_wrong_score_stops_on_the_variance_its_interval_allows() -> None:
    """The reported width is not enough: the rule takes the largest p(1-p) the mean's Wilson interval holds."""
    rule = StopRule(0.05)
    # 40 right, 1 wrong: the reported interval is ±0.048, yet one wrong answer says little about the rate
    few = _scored(40, 1)
    _, low, high, _ = few.headline(0)
    assert (high - low) / 2 <= 0.05 and reached(few, rule, 0) is None
    # 0.9 of 200: reported ±0.042, but rates down to the Wilson bound (variance ~0.14) are not ruled out
    early = _scored(180, 20)
    _, low, high, _ = early.headline(0)
    assert (high - low) / 2 <= 0.05
    variance = wilson_variance(0.9, 200, VARIANCE_Z)
    assert 0.09 < variance < 0.25 and Z95 * math.sqrt(variance / 200) > 0.05
    assert reached(early, rule, 0) is None
    # 0.9 of 400: that variance too gives ±0.05 or better, and both counts are past MIN_EACH
    late = _scored(360, 40)
    assert Z95 * math.sqrt(wilson_variance(0.9, 400, VARIANCE_Z) / 400) <= 0.05 and MIN_EACH <= 40
    found = reached(late, rule, 0)
    assert found is not None and found[0] == 400 and 0 < found[1] <= 0.05
    assert reached(late, StopRule(0.05, min_samples=401), 0) is None  # never before stop_min_samples
    # a wrong answer short of MIN_EACH keeps a run going whatever its width (2,000 right, MIN_EACH - 1 wrong)
    assert reached(_scored(2000, MIN_EACH - 1), rule, 0) is None
    assert reached(_scored(2000, MIN_EACH), rule, 0) is not None


def test_the_wilson_variance_is_the_largest_over_the_interval() -> None:
    """Checked against a brute-force maximum of p(1-p) over the Wilson interval computed from its definition."""
    for mean, n in ((0.5, 50), (0.9, 200), (0.97, 1000), (0.05, 80), (1.0, 100)):
        z = VARIANCE_Z
        grid = [i / 100_000 for i in range(100_001)]
        inside = [p for p in grid if (mean - p) ** 2 <= z * z * p * (1 - p) / n]  # the score test accepts p
        expected = max(p * (1 - p) for p in inside)
        assert math.isclose(wilson_variance(mean, n, z), expected, rel_tol=2e-3, abs_tol=1e-5), (mean, n)


def test_rounds_grow_geometrically_so_a_bootstrap_is_reestimated_rarely() -> None:
    rule = StopRule(0.01)
    drawn, checks = 0, 0
    while drawn < 10_000:
        drawn += round_size(drawn, rule)
        checks += 1
    assert round_size(0, rule) == 30 and round_size(80, rule) == 10
    assert checks <= 55  # about log(10000/30)/log(1.125) (+ ceil rounding) checks for 10,000 samples, not 10,000


def test_blocks_follow_the_seeded_order_and_keep_equal_keys_together() -> None:
    """Blocks read pass by pass equal one sort of everything; a run of equal keys is never cut between blocks."""
    keys = [order_key(3, "d", f"id{i % 37}") for i in range(100)]  # ids repeat: runs of equal keys
    expected = sorted((k, pos) for pos, k in enumerate(keys))
    got: list[tuple[int, int]] = []
    after = None
    more = True
    while more:
        block, more = next_block(iter(range(100)), lambda pos: keys[pos], after, 7)
        assert block
        if more:
            assert block[-1][0] != expected[len(got) + len(block)][0]  # the next key differs: no run was cut
        got += [(k, p) for k, p, _ in block]
        after = got[-1]
    assert got == expected


@pytest.mark.parametrize(
    "options, message",
    [
        ({"stop_at_ci": 0}, "option 'stop_at_ci': expected a positive number"),
        ({"stop_at_ci": "2%"}, "option 'stop_at_ci': expected a positive number"),
        ({"stop_at_ci": 0.02, "stop_min_samples": 1}, "option 'stop_min_samples': expected a whole number >= 2"),
        ({"stop_min_samples": 50}, "option 'stop_min_samples' needs 'stop_at_ci'"),
    ],
)
def test_a_bad_stop_option_is_refused_naming_the_pair_and_key(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    runspecs = text_set(tmp_path, 10)
    config = config_for(
        tmp_path, runspecs, [model_entry("m", "http://127.0.0.1:9/v1")], pairs=[["synth_qa", "exact_match", options]]
    )
    with pytest.raises(ConfigError, match=message) as error:
        build_plan(load_config(config), source=str(config))
    assert "dataset_metric[0]" in str(error.value)
    cli = evalkit_cli(["run", str(config), "--quiet"], tmp_path)
    assert cli.returncode == 2 and message.split(":")[0] in cli.stderr and "Traceback" not in cli.stderr


# -- runs against the test server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from evalkit.testing import start_test_server

    # model "b" answers questions ending in 0-7 wrongly (a rate of about 0.13): another variance, another stop
    started = start_test_server({"answers": [{"model": "b", "match": "re:[0-7] w0", "answer": "wrong"}]})
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory, server: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("stop")
    runspecs = text_set(root, N, words=8)
    models = [model_entry("m", server.base_url, batch_size=16), model_entry("b", server.base_url, batch_size=16)]
    pairs = [["synth_qa", "exact_match", {"stop_at_ci": H}], ["synth_qa", "bleu", {"stop_at_ci": BLEU_H}]]
    config = config_for(root, runspecs, models, pairs=pairs)
    first = run(config)
    return {"root": root, "config": config, "outcome": first, "run_dir": first.run_dir}


def test_a_pair_stops_at_the_ci_asked_and_says_so_everywhere(stopped: dict[str, Any]) -> None:
    run_dir = stopped["run_dir"]
    results = _results(run_dir)
    order = _seeded_order(ALL_IDS)
    for model in ("m", "b"):
        row = results[("synth_qa", "exact_match", model)]
        partial = row["partial"]
        assert partial["reason"] == "stopped_at_ci" and partial["stop_at_ci"] == H
        assert partial["planned"] == N and row["n"] + row["n_failed"] == partial["drawn"] < N / 2
        half = (row["ci_high"] - row["ci_low"]) / 2
        assert math.isclose(partial["half_width"], half) and 0 < half <= H
        # the samples asked are exactly the first `drawn` of the seeded order: a random draw, not the file's head
        asked = [r["sample_id"] for r in _records(run_dir) if r["model"] == model]
        assert sorted(asked) == sorted(order[: partial["drawn"]])
        assert row["n"] >= 30
    m, b = results[("synth_qa", "exact_match", "m")], results[("synth_qa", "exact_match", "b")]
    assert m["partial"]["drawn"] != b["partial"]["drawn"]  # each model stops at its own precision
    # the two pairs of the dataset draw one order: the samples both asked were sent once
    bleu = results[("synth_qa", "bleu", "m")]
    assert bleu["details"]["ci_method"] == "bootstrap" and 0 < bleu["partial"]["half_width"] <= BLEU_H
    outcome = stopped["outcome"]
    drawn = {k: r["partial"]["drawn"] for k, r in results.items()}
    per_model = [max(v for k, v in drawn.items() if k[2] == model) for model in ("m", "b")]
    assert outcome.requests_sent == sum(per_model)
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "finished" and manifest["partial"]["reason"] == "stopped_at_ci"
    assert len(manifest["partial"]["results"]) == 4
    summary = json.loads((run_dir / "results.json").read_text())
    assert summary["partial"] == manifest["partial"]
    shown = f"{m['n']} (stopped at ±{m['partial']['half_width']:.4f})"
    for name in ("report.html", "results.md"):
        assert shown in (run_dir / name).read_text(), name
    assert "stopped early" in (run_dir / "results.md").read_text()
    assert "partial" in (run_dir / "results.csv").read_text().splitlines()[0]


def test_the_viewer_shows_the_stopped_rows(stopped: dict[str, Any]) -> None:
    from evalkit.view.viewer import Viewer

    viewer = Viewer([stopped["run_dir"].parent])
    run_id = stopped["run_dir"].name
    found = viewer.run(run_id)
    row = next(r for r in found["results"] if r["metric"] == "exact_match" and r["model"] == "m")
    assert row["partial"]["reason"] == "stopped_at_ci" and "(stopped at ±" in row["n_text"]


def test_the_same_config_again_stops_at_the_same_sample_from_the_store(stopped: dict[str, Any]) -> None:
    again = run(stopped["config"])
    assert again.requests_sent == 0  # every answer asked was in the store: nothing more was drawn
    first, second = _results(stopped["run_dir"]), _results(again.run_dir)
    for key, row in first.items():
        for field in ("score", "ci_low", "ci_high", "n", "partial"):
            assert second[key][field] == row[field], (key, field)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_killed_run_resumed_stops_where_an_uninterrupted_one_does(tmp_path: Path) -> None:
    """kill -9 half way to the stop, then `--resume`: same samples, same score and CI, nothing asked twice."""
    from evalkit.testing import start_test_server

    # The uninterrupted run asks a quick server; the killed one a slow one with the same answers, so
    # that half its requests take seconds and the kill lands mid-run however loaded the machine is.
    quick = start_test_server({"latency_ms": 15})
    server = start_test_server({"latency_ms": 120, "request_log": str(tmp_path / "requests.jsonl")})
    try:
        runspecs = text_set(tmp_path / "data", N, words=3)
        pairs = [["synth_qa", "exact_match", {"stop_at_ci": H}]]
        whole_models = [model_entry("m", quick.base_url, batch_size=8)]
        whole = run(config_for(tmp_path / "whole", runspecs, whole_models, pairs=pairs), no_cache=True)
        expected = _results(whole.run_dir)[("synth_qa", "exact_match", "m")]
        models = [model_entry("m", server.base_url, batch_size=8)]
        config = config_for(tmp_path / "killed", runspecs, models, pairs=pairs)
        before = len(server.log_events("completed"))
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            give_up = time.monotonic() + 60
            while len(server.log_events("completed")) - before < expected["partial"]["drawn"] // 2:
                assert proc.poll() is None and time.monotonic() < give_up
                time.sleep(0.005)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        run_dir = next(p for p in (tmp_path / "killed" / "runs").iterdir() if p.is_dir())
        assert json.loads((run_dir / "run.json").read_text())["status"] == "running"  # killed, not finished
        answered = len(server.log_events("completed")) - before
        resumed = evalkit_cli(["run", "--resume", str(run_dir), "--quiet"], tmp_path)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        server.stop()
        quick.stop()
    got = _results(run_dir)[("synth_qa", "exact_match", "m")]
    for field in ("score", "ci_low", "ci_high", "n", "partial"):
        assert got[field] == expected[field], field
    assert sorted(r["sample_id"] for r in _records(run_dir)) == sorted(r["sample_id"] for r in _records(whole.run_dir))
    # the resume asked only what the killed run had not had answered (and committed): never more than the rest
    total = len(server.log_events("completed")) - before
    assert total - answered <= expected["partial"]["drawn"] - answered + 8 * 2
    assert json.loads((run_dir / "run.json").read_text())["partial"]["reason"] == "stopped_at_ci"


def test_shards_stop_at_h_times_root_n_and_merge_to_about_h(stopped: dict[str, Any], server: Any) -> None:
    root = stopped["root"] / "sharded"
    models = [model_entry("m", server.base_url, batch_size=16)]
    pairs = [["synth_qa", "exact_match", {"stop_at_ci": 0.04}]]
    config = config_for(root, stopped["root"] / "runspecs", models, pairs=pairs)
    shards = [run(config, shard=Shard(k, 2)) for k in range(2)]
    rows = [_results(s.run_dir)[("synth_qa", "exact_match", "m")] for s in shards]
    for row in rows:
        assert math.isclose(row["partial"]["stop_at_ci"], 0.04 * math.sqrt(2))
        assert row["partial"]["stop_at_ci_asked"] == 0.04 and row["partial"]["shards"] == 2
        assert (row["ci_high"] - row["ci_low"]) / 2 <= 0.04 * math.sqrt(2)
    merged = merge([s.run_dir for s in shards], root / "merged")
    row = _results(merged.run_dir)[("synth_qa", "exact_match", "m")]
    assert row["n"] == sum(r["n"] for r in rows)
    assert row["partial"]["drawn"] == sum(r["partial"]["drawn"] for r in rows)
    assert row["partial"]["planned"] == N and row["partial"]["stop_at_ci"] == 0.04
    half = (row["ci_high"] - row["ci_low"]) / 2
    assert math.isclose(row["partial"]["half_width"], half)
    assert 0.8 * 0.04 <= half <= 1.1 * 0.04  # the merged interval comes out at about the half-width asked


def test_rescore_of_a_stopped_run_stays_partial(stopped: dict[str, Any], tmp_path: Path) -> None:
    """Re-scoring with another metric reads the stopped pair's records: the new rows cover that draw only."""
    import shutil

    from evalkit.run.rescore import rescore

    run_dir = tmp_path / stopped["run_dir"].name
    shutil.copytree(stopped["run_dir"], run_dir)
    source = _results(run_dir)
    rows = {(r.dataset, r.model): r for r in rescore(run_dir, "exact_match", rebuild=False) if r.kind == "dataset"}
    for model in ("m", "b"):
        row, before = rows[("synth_qa", model)], source[("synth_qa", "exact_match", model)]
        assert row.n == before["n"] and row.partial is not None
        assert row.partial["reason"] == "stopped_at_ci" and row.partial["records_of"] == "exact_match"
        assert row.partial["drawn"] == before["partial"]["drawn"] and row.partial["planned"] == N
        assert math.isclose(row.partial["half_width"], (row.ci_high - row.ci_low) / 2)
    written = json.loads((run_dir / "rescore_exact_match.json").read_text())
    assert all(r["partial"]["reason"] == "stopped_at_ci" for r in written["results"])


def test_a_stopped_shard_must_hold_the_head_of_its_seeded_order() -> None:
    """The merge's check: as many records as drawn, and exactly the first ``drawn`` samples of the seeded order."""
    from evalkit.errors import UserError
    from evalkit.run.stopping.at_ci import check_drawn, seeded_prefix

    planned = {(f"s{i:05d}", i) for i in range(200)}
    order = seeded_prefix(planned, SEED, "synth_qa")
    assert [key[0] for key in order] == _seeded_order(sorted(k[0] for k in planned))
    partial = {"reason": "stopped_at_ci", "drawn": 50}
    check_drawn(Path("shard"), "m", set(order[:50]), partial, order)
    check_drawn(Path("shard"), "m", set(order[100:150]), partial, None)  # the order not known: the count only
    with pytest.raises(UserError, match="not among the first 50 samples of the shard's seeded order"):
        check_drawn(Path("shard"), "m", set(order[:49]) | {order[120]}, partial, order)
    with pytest.raises(UserError, match="49 records of model 'm'"):
        check_drawn(Path("shard"), "m", set(order[:49]), partial, order)


def test_a_stopping_pair_shows_what_it_drew_not_a_total_to_reach() -> None:
    import io

    from evalkit.report.progress import Progress

    stream = io.StringIO()
    progress = Progress(stream=stream, totals={("synth_qa/exact_match", "m"): 2000, ("other", "m"): 10})
    state = {"drawn": 45, "stopped": False}
    progress.stops_early("synth_qa/exact_match", "m", lambda: (state["drawn"], 2000, bool(state["stopped"])))
    for _ in range(40):
        progress("synth_qa/exact_match", "m", True)
    progress.tick()
    line = next(x for x in stream.getvalue().splitlines() if "synth_qa/exact_match" in x)
    assert "40 samples done (drawn 45/2000)" in line and "ETA" not in line and "40/2000" not in line
    assert "ETA" not in progress.summary()  # the overall total is not known either
    state.update(drawn=61, stopped=True)
    assert progress.drawn_text(progress.lines[("synth_qa/exact_match", "m")]) == "drawn 61/2000, stopped at its CI"
