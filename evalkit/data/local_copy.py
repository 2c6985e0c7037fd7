"""A lab's own copy of a hub dataset on its disk: which of its files hold the entry's subset and split.

Offline and air-gapped clusters keep the datasets they evaluate on their own
disks, in the layouts the hub's tools leave: a ``datasets`` ``save_to_disk``
folder (one split, or a ``dataset_dict.json`` naming several), parquet or arrow
files (one file, a folder of them, ``data/<split>-*.parquet``), or the hub
repository itself as ``snapshot_download`` / ``huggingface-cli download`` leave
it (subset folders, the ``configs`` of its README, the hub's parquet conversion
``<subset>/<split>/*.parquet``). The answer is a list of files evalkit reads
itself (:mod:`evalkit.data.loading`), so the copy is read without the hub and
without ``datasets``, whose audio decoding would need torchcodec.

The copy is input like any dataset: only files inside the folder given are
read. A symlink that leaves it is refused, except the one layout that is made
of them: a snapshot in the hub's cache (``.../snapshots/<revision>``), whose
files link to the same repository's ``blobs`` folder.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.data.files import LOCAL_SUFFIXES

#: what a local copy may be, for every message that refuses one
LAYOUTS = (
    "a `datasets` save_to_disk folder (Dataset or DatasetDict), a parquet or arrow file, a folder of them "
    "(data/<split>-*.parquet as the hub keeps them), or a snapshot of the hub repository (as snapshot_download or "
    "`huggingface-cli download` leave it)"
)
#: the file types a copy's data may come in: those evalkit reads itself
DATA_SUFFIXES = LOCAL_SUFFIXES
#: other names a split goes by in file names (the hub's own conventions, as ``datasets`` reads them)
SPLIT_NAMES = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
#: files a copy of a repository holds that are not data
_NOT_DATA = frozenset({"dataset_info.json", "state.json", "dataset_dict.json", "dataset_infos.json"})


class LocalCopyError(ValueError):
    """A local copy that cannot be read as the entry's data: the message says why and what was expected."""


@dataclass(frozen=True)
class LocalCopy:
    """The files of one subset and split of a local copy, in read order, and the layout they were found in."""

    root: Path
    files: tuple[Path, ...]
    layout: str


def find_copy(path: Path, subset: str | None, split: str) -> LocalCopy:
    """The files holding ``subset``/``split`` of the copy at ``path``; LocalCopyError when there are none."""
    if not path.exists():
        raise LocalCopyError(f"{path} does not exist")
    if path.is_file():
        if path.suffix not in DATA_SUFFIXES:
            raise LocalCopyError(f"{path} is not a data file ({', '.join(sorted(DATA_SUFFIXES))})")
        return LocalCopy(path, (path,), "file")
    return _in_folder(path, path, subset, split)


def _in_folder(root: Path, folder: Path, subset: str | None, split: str) -> LocalCopy:
    guard = _Guard(root)
    if (folder / "dataset_dict.json").is_file():
        splits = _read_json(folder / "dataset_dict.json").get("splits")
        if not isinstance(splits, list) or split not in splits:
            raise LocalCopyError(f"{folder}: a save_to_disk DatasetDict without split {split!r} (splits: {splits})")
        return LocalCopy(root, _saved_files(folder / split, guard), "save_to_disk DatasetDict")
    if (folder / "state.json").is_file():
        return LocalCopy(root, _saved_files(folder, guard), "save_to_disk Dataset")
    files = _data_files(folder, guard)
    configs = _card_configs(folder)
    if configs:
        return LocalCopy(root, _from_card(folder, configs, subset, split, files), "hub snapshot (README configs)")
    if subset is not None and (folder / subset).is_dir() and not (folder / subset).is_symlink():
        return _in_folder(root, folder / subset, None, split)
    picked = _split_files(folder, files, split)
    if picked:
        return LocalCopy(root, picked, "hub layout (<split> files)")
    if files and not any(_split_of(folder, f) for f in files):
        return LocalCopy(root, tuple(files), "folder of data files")  # no file names a split: the copy is the one split
    found = sorted({s for f in files if (s := _split_of(folder, f))})
    what = f"its data files are of split(s) {', '.join(found)}" if found else "it holds no data files"
    raise LocalCopyError(f"{folder}: no data of {f'subset {subset!r}, ' if subset else ''}split {split!r}: {what}")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise LocalCopyError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(data, dict):
        raise LocalCopyError(f"{path}: expected a JSON object")
    return data


def _saved_files(folder: Path, guard: _Guard) -> tuple[Path, ...]:
    """The arrow files of one ``save_to_disk`` split, in the order its ``state.json`` lists them."""
    state = _read_json(folder / "state.json")
    entries = state.get("_data_files")
    if not isinstance(entries, list) or not entries:
        raise LocalCopyError(f"{folder / 'state.json'}: lists no data files (_data_files)")
    files = []
    for entry in entries:
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str) or Path(name).name != name or not name.endswith(".arrow"):
            raise LocalCopyError(f"{folder / 'state.json'}: _data_files names {name!r}, not an arrow file beside it")
        files.append(guard.check(folder / name))
    return tuple(files)


