"""Every class of config mistake stops the run before any request: one message, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import FIXTURES

BASE = {
    "dataset_metric": [["tiny_qa", "exact_match"]],
    "models": [{"info": {"name": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "m"}}],
    "runspecs_dir": str(FIXTURES / "runspecs"),
}


def _run(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env=env,
    )


def _mutated(**changes) -> str:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(yaml.safe_dump(BASE))
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return yaml.safe_dump(data)


CASES = [
    (
        "unknown key",
        _mutated(models__0__info__batch_sise=4),
        ["models[0].info.batch_sise", "unknown key", 'did you mean "batch_size"'],
    ),
    ("misspelled top key", _mutated(filtres={"num_samples": 3}), ["filtres", 'did you mean "filters"']),
    ("wrong type", _mutated(models__0__info__batch_size="many"), ["models[0].info.batch_size", "integer"]),
    ("missing mandatory", _mutated(models__0__info__model=None), ["models[0].info.model", "missing"]),
    (
        "unknown inference type",
        _mutated(models__0__info__inference_type="vllmm"),
        ["inference_type", 'did you mean "vllm"'],
    ),
    (
        "unknown dataset",
        _mutated(dataset_metric=[["tiny_qq", "exact_match"]]),
        ["dataset_metric[0]", "tiny_qq", 'did you mean "tiny_qa"'],
    ),
    (
        "unknown metric",
        _mutated(dataset_metric=[["tiny_qa", "exact_mach"]]),
        ["dataset_metric[0]", "exact_mach", 'did you mean "exact_match"'],
    ),
    (
        "metric that does not fit",
        _mutated(dataset_metric=[["tiny_qa", "word_error_rate"]]),
        ["does not fit", "exact_match"],
    ),
    (
        "missing env var",
        _mutated(models__0__info__auth_token="${EVALKIT_TEST_UNSET_TOKEN}"),
        ["EVALKIT_TEST_UNSET_TOKEN", "models[0].info.auth_token"],
    ),
    ("bad yaml", "dataset_metric: [[tiny_qa, exact_match]\nmodels: [", ["not valid YAML", "line"]),
    ("not a mapping", "- just\n- a list\n", ["expected a mapping"]),
]


@pytest.mark.parametrize(("label", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_config_mistake_exits_2_with_message(tmp_path: Path, label: str, text: str, expected: list[str]) -> None:
    proc = _run(tmp_path, text)
    assert proc.returncode == 2, (label, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "config.yaml" in proc.stderr or label in ("unknown dataset", "unknown metric", "metric that does not fit")
    for fragment in expected:
        assert fragment in proc.stderr, (label, proc.stderr)
    assert not (tmp_path / "runs").exists(), "a config error must stop before any run folder is made"


def test_missing_config_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "config file not found" in proc.stderr and "Traceback" not in proc.stderr


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    proc = _run(tmp_path, _mutated(models__0__info__batch_sise=4, models__0__info__timeout="soon", filtres={}))
    assert proc.returncode == 2
    for fragment in ("batch_sise", "timeout", "filtres"):
        assert fragment in proc.stderr


def test_validate_command_accepts_good_config(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(BASE))
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout


AUHARNESS_TEMPLATE = """\
task_metric:
  - ["covost2", "bleu"]
models:
  - name: my-model
    inference_type: "vllm"
    url: <ENDPOINT_URL>
    model: my-model
"""


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("<ENDPOINT_URL>", "models[0].url: the placeholder <ENDPOINT_URL> is still there"),
        ("http://<host>:8000/v1", "models[0].url: the placeholder <host> is still there"),
        ("localhost:8000/v1", "models[0].url: not an http(s) URL with a host"),
        ("ftp://host/v1", "models[0].url: not an http(s) URL with a host"),
        ("http:///v1", "models[0].url: not an http(s) URL with a host"),
    ],
)
def test_a_url_that_is_no_endpoint_is_refused_by_validate_and_dry_run(tmp_path: Path, url: str, expected: str) -> None:
    path = tmp_path / "auharness.yaml"
    path.write_text(AUHARNESS_TEMPLATE.replace("<ENDPOINT_URL>", url))
    for command in (["validate", str(path)], ["run", str(path), "--dry-run"]):
        done = subprocess.run(
            [sys.executable, "-m", "evalkit", *command],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 2, (command, done.stderr)
        assert expected in done.stderr and "Traceback" not in done.stderr


def test_evalkit_own_format_names_the_key_and_a_list_of_urls_is_checked_each(tmp_path: Path) -> None:
    text = _mutated(models__0__info__url=["http://127.0.0.1:9/v1", "<SECOND_REPLICA>"])
    done = _run(tmp_path, text)
    assert done.returncode == 2 and "models[0].info.url: the placeholder <SECOND_REPLICA> is still there" in done.stderr


def test_convert_keeps_a_template_blank_for_the_user_to_fill(tmp_path: Path) -> None:
    path = tmp_path / "auharness.yaml"
    path.write_text(AUHARNESS_TEMPLATE)
    done = subprocess.run(
        [sys.executable, "-m", "evalkit", "convert", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "url: <ENDPOINT_URL>" in done.stdout
