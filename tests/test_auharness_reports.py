"""An AU-Harness config's results read as AU-Harness's table: its dataset names and its scale, with evalkit's CI.

A run of AU-Harness's ``librispeech_test_clean`` (evalkit's entry ``librispeech_test_clean_audiollms``, read
from a local copy) against the test server: the console table, results.json/csv/md, report.html and the
viewer's run page show ``librispeech_test_clean`` and the WER ×100, as AU-Harness prints it, the CI on the
same scale; the same pair in evalkit's own config reports exactly what it always did.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from helpers import ROOT, model_entry, run, write_config
from rich.console import Console
from test_local_copies import ANSWERS, ENTRY, _wav, save_to_disk_dict

from evalkit.catalog import load_catalog
from evalkit.config.foreign.auharness import SAME_NAME_OTHER_COMPUTATION
from evalkit.config.foreign.reporting import AUHARNESS_SCALE
from evalkit.metrics import METRICS
from evalkit.report.console import print_table
from evalkit.report.files import load_results
from evalkit.testing import audio_fingerprint
from evalkit.view.links import Links
from evalkit.view.pages import run_page
from evalkit.view.viewer import Viewer

AUHARNESS = Path("/work/.mirror/ServiceNow+AU-Harness/repo")


def _server(make_server: Any) -> Any:
    answers = [{"audio_fingerprint": audio_fingerprint(_wav(i)), "answer": a} for i, a in enumerate(ANSWERS)]
    return make_server({"answers": answers, "default_answer": "no rule matched this audio"})


#: the pair an AU-Harness config runs for its librispeech_test_clean: AU-Harness's variant of the entry
VARIANT = "auharness:librispeech_test_clean"


def _auharness_run(tmp_path: Path, url: str) -> Path:
    path = save_to_disk_dict(tmp_path / "data")
    config = write_config(
        tmp_path / "config.yaml",
        {
            "task_metric": [["librispeech_test_clean", "word_error_rate"]],
            "models": [{"name": "m", "model": "m", "url": url, "inference_type": "openai"}],
            "dataset_paths": {"librispeech_test_clean": str(path)},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    outcome = run(config)
    return outcome.run_dir


def test_an_auharness_config_reports_auharness_names_and_scale(tmp_path: Path, make_server: Any) -> None:
    run_dir = _auharness_run(tmp_path, _server(make_server).base_url)
    rows, _ = load_results(run_dir)
    (row,) = rows
    # evalkit's pair: AU-Harness's variant of the entry, AU-Harness's computation of the metric
    assert (row.dataset, row.metric) == (VARIANT, "auharness:word_error_rate")
    assert row.score == pytest.approx(1 / 7)
    assert (row.shown_dataset, row.shown_metric, row.scale) == ("librispeech_test_clean", "word_error_rate", 100)
    score, low, high = row.scaled()
    assert score == pytest.approx(100 / 7) and low is not None and high is not None
    assert low == pytest.approx(row.ci_low * 100) and high == pytest.approx(row.ci_high * 100)

    results = json.loads((run_dir / "results.json").read_text())["results"][0]
    assert results["score"] == pytest.approx(1 / 7)
    reported = results["reported_as"]
    assert reported["tool"] == "AU-Harness" and reported["dataset"] == "librispeech_test_clean"
    assert reported["score"] == pytest.approx(100 / 7) and reported["ci_high"] == pytest.approx(row.ci_high * 100)

    (line,) = csv.DictReader(io.StringIO((run_dir / "results.csv").read_text()))
    assert line["dataset"] == VARIANT and float(line["score"]) == pytest.approx(1 / 7)
    assert line["reported_dataset"] == "librispeech_test_clean" and float(line["reported_score"]) == pytest.approx(
        100 / 7
    )

    shown = f"{100 / 7:.2f}"  # AU-Harness prints two decimals
    ci = f"[{low:.2f}, {high:.2f}]"
    markdown = (run_dir / "results.md").read_text()
    assert (
        f"| librispeech_test_clean | word_error_rate | m | {shown} | {ci} | 3 | 0 | "
        f"{VARIANT} / auharness:word_error_rate x100 |" in markdown
    )
    html = (run_dir / "report.html").read_text()
    assert "librispeech_test_clean" in html and shown in html and ci in html

    console = Console(file=io.StringIO(), width=200)
    print_table(rows, "results", console)
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert "librispeech_test_clean " in printed and shown in printed and ci in printed

    viewer = Viewer([run_dir.parent])
    page = run_page(viewer.run(run_dir.name), Links())
    assert f">{shown}<" in page and ci in page and "librispeech_test_clean<" in page
    # the samples are still found under evalkit's pair
    assert f"/pair/{quote(VARIANT)}/{quote('auharness:word_error_rate')}/" in page


def test_evalkit_own_config_reports_as_before(tmp_path: Path, make_server: Any) -> None:
    server = _server(make_server)
    path = save_to_disk_dict(tmp_path / "data")
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[ENTRY, "word_error_rate"]],
            "models": [model_entry("m", server.base_url)],
            "dataset_paths": {ENTRY: str(path)},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    run_dir = run(config).run_dir
    results = json.loads((run_dir / "results.json").read_text())["results"][0]
    assert "reported_as" not in results and results["dataset"] == ENTRY
    header = (run_dir / "results.csv").read_text().splitlines()[0]
    assert (
        header
        == "kind,dataset,task,category,metric,model,score,ci_low,ci_high,n,n_failed,failure_rate,unreliable,seconds"
    )
    assert "| dataset | metric | model | score | 95% CI | n | failed |\n" in (run_dir / "results.md").read_text()
    assert f"| {ENTRY} | word_error_rate | m | {1 / 7:.4f} |" in (run_dir / "results.md").read_text()


def _printed_scale(source: str, metric_class: str) -> float | None:
    """The factor AU-Harness's metric class (or a base class in its module) applies before printing."""
    classes = {n.name: n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)}
    node = classes.get(metric_class)
    if node is None:
        return None
    found = re.findall(r"\*\s*(100(?:\.0)?|20(?:\.0)?|10)\b", ast.get_source_segment(source, node) or "")
    if found:
        return float(found[0])
    bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
    return next((f for b in bases if (f := _printed_scale(source, b)) is not None), None)


