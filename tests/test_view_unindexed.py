"""The samples page of a pair whose index is not built yet: read from the file a budget at a time, and honest.

A records file of a million records takes seconds to read, so a request reads
only a budget's worth, answers with the matches among the records read so far,
and says so; the next request reads on. Each test checks such an answer
against the real index (SQLite, built from the same file, or from the part of
it that was read): a partial answer is the whole answer for the records read,
the last one is the index's answer, and a page served before it is whole says
so and never shows the count of part as the pair's. The file is read in small
blocks here (as a large file is read in 1 MB ones) so that a run of a few
dozen records takes many steps.
"""

from __future__ import annotations

import json
import mmap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_view import RUN, make_run, speech_pair

from evalkit.view import index as view_index
from evalkit.view import pages, scan
from evalkit.view.links import Links
from evalkit.view.queries import PairFilter, Sources, samples_page
from evalkit.view.runs import Pair, find_pair
from evalkit.view.viewer import Viewer

QUERIES: list[dict[str, str]] = [
    {},
    {"model": "alpha"},
    {"model": "beta", "sort": "-score"},
    {"model": "alpha", "sort": "score", "per": "7", "page": "3"},
    {"failure": "none", "min": "0.2", "max": "0.4"},
    {"failure": "timeout"},
    {"group": "gender:female", "sort": "id"},
    {"q": "word"},
    {"q": "transcribe", "model": "alpha"},  # a prompt's text: the sent file is read first
    {"q": "<script>"},
]
#: one step a request: the least a request reads is one block (or one window), however small the budget
STEP = scan.Budget(max_bytes=1)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(scan, "_READ", 512)
    monkeypatch.setattr(scan, "_WINDOW", mmap.ALLOCATIONGRANULARITY)
    yield
    view_index.stop_builds()


def _read_to_the_end(pair: Pair, f: PairFilter) -> list[dict[str, Any]]:
    answers = []
    while True:
        answer = scan.samples_page(pair.records, pair.sent, f, STEP)
        answers.append(answer)
        if "partial" not in answer:
            return answers
        assert len(answers) < 10_000, "the reading got no further"


@pytest.mark.parametrize("query", QUERIES)
def test_a_question_read_a_step_at_a_time_ends_with_the_index_answer(tmp_path: Path, query: dict[str, str]) -> None:
    make_run(tmp_path / "runs", n=60)
    viewer = Viewer([tmp_path / "runs"])
    run, pair = speech_pair(viewer)
    assert pair.records.stat().st_size > 8 * mmap.ALLOCATIONGRANULARITY
    f = PairFilter.parse(query)
    answers = _read_to_the_end(pair, f)
    indexed = samples_page(viewer.sources(run, pair), f)
    assert answers[-1] == indexed and indexed["total"] > 0
    assert len(answers) > 3  # it was read in steps, not at once
    read = [a["partial"]["bytes_read"] for a in answers[:-1] if a["partial"]["reading"] == "records"]
    assert read and read == sorted(set(read))  # each request read further
    assert all(a["total"] <= indexed["total"] for a in answers)
    lines = [a["partial"]["records_read"] for a in answers[:-1] if a["partial"]["reading"] == "records"]
    assert lines == sorted(lines) and lines[-1] < view_index.refresh(pair.records, "records").lines
    if query.get("q") and pair.sent is not None:  # the prompts are read before any record
        assert answers[0]["partial"]["reading"] == "prompts" and answers[0]["rows"] == []


