"""Names evalkit did not choose never lead a file outside its folder, and two names never share one file.

A runspec dataset named ``../..`` once made evalkit truncate a file outside the
run folder. Here every hostile shape of a name (``..``, ``/``, absolute paths,
NUL, very long, Unicode, Windows device names, leading dots) goes through
:func:`safe_name`, and a real run with such datasets writes only inside its
output folder, keeps the original names in records and results, and is read
back by ``evalkit rescore``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import config_for, model_entry, run

from evalkit.data.hubcache import HubRowCache
from evalkit.run.rescore import rescore
from evalkit.util.safe_names import MAX_BYTES, UnsafePathError, inside, safe_name, safe_path

HOSTILE = [
    "..",
    ".",
    "../..",
    "../../etc/passwd",
    "/abs/path",
    "C:\\Windows\\win.ini",
    "a/b",
    "a\x00b",
    "\x00",
    "",
    " ",
    "x" * 300,
    "é" * 200,
    "数据集",
    "数据集/" * 80,
    "CON",
    "nul",
    "Com1.txt",
    ".hidden",
    "-rf",
    "name.",
    "line\nbreak",
    "\ud800lone surrogate",
    "emoji 🙂",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_becomes_one_plain_file_name(name: str, tmp_path: Path) -> None:
    for out in (safe_name(name), safe_name(name, "exact_match", suffix=".jsonl")):
        assert "/" not in out and "\\" not in out and "\x00" not in out and "\n" not in out
        assert out not in (".", "..") and not out.startswith((".", "-"))
        assert len(out.encode("utf-8")) <= MAX_BYTES
        assert out.split(".")[0].upper() not in ("CON", "NUL", "COM1")
        assert inside(tmp_path, out).parent == tmp_path
        (tmp_path / out).write_text("x")  # the file system takes it
    assert safe_name(name, suffix=".jsonl").endswith(".jsonl")


def test_safe_names_stay_as_they_were() -> None:
    for name in ("librispeech_test_clean", "mmau-mini", "chrf++", "a.b", "fleurs_en_us"):
        assert safe_name(name) == name
    assert safe_name("librispeech", "word_error_rate", suffix=".jsonl") == "librispeech__word_error_rate.jsonl"


def test_different_names_never_share_a_file() -> None:
    names = [
        *HOSTILE,
        "Libri",
        "libri",
        "LIBRI",
        "x" * 300 + "a",
        "x" * 300 + "b",
        "a_b",
        "a/b",
        "a b",
        "a\\b",
        "é",
        "e\u0301",  # é decomposed: one file on macOS
        "a-0123456789",  # looks like a hashed name
    ]
    outs = {safe_name(n) for n in names}
    assert len(outs) == len(set(names))
    assert len({o.lower() for o in outs}) == len(outs)  # also apart on case-insensitive file systems
    pairs = [("a__b", "c"), ("a", "b__c"), ("a", "b"), ("a_", "_b")]
    assert len({safe_name(*p, suffix=".jsonl") for p in pairs}) == len(pairs)
    hashed = safe_name("a/b")
    assert safe_name(hashed) != hashed  # a safe name shaped like a hashed one is kept apart from it


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    (folder / "synth__exact_match.jsonl").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside"):
        safe_path(folder, "synth", "exact_match", suffix=".jsonl")
    with pytest.raises(UnsafePathError):
        inside(folder, "..", "precious.txt")
    assert outside.read_text() == "keep me"


def test_the_hub_cache_folder_stays_in_the_cache(tmp_path: Path) -> None:
    spec: Any = SimpleNamespace(
        hf_repo="../../evil", subset="a/../../../b", split="/abs/test", revision=None, data_files=None
    )
    folder = HubRowCache(spec, root=tmp_path).folder
    assert folder.parent == tmp_path and not folder.name.startswith(".")
    plain: Any = SimpleNamespace(
        hf_repo="openslr/librispeech_asr", subset="clean", split="test", revision=None, data_files=None
    )
    assert HubRowCache(plain, root=tmp_path).folder.name.startswith("openslr__librispeech_asr-clean-test-")


def _snapshot(root: Path) -> dict[str, float]:
    """Every file and folder under ``root`` with its change time (a folder's changes when an entry is added)."""
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if not p.is_symlink()}


