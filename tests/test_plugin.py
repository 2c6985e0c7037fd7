"""The stable plugin contract: a package built here registers a metric through evalkit.plugin and the entry point.

The plugin is a real installed distribution as far as ``importlib.metadata``
knows (a module plus a ``.dist-info`` folder with ``entry_points.txt`` on the
path), and evalkit runs in a subprocess, as a user's would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT, model_entry, write_config

from evalkit.testing import start_test_server

PLUGIN = '''
from evalkit.plugin import METRICS, FailureReason, Metric, Reference, Sample, SampleScore


@METRICS.register("exact_length", "same_length")
class ExactLength(Metric):
    """1 when the answer has as many words as the reference."""

    bounds = (0.0, 1.0)
    reference = Reference(
        "lab/length-eval", "length.py, same_length()", "1.0", "a table of cases", ("counts words by whitespace",)
    )

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        if not sample.reference:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        same = float(len(prediction.split()) == len(str(sample.reference).split()))
        return SampleScore(same, (same, 1.0))
'''


def _install_plugin(site: Path) -> None:
    (site / "length_plugin.py").write_text(PLUGIN)
    info = site / "length_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: length-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[evalkit.plugins]\nlength = length_plugin\n")


def _runspecs(root: Path) -> Path:
    spec = json.loads((FIXTURES / "runspecs" / "text" / "tiny_text.json").read_text())
    spec["_task"]["metrics"] = ["exact_length", "exact_match"]
    spec["tiny_qa"]["path"] = str(FIXTURES / "data" / "tiny_qa.jsonl")
    folder = root / "runspecs" / "text"
    folder.mkdir(parents=True)
    (folder / "tiny_text.json").write_text(json.dumps(spec))
    return root / "runspecs"


@pytest.fixture()
def server() -> Any:
    # two answers of the right length, three of the wrong one
    answers = {
        "capital of France": "Paris",
        "spider": "eight legs",
        "sky": "blue",
        "red planet": "the planet Mars",
        "opposite of hot": "not hot",
    }
    srv = start_test_server({"answers": [{"match": q, "answer": a} for q, a in answers.items()]})
    yield srv
    srv.stop()


def _evalkit(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_plugin_metric_is_listed_and_scores_a_run(tmp_path: Path, server: Any) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site)
    listed = _evalkit(["list", "metrics", "--format", "json"], tmp_path, site)
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in json.loads(listed.stdout) if r["name"] == "exact_length")
    assert (
        row["aliases"] == ["same_length"]
        and row["description"] == "1 when the answer has as many words as the reference."
        and row["reference"] == "lab/length-eval 1.0"
    )
    info = _evalkit(["info", "metric", "same_length", "--format", "json"], tmp_path, site)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["reference"] == {
        "project": "lab/length-eval",
        "source": "length.py, same_length()",
        "version": "1.0",
        "checked_by": "a table of cases",
        "differences": ["counts words by whitespace"],
    }

    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tiny_qa", "same_length"]],
            "models": [model_entry("m", server.base_url)],
            "runspecs_dir": [str(_runspecs(tmp_path))],
            "output_dir": str(tmp_path / "runs"),
        },
    )
    ran = _evalkit(["run", str(config), "--quiet"], tmp_path, site)
    assert ran.returncode == 0, ran.stderr
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    (row,) = results["results"]
    assert row["metric"] == "exact_length" and row["n"] == 5 and row["score"] == pytest.approx(2 / 5)


def test_old_import_paths_users_rely_on_still_work() -> None:
    """The layout moved modules; the entry point and the plugin registries kept their import paths."""
    import evalkit
    import evalkit.plugin as plugin
    from evalkit.api import evaluate
    from evalkit.metrics import METRICS, Metric
    from evalkit.metrics.base import SampleScore
    from evalkit.processing.postprocessors import POSTPROCESSORS
    from evalkit.prompts.preprocessors import PREPROCESSORS

    assert evalkit.evaluate is evaluate
    assert (plugin.METRICS, plugin.Metric, plugin.SampleScore) == (METRICS, Metric, SampleScore)
    assert (plugin.PREPROCESSORS, plugin.POSTPROCESSORS) == (PREPROCESSORS, POSTPROCESSORS)


def test_a_config_plugins_entry_imports_a_plain_module_without_an_entry_point(tmp_path: Path, server: Any) -> None:
    """The second route: no distribution, no entry point; the config names the module and evalkit imports it."""
    site = tmp_path / "site"
    (site / "length_pkg").mkdir(parents=True)
    (site / "length_pkg" / "__init__.py").write_text("")
    (site / "length_pkg" / "metrics.py").write_text(PLUGIN)
    base = {
        "dataset_metric": [["tiny_qa", "exact_length"]],
        "models": [model_entry("m", server.base_url)],
        "runspecs_dir": [str(_runspecs(tmp_path))],
        "output_dir": str(tmp_path / "runs"),
    }
    without = write_config(tmp_path / "without.yaml", base)
    refused = _evalkit(["validate", str(without)], tmp_path, site)
    assert refused.returncode == 2 and "unknown metric 'exact_length'" in refused.stderr, refused.stderr

    config = write_config(tmp_path / "config.yaml", {**base, "plugins": ["length_pkg.metrics"]})
    ran = _evalkit(["run", str(config), "--quiet"], tmp_path, site)
    assert ran.returncode == 0, ran.stderr
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    (row,) = results["results"]
    assert row["metric"] == "exact_length" and row["n"] == 5 and row["score"] == pytest.approx(2 / 5)


def test_an_unknown_or_broken_plugin_module_is_exit_2_naming_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "broken_plugin.py").write_text("raise RuntimeError('half-written plugin')\n")
    base = {
        "dataset_metric": [["basic_qa", "exact_match"]],
        "models": [model_entry("m", "http://127.0.0.1:9/v1")],
    }
    for module, needle in (
        ("no_such_plugin_module", "cannot import plugin module 'no_such_plugin_module'"),
        ("broken_plugin", "RuntimeError: half-written plugin"),
    ):
        config = write_config(tmp_path / "config.yaml", {**base, "plugins": [module]})
        result = _evalkit(["validate", str(config)], tmp_path, site)
        assert result.returncode == 2, result.stderr
        assert "plugins[0]" in result.stderr and needle in result.stderr and "Traceback" not in result.stderr