@pytest.mark.parametrize("query", QUERIES)
def test_a_partial_answer_is_the_whole_answer_for_the_records_read(tmp_path: Path, query: dict[str, str]) -> None:
    """What a page shows before the file is read through is exact for the part read: the index of that part
    (the same lines at the same offsets) gives the same rows, line numbers and count."""
    make_run(tmp_path / "runs", n=60)
    viewer = Viewer([tmp_path / "runs"])
    _, pair = speech_pair(viewer)
    f = PairFilter.parse(query)
    answer = scan.samples_page(pair.records, pair.sent, f, STEP)
    while answer["partial"]["reading"] == "prompts":
        answer = scan.samples_page(pair.records, pair.sent, f, STEP)
    for _ in range(3):  # a few steps in: part of the file, not all of it
        answer = scan.samples_page(pair.records, pair.sent, f, STEP)
    partial = answer.pop("partial")
    assert 0 < partial["bytes_read"] < partial["bytes"] == pair.records.stat().st_size
    prefix = tmp_path / "part" / pair.records.name
    prefix.parent.mkdir()
    prefix.write_bytes(pair.records.read_bytes()[: partial["bytes_read"]])
    assert pair.sent is not None
    part = Sources(view_index.refresh(prefix, "records"), view_index.refresh(pair.sent, "sent"))
    assert answer == samples_page(part, f)
    assert partial["records_read"] == part.index.lines
    whole = view_index.refresh(pair.records, "records").lines
    assert partial["records_about"] is not None and abs(partial["records_about"] - whole) <= whole // 2


def test_a_page_served_before_the_index_is_done_says_so_and_then_counts_as_the_index(tmp_path: Path) -> None:
    make_run(tmp_path / "runs", n=60)
    viewer = Viewer([tmp_path / "runs"], scan_budget=STEP)
    run, pair = speech_pair(viewer)
    links = Links()
    first = viewer.pair(RUN, "speech", "word_error_rate", {})
    assert first["indexed"] is False  # the build was only started by this request
    partial = first["partial"]
    assert partial is not None and partial["reading"] == "records" and partial["records_read"] > 0
    assert 0 < first["total"] == len(first["rows"]) < 50  # the matches among the few records read
    html = pages.pair_page(first, links)
    assert "Still reading" in html and f"{partial['records_read']:,} records read" in html
    assert "matching records so far" in html and "page 1 of" not in html  # no count of part as the whole
    assert f'<meta http-equiv="refresh" content="{pages.READING_RELOAD_S}">' in html
    assert "by results.json" in html  # the filter's counts are results.json's until the index has counted
    assert view_index.wait_build(pair.records, "records", timeout=60)
    assert pair.sent is not None and view_index.wait_build(pair.sent, "sent", timeout=60)
    done = viewer.pair(RUN, "speech", "word_error_rate", {})
    assert done["indexed"] is True and done["partial"] is None
    html = pages.pair_page(done, links)
    assert "Still reading" not in html and "http-equiv" not in html and "by results.json" not in html
    f = PairFilter.parse({})
    read = _read_to_the_end(pair, f)[-1]  # the reading, carried on to its end: the index's count and rows
    assert read["total"] == done["total"] > first["total"] and read["rows"] == done["rows"]


