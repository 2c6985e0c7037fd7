"""Checksums of what a finished run folder holds for others to read: ``records/`` and ``results.json``.

A shard's folder is handed from one machine to another and then merged; a
merge that trusted it would let an edited record line move a score, and a
deleted or duplicated line pass unnoticed. When a run finishes it lists, in
run.json's ``checksums``, the SHA-256 and size of ``results.json`` and of every
file under ``records/`` (computed streaming, a megabyte at a time), and
:func:`verify_checksums` refuses a folder whose files differ from that list:
a changed, missing, added or linked file, each named in one line.

These are checksums, not signatures: they catch damage, partial copies and
edits of the data files, not someone who also rewrites run.json. What a merge
checks beyond them (every planned sample once, the shard's own samples only)
lives in :mod:`evalkit.run.merge`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from evalkit.errors import UserError

#: run.json's key for the list
CHECKSUMS = "checksums"
#: the files a checksum list covers: results.json and everything under records/
RESULTS = "results.json"
RECORDS = "records"
_CHUNK = 1 << 20


class ChecksumError(UserError):
    """A run folder's files differ from the checksums its run.json lists (or it lists none)."""


def file_digest(path: Path) -> tuple[str, int]:
    """(SHA-256 hex, size in bytes) of one file, read a megabyte at a time (records may be gigabytes)."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def covered_files(run_dir: Path) -> dict[str, Path]:
    """Relative POSIX name -> path of every entry the checksums cover, links included (never followed)."""
    found: dict[str, Path] = {}
    results = run_dir / RESULTS
    if results.exists() or results.is_symlink():
        found[RESULTS] = results
    records = run_dir / RECORDS
    if records.is_symlink() or (records.exists() and not records.is_dir()):
        found[RECORDS] = records
        return found
    for folder, dirs, files in os.walk(records, followlinks=False):
        base = Path(folder)
        for name in [*files, *(d for d in dirs if (base / d).is_symlink())]:
            path = base / name
            found[path.relative_to(run_dir).as_posix()] = path
    return found


def folder_checksums(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The checksum list a finished run writes into its run.json (regular files only, sorted by name)."""
    listed: dict[str, dict[str, Any]] = {}
    for name, path in sorted(covered_files(run_dir).items()):
        if path.is_symlink() or not path.is_file():
            continue  # the run made no such thing: a verifying reader refuses it as unlisted
        sha256, size = file_digest(path)
        listed[name] = {"sha256": sha256, "bytes": size}
    return listed


def verify_checksums(run_dir: Path, listed: Any, what: str) -> None:
    """Refuse ``run_dir`` (ChecksumError naming the file, starting with ``what``) unless it holds exactly ``listed``.

    Each listed file must be a regular file inside the folder (no link) with the listed size and SHA-256;
    no other file may lie under ``records/``; ``results.json`` must be listed when present.
    """
    manifest = run_dir / "run.json"
    if not isinstance(listed, dict) or not all(
        isinstance(entry, dict) and isinstance(entry.get("sha256"), str) and isinstance(entry.get("bytes"), int)
        for entry in listed.values()
    ):
        raise ChecksumError(f"{what} {manifest}: unreadable `{CHECKSUMS}` entry; run the shard again")
    present = covered_files(run_dir)
    root = run_dir.resolve()
    for name, entry in sorted(listed.items()):
        path = run_dir / name
        if name not in present or not (name == RESULTS or name.startswith(RECORDS + "/")):
            raise ChecksumError(
                f"{what} {path}: listed in {manifest} but missing; the folder is incomplete: copy it again or run "
                "the shard again"
            )
        if path.is_symlink() or not path.is_file() or not path.resolve().is_relative_to(root):
            raise ChecksumError(f"{what} {path}: not a regular file inside the run folder (a link?); refused")
        sha256, size = file_digest(path)
        if (sha256, size) != (entry["sha256"], entry["bytes"]):
            raise ChecksumError(
                f"{what} {path}: does not match its checksum in {manifest} ({size} bytes, sha256 {sha256[:12]}…; "
                f"listed {entry['bytes']} bytes, {str(entry['sha256'])[:12]}…): the file was changed or damaged "
                "after the run finished; run the shard again"
            )
    extra = sorted(set(present) - set(listed))
    if extra:
        more = f" and {len(extra) - 1} more" if len(extra) > 1 else ""
        raise ChecksumError(
            f"{what} {run_dir / extra[0]}{more}: not listed in {manifest}'s `{CHECKSUMS}`: the run did not write it; "
            "remove it, or run the shard again"
        )
