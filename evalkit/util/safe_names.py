"""File names made from names evalkit did not choose: datasets, metrics, models, hub repos.

A runspec may name a dataset ``../..`` or ``/etc/passwd``, a model may be
called ``CON`` or ``数据集``, a plugin metric may hold a NUL byte. Every file
or folder evalkit names after such a thing goes through :func:`safe_name`,
and every path it then opens is checked by :func:`inside`, so nothing is
ever written outside the folder it belongs in. The two together are
:func:`safe_path`; readers find the files by the same function (or read the
original names from the records, which always keep them).

Why each rule:

- only ``[A-Za-z0-9._+-]`` and letters/digits of other scripts survive; path
  separators, NUL, control and shell characters become ``_``;
- no leading dot (``.``, ``..``, hidden files), no leading ``-`` (a name read
  as an option), no trailing dot or space (Windows drops them);
- Windows device names (``CON``, ``NUL``, ``COM1``, also ``nul.jsonl``)
  get a leading ``_``;
- at most :data:`MAX_BYTES` bytes in UTF-8 (file systems allow 255 bytes; the
  rest is room for an atomic write's temporary prefix);
- whenever a name was changed, is long, has capitals or non-ASCII letters
  (two names that differ only in case or in Unicode normal form are one
  file on macOS and Windows), or joins parts that contain the separator, a
  short hash of the original parts is appended, so two different names never
  give the same file. Names that are already safe stay exactly as they were,
  so the files of existing runs keep their names.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path

from evalkit.errors import UserError

#: the longest file name made here, in UTF-8 bytes (255 is the usual limit; atomic writes add a prefix)
MAX_BYTES = 200
#: hex digits of the hash that keeps changed names apart (40 bits)
HASH_CHARS = 10
_PLAIN = re.compile(r"[a-z0-9._+-]+")
_HASHED_TAIL = re.compile(rf"-[0-9a-f]{{{HASH_CHARS}}}$")
_WINDOWS_DEVICES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{prefix}{n}" for prefix in ("COM", "LPT") for n in [*"123456789", "¹", "²", "³"]}
)


class UnsafePathError(UserError):
    """A path evalkit was about to open lies outside the folder it belongs in (a symlink planted there)."""


def _keep(char: str) -> bool:
    if char.isascii():
        return char.isalnum() or char in "._+-"
    return char.isalnum()


def _slug(text: str) -> str:
    out: list[str] = []
    for char in unicodedata.normalize("NFC", text):
        if _keep(char):
            out.append(char)
        elif not out or out[-1] != "_":
            out.append("_")
    slug = "".join(out).lstrip(".-").rstrip(". ")
    if slug.split(".", 1)[0].upper() in _WINDOWS_DEVICES:
        slug = "_" + slug
    return slug


def _truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: max(0, limit)].decode("utf-8", errors="ignore").rstrip(". ")


def name_hash(*parts: str) -> str:
    """The short hash of the original parts that keeps changed names apart."""
    key = json.dumps(list(parts), ensure_ascii=True)  # ASCII: lone surrogates and NUL hash too
    return hashlib.sha256(key.encode("ascii")).hexdigest()[:HASH_CHARS]


def safe_name(
    *parts: str, sep: str = "__", suffix: str = "", max_bytes: int = MAX_BYTES, unique_already: bool = False
) -> str:
    """A file name for ``parts`` joined by ``sep`` (plus ``suffix``, e.g. ``.jsonl``) that is safe and unique.

    ``safe_name("librispeech", "wer", suffix=".jsonl")`` is ``librispeech__wer.jsonl``;
    ``safe_name("../..", "wer", suffix=".jsonl")`` is ``_..__wer-<hash>.jsonl``.
    ``unique_already``: the name holds its own digest of what it stands for (a cache folder), so a changed
    name gets no second hash unless it is too long.
    """
    texts = [str(part) for part in parts]
    joined = sep.join(texts)
    slug = _slug(joined) or "_"
    if unique_already and len((slug + suffix).encode("utf-8")) <= max_bytes:
        return slug + suffix
    needs_hash = (
        slug != joined
        or not _PLAIN.fullmatch(joined)  # capitals, non-ASCII letters
        or (len(texts) > 1 and any(sep in text for text in texts))  # ("a__b", "c") vs ("a", "b__c")
        or bool(_HASHED_TAIL.search(joined))  # a safe name that looks like a hashed one stays apart from it
        or len((joined + suffix).encode("utf-8")) > max_bytes
    )
    if not needs_hash:
        return joined + suffix
    tail = f"-{name_hash(*texts)}{suffix}"
    room = max_bytes - len(tail.encode("utf-8"))
    return (_truncate(slug, room) or "_") + tail


def inside(root: str | Path, *names: str) -> Path:
    """``root / names...``, after checking that it resolves inside ``root`` (symlinks followed).

    The one check every write of a named file passes: even a safe name can point
    outside when a symlink was planted in the folder.
    """
    base = Path(root)
    path = base.joinpath(*names)
    resolved_root = base.resolve()
    resolved = path.resolve()
    if resolved == resolved_root or not resolved.is_relative_to(resolved_root):
        raise UnsafePathError(
            f"{path}: resolves to {resolved}, outside {resolved_root}; evalkit writes only inside that folder "
            "(remove the link or pick another output_dir)"
        )
    return path


def safe_path(root: str | Path, *parts: str, sep: str = "__", suffix: str = "") -> Path:
    """:func:`inside` ``root`` at :func:`safe_name` of ``parts``: the path of a file named after user-given names."""
    return inside(root, safe_name(*parts, sep=sep, suffix=suffix))
