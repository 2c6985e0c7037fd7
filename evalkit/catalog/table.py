"""The catalogue's datasets by name, each entry validated the first time it is read.

A run names a few of the catalogue's ~600 entries; validating all of them (and
building every other tool's variant of them) cost a run's start-up more than
its own work. So the catalogue reads every runspec file (the names, the
tasks and the conflicts between definitions are known at once) and keeps each
entry as written until something reads it: ``catalog.datasets[name]`` validates
that entry, ``values()``/``items()`` all of them, and :meth:`DatasetTable.check`
all of them without keeping anything else. A broken entry is reported, with its
file and key, by whatever reads it; ``load_catalog(check=True)`` (listings,
``evalkit validate``) reads them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalkit.catalog.specs import DatasetSpec
from evalkit.errors import RunspecError, did_you_mean


@dataclass(frozen=True)
class WrittenEntry:
    """A dataset entry as its runspec file wrote it, and where: what validating it needs."""

    name: str
    entry: dict[str, Any]
    task: str
    category: str
    file: Path

    def validate(self) -> DatasetSpec:
        try:
            return DatasetSpec.model_validate(
                {**self.entry, "name": self.name, "task": self.task, "category": self.category, "file": str(self.file)}
            )
        except ValidationError as error:
            raise RunspecError(format_runspec_error(error, self.file, self.name)) from None


#: what the table holds for a name: the entry validated, the entry as written, or how to build it (a variant)
Held = DatasetSpec | WrittenEntry | Callable[[], DatasetSpec]


class DatasetTable(MutableMapping[str, DatasetSpec]):
    """Datasets by name, in the order they were read; an entry is validated when it is first read.

    Membership, names and length never validate; reading an entry validates
    it once, and a broken one raises :class:`RunspecError` each time it is read.
    """

    def __init__(self, entries: Mapping[str, DatasetSpec] | None = None) -> None:
        self._held: dict[str, Held] = dict(entries or {})
        #: the entries read from runspec files, as written (kept after validation: conflicts compare them)
        self._written: dict[str, WrittenEntry] = {}
        #: the datasets made from others (other tools' variants), not written in any file
        self._made: set[str] = set()

    def __getitem__(self, name: str) -> DatasetSpec:
        held = self._held[name]
        if isinstance(held, DatasetSpec):
            return held
        spec = held.validate() if isinstance(held, WrittenEntry) else held()
        self._held[name] = spec
        return spec

    def __setitem__(self, name: str, value: DatasetSpec) -> None:
        self._held[name] = value
        self._written.pop(name, None)
        self._made.discard(name)

    def __delitem__(self, name: str) -> None:
        del self._held[name]
        self._written.pop(name, None)
        self._made.discard(name)

    def __contains__(self, name: object) -> bool:
        return name in self._held

    def __iter__(self) -> Iterator[str]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def __repr__(self) -> str:
        return f"DatasetTable({len(self._held)} datasets)"

    def add_written(self, written: WrittenEntry) -> None:
        """Keep an entry as written, validated when it is read."""
        self._held[written.name] = written
        self._written[written.name] = written
        self._made.discard(written.name)

    def add_made(self, name: str, make: Callable[[], DatasetSpec]) -> None:
        """Keep a dataset made from others (another tool's variant of an entry), made when it is read."""
        self._held[name] = make
        self._written.pop(name, None)
        self._made.add(name)

    def written(self, name: str) -> WrittenEntry | None:
        """The entry as its runspec file wrote it (validated since or not); None for one not read from a file."""
        return self._written.get(name)

    def is_made(self, name: str) -> bool:
        """Whether ``name`` is a dataset made from another entry (a variant) rather than one a file wrote."""
        return name in self._made

    def value(self, name: str, key: str, default: Any = None) -> Any:
        """One key of a dataset without validating it: as written for an entry not read yet, else the spec's."""
        held = self._held[name]
        if isinstance(held, WrittenEntry):
            return held.entry.get(key, default)
        return getattr(self[name], key, default)

    def check(self) -> None:
        """Validate every dataset: the first broken entry (in the order read) raises, naming its file and key."""
        for name in self._held:
            self[name]


def format_runspec_error(error: ValidationError, path: Path, name: str) -> str:
    """pydantic's errors as evalkit words them: one line per problem, naming the file, the entry and the key."""
    lines = []
    known = list(DatasetSpec.model_fields) + ["additional_instruction_column"]
    for item in error.errors():
        loc = ".".join(str(p) for p in item["loc"])
        if item["type"] == "extra_forbidden":
            lines.append(f"{path}: {name}.{loc}: unknown key{did_you_mean(str(item['loc'][-1]), known)}")
        elif item["type"] == "missing":
            lines.append(f"{path}: {name}.{loc}: missing mandatory key")
        else:
            where = f"{name}.{loc}" if loc else name
            lines.append(f"{path}: {where}: {item['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)