def test_a_small_file_is_answered_whole_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file read within the budget gets its whole answer at once, as before: no partial state to show."""
    monkeypatch.setattr(scan, "_READ", 1 << 20)
    make_run(tmp_path / "runs")
    viewer = Viewer([tmp_path / "runs"], scan_budget=scan.Budget(max_bytes=1 << 20))
    data = viewer.pair(RUN, "speech", "word_error_rate", {"model": "beta"})
    assert data["indexed"] is False and data["partial"] is None and data["total"] > 0
    html = pages.pair_page(data, Links())
    assert f"page 1 of {data['pages']}" in html and "Still reading" not in html and "http-equiv" not in html


def test_a_sample_and_what_was_sent_are_found_in_the_file_as_the_index_finds_them(tmp_path: Path) -> None:
    """The sample page without an index looks for the id's bytes in the mapped file: the same records, the same
    line numbers and the same sent entries as the index gives, hostile ids included."""
    from test_view import EVIL_IDS

    from evalkit.view import queries

    make_run(tmp_path / "runs", n=60)
    viewer = Viewer([tmp_path / "runs"])
    run, pair = speech_pair(viewer)
    sources = viewer.sources(run, pair)
    for sample_id in ["utt000", "utt031", "utt059", *EVIL_IDS, "utt0", "nothing"]:
        indexed = queries.sample_records(sources, sample_id)
        assert scan.sample_records(pair.records, sample_id) == indexed, sample_id
        assert scan.sample_records(pair.records, sample_id, numbered=False) == [(0, r) for _, r in indexed]
        keys = list(dict.fromkeys(str(r["sent"]) for _, r in indexed))
        assert scan.sent_entries(pair.sent, keys) == queries.sent_entries(sources.sent, keys), sample_id
        assert bool(indexed) == (sample_id not in ("utt0", "nothing"))


def test_a_sample_page_read_from_the_file_is_the_indexed_one(tmp_path: Path) -> None:
    make_run(tmp_path / "runs", n=60)
    viewer = Viewer([tmp_path / "runs"])
    asked = [(name, sample_id) for name in (("speech", "word_error_rate"), ("pics", "exact_match")) for sample_id in
             ("utt000", "utt033")]  # fmt: skip
    read = {key: viewer.sample(RUN, *key[0], key[1]) for key in asked}  # no index yet: its build only starts here
    run = viewer.catalog.get(RUN)
    assert run is not None
    for (name, sample_id), page in read.items():
        pair = find_pair(run, *name)
        assert pair is not None and page["records"]
        viewer.sources(run, pair)  # the index, built
        indexed = viewer.sample(RUN, *name, sample_id)
        notes, _ = page.pop("problems"), indexed.pop("problems")
        if sample_id == "utt000":  # the pair's first request: its index was not there (the build started then)
            assert any("indexing this pair" in note for note in notes)
        assert indexed == page


def test_the_scans_kept_between_requests_stay_within_their_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Older scans under way are let go past a number of records held in all; the latest is kept, so it reads on."""
    make_run(tmp_path / "runs", n=60)
    viewer = Viewer([tmp_path / "runs"])
    _, pair = speech_pair(viewer)
    monkeypatch.setattr(scan, "_scans", type(scan._scans)())
    monkeypatch.setattr(scan, "_KEPT_ITEMS", 5)
    asked = [PairFilter.parse({"model": m, "per": "7"}) for m in ("alpha", "beta")] + [PairFilter.parse({"per": "9"})]
    for f in asked:
        for _ in range(40):  # far enough in for each page to hold its 7 or 9 records
            scan.samples_page(pair.records, pair.sent, f, STEP)
    kept = list(scan._scans.values())
    assert len(kept) == 1 and kept[0].f == asked[-1] and kept[0].weight() > 5
    before = kept[0].pos
    scan.samples_page(pair.records, pair.sent, asked[-1], STEP)
    assert kept[0].pos > before  # read on from where it was, not from the start
    while "partial" in scan.samples_page(pair.records, pair.sent, asked[-1], STEP):
        pass
    assert kept[0].answer is not None and kept[0].weight() == 0  # a whole answer keeps its rows alone


@pytest.mark.parametrize(
    "query", [{"group": "flag:true"}, {"group": "n:1.0"}, {"failure": "any"}, {"sort": "id"}, {"model": "7"}]
)
def test_values_that_are_not_strings_are_read_as_the_index_reads_them(tmp_path: Path, query: dict[str, str]) -> None:
    """A group value true or 1.0, a failure or sample id that is an object, a model that is a number: the file's
    reading and the index give the same rows and count (the index's text of a value is its JSON)."""
    records = tmp_path / "odd.jsonl"
    lines = [
        {"sample_id": "a", "model": "m", "score": 1.0, "groups": {"flag": True, "n": 1.0}},
        {"sample_id": {"x": 1}, "model": 7, "score": 0.0, "failure": {"x": 1}, "groups": {"flag": False, "n": 2}},
        {"sample_id": "c", "model": "m", "score": 0.5, "groups": {"flag": "true", "n": "1.0"}},
    ]
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    f = PairFilter.parse(query)
    read = scan.samples_page(records, None, f)
    indexed = samples_page(Sources(view_index.refresh(records, "records"), None), f)
    assert read == indexed and indexed["total"] > 0
