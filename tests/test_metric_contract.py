"""Your own metric is a contract: README's example runs as written, its CI is of its corpus statistic, a broken
plugin fails only its own pair, and a plugin beside the config is found and listed without PYTHONPATH.

The example is read from README.md here, so the documentation cannot drift from what is tested. Every run is
``python -m evalkit`` in a subprocess against the project's test server, from a working directory that is *not*
the config's folder (``python -m`` puts the working directory on ``sys.path``, which would hide the
beside-the-config lookup) and with no PYTHONPATH beyond evalkit itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import ROOT, doc_section, model_entry, write_config

from evalkit.metrics.ci import bootstrap_ci
from evalkit.testing import start_test_server

#: (question, reference, the test server's answer): references of different lengths, so the pooled ratio
#: Σ found / Σ words (12/21 = 0.57) differs from the mean of per-sample ratios (0.68)
ROWS = [
    ("What is the capital of France?", "Paris", "Paris"),
    ("Name the colours of the French flag.", "blue white and red", "red and blue"),
    ("What does a spider have?", "eight hairy legs", "eight legs"),
    ("Which planet is the red planet?", "the fourth planet Mars", "Venus"),
    ("What is the opposite of hot?", "cold", "cold"),
    ("Who wrote Hamlet?", "William Shakespeare", "Shakespeare"),
    ("Name three primary colours.", "red yellow and blue", "red and green"),
    ("What is the largest ocean?", "the Pacific", "the Pacific Ocean"),
]


def readme_example() -> str:
    """The ```python block of the docs' "Your own metric" section that starts with ``# word_recall.py``."""
    section = doc_section("Your own metric")
    match = re.search(r"```python\n(# word_recall\.py\n.*?)```", section, re.S)
    assert match, "the 'Your own metric' section (docs/scoring.md) lost its word_recall.py example"
    return match.group(1)


def variant(code: str, name: str, *, ci_method: str | None = None, scalar: bool = False) -> str:
    """The example registered as ``name`` (no aliases); with another ``ci_method``, or a corpus for one vector only."""
    code = re.sub(r"@METRICS\.register\([^)]*\)", f'@METRICS.register("{name}")', code)
    if ci_method is not None:
        code = re.sub(r'ci_method = "\w+"', f'ci_method = "{ci_method}"', code)
    if scalar:
        body = code[code.index("    def corpus(") :]
        code = code.replace(
            body,
            "    def corpus(self, totals):\n"
            "        found, words = totals  # one vector only: a (m, k) batch unpacks wrongly or raises\n"
            "        return float(found) / float(words)\n",
        )
    return code


BROKEN = '''
from evalkit.plugin import METRICS, Metric, Sample, SampleScore


@METRICS.register("raises_in_score")
class RaisesInScore(Metric):
    """Raises on every sample."""

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        raise RuntimeError("no scorer for " + sample.id)


@METRICS.register("raises_in_corpus")
class RaisesInCorpus(Metric):
    """Scores every sample, then raises when the corpus value is asked for."""

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        return SampleScore(1.0, (1.0, 1.0))

    def corpus(self, totals):
        raise KeyError("weights")
'''


class _Ratio:
    """The README example's corpus, for computing the expected interval in this process."""

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        return totals[..., 0] / totals[..., 1]


@pytest.fixture(scope="module")
def server() -> Any:
    srv = start_test_server({"answers": [{"match": question, "answer": answer} for question, _, answer in ROWS]})
    yield srv
    srv.stop()


def _project(root: Path, metrics: list[str], modules: dict[str, str], server: Any) -> Path:
    """A project folder: plugin modules, a runspec naming ``metrics`` on the ROWS set, and config.yaml."""
    project = root / "project"
    (project / "runspecs" / "text").mkdir(parents=True)
    with (project / "qa.jsonl").open("w") as out:
        for i, (question, reference, _) in enumerate(ROWS):
            out.write(json.dumps({"qid": f"q{i + 1}", "question": question, "answer": reference}) + "\n")
    spec = {
        "_task": {"description": "short answers", "metrics": metrics},
        "qa": {
            "path": str(project / "qa.jsonl"),
            "language": "en",
            "modality": "text",
            "id_column": "qid",
            "textual_input_column": "question",
            "target_column": "answer",
        },
    }
    (project / "runspecs" / "text" / "short_qa.json").write_text(json.dumps(spec))
    for module, code in modules.items():
        (project / f"{module}.py").write_text(code)
    return write_config(
        project / "config.yaml",
        {
            "dataset_metric": [["qa", metric] for metric in metrics],
            "models": [model_entry("m", server.base_url)],
            "runspecs_dir": ["runspecs"],
            "plugins": list(modules),
        },
    )


def _evalkit(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """evalkit as a user runs it; PYTHONPATH holds evalkit's checkout only, never the plugin's folder."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _run_dir(config: Path) -> Path:
    (run,) = (config.parent / "runs").glob("*/results.json")
    return run.parent


def _records(run: Path, metric: str) -> list[dict[str, Any]]:
    path = run / "records" / f"qa__{metric}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(rows, key=lambda r: int(r["sample_id"][1:]))


def test_readme_ratio_metric_runs_and_its_ci_is_of_its_corpus_statistic(tmp_path: Path, server: Any) -> None:
    code = readme_example()
    modules = {
        "word_recall": code,
        "word_recall_normal": variant(code, "word_recall_normal", ci_method="normal"),
        "word_recall_scalar": variant(code, "word_recall_scalar", scalar=True),
    }
    config = _project(tmp_path, ["word_recall", "word_recall_normal", "word_recall_scalar"], modules, server)
    ran = _evalkit(["run", str(config), "--quiet"], tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr
    run = _run_dir(config)
    results = {row["metric"]: row for row in json.loads((run / "results.json").read_text())["results"]}

    # the statistics as the user would recompute them from the records: (found, reference words) per sample
    records = _records(run, "word_recall")
    stats = np.array([(r["details"]["found"], len(r["reference"].split())) for r in records], dtype=float)
    pooled = stats[:, 0].sum() / stats[:, 1].sum()
    mean_of_ratios = float(np.mean(stats[:, 0] / stats[:, 1]))
    assert pooled == pytest.approx(12 / 21) and abs(pooled - mean_of_ratios) > 0.05
    expected = bootstrap_ci(_Ratio(), stats, seed=0)

    for metric in ("word_recall", "word_recall_normal", "word_recall_scalar"):
        row = results[metric]
        assert row["error"] is None and row["n"] == len(ROWS)
        assert row["score"] == pytest.approx(pooled), metric
        # the interval is the bootstrap of the pooled ratio, whatever ci_method said and however corpus is written
        assert row["details"]["ci_method"] == "bootstrap", metric
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(expected), metric
        assert row["ci_low"] <= row["score"] <= row["ci_high"]


def test_a_plugin_that_raises_fails_only_its_own_pair(tmp_path: Path, server: Any) -> None:
    config = _project(tmp_path, ["exact_match", "raises_in_score", "raises_in_corpus"], {"broken": BROKEN}, server)
    ran = _evalkit(["run", str(config)], tmp_path)
    console = ran.stdout + ran.stderr
    assert ran.returncode == 1, console
    assert "Traceback" not in console
    run = _run_dir(config)
    assert (run / "report.html").is_file() and (run / "results.csv").is_file()
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    results = {row["metric"]: row for row in json.loads((run / "results.json").read_text())["results"]}

    good = results["exact_match"]
    assert good["error"] is None and good["n"] == len(ROWS) and good["score"] == pytest.approx(2 / 8)

    in_score = results["raises_in_score"]["error"]
    assert in_score.startswith("metric 'raises_in_score': score() raised RuntimeError: no scorer for q")
    assert "(broken.py:" in in_score and in_score.endswith(f"({len(ROWS)} samples not scored)")
    assert "\n" not in in_score

    in_corpus = results["raises_in_corpus"]
    assert in_corpus["error"].startswith("metric 'raises_in_corpus': corpus() raised KeyError: 'weights' (broken.py:")
    assert in_corpus["score"] is None

    flat = " ".join(console.split())  # the console wraps long lines
    assert "engine qa__raises_in_score failed: metric 'raises_in_score': score() raised RuntimeError" in flat
    assert "engine qa__raises_in_corpus failed: metric 'raises_in_corpus': corpus() raised KeyError" in flat


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_plugin_beside_the_config_is_found_and_listed(tmp_path: Path, server: Any) -> None:
    code = readme_example()
    config = _project(tmp_path, ["word_recall"], {"word_recall": code}, server)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    listed = _evalkit(["list", "metrics", "--config", str(config), "--format", "json"], elsewhere)
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in json.loads(listed.stdout) if r["name"] == "word_recall")
    assert row["aliases"] == ["pooled_word_recall"] and row["ci"] == "bootstrap"

    info = _evalkit(["info", "metric", "pooled_word_recall", "--config", str(config), "--format", "json"], elsewhere)
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert data["name"] == "word_recall" and data["module"] == "word_recall" and data["better"] == "higher"

    # without --config, ./config.yaml is read when there is one
    here = _evalkit(["list", "metrics", "--format", "json"], config.parent)
    assert here.returncode == 0 and any(r["name"] == "word_recall" for r in json.loads(here.stdout)), here.stderr
    # and nowhere near a config, the plugin is unknown (nothing leaks in from elsewhere)
    bare = _evalkit(["info", "metric", "word_recall"], elsewhere)
    assert bare.returncode == 2 and "word_recall" in bare.stderr

    validated = _evalkit(["validate", str(config)], elsewhere)
    assert validated.returncode == 0, validated.stderr


def test_a_plugin_module_that_is_nowhere_names_the_config_folder(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["basic_qa", "exact_match"]],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "plugins": ["no_such_metrics"],
        },
    )
    result = _evalkit(["validate", str(config)], ROOT)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "cannot import plugin module 'no_such_metrics'" in result.stderr
    assert f"put it beside the config ({tmp_path})" in result.stderr


def test_stats_of_changing_length_fail_the_pair_not_the_run(tmp_path: Path, server: Any) -> None:
    code = '''
from evalkit.plugin import METRICS, Metric, Sample, SampleScore


@METRICS.register("changing_stats")
class ChangingStats(Metric):
    """Two statistics on the first row, three after it."""

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        return SampleScore(1.0, (1.0, 1.0) if sample.id == "q1" else (1.0, 1.0, 1.0))
'''
    config = _project(tmp_path, ["changing_stats", "exact_match"], {"changing": code}, server)
    ran = _evalkit(["run", str(config), "--quiet"], tmp_path)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    results = {row["metric"]: row for row in json.loads((_run_dir(config) / "results.json").read_text())["results"]}
    assert results["exact_match"]["error"] is None
    error = results["changing_stats"]["error"]
    assert (
        error.startswith("metric 'changing_stats': score() returned an unusable SampleScore: ")
        and "values, earlier samples had" in error
    )


def test_a_plugin_whose_constructor_raises_stops_the_plan_with_one_line(tmp_path: Path, server: Any) -> None:
    code = '''
from evalkit.plugin import METRICS, Metric, Sample, SampleScore


@METRICS.register("unbuildable")
class Unbuildable(Metric):
    """Its constructor has a bug."""

    def __init__(self, language=None, **options):
        raise RuntimeError("forgot a file")

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        return SampleScore(1.0, (1.0, 1.0))
'''
    config = _project(tmp_path, ["unbuildable"], {"unbuildable_metrics": code}, server)
    ran = _evalkit(["run", str(config), "--quiet"], tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr
    assert "metric 'unbuildable' could not be built: RuntimeError: forgot a file (unbuildable_metrics.py:" in ran.stderr
    assert not (tmp_path / "project" / "runs").exists()  # stopped before any run folder was made


def test_readme_example_scores_its_suggested_pair_basic_qa_whose_references_are_lists(
    tmp_path: Path,
) -> None:
    """The README suggests ``[["basic_qa", "word_recall"]]``: right answers score 1 there, as exact match does."""
    rows = [json.loads(line) for line in (ROOT / "runspecs" / "_data" / "basic_qa.jsonl").read_text().splitlines()]
    assert any(len(row["answers"]) > 1 for row in rows)  # lists, some with several acceptable answers
    # the last acceptable answer, with a full stop, as a chat model writes it
    script = {"answers": [{"match": row["question"], "answer": f"{row['answers'][-1]}."} for row in rows]}
    srv = start_test_server(script)
    try:
        project = tmp_path / "project"
        project.mkdir()
        (project / "word_recall.py").write_text(readme_example())
        config = write_config(
            project / "config.yaml",
            {
                "dataset_metric": [["basic_qa", "word_recall"], ["basic_qa", "exact_match"]],
                "models": [model_entry("m", srv.base_url)],
                "plugins": ["word_recall"],
            },
        )
        ran = _evalkit(["run", str(config), "--quiet"], tmp_path)
    finally:
        srv.stop()
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = {row["metric"]: row for row in json.loads((_run_dir(config) / "results.json").read_text())["results"]}
    assert results["exact_match"]["score"] == pytest.approx(1.0)
    assert results["word_recall"]["n"] == len(rows)
    assert results["word_recall"]["score"] == pytest.approx(1.0)
