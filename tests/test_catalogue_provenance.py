"""Every hub entry of the shipped catalogue says where and when it was checked against the hub.

An entry that names a Hugging Face repo (`hf_repo`) must carry a `checked`
record: the https page that was read, the ISO date of the check, and what was
compared (repo, config, split, columns, licence) and fixed. Local entries
(`path`) need none. The record is also validated through evalkit's own
schema, so a misspelt key fails here and in `evalkit list datasets` alike.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

REPO = Path(__file__).resolve().parent.parent
RUNSPECS = REPO / "runspecs"
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
RECORD_KEYS = {"url", "date", "what"}


def _entries() -> list[tuple[Path, str, dict[str, Any]]]:
    files = sorted(p for p in RUNSPECS.glob("*/*.json") if not p.parent.name.startswith(("_", ".")))
    return [
        (path, name, entry)
        for path in files
        for name, entry in json.loads(path.read_text(encoding="utf-8")).items()
        if name != "_task"
    ]


ENTRIES = _entries()
HUB_ENTRIES = [item for item in ENTRIES if "hf_repo" in item[2]]


def test_there_are_hub_entries_to_check() -> None:
    assert len(HUB_ENTRIES) >= 100


@pytest.mark.parametrize("item", HUB_ENTRIES, ids=lambda item: item[1])
def test_hub_entry_has_a_checked_record(item: tuple[Path, str, dict[str, Any]]) -> None:
    path, name, entry = item
    where = f"{path.relative_to(REPO)}: {name}"
    record = entry.get("checked")
    assert isinstance(record, dict), f"{where}: hub entry ({entry['hf_repo']}) without a `checked` record"
    assert set(record) == RECORD_KEYS, f"{where}: `checked` needs exactly {sorted(RECORD_KEYS)}, has {sorted(record)}"

    url = record["url"]
    parsed = urlparse(url) if isinstance(url, str) else None
    assert parsed is not None and parsed.scheme == "https" and parsed.netloc, (
        f"{where}: checked.url {url!r} is not an https URL"
    )
    assert " " not in url, f"{where}: checked.url contains a space"

    date = record["date"]
    assert isinstance(date, str) and ISO_DATE.fullmatch(date), f"{where}: checked.date {date!r} is not YYYY-MM-DD"
    day = dt.date.fromisoformat(date)  # raises on 2026-02-30 and the like
    assert dt.date(2020, 1, 1) <= day <= dt.date.today() + dt.timedelta(days=1), (
        f"{where}: checked.date {date} is implausible"
    )

    what = record["what"]
    assert isinstance(what, str) and len(what.strip()) >= 20, f"{where}: checked.what must say what was checked"


@pytest.mark.parametrize("item", HUB_ENTRIES, ids=lambda item: item[1])
def test_checked_record_names_the_entrys_own_repo_or_its_sources(item: tuple[Path, str, dict[str, Any]]) -> None:
    """The page read is on the hub for this repo, or the record says which other source it relied on."""
    path, name, entry = item
    record = entry.get("checked") or {}
    url, what = record.get("url", ""), record.get("what", "")
    owner = entry["hf_repo"].split("/")[0]
    on_own_page = f"huggingface.co/datasets/{entry['hf_repo']}" in url or url.rstrip("/").endswith(f"/datasets/{owner}")
    assert on_own_page or entry["hf_repo"] in what, (
        f"{path.relative_to(REPO)}: {name}: checked.url is not a page of {entry['hf_repo']}"
    )


def test_local_entries_need_no_record_but_may_not_carry_a_malformed_one() -> None:
    for path, name, entry in ENTRIES:
        if "path" in entry and "checked" in entry:
            assert set(entry["checked"]) == RECORD_KEYS, f"{path}: {name}: malformed `checked`"


def test_checked_records_load_through_evalkit() -> None:
    from evalkit.catalog import load_catalog

    catalog = load_catalog(cwd=REPO)
    for _, name, entry in HUB_ENTRIES:
        spec = catalog.datasets[name]
        assert spec.checked is not None, f"{name}: evalkit dropped the `checked` record"
        assert spec.checked.url == entry["checked"]["url"] and spec.checked.date == entry["checked"]["date"]
