"""A damaged response store never stops a run, and is never repaired, moved or deleted.

Real stores written by real runs against the test server, then damaged byte
for byte as a failing disk would (a page's header and cell pointers
overwritten): `evalkit run` in a child process warns once naming the file,
copies what still reads and verifies into ``responses.replacement.sqlite``,
asks the rest again, scores as a clean run and exits 0, leaving the damaged
file as it was. ``--resume`` finds the same replacement; ``--resume
--no-cache`` finishes the folder asking everything again. A page that turns
bad while the store is open moves the writes to the replacement mid-run.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, evalkit_cli, model_entry, text_set

from evalkit.clients.store import ResponseStore

N = 60
#: SQLite's b-tree page types (the first byte of a page's header)
TABLE_LEAF, INDEX_LEAF = 0x0D, 0x0A


def _pages(path: Path, kind: int) -> list[int]:
    """The numbers (from 1) of the pages of ``kind`` in the SQLite file at ``path``."""
    data = path.read_bytes()
    size = int.from_bytes(data[16:18], "big")
    size = 65536 if size == 1 else size
    found = []
    for number in range(2, len(data) // size + 1):  # page 1 holds the schema
        if data[(number - 1) * size] == kind:
            found.append(number)
    return found


def _damage(path: Path, page: int) -> None:
    """Overwrite a page's header and cell pointers with 0xFF, as a bad sector would leave it."""
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    start = (page - 1) * size
    data[start : start + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))


def _quick_check(path: Path) -> str:
    try:
        with sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True) as db:
            return str(db.execute("PRAGMA quick_check").fetchone()[0])
    except sqlite3.DatabaseError as error:
        return str(error)


def _summary(stdout: str) -> tuple[int, int]:
    """(requests sent, answers from the store) from the run's summary line."""
    found = re.search(r"(\d+) requests sent, (\d+) answers from the response store", stdout)
    assert found, stdout
    return int(found[1]), int(found[2])


def _score(stdout: str) -> tuple[dict[str, Any], Path]:
    run_dir = Path(re.search(r"Records: (\S+)/records", stdout)[1])  # type: ignore[index]
    results = json.loads((run_dir / "results.json").read_text())
    row = next(r for r in results["results"] if r["model"] == "m")
    return {key: row[key] for key in ("score", "ci_low", "ci_high", "n", "n_failed")}, run_dir


def _clean_run(tmp_path: Path, server: Any) -> tuple[Path, Path, dict[str, Any]]:
    runspecs = text_set(tmp_path, N, words=40)
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)])
    first = evalkit_cli(["run", str(config)], tmp_path)
    assert first.returncode == 0, first.stderr
    assert _summary(first.stdout) == (N, 0)
    return config, tmp_path / "runs" / "responses.sqlite", _score(first.stdout)[0]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
@pytest.mark.parametrize("kind", [TABLE_LEAF, INDEX_LEAF], ids=["table-page", "index-page"])
def test_a_damaged_store_is_set_aside_untouched_and_the_run_scores_as_a_clean_one(
    tmp_path: Path, make_server, kind: int
) -> None:
    server = make_server(request_log=True)
    config, store, clean = _clean_run(tmp_path, server)
    pages = _pages(store, kind)
    assert len(pages) >= 2, pages
    _damage(store, pages[len(pages) // 2])
    assert _quick_check(store) != "ok"  # SQLite itself sees the damage
    damaged = store.read_bytes()

    again = evalkit_cli(["run", str(config)], tmp_path)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    replacement = store.with_name("responses.replacement.sqlite")
    warning = [line for line in again.stderr.splitlines() if "is damaged" in line]
    assert len(warning) == 1, again.stderr
    assert f"response store {store} is damaged (SQLite: " in warning[0]
    assert "evalkit leaves it untouched" in warning[0] and str(replacement) in warning[0]
    score, run_dir = _score(again.stdout)
    assert score == clean
    sent, stored = _summary(again.stdout)
    assert sent + stored == N and stored > 0  # what still reads is used, the rest asked again
    if kind == INDEX_LEAF:
        assert sent == 0  # the table is whole: every answer was saved
    else:
        assert sent > 0
    assert f"damaged response store {store} left untouched (answers kept in {replacement})" in again.stdout
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "finished"
    assert manifest["store"]["damaged"]["path"] == str(store.resolve())
    assert manifest["store"]["damaged"]["replacement"] == str(replacement.resolve())
    assert manifest["store"]["damaged"]["answers_saved"] == stored
    # the damaged file: byte for byte as it was, and nothing made beside it but the replacement
    assert store.read_bytes() == damaged
    assert sorted(p.name for p in store.parent.iterdir() if p.is_file()) == [
        "responses.replacement.sqlite",
        "responses.sqlite",
    ]

    # --resume of that run takes every answer from the replacement; --resume --no-cache asks everything again
    resumed = evalkit_cli(["run", str(config), "--resume", str(run_dir)], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _summary(resumed.stdout) == (0, N) and _score(resumed.stdout)[0] == clean
    uncached = evalkit_cli(["run", str(config), "--resume", str(run_dir), "--no-cache"], tmp_path)
    assert uncached.returncode == 0, uncached.stderr
    assert _summary(uncached.stdout) == (N, 0) and _score(uncached.stdout)[0] == clean
    assert json.loads((run_dir / "run.json").read_text())["store"]["enabled"] is False
    assert store.read_bytes() == damaged


def test_a_page_damaged_while_the_store_is_open_moves_the_writes_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"

    async def fill() -> None:
        store = await ResponseStore(path).open()
        await asyncio.gather(*(store.put(f"k{i:03d}", "m", {"text": f"answer {i} " + "x" * 300}) for i in range(80)))
        await store.close()

    asyncio.run(fill())

    async def go() -> None:
        store = await ResponseStore(path).open()
        assert store.damaged is None and await store.get("k001") is not None
        for page in _pages(path, TABLE_LEAF) + _pages(path, INDEX_LEAF):  # every page a write may touch
            _damage(path, page)
        before = path.read_bytes()
        assert await store.get("k050") is None  # a damaged read is a miss, asked again: no error
        await store.put("new", "m", {"text": "kept"})  # its commit meets the damage: written beside instead
        assert store.damaged == path and store.path == path.with_name("responses.replacement.sqlite")
        assert store.stopped is None
        assert await store.get("new") == {"text": "kept"}
        await store.put("later", "m", {"text": "also kept"})
        await store.close()
        assert path.read_bytes() == before

    asyncio.run(go())
    with sqlite3.connect(path.with_name("responses.replacement.sqlite")) as db:
        keys = {key for (key,) in db.execute("SELECT key FROM responses")}
    assert {"new", "later"} <= keys


def test_a_damaged_file_that_is_not_recognisably_evalkits_is_refused_with_what_to_do(
    tmp_path: Path, make_server
) -> None:
    server = make_server()
    config, store, _ = _clean_run(tmp_path, server)
    data = bytearray(store.read_bytes())
    data[:100] = b"\x00" * 100  # the header gone: no SQLite magic, no application_id
    store.write_bytes(bytes(data))
    result = evalkit_cli(["run", str(config), "--quiet"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"response store {store}" in lines[0] and "move it away" in lines[0].lower(), lines
    assert store.read_bytes() == bytes(data)