def test_every_auharness_metric_has_a_scale() -> None:
    """Every metric AU-Harness's task configs list has its print scale in the table."""
    table = load_catalog(cwd=ROOT).foreign["auharness"]
    metrics = {m for entry in table.datasets.values() for m in entry.metrics} - {"detailed_judge_prompt"}
    assert metrics <= set(AUHARNESS_SCALE), sorted(metrics - set(AUHARNESS_SCALE))


@pytest.mark.skipif(not AUHARNESS.exists(), reason="AU-Harness's source snapshot is not on this machine")
def test_the_scales_are_those_auharness_code_applies() -> None:
    """×100 where AU-Harness's metric class multiplies a 0-1 mean by 100 before printing (its metrics/*.py)."""
    import subprocess

    def show(path: str) -> str:
        git = ["git", f"--git-dir={AUHARNESS}", "show", f"HEAD:{path}"]
        return subprocess.run(git, capture_output=True, text=True, check=True).stdout

    constants = show("utils/constants.py")
    metric_map = ast.literal_eval(re.search(r"metric_map = (\{.*?\n\})", constants, re.DOTALL).group(1))  # type: ignore[union-attr]
    for name, (module, cls) in metric_map.items():
        factor = _printed_scale(show(module.replace(".", "/") + ".py"), cls)
        upper = METRICS.get(name).bounds[1]
        if factor == 100.0:  # a 0-1 mean printed ×100, and evalkit's metric of that name is a 0-1 quantity
            assert AUHARNESS_SCALE[name] == 100.0 and upper in (1.0, None), name
        else:  # BLEU (sacrebleu's 0-100), the rating judges (x20, (s + 1) x 10, x10): evalkit reports them so too
            assert AUHARNESS_SCALE[name] == 1.0 and upper != 1.0, (name, factor)


# ---------------------------------------------------------------- evalkit convert on AU-Harness's shipped configs

#: AU-Harness's shipped configs: its sample config and run_configs/ at the pinned commit
SHIPPED = ["sample_config.yaml"] + [
    f"run_configs/{name}.yaml"
    for name in ("callhome_diarization", "covost2", "leaderboard_config", "librispeech", "librispeech_phi4",
                 "librispeech_voxtral", "mtbench", "spokenwoz_config")
]  # fmt: skip
#: what the user fills in for each placeholder the shipped configs leave
FILLED = {
    "<ENDPOINT_URL>": "http://127.0.0.1:9/v1",
    "<JUDGE_MODEL_ENDPOINT>": "http://127.0.0.1:9/v1",
    "<MODEL_NAME>": "model-under-test",
    "<JUDGE_MODEL_NAME>": "judge",
    "<AUTH_TOKEN>": "key",
    "<JUDGE_MODEL_KEY>": "key",
    "<JUDGE_MODEL_VERSION>": "'2024-10-21'",  # quoted, or YAML reads a date
    "<vLLM end-point URL>:<port>": "127.0.0.1:9",  # the Phi-4 configs' blanks (a template's url fails validation)
}


