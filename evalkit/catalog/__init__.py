"""Runspec discovery: dataset name, task (file stem) and category (folder) resolution.

Runspecs are read from, in order: the runspecs that ship with evalkit, the
``runspecs/`` folder beside the config file (the working directory's without
one), and every folder named by the config's ``runspecs_dir``. A dataset name
defined twice with two different definitions is an error, so a private dataset
can never silently shadow a public one; the same definition found twice (the
installed catalogue and a checkout's ``runspecs/``) is read once.

The shipped runspecs live at the top of the repository (``runspecs/``); the
wheel carries them inside the package (``evalkit/runspecs/``, mapped in
``setup.py``), so an installed evalkit finds them there first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalkit.catalog.specs import (
    PACKAGE_PATH_PREFIX,
    SHIPPED_RUNSPECS,
    CheckedRecord,
    DatasetSpec,
    GenerationSettings,
    TaskSpec,
    resolve_runspec_path,
)
from evalkit.catalog.table import DatasetTable, Deferred, Once, WrittenEntry, format_runspec_error
from evalkit.errors import RunspecError, did_you_mean
from evalkit.util.json_safe import load_json_file
from evalkit.util.yaml_safe import shorten

if TYPE_CHECKING:
    from evalkit.catalog.foreign import ForeignDataset, ForeignNames, ForeignRequest, variant_name

#: what evalkit.catalog.foreign gives, named here as well; imported when first asked for (other tools' names only)
_FROM_FOREIGN = ("ForeignDataset", "ForeignNames", "ForeignRequest", "variant_name")

__all__ = [
    "PACKAGE_PATH_PREFIX",
    "SHIPPED_RUNSPECS",
    "Catalog",
    "CheckedRecord",
    "DatasetSpec",
    "DatasetTable",
    "ForeignDataset",
    "ForeignNames",
    "ForeignRequest",
    "GenerationSettings",
    "TaskSpec",
    "dataset_aliases",
    "default_roots",
    "load_catalog",
    "resolve_runspec_path",
    "variant_name",
]


@dataclass
class Catalog:
    #: every dataset by name, each entry validated when it is first read (``DatasetTable``)
    datasets: DatasetTable = field(default_factory=DatasetTable)
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    categories: dict[str, list[str]] = field(default_factory=dict)
    roots: list[Path] = field(default_factory=list)
    #: other names of datasets (alias -> dataset): the names LALMEval and KARMA users type, see dataset_aliases
    aliases: MutableMapping[str, str] = field(default_factory=dict)
    #: other tools' names by prefix (runspecs/_names/<prefix>.json): ``auharness`` -> AU-Harness's (load_catalog's
    #: reads them when first asked for)
    foreign: MutableMapping[str, ForeignNames] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.datasets, DatasetTable):  # a Catalog built by hand, from a dict of specs
            self.datasets = DatasetTable(self.datasets)

    def entries(self) -> dict[str, DatasetSpec]:
        """The catalogue's own entries, by name: every dataset but other tools' variants of them (all validated).

        A variant (``auharness:<name>``) is how another tool's name asks for an entry's data, not a dataset of
        its own, so listings, counts and checks of the catalogue go over these.
        """
        table = self.datasets
        return {name: table[name] for name in table if not table.is_made(name) and table[name].variant_of is None}

    @property
    def raw_entries(self) -> dict[str, dict[str, Any]]:
        """Each entry as its runspec file wrote it, by name (another tool's variants are written in none)."""
        table = self.datasets
        return {name: written.entry for name in table if (written := table.written(name)) is not None}

    def check(self) -> None:
        """Validate every entry, as listings and ``evalkit validate`` do; a run validates only the ones it reads."""
        self.datasets.check()

    def all_names(self) -> list[str]:
        """Every name ``resolve`` accepts: datasets, their aliases, tasks and categories."""
        return sorted({*self.datasets, *self.aliases, *self.tasks, *self.categories})

    def knows(self, name: str) -> bool:
        """Whether ``name`` is one of :meth:`all_names` (asked without listing them)."""
        return any(name in names for names in (self.datasets, self.aliases, self.tasks, self.categories))

    def resolve(self, name: str, where: str = "") -> list[DatasetSpec]:
        """Datasets selected by a dataset name or alias, a task stem or a category folder."""
        if name in self.datasets:
            return [self.datasets[name]]
        if name in self.aliases:
            return [self.datasets[self.aliases[name]]]
        if name in self.tasks:
            return [self.datasets[d] for d in self.tasks[name].datasets]
        if name in self.categories:
            return [self.datasets[d] for task in self.categories[name] for d in self.tasks[task].datasets]
        tool, _, inner = name.partition(":")
        if inner and tool in self.foreign:
            names = self.foreign[tool]
            if inner in names.datasets or inner in names.groups or self.spelling(name) is None:
                return self.resolve_foreign(tool, inner, where)
        for tool, names in self.foreign.items():
            if name in names.datasets or name in names.groups:
                return self.resolve_foreign(tool, name, where)
        spelled = self.spelling(name)
        if spelled is not None:
            return self.resolve(spelled, where)
        prefix = f"{where}: " if where else ""
        foreign = [n for names in self.foreign.values() for n in (*names.datasets, *names.groups)]
        raise RunspecError(
            f"{prefix}{name!r} is not a dataset, task or category"
            f"{did_you_mean(name, [*self.all_names(), *foreign])}. {self.where_searched()}"
        )

    def where_searched(self) -> str:
        """The sentence ending an unknown name's message; a message naming several unknown names says it once."""
        searched = ", ".join(str(root) + ("" if root.is_dir() else " (absent)") for root in self.roots)
        return f"Runspec folders searched: {searched}. Run `evalkit list datasets` to see the catalogue."

    def resolve_foreign(self, tool: str, name: str, where: str = "") -> list[DatasetSpec]:
        """Datasets another tool means by ``name``: one of its datasets, or all of one of its groups.

        A group resolves only whole: running part of it under its name would
        give an average the tool's users cannot compare with theirs.
        """
        names = self.foreign[tool]
        prefix = f"{where}: " if where else ""
        # a dataset the tool runs per language or subset (KARMA's --dataset-args) is, with no entry of its own, the
        # group of its selections: all of them
        if name in names.datasets and (name not in names.groups or names.datasets[name].evalkit is not None):
            return [self._foreign_target(tool, name, prefix)]
        if name in names.groups:
            members = names.groups[name]
            missing = [m for m in members if self._target_name(names, m) is None]
            if missing:
                shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
                raise RunspecError(
                    f"{prefix}{names.tool}'s group {name!r} has {len(members)} datasets and evalkit's catalogue has "
                    f"no entry for {len(missing)} of them ({shown}); name the datasets it has instead "
                    f"(`evalkit info dataset NAME` tells which)"
                )
            found: dict[str, DatasetSpec] = {}
            for member in members:
                spec = self._foreign_target(tool, member, prefix)
                found.setdefault(spec.name, spec)
            return list(found.values())
        raise RunspecError(
            f"{prefix}{name!r} is not a dataset or group name of {names.tool}"
            f"{did_you_mean(name, [*names.datasets, *names.groups])}"
        )

    def _target_name(self, names: ForeignNames, name: str) -> str | None:
        target = names.datasets[name].evalkit
        return target if target is not None and target in self.datasets else None

    def _foreign_target(self, tool: str, name: str, prefix: str) -> DatasetSpec:
        """The tool's variant of the entry reading ``name``'s data (its request: ``_add_variants``), else the entry."""
        names = self.foreign[tool]
        target = self._target_name(names, name)
        if target is None:
            entry = names.datasets[name]
            reads = f" (it reads {entry.hub})" if entry.hub else " (it reads local data)"
            raise RunspecError(
                f"{prefix}{name!r} is {names.tool}'s dataset{reads}, and evalkit's catalogue has no entry reading "
                f"the same data yet; add one to a runspecs_dir folder, or see `evalkit list datasets` for what there is"
            )
        from evalkit.catalog.foreign import variant_name

        variant = self.datasets.get(variant_name(tool, name))
        return variant if variant is not None and variant.variant_of == target else self.datasets[target]

    def select(self, name: str, args: dict[str, Any], where: str = "") -> DatasetSpec:
        """The entry another tool's dataset means with the dataset arguments that pick its language or subset.

        KARMA picks MedMCQA-Indic's subset or IN22-Conv's pair with ``--dataset-args``;
        the tool's table names each picking ``<id>:key=value[,key=value]`` (keys in any
        order). ``name`` is the tool's id (prefixed or not) or a catalogue entry one of
        its ids reads; no arguments: the entry the name resolves to.
        """
        prefix = f"{where}: " if where else ""
        if not args:
            found = self.resolve(name, where)
            if len(found) != 1:
                raise RunspecError(f"{prefix}{name!r} is not one dataset: dataset arguments pick within one")
            return found[0]
        wanted = {str(key): str(value) for key, value in args.items()}
        tool, _, inner = name.partition(":")
        tables = {tool: self.foreign[tool]} if inner and tool in self.foreign else self.foreign
        bare = inner if inner and tool in self.foreign else name
        target = self.entry_name(name)
        offered: list[str] = []
        for tool_prefix, names in tables.items():
            for key in names.datasets:
                base, _, picked = key.rpartition(":")
                if "=" not in picked:
                    continue
                base_entry = names.datasets.get(base)
                same_data = target is not None and base_entry is not None and base_entry.evalkit == target
                if base != bare and not same_data:
                    continue
                offered.append(key)
                if dict(part.split("=", 1) for part in picked.split(",")) == wanted:
                    return self._foreign_target(tool_prefix, key, prefix)
        shown = shorten(", ".join(f"{k}={v}" for k, v in wanted.items()))  # a pasted document is not echoed whole
        choices = f"; known: {', '.join(offered)}" if offered else "; it takes no dataset arguments in evalkit"
        raise RunspecError(f"{prefix}{name!r} with {shown} is not a dataset evalkit's catalogue has{choices}")

    def entry_name(self, name: str) -> str | None:
        """The catalogue entry a dataset name means: its own, an alias's, or another tool's dataset name's."""
        found = self._exact_entry(name)
        if found is not None:
            return found
        spelled = self.spelling(name)
        return None if spelled is None else self._exact_entry(spelled)

    def _exact_entry(self, name: str) -> str | None:
        """``entry_name`` for a name spelt exactly as the catalogue or a tool's table spells it.

        Another tool's variant (``auharness:<name>``) means its entry: the one whose data it reads.
        """
        if name in self.datasets:
            return self.datasets[name].variant_of or name
        if name in self.aliases:
            return self.aliases[name]
        tool, _, inner = name.partition(":")
        for prefix, names in self.foreign.items():
            key = inner if inner and tool == prefix else name
            if key in names.datasets:
                return self._target_name(names, key)
        return None

    def spelling(self, name: str) -> str | None:
        """The one known name ``name`` matches when case is ignored (``AI2D`` -> ``ai2d``), or None.

        Other tools' users type their tool's capitals (ChEF's ``MMBench``,
        ``POPE_COCO_random``) or none at all; an exact name always wins, and a
        spelling two known names share (``x`` and ``X``) is left unresolved
        rather than guessed. Tried only after every exact lookup has failed.
        """
        wanted = name.casefold()
        known = {*self.all_names()}
        for prefix, names in self.foreign.items():
            for foreign in (*names.datasets, *names.groups):
                known.update((foreign, f"{prefix}:{foreign}"))
        matches = sorted(candidate for candidate in known if candidate.casefold() == wanted and candidate != name)
        if len(matches) == 1:
            return matches[0]
        # ChEF's "MME" and evalkit's "mme" are two spellings of one entry: then it does not matter which is meant
        entries = {self._exact_entry(candidate) for candidate in matches}
        return matches[0] if len(entries) == 1 and None not in entries else None

    def source_notes(self, dataset: str) -> list[str]:
        """Where another tool reads different data under this entry's name, or reads this entry's data by another.

        So ``evalkit info dataset librispeech_test_clean`` says that AU-Harness's
        ``librispeech_test_clean`` is another upload, and which entry reads it.
        """
        notes = []
        for prefix, names in self.foreign.items():
            for name, entry in names.datasets.items():
                if name == dataset and entry.evalkit_reads is not None:
                    other = self._target_name(names, name)
                    offer = (
                        f"entry {other!r} (also `{prefix}:{name}`) reads that upload"
                        if other is not None and other != name
                        else "evalkit has no entry reading that upload yet"
                    )
                    notes.append(
                        f"{names.tool}'s {name!r} reads {entry.hub}; this entry reads {entry.evalkit_reads}, "
                        f"the same benchmark from another upload, so scores may differ row for row; {offer}"
                    )
                elif entry.evalkit == dataset and name != dataset:
                    notes.append(f"{names.tool} calls this dataset {name!r} (`{prefix}:{name}`)")
        return notes

    def fitting_metrics(self, spec: DatasetSpec) -> list[str]:
        if spec.metrics is not None:
            return list(spec.metrics)
        return list(self.tasks[spec.task].metrics)


def _runspec_files(root: Path) -> Iterable[Path]:
    for path in sorted(root.glob("*/*.json")):
        if path.parent.name.startswith(("_", ".")):
            continue
        yield path


def _read_runspec(path: Path) -> dict[str, Any]:
    data = load_json_file(path, RunspecError)  # duplicate keys and deep nesting refused, one line naming the file
    if not isinstance(data, dict):
        raise RunspecError(f"{path}: expected a JSON object mapping dataset names to entries")
    return data


def default_roots(extra_dirs: Iterable[str | Path] = (), cwd: Path | None = None) -> list[Path]:
    roots: list[Path] = []
    for candidate in [SHIPPED_RUNSPECS, (cwd or Path.cwd()) / "runspecs", *map(Path, extra_dirs)]:
        resolved = candidate.resolve()
        if resolved not in roots:
            roots.append(resolved)
    return roots


def load_catalog(extra_dirs: Iterable[str | Path] = (), cwd: Path | None = None, *, check: bool = True) -> Catalog:
    """Read every runspec; ``extra_dirs`` must exist (they come from the user's config).

    Every file is read and its structure checked (JSON, ``_task``, names defined
    twice) in any case. ``check`` validates every dataset entry too, so a broken
    one stops here; without it an entry is validated when it is first read, so a
    run pays only for the entries it names and a broken entry it does not name
    does not stop it (``evalkit validate`` and the listings still report it).
    Without ``check`` other tools' name tables (``_names/``) are read too only when
    a name is not the catalogue's own, or every name is asked for.
    """
    extra = [Path(d) for d in extra_dirs]
    for directory in extra:
        if not directory.is_dir():
            raise RunspecError(f"runspecs_dir: {directory} is not a folder")
    catalog = Catalog(roots=default_roots(extra, cwd))
    tables: list[Path] = []
    for root in catalog.roots:
        if not root.is_dir():
            continue
        for path in _runspec_files(root):
            _add_file(catalog, path)
        found = sorted((root / "_names").glob("*.json"))
        if check:
            for path in found:  # read in the order they always were, so the first problem found is the same
                _add_foreign(catalog, path)
        tables += found
    if check:
        catalog.aliases = dataset_aliases(catalog)
        _add_variants(catalog)
        catalog.check()
        return catalog
    # what a name the catalogue's entries do not have needs: derived or read when first asked for
    aliases: Deferred[str] = Deferred(Once(partial(_fill_aliases, catalog)))
    catalog.aliases = aliases
    complete = Once(partial(_read_tables, catalog, tables))
    catalog.foreign = Deferred(complete)
    catalog.datasets.defer(complete)
    return catalog


def _fill_aliases(catalog: Catalog) -> None:
    catalog.aliases.update(dataset_aliases(catalog))


def _read_tables(catalog: Catalog, tables: list[Path]) -> None:
    for path in tables:
        _add_foreign(catalog, path)
    _add_variants(catalog)


def _add_variants(catalog: Catalog) -> None:
    from evalkit.catalog.foreign import variants

    for prefix, names in catalog.foreign.items():
        for name, base, make in list(variants(catalog.datasets, prefix, names)):
            catalog.datasets.add_made(name, partial(_made_from, catalog.datasets, base, make))


def __getattr__(name: str) -> Any:
    """evalkit.catalog.foreign's names, imported when first asked for: a run naming catalogue entries needs none."""
    if name in _FROM_FOREIGN:
        from evalkit.catalog import foreign

        return getattr(foreign, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _made_from(table: DatasetTable, base: str, make: Callable[[DatasetSpec], DatasetSpec]) -> DatasetSpec:
    return make(table[base])


def _add_foreign(catalog: Catalog, path: Path) -> None:
    """Read another tool's name table; the same table found twice (installed and checkout) is read once."""
    from evalkit.catalog.foreign import ForeignNames

    try:
        names = ForeignNames.model_validate(_read_runspec(path))
    except ValidationError as error:
        raise RunspecError(format_runspec_error(error, path, path.stem)) from None
    known = catalog.foreign.get(path.stem)
    if known is not None and known != names:
        raise RunspecError(f"{path}: another table of {path.stem!r} names was read first, with other contents")
    catalog.foreign[path.stem] = names


def dataset_aliases(catalog: Catalog) -> dict[str, str]:
    """The names other tools give catalogue datasets, derived from each entry's hub coordinates.

    - the hub repo id, and its last part, for a repo that only one entry reads, whatever its subset
      (``AudioLLMs/alpaca_audio_test``, ``alpaca_audio_test``, ``ChuGyouk/MedXpertQA``: LALMEval's and
      KARMA's names);
    - LALMEval's ``<subset>_<split>_<audio|text>`` for an audio or text entry with a subset and a split
      (``sd-qa_ind_s_audio``); when several entries would share one, the entry of a repo read several times
      keeps it (``hi_test_audio`` stays Common Voice's, not a single-entry Hindi set's).

    An alias never shadows a dataset, task or category name, and one two entries
    would share is left out rather than guessed.
    """
    # the entries as written (validating every entry here would cost a run what it saves); not other tools'
    # variants, which share their entries' repos
    own = catalog.datasets.own_names()
    taken = {*own, *catalog.tasks, *catalog.categories}
    coordinates = {name: _hub_coordinates(catalog.datasets, name) for name in own}
    repo_users: dict[str, int] = {}
    for hf_repo, _, _, _ in coordinates.values():
        if hf_repo:
            repo_users[hf_repo] = repo_users.get(hf_repo, 0) + 1
    candidates: dict[str, set[str]] = {}
    for name, (hf_repo, subset, split, modality) in coordinates.items():
        names = []
        if hf_repo:
            # the repo id even for an entry with a subset: KARMA names MedXpertQA or IndicVoices by repo alone;
            # a repo that several entries read gets no repo alias (below)
            names += [hf_repo, hf_repo.rsplit("/", 1)[-1]]
            if subset and split and modality in ("audio", "text", "audio+text"):
                names.append(f"{subset}_{split}_{'text' if modality == 'text' else 'audio'}")
        for alias in names:
            candidates.setdefault(alias, set()).add(name)
    out = {}
    for alias, owners in candidates.items():
        if len(owners) > 1:
            # a subset-form name ("hi_test_audio") wanted by several entries goes to the one whose repo several
            # entries read: an entry whose repo is read once is named by its repo id already
            shared = {o for o in owners if repo_users.get(str(coordinates[o][0]), 0) > 1}
            owners = shared if len(shared) == 1 else owners
        if alias in taken or len(owners) != 1:
            continue
        owner = next(iter(owners))
        repo = coordinates[owner][0]
        if repo and alias in (repo, repo.rsplit("/", 1)[-1]) and repo_users[repo] != 1:
            continue
        out[alias] = owner
    return out


def _hub_coordinates(table: DatasetTable, name: str) -> tuple[str | None, str | None, str | None, str | None]:
    """An entry's hf_repo, subset, split and modality, with the schema's defaults; a value of another type: None."""

    def text(key: str, default: str | None = None) -> str | None:
        value = table.value(name, key, default)
        return value if isinstance(value, str) else None

    return text("hf_repo"), text("subset"), text("split", "test"), text("modality", "audio")


def _add_file(catalog: Catalog, path: Path) -> None:
    data = _read_runspec(path)
    task_name, category = path.stem, path.parent.name
    task_meta = data.pop("_task", {}) or {}
    if not isinstance(task_meta, dict):
        raise RunspecError(f"{path}: _task: expected an object with description and metrics")
    try:
        generation = GenerationSettings.model_validate(task_meta.get("generation") or {})
    except ValidationError as error:
        raise RunspecError(format_runspec_error(error, path, "_task.generation")) from None
    task = catalog.tasks.get(task_name)
    if task is None:
        task = TaskSpec(
            name=task_name,
            category=category,
            file=str(path),
            description=str(task_meta.get("description", "")),
            metrics=list(task_meta.get("metrics", [])),
            default_metric=task_meta.get("default_metric"),
            generation=generation,
        )
        catalog.tasks[task_name] = task
        catalog.categories.setdefault(category, []).append(task_name)
    elif task.category != category:
        raise RunspecError(f"{path}: task {task_name!r} is also defined in category {task.category!r} ({task.file})")
    else:
        for metric in task_meta.get("metrics", []):
            if metric not in task.metrics:
                task.metrics.append(metric)
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise RunspecError(f"{path}: {name}: expected an object of dataset properties")
        if name in catalog.datasets:
            known = catalog.datasets.written(name)
            if known is not None and known.task == task_name and known.category == category and known.entry == entry:
                continue  # the same definition read twice (installed catalogue and a checkout): not a conflict
            where = known.file if known is not None else catalog.datasets[name].file
            raise RunspecError(
                f"{path}: dataset {name!r} is already defined differently in {where}; dataset names must be unique"
            )
        catalog.datasets.add_written(WrittenEntry(name, entry, task_name, category, path))
        task.datasets.append(name)
