"""A plan's identity is its content: copies of one project at different paths give shards that merge.

Node-local copies, per-job scratch folders, containers and Ray nodes with other
temporary folders all hold the same project at another path. The plan
fingerprint a shard's run.json keeps (and ``evalkit merge`` checks) is the
config's meaning, the runspec entries' content, the prompts' content and the
data's content hash: never a path on one machine, whether the config writes it
relative or absolute. What does change the content is still refused.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import evalkit_cli, model_entry, run, text_set, write_config

from evalkit.run.merge import merge
from evalkit.run.shard import Shard

PAIRS = [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]


def _project(root: Path, url: str) -> Path:
    """A project folder: config.yaml with relative paths, its runspecs, data and prompts beside it."""
    text_set(root, 40, words=5)
    (root / "prompts").mkdir()
    (root / "prompts" / "system_prompts.yaml").write_text("terse:\n  text: Answer in as few words as you can.\n")
    data = {
        "dataset_metric": PAIRS,
        "models": [model_entry("m", url, batch_size=4)],
        "runspecs_dir": "runspecs",
        "prompts_dir": "prompts",
        "output_dir": "runs",
        "filters": {"system_prompts": ["terse"]},
    }
    return write_config(root / "config.yaml", data)


def _results(run_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every number of results.json per pair and model, but the timing and usage: which of two pairs sends a
    request they share and which takes its answer is a matter of timing (as in test_shard_merge)."""
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    how = ("seconds", "usage", "judge_usage")
    return {(r["dataset"], r["metric"], r["model"]): {k: v for k, v in r.items() if k not in how} for r in rows}


def _plan_of(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["shard"]["plan"])


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One project, copied to two unrelated folders; the second copy's config writes its paths absolute."""
    from evalkit.testing import start_test_server

    server = start_test_server({})
    try:
        here = tmp_path_factory.mktemp("node-a") / "project"
        here.mkdir()
        config_a = _project(here, server.base_url)
        there = tmp_path_factory.mktemp("scratch-job-17") / "deeper" / "copy"
        shutil.copytree(here, there)
        config_b = there / "config.yaml"
        data = yaml.safe_load(config_b.read_text())
        data.update(runspecs_dir=str(there / "runspecs"), prompts_dir=str(there / "prompts"))
        data["output_dir"] = str(there / "elsewhere-runs")
        data["cache"] = {"path": str(there / "store" / "responses.sqlite")}
        write_config(config_b, data)
        yield {"a": config_a, "b": config_b, "server": server, "whole": run(config_a, no_cache=True).run_dir}
    finally:
        server.stop()


def test_shards_run_in_copies_at_two_paths_merge_to_the_whole_run(copies: dict[str, Any], tmp_path: Path) -> None:
    first = run(copies["a"], shard=Shard(0, 2))
    second = run(copies["b"], shard=Shard(1, 2))
    assert _plan_of(first.run_dir) == _plan_of(second.run_dir)
    merged = merge([first.run_dir, second.run_dir], tmp_path / "merged")
    assert _results(merged.run_dir) == _results(copies["whole"])
    # the merge reads the plan from either copy: the second's first works as well
    again = merge([second.run_dir, first.run_dir], tmp_path / "merged-again")
    assert _results(again.run_dir) == _results(copies["whole"])


def test_a_copy_whose_content_differs_is_another_plan(copies: dict[str, Any], tmp_path: Path) -> None:
    """Paths do not count, content does: a runspec instruction or a prompt changed is refused by the merge."""
    first = run(copies["a"], shard=Shard(0, 2))
    changed: dict[str, Path] = {}
    for what in ("runspec", "prompt"):
        copy = tmp_path / what
        shutil.copytree(copies["a"].parent, copy, ignore=shutil.ignore_patterns("runs"))
        if what == "runspec":
            spec_file = copy / "runspecs" / "text" / "synth_qa.json"
            spec = json.loads(spec_file.read_text())
            spec["synth_qa"]["instruction"] = "Answer the question."
            spec_file.write_text(json.dumps(spec))
        else:
            (copy / "prompts" / "system_prompts.yaml").write_text("terse:\n  text: Answer briefly.\n")
        changed[what] = run(copy / "config.yaml", shard=Shard(1, 2)).run_dir
        assert _plan_of(changed[what]) != _plan_of(first.run_dir), what
    refused = evalkit_cli(["merge", str(first.run_dir), str(changed["runspec"])], tmp_path)
    assert refused.returncode == 2 and "different plans" in refused.stderr, refused.stderr


def test_a_resume_from_another_copy_of_the_project_continues_the_run(copies: dict[str, Any], tmp_path: Path) -> None:
    """A shard started in one copy is finished from another (a requeued job on another node's copy)."""
    started = run(copies["a"], shard=Shard(1, 2))
    manifest = json.loads((started.run_dir / "run.json").read_text())
    (started.run_dir / "run.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    done = evalkit_cli(["run", str(copies["b"]), "--resume", str(started.run_dir), "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    after = json.loads((started.run_dir / "run.json").read_text())
    assert after["status"] == "finished" and after["shard"]["plan"] == manifest["shard"]["plan"]


def test_a_merge_in_another_copy_reads_the_plan_from_its_own_config(copies: dict[str, Any], tmp_path: Path) -> None:
    """The first shard ran in a copy that is gone (a node's scratch folder): the merge, run in another copy's
    folder as the Ray job's driver runs it, finds the config where the shard was given it and checks its plan."""
    scratch = tmp_path / "scratch"
    shutil.copytree(copies["a"].parent, scratch, ignore=shutil.ignore_patterns("runs"))
    ran = evalkit_cli(["run", "config.yaml", "--shard", "0/2", "--quiet"], scratch)
    assert ran.returncode == 0, ran.stderr
    (shard,) = [p.parent for p in (scratch / "runs").glob("*/run.json")]
    collected = shutil.move(shard, tmp_path / "collected")
    shutil.rmtree(scratch)
    other = run(copies["b"], shard=Shard(1, 2)).run_dir
    merged = evalkit_cli(
        ["merge", str(collected), str(other), "--output", str(tmp_path / "merged")], copies["b"].parent
    )
    assert merged.returncode == 0, merged.stderr
    assert _results(tmp_path / "merged") == _results(copies["whole"])
