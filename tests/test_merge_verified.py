"""`evalkit merge` verifies what it merges: checksums, every planned sample once, no link written through.

Real shards of a real run against the project's test server, then damaged as
a copy, a careless hand or a forger would: an edited score, a deleted and a
duplicated line, checksums recomputed after the edit, checksums removed (an
older evalkit's shard), a records file replaced by a link, an ``--output``
whose ``records/`` is a link, a shard over ``max_failure_rate``, and a merge
killed while it writes. Each is refused with exit 2 and one line naming the
file, and leaves nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, config_for, evalkit_cli, model_entry, run, text_set

from evalkit.run.checksums import folder_checksums
from evalkit.run.merge import merge
from evalkit.run.shard import Shard

N = 60
SHARDS = 2
PAIRS = [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One whole run and its two shards (echo answers: exact_match 2/3), of one config, against one test server."""
    from evalkit.testing import start_test_server

    root = tmp_path_factory.mktemp("verified")
    runspecs = text_set(root, N)
    server = start_test_server()
    try:
        config = config_for(root, runspecs, [model_entry("m", server.base_url)], pairs=PAIRS)
        whole = run(config, no_cache=True)
        shards = [run(config, shard=Shard(k, SHARDS)).run_dir for k in range(SHARDS)]
        yield {"root": root, "whole": whole.run_dir, "shards": shards}
    finally:
        server.stop()


def _results(run_dir: Path) -> dict[tuple[str, str], Any]:
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    return {(r["dataset"], r["metric"]): (r["score"], r["ci_low"], r["ci_high"], r["n"], r["n_failed"]) for r in rows}


def _copy(runs: dict[str, Any], tmp_path: Path, index: int = 1) -> list[Path]:
    """The shards, shard ``index`` replaced by a copy to damage."""
    copy = tmp_path / f"shard{index}"
    shutil.copytree(runs["shards"][index], copy, symlinks=True)
    return [copy if k == index else d for k, d in enumerate(runs["shards"])]


def _records(shard: Path, metric: str = "exact_match") -> Path:
    return shard / "records" / f"synth_qa__{metric}.jsonl"


def _edit_lines(path: Path, change: Callable[[list[bytes]], list[bytes]]) -> None:
    path.write_bytes(b"".join(change(path.read_bytes().splitlines(keepends=True))))


def _rechecksum(shard: Path) -> None:
    """What a forger does after editing: the checksums recomputed and written into run.json."""
    manifest = json.loads((shard / "run.json").read_text())
    manifest["checksums"] = folder_checksums(shard)
    (shard / "run.json").write_text(json.dumps(manifest))


