"""The viewer's indexes: read on as a file grows, written into a run folder by the run, checked before use.

An index is a copy of what its file says, so each test compares it with a
fresh reading of the file: an index read on line by line with one built at
once, a run folder's index with the viewer's own and with a plain scan of the
records, and a run folder's index that is stale, damaged, foreign or hostile
with the answer the file itself gives (the index is then not used, and never
written to).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_view import RUN, make_run, speech_pair

from evalkit.view import index as view_index
from evalkit.view import scan
from evalkit.view.indexcheck import folder_index
from evalkit.view.queries import PairFilter, Sources, samples_page
from evalkit.view.runindex import EAGER_BYTES, EAGER_BYTES_ENV, eager_bytes, index_run
from evalkit.view.viewer import Viewer

NEEDLES = ["word", "WORD 1", "clip number 1 <b>", "<script>", "strasse", "colour?", "e", "zz", 'a"b', "utt00"]
QUERIES: list[dict[str, str]] = [
    {},
    {"model": "beta", "sort": "-score"},
    {"failure": "none", "min": "0.2", "max": "0.4"},
    {"group": "gender:female", "sort": "id"},
    *({"q": q} for q in NEEDLES),
    {"q": "transcribe", "model": "alpha"},
]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    yield
    view_index.stop_builds()


def _dump(db_path: Path, kind: str) -> dict[str, Any]:
    """Everything an index says of its file (row numbers of the group table aside), and what searches find."""
    db = sqlite3.connect(db_path)
    try:
        if kind == "sent":
            found = {"sent": db.execute("SELECT key, off, len, sample_id, text FROM sent ORDER BY key").fetchall()}
            table, column = "sfts", "rowid"
        else:
            found = {
                "rec": db.execute("SELECT * FROM rec ORDER BY id").fetchall(),
                "txt": db.execute("SELECT * FROM txt ORDER BY id").fetchall(),
                "grp": db.execute(
                    "SELECT name, value, id FROM grp JOIN gv USING (gv) ORDER BY name, value, id"
                ).fetchall(),
            }
            table, column = "fts", "rowid"
        for needle in ("word", "e s", "clip", "<b>", "zzz"):
            phrase = '"' + needle + '"'
            found[f"match {needle}"] = db.execute(
                f"SELECT {column} FROM {table} WHERE {table} MATCH ? ORDER BY 1", (phrase,)
            ).fetchall()
        meta = dict(db.execute("SELECT k, v FROM meta"))
    finally:
        db.close()
    found["meta"] = {k: meta.get(k) for k in ("lines", "bad", "long", "next", "offset", "size")}
    return found


@pytest.mark.parametrize("kind", ["records", "sent"])
def test_an_index_read_on_as_its_file_grows_equals_one_built_at_once(tmp_path: Path, kind: str) -> None:
    run = make_run(tmp_path / "runs", n=30)
    source = (
        run / "records" / "speech__word_error_rate.jsonl" if kind == "records" else run / "records/sent/speech.jsonl"
    )
    whole = source.read_bytes()
    lines = whole.splitlines(keepends=True)
    growing = tmp_path / "live" / "records" / ("sent" if kind == "sent" else "") / source.name
    growing.parent.mkdir(parents=True)
    # written in three steps, the second ending mid-line (as a run writes it)
    cut = len(b"".join(lines[: len(lines) // 3]))
    steps = [
        whole[:cut],
        whole[cut : cut + len(lines[len(lines) // 3]) // 2],
        whole[cut + len(lines[len(lines) // 3]) // 2 :],
    ]
    for step in steps:
        with growing.open("ab") as handle:
            handle.write(step)
        state = view_index.refresh(growing, kind)
    assert state.complete and not state.in_run_folder
    once = view_index.build_into(source, kind, tmp_path / "once.sqlite")
    assert _dump(state.db, kind) == _dump(once.db, kind)
    assert _dump(once.db, kind)["match clip" if kind == "sent" else "match word"]  # the searches find something


def test_the_index_a_run_wrote_is_used_as_it_is_and_answers_as_a_scan_does(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs")
    assert index_run(run_dir, min_bytes=0) == 4  # two records files, two sent files
    viewer = Viewer([tmp_path / "runs"])
    run, pair = speech_pair(viewer)
    sources = viewer.sources(run, pair)
    assert sources.records is not None and sources.records.in_run_folder
    assert sources.sent is not None and sources.sent.in_run_folder
    assert not list((tmp_path / "cache").rglob("*.sqlite"))  # nothing built by the viewer
    own = Sources(view_index.refresh(pair.records, "records"), view_index.refresh(pair.sent, "sent"))
    for query in QUERIES:
        f = PairFilter.parse(query)
        from_run = samples_page(sources, f)
        assert from_run == scan.samples_page(pair.records, pair.sent, f), query
        assert from_run == samples_page(own, f), query
    assert samples_page(sources, PairFilter.parse({"q": "transcribe"}))["total"] > 0  # a prompt's text is searched
    assert index_run(run_dir, min_bytes=0) == 0  # current already: left as it is


def _edit_middle(path: Path) -> None:
    """One score changed in the middle of the file, the size kept (the time moves on)."""
    data = path.read_bytes()
    at = data.index(b'"score": 0.', len(data) // 2)
    digit = data[at + 11 : at + 12]
    path.write_bytes(data[: at + 11] + (b"7" if digit != b"7" else b"3") + data[at + 12 :])


def _damage(case: str, run_dir: Path, db: Path, records: Path, tmp_path: Path) -> None:
    if case == "edited records":
        _edit_middle(records)
    elif case == "appended records":
        with records.open("ab") as handle:
            handle.write(records.read_bytes().splitlines(keepends=True)[0])
    elif case == "foreign index":
        shutil.copyfile(db.with_name("pics__exact_match.jsonl.sqlite"), db)
    elif case == "another run's index":
        other = make_run(tmp_path / "other", shift=4)
        index_run(other, min_bytes=0)
        shutil.copyfile(folder_index(other / "records" / records.name, "records")[0], db)  # type: ignore[index]
    elif case == "garbage pages":
        data = bytearray(db.read_bytes())
        data[8192:] = os.urandom(len(data) - 8192)
        db.write_bytes(bytes(data))
    elif case == "cut short":
        db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])
    elif case == "a view added":
        conn = sqlite3.connect(db)
        conn.execute("CREATE VIEW spy AS SELECT * FROM rec")
        conn.commit()
        conn.close()
    elif case == "a trigger added":
        conn = sqlite3.connect(db)
        conn.execute("CREATE TRIGGER t AFTER INSERT ON meta BEGIN DELETE FROM rec; END")
        conn.commit()
        conn.close()
    elif case == "write-ahead log":
        data = bytearray(db.read_bytes())
        data[18:20] = b"\x02\x02"
        db.write_bytes(bytes(data))
    elif case == "a link out of the run folder":
        outside = tmp_path / "outside.sqlite"
        shutil.copyfile(db, outside)
        db.unlink()
        db.symlink_to(outside)
    elif case == "lying rows":
        conn = sqlite3.connect(db)
        conn.execute("UPDATE rec SET score = 1.0 WHERE id = (SELECT max(id) FROM rec)")
        conn.commit()
        conn.close()
    else:
        raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "edited records",
        "appended records",
        "foreign index",
        "another run's index",
        "garbage pages",
        "cut short",
        "a view added",
        "a trigger added",
        "write-ahead log",
        "a link out of the run folder",
        "lying rows",
    ],
)
def test_a_run_folders_index_that_does_not_match_is_not_used_nor_touched(tmp_path: Path, case: str) -> None:
    run_dir = make_run(tmp_path / "runs")
    index_run(run_dir, min_bytes=0)
    records = run_dir / "records" / "speech__word_error_rate.jsonl"
    db = folder_index(records, "records")[0]  # type: ignore[index]
    _damage(case, run_dir, db, records, tmp_path)
    before = {p: p.read_bytes() for p in (run_dir / "index").rglob("*") if p.is_file()}
    viewer = Viewer([tmp_path / "runs"])
    run, pair = speech_pair(viewer)
    assert not view_index.refresh(records, "records").in_run_folder
    for query in ({}, {"model": "alpha", "sort": "-score"}, {"q": "word"}):
        f = PairFilter.parse(query)
        assert (
            viewer.pair(RUN, "speech", "word_error_rate", query)["rows"]
            == scan.samples_page(pair.records, pair.sent, f)["rows"]
        ), query
    assert {p: p.read_bytes() for p in (run_dir / "index").rglob("*") if p.is_file()} == before  # never written


def test_a_damaged_index_found_by_a_query_is_set_aside_and_the_page_still_answers(tmp_path: Path) -> None:
    """Damage the checks before use cannot see (pages no check reads): the query that meets it says so, and the
    page is answered from the file while the viewer builds its own index."""
    run_dir = make_run(tmp_path / "runs", n=400)
    index_run(run_dir, min_bytes=0)
    viewer = Viewer([tmp_path / "runs"])
    run, pair = speech_pair(viewer)
    state = view_index.refresh(pair.records, "records")
    assert state.in_run_folder
    db = state.db
    page_size = 4096
    conn = sqlite3.connect(db)
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'rec_model_score'").fetchone()
    conn.close()
    data = bytearray(db.read_bytes())
    data[(root - 1) * page_size : root * page_size] = b"\xff" * page_size  # an index the checks do not read
    db.write_bytes(bytes(data))
    os.utime(db, ns=(state.size, state.size))  # its time changes too, as a copy's would
    assert view_index.refresh(pair.records, "records").in_run_folder  # the checks before use still pass
    query = {"model": "alpha", "sort": "-score"}
    answer = viewer.pair(RUN, "speech", "word_error_rate", query)
    assert answer["rows"] == scan.samples_page(pair.records, pair.sent, PairFilter.parse(query))["rows"]
    assert not view_index.refresh(pair.records, "records").in_run_folder


def test_filter_choices_an_index_carries_are_taken_only_in_the_shape_a_build_writes(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs")
    index_run(run_dir, min_bytes=0)
    records = run_dir / "records" / "speech__word_error_rate.jsonl"
    db = folder_index(records, "records")[0]  # type: ignore[index]
    conn = sqlite3.connect(db)
    offset = conn.execute("SELECT v FROM meta WHERE k = 'offset'").fetchone()[0]
    odd = {"offset": offset, "facets": {"models": "alpha", "failures": [1], "groups": {"g": 3}, "scored": "x"}}
    conn.execute("UPDATE meta SET v = ? WHERE k = 'facets'", (json.dumps(odd),))
    conn.commit()
    conn.close()
    viewer = Viewer([tmp_path / "runs"])
    answer = viewer.pair(RUN, "speech", "word_error_rate", {})
    assert view_index.refresh(records, "records").in_run_folder  # the rows still match: the index is used
    assert answer["facets"]["models"] == ["alpha", "beta"] and answer["facets"]["failures"] == {"timeout": 2}


def test_evalkit_run_writes_the_index_the_viewer_then_takes(tmp_path: Path) -> None:
    from helpers import config_for, evalkit_cli, model_entry, text_set

    from evalkit.testing import start_test_server

    runspecs = text_set(tmp_path, 12)
    server = start_test_server({})
    try:
        config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)], [["synth_qa", "exact_match"]])
        # 12 records are under the size a run is indexed at as it ends: 0 asks for every run's index
        done = evalkit_cli(["run", str(config), "--quiet"], tmp_path, env={**os.environ, EAGER_BYTES_ENV: "0"})
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    records = run_dir / "records" / "synth_qa__exact_match.jsonl"
    assert (run_dir / "index" / "synth_qa__exact_match.jsonl.sqlite").is_file()
    assert (run_dir / "index" / "sent" / "synth_qa.jsonl.sqlite").is_file()
    state = view_index.refresh(records, "records")
    assert state.in_run_folder and state.lines == 12
    viewer = Viewer([tmp_path / "runs"])
    found = viewer.pair(run_dir.name, "synth_qa", "exact_match", {"q": "question 1"})
    assert found["indexed"] and found["total"] == 3  # questions 1, 10 and 11
    assert not list((tmp_path / "cache").rglob("*.sqlite"))  # the viewer built nothing of its own


def test_a_small_run_is_left_to_the_viewer_which_indexes_it_on_first_view(tmp_path: Path) -> None:
    from helpers import config_for, evalkit_cli, model_entry, text_set

    from evalkit.testing import start_test_server

    runspecs = text_set(tmp_path, 12)
    server = start_test_server({})
    try:
        config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)], [["synth_qa", "exact_match"]])
        env = {k: v for k, v in os.environ.items() if k != EAGER_BYTES_ENV}
        done = evalkit_cli(["run", str(config), "--quiet"], tmp_path, env=env)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert not (run_dir / "index").exists()  # a few KB: indexing it as the run ends would only cost the run
    viewer = Viewer([tmp_path / "runs"])
    found = viewer.pair(run_dir.name, "synth_qa", "exact_match", {"q": "question 1"})
    # questions 1, 10 and 11, as from a run folder's own index: read from the file until the viewer's own index
    # (built in the background by `evalkit view`, in its cache folder) is ready
    assert found["total"] == 3 and not found["indexed"]
    records = run_dir / "records" / "synth_qa__exact_match.jsonl"
    assert view_index.wait_build(records, "records", timeout=60)  # the viewer did start its own index
    again = viewer.pair(run_dir.name, "synth_qa", "exact_match", {"q": "question 1"})
    assert again["indexed"] and again["total"] == 3 and again["rows"] == found["rows"]
    assert not (run_dir / "index").exists()  # in its cache folder, never the run folder


def test_the_threshold_is_read_from_the_environment_and_a_mistake_keeps_the_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert eager_bytes({}) == EAGER_BYTES
    assert eager_bytes({EAGER_BYTES_ENV: "0"}) == 0
    assert eager_bytes({EAGER_BYTES_ENV: " 1048576 "}) == 1 << 20
    for wrong in ("-1", "16MB", "1.5"):
        with caplog.at_level("WARNING", logger="evalkit.view"):
            assert eager_bytes({EAGER_BYTES_ENV: wrong}) == EAGER_BYTES
        assert EAGER_BYTES_ENV in caplog.text and "whole number of bytes" in caplog.text
        caplog.clear()


def test_a_run_at_the_threshold_is_indexed_as_it_ends_and_one_under_it_is_not(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "records" / "sent").mkdir(parents=True)
    records = run_dir / "records" / "p__m.jsonl"
    records.write_text("".join(json.dumps({"sample_id": str(i), "model": "m", "score": 1.0}) + "\n" for i in range(50)))
    size = records.stat().st_size
    assert index_run(run_dir, min_bytes=size + 1) == 0 and not (run_dir / "index").exists()
    assert index_run(run_dir, min_bytes=size) == 1
    assert (run_dir / "index" / "p__m.jsonl.sqlite").is_file()
