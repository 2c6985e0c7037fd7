"""Where ``evalkit merge`` writes: a hidden folder beside the target, renamed into place once it is complete.

A merge killed midway must not leave a ``run.json`` saying "running" beside
an earlier merge's results, nor half of its records mixed with theirs. So the
merged folder is built in ``.<name>.merging-<pid>-<hex>`` next to the target
and renamed to the target's name only when it is whole; an earlier merge's
folder is moved aside first and removed after. A kill leaves the earlier
results untouched and the unfinished build hidden (its run.json says
"running"); the next merge beside it removes such leftovers whose process is
gone.

``--output`` is never written through: a link (the folder itself, or
``records/`` or any file in it) is refused, and so is a folder holding
anything an earlier merge did not write there, since replacing it would
delete what evalkit did not make.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
from pathlib import Path

from evalkit.errors import UserError

#: the entries of a merged folder (anything else in an earlier merge's folder is someone else's); ``index`` holds
#: the viewer's indexes, written once the merged folder is in place (evalkit.view.runindex)
MERGED_ENTRIES = frozenset({"run.json", "results.json", "results.csv", "results.md", "report.html", "records", "index"})
#: a crash-safe write's temporary file (evalkit.util.atomic), which a kill can leave
_ATOMIC_TMP = re.compile(r"^\..+\.\d+\.tmp$")
_BUILDING = re.compile(r"^\.(?P<name>.+)\.merging-(?P<pid>\d+)-[0-9a-f]+$")


def check_output(target: Path) -> None:
    """Refuse an ``--output`` that is a link, not a folder, or holds what an earlier merge did not write."""
    if target.is_symlink():
        raise UserError(f"merge --output {target}: a symbolic link; give a real folder (evalkit writes no link)")
    if not target.exists():
        return
    if not target.is_dir():
        raise UserError(f"merge --output {target}: not a folder; expected a new or empty folder")
    if not any(target.iterdir()):
        return
    if not _earlier_merge(target):
        raise UserError(
            f"merge --output {target}: holds files that are not an earlier merge's; expected a new or empty folder "
            "(or the folder of an earlier `evalkit merge`, which is replaced)"
        )
    for entry in sorted(target.iterdir()):
        if entry.name not in MERGED_ENTRIES and not _ATOMIC_TMP.match(entry.name):
            raise UserError(
                f"merge --output {entry}: an earlier merge did not write it; evalkit replaces only a folder it made "
                "whole: move it out, or choose another folder"
            )
        if entry.is_symlink():
            raise UserError(f"merge --output {entry}: a symbolic link; evalkit writes no link (remove it)")
    for made in (target / "records", target / "index"):
        if made.exists() and not made.is_dir():
            raise UserError(f"merge --output {made}: not a folder; an earlier merge's {made.name}/ is a folder")
        for folder, dirs, files in os.walk(made, followlinks=False):
            for name in [*dirs, *files]:
                path = Path(folder) / name
                if path.is_symlink():
                    raise UserError(f"merge --output {path}: a symbolic link; evalkit writes no link (remove it)")


def _earlier_merge(folder: Path) -> bool:
    try:
        data = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool(data.get("merged"))


def start_building(target: Path) -> Path:
    """A new hidden folder beside ``target`` for the merge to write into (the target's parent is made if needed)."""
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"merge --output {target}: cannot make its folder: {error.strerror or error}") from None
    remove_leftovers(parent)
    building = parent / f".{target.name}.merging-{os.getpid()}-{secrets.token_hex(3)}"
    building.mkdir()
    return building


def remove_leftovers(parent: Path) -> None:
    """Unfinished builds of killed merges in ``parent`` (their process gone, their run.json a merge's): removed."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            match = _BUILDING.match(entry.name)
            if match is None or entry.is_symlink() or not entry.is_dir() or _alive(int(match["pid"])):
                continue
            if _earlier_merge(entry) or not any(entry.iterdir()):
                shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process builds one merge at a time: an older build of its own is a leftover
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: not ours to judge
    return True


def put_in_place(building: Path, target: Path) -> None:
    """Rename the finished build to ``target``; an earlier merge there is moved aside, then removed."""
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        target.rmdir()
    if not target.exists():
        os.rename(building, target)
        return
    aside = target.parent / f".{target.name}.replaced-{secrets.token_hex(3)}"
    os.rename(target, aside)
    try:
        os.rename(building, target)
    except OSError:
        os.rename(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)