def _shipped(path: str, folder: Path) -> Path:
    import subprocess

    git = ["git", f"--git-dir={AUHARNESS}", "show", f"HEAD:{path}"]
    text = subprocess.run(git, capture_output=True, text=True, check=True).stdout
    for placeholder, value in FILLED.items():
        text = text.replace(placeholder, value)
    target = folder / Path(path).name
    target.write_text(text, encoding="utf-8")
    return target


@pytest.mark.skipif(not AUHARNESS.exists(), reason="AU-Harness's source snapshot is not on this machine")
@pytest.mark.parametrize("shipped", SHIPPED)
def test_convert_keeps_auharness_meaning_of_every_shipped_config(
    shipped: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.cli.main import main
    from evalkit.config import load_config
    from evalkit.plan import build_plan

    monkeypatch.chdir(tmp_path)  # AU-Harness's private_datasets/ (CallHome) are looked for where it runs
    variables = {"ENDPOINT_URL": "http://127.0.0.1:9/v1", "AUTH_TOKEN": "key", "API_VERSION": "2024-10-21",
                 "GOOGLE_CLOUD_LOCATION": "us-central1", "GOOGLE_CLOUD_PROJECT": "lab-eval"}  # fmt: skip
    for name, value in variables.items():  # the variables its configs read, set as its user sets them
        monkeypatch.setenv(name, value)
    for corpus in ("CallHome_deu", "CallHome_eng", "CallHome_jpn", "CallHome_spa", "CallHome_zho"):
        (tmp_path / "private_datasets" / corpus / "hf_dataset").mkdir(parents=True)
    source = _shipped(shipped, tmp_path)
    out = tmp_path / "converted.yaml"
    assert main(["convert", str(source), "--output", str(out)]) == 0
    original = build_plan(load_config(source), source=str(source))
    converted_config = load_config(out)
    again = build_plan(converted_config, source=str(out))
    pairs = [(e.dataset.name, e.metric, e.reported_as) for e in original.engines]
    assert pairs and [(e.dataset.name, e.metric, e.reported_as) for e in again.engines] == pairs
    assert converted_config.report_as == "auharness"
    assert all(e.reported_as is not None and e.reported_as.tool == "AU-Harness" for e in again.engines)
    written = {metric for _, metric, *_ in converted_config.dataset_metric}
    # a name evalkit computes otherwise is written as AU-Harness's computation; the others are AU-Harness's already
    assert not written & set(SAME_NAME_OTHER_COMPUTATION), written
    assert again.config.aggregate == original.config.aggregate


# ---------------------------------------------------------------- pip install 'evalkit[auharness]'

#: AU-Harness metrics whose model packages (torch and a downloaded model) are installed apart, as the README says
MODEL_METRICS = {"bertscore": "bert-score and its model", "comet": "unbabel-comet and its model"}
#: what those two import (they share their module with meteor, which needs none of it)
MODEL_PACKAGES = {"bert_score", "comet", "torch", "transformers"}


def _imports(module: str, seen: set[str]) -> set[str]:
    """Top-level packages ``module`` and the evalkit modules it reaches import, lazily or by name (import_module)."""
    if module in seen:
        return set()
    seen.add(module)
    path = ROOT.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if not path.is_file():
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Call) and node.args:
            called = getattr(node.func, "attr", getattr(node.func, "id", ""))
            first = node.args[0]
            value = first.value if isinstance(first, ast.Constant) else constants.get(getattr(first, "id", ""))
            if called in ("import_module", "find_spec") and isinstance(value, str):
                names = [value]
        for name in names:
            if name.startswith("evalkit."):
                found |= _imports(name, seen)
            else:
                found.add(name.split(".")[0])
    return found


def _requirement_names(specs: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in specs}


def test_the_auharness_extra_lists_every_package_auharness_metrics_import() -> None:
    """Derived from the metric table: each AU-Harness metric's module, and what it reaches, needs only the extra."""
    import sys
    from importlib import metadata

    from evalkit.metrics.table import BUILTIN_METRICS

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    have = _requirement_names(project["dependencies"]) | _requirement_names(
        project["optional-dependencies"]["auharness"]
    )
    distributions = metadata.packages_distributions()
    modules = {info.name: info.module for info in BUILTIN_METRICS}
    missing: dict[str, set[str]] = {}
    for metric in sorted(set(AUHARNESS_SCALE) - set(MODEL_METRICS)):
        packages = _imports(modules[metric], set()) - set(sys.stdlib_module_names) - {"__future__"} - MODEL_PACKAGES
        needed = {d.lower().replace("_", "-") for p in packages for d in distributions.get(p, [p])}
        if needed - have:
            missing[metric] = needed - have
    assert not missing, f"add to the auharness extra in pyproject.toml: {missing}"