def _merge_cli(shards: list[Path], out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return evalkit_cli(["merge", *map(str, shards), "--output", str(out), "--quiet", *flags], out.parent)


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 2, one line, no traceback, naming what it should."""
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.strip().splitlines() if not line.startswith("WARNING")]
    assert "Traceback" not in done.stderr and len(said) == 1 and said[0].startswith("evalkit: error: "), done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def test_a_finished_run_lists_the_checksums_of_its_records_and_results(runs: dict[str, Any], tmp_path: Path) -> None:
    manifest = json.loads((runs["shards"][0] / "run.json").read_text())
    listed = manifest["checksums"]
    assert set(listed) == {
        "results.json",
        "records/synth_qa__exact_match.jsonl",
        "records/synth_qa__bleu.jsonl",
        "records/sent/synth_qa.jsonl",
    }
    assert listed == folder_checksums(runs["shards"][0])
    merged = merge(runs["shards"], tmp_path / "m")
    assert _results(merged.run_dir) == _results(runs["whole"])
    assert json.loads((merged.run_dir / "run.json").read_text())["checksums"] == folder_checksums(merged.run_dir)


def test_an_edited_record_is_refused_naming_the_file(runs: dict[str, Any], tmp_path: Path) -> None:
    shards = _copy(runs, tmp_path)

    def wrong_to_right(lines: list[bytes]) -> list[bytes]:
        return [
            line.replace(b'"score":0.0', b'"score":1.0').replace(b'"stats":[0.0,', b'"stats":[1.0,') for line in lines
        ]

    _edit_lines(_records(shards[1]), wrong_to_right)
    done = _merge_cli(shards, tmp_path / "out")
    _refused(done, str(_records(shards[1])), "does not match its checksum")
    assert not (tmp_path / "out").exists()
    # an edit of results.json is refused the same way
    shards = _copy(runs, tmp_path / "again")
    results = shards[1] / "results.json"
    results.write_text(results.read_text().replace('"n_failed": 0', '"n_failed": 0 '))
    _refused(_merge_cli(shards, tmp_path / "out"), str(results), "does not match its checksum")


def test_deleted_and_duplicated_lines_are_refused_also_under_recomputed_checksums(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    shards = _copy(runs, tmp_path)
    path = _records(shards[1])
    _edit_lines(path, lambda lines: [lines[0], *lines[:-1]])  # one line twice, the last one gone: counts agree
    _refused(_merge_cli(shards, tmp_path / "out"), str(path), "does not match its checksum")

    _rechecksum(shards[1])
    done = _merge_cli(shards, tmp_path / "out")
    _refused(done, f"{path}: line 2", "a second record of sample")
    assert not (tmp_path / "out").exists()

    shards = _copy(runs, tmp_path / "deleted")
    path = _records(shards[1])
    _edit_lines(path, lambda lines: lines[:-1])
    _rechecksum(shards[1])
    _refused(_merge_cli(shards, tmp_path / "out"), str(path), "no record of sample")


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_shard_without_checksums_needs_trust_unverified(runs: dict[str, Any], tmp_path: Path) -> None:
    shards = _copy(runs, tmp_path)
    manifest = json.loads((shards[1] / "run.json").read_text())
    del manifest["checksums"]  # as an evalkit from before checksums wrote it
    (shards[1] / "run.json").write_text(json.dumps(manifest))
    _refused(_merge_cli(shards, tmp_path / "out"), str(shards[1] / "run.json"), "--trust-unverified")
    assert not (tmp_path / "out").exists()

    done = _merge_cli(shards, tmp_path / "out", "--trust-unverified")
    assert done.returncode == 0, done.stderr
    assert "merged unverified" in done.stderr
    assert _results(tmp_path / "out") == _results(runs["whole"])
    # trusted, not unchecked: a duplicated line is still refused
    _edit_lines(_records(shards[1]), lambda lines: [lines[0], *lines[:-1]])
    _refused(_merge_cli(shards, tmp_path / "out2", "--trust-unverified"), "a second record of sample")


def test_a_records_file_that_is_a_link_or_not_listed_is_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    shards = _copy(runs, tmp_path)
    path = _records(shards[1])
    outside = tmp_path / "elsewhere.jsonl"
    shutil.copyfile(path, outside)  # the same bytes, so the checksum alone would pass
    path.unlink()
    path.symlink_to(outside)
    _refused(_merge_cli(shards, tmp_path / "out"), str(path), "not a regular file inside the run folder")

    shards = _copy(runs, tmp_path / "extra")
    planted = shards[1] / "records" / "synth_qa__word_error_rate.jsonl"
    planted.write_text("{}\n")
    _refused(_merge_cli(shards, tmp_path / "out"), str(planted), "not listed")

    shards = _copy(runs, tmp_path / "manifest")
    manifest = shards[1] / "run.json"
    shutil.move(manifest, tmp_path / "run.json")
    manifest.symlink_to(tmp_path / "run.json")
    _refused(_merge_cli(shards, tmp_path / "out"), str(manifest), "symbolic link")


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_an_output_holding_links_or_foreign_files_is_never_written_through(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert _merge_cli(runs["shards"], out).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    shutil.rmtree(out / "records")
    (out / "records").symlink_to(elsewhere, target_is_directory=True)
    _refused(_merge_cli(runs["shards"], out), str(out / "records"), "symbolic link")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]

    (out / "records").unlink()
    (out / "notes.txt").write_text("the user's")
    _refused(_merge_cli(runs["shards"], out), str(out / "notes.txt"), "did not write it")
    assert (out / "notes.txt").read_text() == "the user's"

    link = tmp_path / "link"
    link.symlink_to(elsewhere, target_is_directory=True)
    _refused(_merge_cli(runs["shards"], link), str(link), "symbolic link")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_merge_killed_while_writing_leaves_the_earlier_merge_whole(runs: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _merge_cli(runs["shards"], out).returncode == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # killed (SIGKILL: no cleanup) after the records are written, as it starts writing the results
    kill = (
        "import os, signal, sys; import evalkit.run.merge as m; "
        "m.write_results = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL); "
        "from evalkit.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", kill, "merge", *map(str, runs["shards"]), "--output", str(out), "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -9, done.stderr
    assert json.loads((out / "run.json").read_text())["status"] == "finished"
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    leftovers = [p.name for p in tmp_path.iterdir() if ".merging-" in p.name]
    assert len(leftovers) == 1 and leftovers[0].startswith(".out.")  # hidden, beside it, not in it

    again = _merge_cli(runs["shards"], out)
    assert again.returncode == 0, again.stderr
    assert [p.name for p in tmp_path.iterdir() if ".merging-" in p.name or ".replaced-" in p.name] == []
    assert _results(out) == _results(runs["whole"])


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_shard_over_max_failure_rate_is_refused_unless_allowed(tmp_path: Path, make_server) -> None:  # type: ignore[no-untyped-def]
    server = make_server({"answers": [{"match": "re:^question \\d*[05] ", "answer": "", "fault": "400"}]})
    runspecs = text_set(tmp_path, 40)
    config = config_for(
        tmp_path, runspecs, [model_entry("m", server.base_url, retry_attempts=0)], max_failure_rate=0.05
    )
    shards = [run(config, shard=Shard(k, 2)).run_dir for k in range(2)]
    out = tmp_path / "out"
    done = _merge_cli(shards, out)
    _refused(done, "results.json", "over max_failure_rate 0.05", "--allow-failures")
    assert not out.exists()
    allowed = _merge_cli(shards, out, "--allow-failures")
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads((out / "run.json").read_text())["status"] == "finished"


def test_data_not_readable_where_the_merge_runs_needs_trust_unverified(runs: dict[str, Any], tmp_path: Path) -> None:
    data = runs["root"] / "data" / "synth_qa.jsonl"
    aside = tmp_path / "synth_qa.jsonl"
    shutil.move(data, aside)
    data.write_text("not json\n")  # there, but not readable as the shards read it
    try:
        _refused(_merge_cli(runs["shards"], tmp_path / "out"), "dataset 'synth_qa' cannot be read here", "line 1")
        assert not (tmp_path / "out").exists()
        done = _merge_cli(runs["shards"], tmp_path / "out", "--trust-unverified")
        assert done.returncode == 0, done.stderr
        assert "planned samples not checked" in done.stderr
    finally:
        shutil.move(aside, data)
    assert _results(tmp_path / "out") == _results(runs["whole"])