def _data_files(folder: Path, guard: _Guard) -> list[Path]:
    """Every data file under ``folder`` (hidden folders such as ``.cache`` left out), symlinked folders not entered."""
    found: list[Path] = []
    for current, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(current) / name
            if path.suffix in DATA_SUFFIXES and name not in _NOT_DATA and not name.startswith("."):
                found.append(guard.check(path))
    return found


def _card_configs(folder: Path) -> list[dict[str, Any]]:
    """The ``configs`` of the repository's README front matter (subset names and their files per split)."""
    readme = folder / "README.md"
    if not readme.is_file():
        return []
    try:
        text = readme.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    match = re.match(r"---\s*\n(.*?)\n---\s*(\n|$)", text, re.DOTALL)
    if match is None:
        return []
    import yaml

    try:
        card = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return []
    configs = card.get("configs") if isinstance(card, dict) else None
    return [c for c in configs if isinstance(c, dict) and "config_name" in c] if isinstance(configs, list) else []


def _from_card(
    folder: Path, configs: list[dict[str, Any]], subset: str | None, split: str, files: list[Path]
) -> tuple[Path, ...]:
    names = [str(c["config_name"]) for c in configs]
    if subset is None:
        chosen = next((c for c in configs if c.get("default")), None) or next(
            (c for c in configs if c["config_name"] == "default"), configs[0] if len(configs) == 1 else None
        )
        if chosen is None:
            raise LocalCopyError(f"{folder}: README.md lists subsets {', '.join(names)}; the entry names none")
    else:
        chosen = next((c for c in configs if str(c["config_name"]) == subset), None)
        if chosen is None:
            raise LocalCopyError(f"{folder}: README.md lists subsets {', '.join(names)}, not {subset!r}")
    patterns = _split_patterns(chosen.get("data_files"), split)
    if patterns is None:
        raise LocalCopyError(f"{folder}: README.md's subset {chosen['config_name']!r} has no split {split!r}")
    matchers = [_glob(p) for p in patterns]
    picked = tuple(f for f in files if any(m.fullmatch(f.relative_to(folder).as_posix()) for m in matchers))
    if not picked:
        raise LocalCopyError(
            f"{folder}: README.md's subset {chosen['config_name']!r}, split {split!r} names {', '.join(patterns)}, "
            "and no data file of the copy matches"
        )
    return picked


def _split_patterns(data_files: Any, split: str) -> list[str] | None:
    """The file patterns of ``split`` in a card's ``data_files`` (a pattern alone is the ``train`` split)."""
    if isinstance(data_files, str):
        data_files = [{"split": "train", "path": data_files}]
    if isinstance(data_files, list) and all(isinstance(p, str) for p in data_files):
        data_files = [{"split": "train", "path": data_files}]
    if not isinstance(data_files, list):
        return None
    for item in data_files:
        if isinstance(item, dict) and item.get("split") == split:
            path = item.get("path")
            return [path] if isinstance(path, str) else [str(p) for p in path or []]
    return None


def _glob(pattern: str) -> re.Pattern[str]:
    """A hub file pattern as a regular expression: ``*`` within one folder, ``**`` across folders."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def _names(parts: tuple[str, ...], name: str) -> bool:
    """Whether a file's path names a split the hub's way: a ``<name>`` folder, ``<name>-*`` or ``<name>.*``."""
    return name in parts[:-1] or re.match(rf"{re.escape(name)}([-._ 0-9]|$)", parts[-1]) is not None


def _split_of(folder: Path, path: Path) -> str | None:
    """The standard split (train, validation, test) a file's path names, under any of its names."""
    parts = path.relative_to(folder).parts
    return next((split for split, names in SPLIT_NAMES.items() if any(_names(parts, n) for n in names)), None)


def _split_files(folder: Path, files: list[Path], split: str) -> tuple[Path, ...]:
    """The files whose path names ``split`` (or, for a standard split, one of its other names)."""
    names = SPLIT_NAMES.get(split, (split,))
    return tuple(f for f in files if any(_names(f.relative_to(folder).parts, n) for n in names))


class _Guard:
    """Every file read lies inside the copy given (or, for a hub cache snapshot, in its repository's blobs)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        repo = self.root.parent.parent
        self.blobs = repo / "blobs" if self.root.parent.name == "snapshots" and (repo / "blobs").is_dir() else None

    def check(self, path: Path) -> Path:
        resolved = path.resolve()
        if resolved.is_relative_to(self.root) or (self.blobs is not None and resolved.is_relative_to(self.blobs)):
            return path
        raise LocalCopyError(
            f"{path} resolves to {resolved}, outside the copy {self.root}; evalkit reads a copy's files only inside "
            "the folder given (copy the file there instead of linking it)"
        )
