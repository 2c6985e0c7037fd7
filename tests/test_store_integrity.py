"""The response store keeps only what it can keep, never serves a changed answer, and never touches a stranger's file.

Real runs against the test server with a real SQLite store: bytes flipped in
one stored answer (with sqlite3, as a disk or a hand would) make that sample
asked again, counted in the summary and run.json, with scores equal to a clean
run's; an answer too large for SQLite fails only its own sample as
``unstorable``; a store from before checksums is migrated in place and used;
a SQLite file that is not evalkit's (and a run folder of someone else's
files) is refused with exit 2 and left byte for byte as it was.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, evalkit_cli, model_entry, run, text_set

from evalkit.clients import store as store_module
from evalkit.clients.store import APPLICATION_ID, ResponseStore, StoreError, StoreRefused, checksum
from evalkit.errors import UserError
from evalkit.report.console import summary_line

N = 12


def _records(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / "records" / "synth_qa__exact_match.jsonl").read_text().splitlines()
    return {record["sample_id"]: record for record in map(json.loads, lines)}


def _received(server: Any) -> list[str]:
    return [event["body_sha256"] for event in server.log_events("received")]


def test_a_changed_stored_answer_is_asked_again_counted_and_never_scored(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, N)
    server = make_server(request_log=True)
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)])
    clean = run(config)
    assert clean.requests_sent == N and clean.changed == 0
    first_requests = len(_received(server))

    # flip bytes inside one stored answer: "question 4" becomes "question 7" (valid JSON, another answer)
    store = tmp_path / "runs" / "responses.sqlite"
    with sqlite3.connect(store) as db:
        key, blob = next(
            (key, blob) for key, blob in db.execute("SELECT key, response FROM responses") if b"question 4" in blob
        )
        db.execute("UPDATE responses SET response = ? WHERE key = ?", (blob.replace(b"question 4", b"question 7"), key))
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)  # SQLite sees nothing wrong

    again = run(config)
    asked = _received(server)[first_requests:]
    assert len(asked) == 1 and again.requests_sent == 1 and again.store_hits == N - 1  # that sample alone, re-asked
    assert again.changed == 1
    assert ", 1 changed answer in the response store re-asked" in summary_line(again)
    manifest = json.loads((again.run_dir / "run.json").read_text())
    assert manifest["store"]["changed_answers"] == 1 and manifest["store"]["unverified_answers"] == 0
    clean_row, row = clean.rows[0], again.rows[0]
    assert (row.score, row.ci_low, row.ci_high, row.n) == (clean_row.score, clean_row.ci_low, clean_row.ci_high, N)
    assert _records(again.run_dir)["s00004"]["response"] == "question 4 w0"

    # the new answer replaced the changed one: a third run takes everything from the store
    third = run(config)
    assert third.requests_sent == 0 and third.changed == 0 and len(_received(server)) == first_requests + 1


def test_a_store_from_before_checksums_is_migrated_in_place_and_its_answers_used(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:  # the table as every evalkit before checksums wrote it
        db.execute(
            "CREATE TABLE responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, response BLOB NOT NULL, "
            "created REAL NOT NULL)"
        )
        db.execute("INSERT INTO responses VALUES ('old', 'm', ?, 1.0)", (b'{"text": "kept"}',))

    async def go() -> None:
        store = await ResponseStore(path).open()
        assert await store.get("old") == {"text": "kept"}
        assert store.unverified == 1 and store.changed == 0
        await store.put("new", "m", {"text": "checked"})
        await store.close()

    asyncio.run(go())
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
        rows = dict(db.execute("SELECT key, checksum FROM responses"))
        blob = db.execute("SELECT response FROM responses WHERE key = 'new'").fetchone()[0]
    assert rows["old"] is None and rows["new"] == checksum("new", blob)


def test_an_answer_too_large_for_the_store_fails_only_its_sample(
    tmp_path: Path, make_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's largest value is 1 GB; lowered to 64 KiB (for the store's check and SQLite's own limit alike) so a
    # 100 KB answer stands for a 1 GiB one without the memory
    monkeypatch.setattr(store_module, "_sqlite_length_limit", lambda: 64 * 1024)
    runspecs = text_set(tmp_path, N)
    server = make_server({"answers": [{"match": "question 5 ", "answer": "y" * 100_000}]}, request_log=True)
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url, retry_attempts=2)])
    out = run(config)
    record = _records(out.run_dir)["s00005"]
    assert record["failure"] == "unstorable" and record["score"] is None and record["response"] is None
    assert "larger than the response store" in record["error"] and "SQLite's largest value" in record["error"]
    assert record["attempts"] == 1  # not asked again: it would not fit the next time either
    row = out.rows[0]
    assert row.n == N - 1 and row.n_failed == 1 and row.failure_reasons == {"unstorable": 1}
    assert json.loads((out.run_dir / "run.json").read_text())["status"] == "finished"
    with sqlite3.connect(tmp_path / "runs" / "responses.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone() == (N - 1,)


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="lowering SQLite's own length limit needs sqlite3's setlimit (Python 3.11+)"
)
def test_a_row_sqlite_refuses_fails_alone_and_the_rest_of_its_batch_commits(tmp_path: Path) -> None:
    async def go() -> None:
        store = await ResponseStore(tmp_path / "s.sqlite", max_value_bytes=16 * 1024).open()
        store.max_value_bytes = 10**9  # past the store's own check: SQLite itself refuses the big row
        small, big, other = (
            store.put("a", "m", {"text": "a"}),
            store.put("b", "m", {"text": "b" * 32 * 1024}),
            store.put("c", "m", {"text": "c"}),
        )
        done = await asyncio.gather(small, big, other, return_exceptions=True)
        assert done[0] is None and done[2] is None
        assert isinstance(done[1], StoreRefused) and "string or blob too big" in str(done[1])
        assert await store.get("b") is None and (await store.get("c")) == {"text": "c"}
        assert store.stopped is None  # one refused row does not stop the store
        await store.put("d", "m", {"text": "d"})
        await store.close()

    asyncio.run(go())


def _foreign(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        db.execute("INSERT INTO invoices VALUES (1, 9.5)")
    return path.read_bytes()


def test_a_foreign_sqlite_file_is_refused_with_exit_2_and_left_untouched(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, 3)
    server = make_server(request_log=True)
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)])
    store = tmp_path / "runs" / "responses.sqlite"
    before = _foreign(store)

    result = evalkit_cli(["run", str(config), "--quiet"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"response store {store}: not an evalkit response store" in result.stderr
    assert "found no application_id and tables invoices" in result.stderr
    assert store.read_bytes() == before
    assert sorted(p.name for p in store.parent.iterdir() if p.is_file()) == ["responses.sqlite"]  # no -wal, no -shm
    assert server.log_events("received") == []  # refused before any request

    with pytest.raises(StoreError, match="leaves it untouched"):
        asyncio.run(ResponseStore(store).open())  # the dry run and rescore open it the same way
    assert store.read_bytes() == before


def test_a_run_folder_of_someone_elses_files_is_refused(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, 3)
    server = make_server()
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)])
    folder = tmp_path / "theirs"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds files evalkit did not make"):
        run(config, run_dir=str(folder))
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(config, run_dir=str(empty)).run_dir == empty  # an empty folder is fine
