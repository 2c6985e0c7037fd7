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
from typing import Any, TypeVar

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


class Once:
    """A step run at most once, by whichever of its users needs it first (re-entered while it runs: nothing)."""

    def __init__(self, step: Callable[[], None]) -> None:
        self._step: Callable[[], None] | None = step

    def __call__(self) -> None:
        step, self._step = self._step, None
        if step is not None:
            step()


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
        #: what adds the datasets made from other tools' name tables, until it has run (see :meth:`defer`)
        self._pending: Once | None = None

    def defer(self, complete: Once) -> None:
        """Names the table does not hold yet are added by ``complete``: run before a name is missed or all are listed.

        A run that names its datasets as the catalogue does never reads other tools' name tables; any other
        question (an unknown name, every name, the length) has the table completed first.
        """
        self._pending = complete

    def _settle(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending()

    def __getitem__(self, name: str) -> DatasetSpec:
        if name not in self._held:
            self._settle()
        held = self._held[name]
        if isinstance(held, DatasetSpec):
            return held
        spec = held.validate() if isinstance(held, WrittenEntry) else held()
        self._held[name] = spec
        return spec

    def __setitem__(self, name: str, value: DatasetSpec) -> None:
        self._settle()
        self._held[name] = value
        self._written.pop(name, None)
        self._made.discard(name)

    def __delitem__(self, name: str) -> None:
        self._settle()
        del self._held[name]
        self._written.pop(name, None)
        self._made.discard(name)

    def __contains__(self, name: object) -> bool:
        if name in self._held:
            return True
        self._settle()
        return name in self._held

    def __iter__(self) -> Iterator[str]:
        self._settle()
        return iter(self._held)

    def __len__(self) -> int:
        self._settle()
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
        self._settle()
        return name in self._made

    def own_names(self) -> list[str]:
        """The names of the datasets held but those made from others, in the order read (no name table is read)."""
        return [name for name in self._held if name not in self._made]

    def value(self, name: str, key: str, default: Any = None) -> Any:
        """One key of a dataset without validating it: as written for an entry not read yet, else the spec's."""
        if name not in self._held:
            self._settle()
        held = self._held[name]
        if isinstance(held, WrittenEntry):
            return held.entry.get(key, default)
        return getattr(self[name], key, default)

    def check(self) -> None:
        """Validate every dataset: the first broken entry (in the order read) raises, naming its file and key."""
        self._settle()
        for name in self._held:
            self[name]


V = TypeVar("V")


class Deferred(MutableMapping[str, V]):
    """A mapping filled by a step run when it is first read: other tools' name tables, the aliases of datasets.

    AU-Harness's name table alone is some 260 KB of JSON, and the aliases are derived from every entry: a run
    whose every name is the catalogue's own reads neither. Storing into it (what the step does) runs nothing.
    """

    def __init__(self, fill: Once) -> None:
        self._items: dict[str, V] = {}
        self._pending: Once | None = fill

    def _settle(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending()

    def __getitem__(self, key: str) -> V:
        self._settle()
        return self._items[key]

    def __setitem__(self, key: str, value: V) -> None:
        self._items[key] = value

    def __delitem__(self, key: str) -> None:
        self._settle()
        del self._items[key]

    def __iter__(self) -> Iterator[str]:
        self._settle()
        return iter(self._items)

    def __len__(self) -> int:
        self._settle()
        return len(self._items)

    def __repr__(self) -> str:
        return f"Deferred({'unread' if self._pending is not None else sorted(self._items)})"


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