def _changed_outside(before: dict[str, float], root: Path, allowed: Path) -> list[str]:
    """What changed under ``root`` outside ``allowed`` (its ancestor folders, which gain it, excepted)."""
    return sorted(
        p
        for p, mtime in _snapshot(root).items()
        if before.get(p) != mtime and not Path(p).is_relative_to(allowed) and not allowed.is_relative_to(p)
    )


def test_a_run_with_hostile_dataset_names_writes_only_inside_its_folder(tmp_path: Path, make_server) -> None:
    work = tmp_path / "work"
    victim = tmp_path / "victim"  # where "../.." and an absolute name would have pointed
    victim.mkdir()
    (victim / "keep.jsonl").write_text("precious\n")
    data = work / "data.jsonl"
    work.mkdir()
    data.write_text(
        "".join(json.dumps({"qid": f"s{i}", "question": f"q {i}", "answer": f"q {i}"}) + "\n" for i in range(3))
    )
    names = [
        "../..",
        "../../victim/keep",
        str(victim / "keep"),
        "a\x00b",
        "数据集",
        "y" * 300,
        "CON",
        ".hidden",
        "Keep",
    ]
    spec = {
        "path": str(data),
        "language": "en",
        "modality": "text",
        "id_column": "qid",
        "textual_input_column": "question",
        "target_column": "answer",
    }
    specs = work / "runspecs" / "text"
    specs.mkdir(parents=True)
    (specs / "t.json").write_text(
        json.dumps({"_task": {"description": "d", "metrics": ["exact_match", "f1"]}, **{n: spec for n in names}})
    )
    server = make_server()
    output = work / "out" / "deep" / "runs"
    config = config_for(
        work / "cfg",
        work / "runspecs",
        [model_entry("m", server.base_url)],
        [[n, "exact_match"] for n in names],
        output_dir=str(output),
    )
    before = _snapshot(tmp_path)
    outcome = run(config)

    assert _changed_outside(before, tmp_path, output) == []
    assert (victim / "keep.jsonl").read_text() == "precious\n"
    records_files = sorted(p for p in (outcome.run_dir / "records").iterdir() if p.is_file())
    assert len(records_files) == len(names)
    # what was sent, one file per dataset, under the same safe names
    sent_files = sorted((outcome.run_dir / "records" / "sent").iterdir())
    assert len(sent_files) == len(names) and all(p.parent == outcome.run_dir / "records" / "sent" for p in sent_files)
    assert {json.loads(p.read_text().splitlines()[0])["dataset"] for p in sent_files} == set(names)
    datasets = set()
    for path in records_files:
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(lines) == 3 and len({r["dataset"] for r in lines}) == 1
        datasets.add(lines[0]["dataset"])
    assert datasets == set(names)  # records keep the names as given
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert {r["dataset"] for r in results["results"]} == set(names) and {r["score"] for r in results["results"]} == {
        1.0
    }

    # rescore finds every records file, reads the names from the records, and writes inside the run folder
    before = _snapshot(tmp_path)
    rows = rescore(outcome.run_dir, "f1", config_path=str(config))
    assert {r.dataset for r in rows} == set(names) and {r.score for r in rows} == {1.0}
    assert _changed_outside(before, tmp_path, outcome.run_dir) == []
    assert len(os.listdir(outcome.run_dir / "rescore")) == len(names)


def test_a_symlink_planted_at_report_html_is_replaced_not_followed(tmp_path: Path) -> None:
    """report.html is written atomically: a link someone left there never leads the write out of the run folder."""
    from evalkit.report.html import write_html

    outside = tmp_path / "outside.txt"
    outside.write_text("keep me", encoding="utf-8")
    run_dir = tmp_path / "run"
    (run_dir / "records").mkdir(parents=True)
    (run_dir / "report.html").symlink_to(outside)
    path = write_html(run_dir, [], {})
    assert outside.read_text(encoding="utf-8") == "keep me"
    assert not path.is_symlink() and "<html" in path.read_text(encoding="utf-8").lower()
