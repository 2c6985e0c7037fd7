"""AU-Harness's run config, read as it is and translated to evalkit's config tree before validation.

AU-Harness (github.com/ServiceNow/AU-Harness) grew out of LALMEval, whose
config evalkit reads natively; its configs renamed keys (``task_metric``,
``filter``, ``judge_settings``), flattened model entries (``- name: ... url:``)
and added ``logging``, ``prompt_overrides``, ``generation_params_override`` and
``inference_type: gemini``. Its users should not have to rewrite a config to
try evalkit, so such a config is recognised and rewritten here into the tree
:class:`evalkit.config.schema.Config` validates. Every key is either mapped to what
evalkit does with the same meaning or refused with the reason; none is dropped.

Names keep AU-Harness's meaning: a name evalkit also uses for other data (its
``speech_recognition`` category, its ``librispeech_test_clean`` entry) is written
``auharness:<name>`` (see :meth:`evalkit.catalog.Catalog.resolve_foreign`).
Validation errors are reported under the user's own key (``task_metric[0]``,
``models[1].timeout``), not the translated one.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.catalog import Catalog, load_catalog
from evalkit.config.foreign.auharness_names import PREFIX, SAME_NAME_OTHER_COMPUTATION, auharness_metric
from evalkit.errors import ConfigError, RunspecError, did_you_mean

log = logging.getLogger("evalkit")

#: AU-Harness's top-level key -> evalkit's; the same key on both sides is listed too
TOP_LEVEL = {
    "task_metric": "dataset_metric",
    "dataset_metric": "dataset_metric",  # the name AU-Harness's README still uses in one example
    "aggregate": "aggregate",
    "filter": "filters",
    "filters": "filters",  # what AU-Harness's validator and engine read; its preprocessors read `filter`
    "judge_settings": "judge_properties",
    "logging": "log_file",
    "prompt_overrides": "prompts",
    "generation_params_override": "generation_overrides",
    "temperature_overrides": "temperature_overrides",
    "models": "models",
}
FILTER_KEYS = ("num_samples", "length_filter", "accented", "language")
#: what an AU-Harness config's ``length_filter`` does there: nothing (its preprocessors read a key ``length`` its
#: validator does not know, and would want a tuple YAML cannot write), so its figures include every clip
LENGTH_FILTER_NOTE = (
    "{key}.length_filter is not applied, as AU-Harness does not apply it (its preprocessors read another key), so "
    "the figures are AU-Harness's; to drop long clips in evalkit's own format, write filters.length_filter there"
)
#: AU-Harness's generation parameter (task configs' generation_kwargs and overrides) -> evalkit's
GENERATION_KEYS = {
    "temperature": "temperature",
    "max_completion_tokens": "max_tokens",
    "max_gen_tokens": "max_tokens",
    "max_tokens": "max_tokens",
    "top_p": "top_p",
    "seed": "seed",
}
#: what AU-Harness's request handler sends where neither the task nor an override gives a value (utils/constants.py)
AUHARNESS_DEFAULT_TEMPERATURE = 0.7
AUHARNESS_DEFAULT_MAX_TOKENS = 4096
#: names AU-Harness's task configs list among a dataset's metrics that are no metric: its `all` skips them
NOT_METRICS = {
    "detailed_judge_prompt": "the name of the detailed judge's prompt, which AU-Harness lists among some tasks' "
    "metrics but cannot load as a metric, so its own `all` skips it too",
}
#: the access token of Google's application-default credentials, which AU-Harness's Vertex AI client uses
VERTEX_TOKEN_COMMAND = ("gcloud", "auth", "application-default", "print-access-token")
#: Gemini on Vertex AI through its OpenAI-compatible endpoint, as AU-Harness addresses it from location + project_id
VERTEX_URL = "https://{host}/v1/projects/{project}/locations/{location}/endpoints/openapi"
#: a Google Cloud region (``us-central1``, ``europe-west4``, ``northamerica-northeast1``) or ``global``: the location
#: becomes part of the host name the access token is sent to, so nothing else may pass (``127.0.0.1:8080/x#`` would
#: send Google's token to that server)
VERTEX_LOCATION = re.compile(r"global|[a-z]{2,}(?:-[a-z]+)+[0-9]{1,2}")
#: a Google Cloud project id (6 to 30 lowercase letters, digits and hyphens, from a letter, not ending in a hyphen),
#: optionally behind the domain of a domain-scoped project (``example.com:my-project``)
VERTEX_PROJECT = re.compile(r"(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")
#: a value that is one whole ``${NAME}`` (`evalkit convert` keeps variables unexpanded; a run expands them from the
#: user's environment first): nothing else can ride along in it to change the host the token goes to
WHOLE_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


@dataclass
class Translation:
    """An AU-Harness config as evalkit's config tree, with where each evalkit key came from."""

    data: dict[str, Any]
    #: evalkit key path -> the user's key path, longest match wins (``models[0].info`` -> ``models[0]``)
    origin: dict[str, str] = field(default_factory=dict)
    #: per dataset_metric pair, the user's entry that made it, for the plan's messages
    pair_labels: list[str] = field(default_factory=list)
    #: where the data differs from AU-Harness's (another upload): logged, and comments in `evalkit convert`
    notes: list[str] = field(default_factory=list)
    #: values written differently for the same meaning (attempts -> retries): comments in `evalkit convert`
    changes: list[str] = field(default_factory=list)

    def original(self, location: str) -> str:
        """The user's key path for an evalkit key path (unchanged where it was not renamed)."""
        best = ""
        for key in self.origin:
            if len(key) > len(best) and (location == key or location.startswith((key + ".", key + "["))):
                best = key
        return self.origin[best] + location[len(best) :] if best else location

    def rename(self, message: str, source: str) -> str:
        """A validation message whose lines name evalkit's keys, naming the user's instead."""
        lines = []
        head = f"{source}: "
        for line in message.splitlines():
            if line.startswith(head):
                location, sep, rest = line[len(head) :].partition(": ")
                if sep:
                    line = f"{head}{self.original(location)}{sep}{rest}"
            lines.append(line)
        return "\n".join(lines)


class _Problems:
    """Every mistake of a config at once, each naming the user's key, raised as one ConfigError."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.lines.append(f"{self.source}: {where}: {message}")

    def raise_any(self) -> None:
        if self.lines:
            raise ConfigError("\n".join(self.lines))


class _Names:
    """AU-Harness's names as evalkit names: plain where both mean the same datasets, ``auharness:`` where not."""

    def __init__(self, catalog: Catalog, notes: list[str]) -> None:
        self.catalog = catalog
        self.table = catalog.foreign.get(PREFIX)
        self.notes = notes

    def is_theirs(self, name: str) -> bool:
        return self.table is not None and (name in self.table.datasets or name in self.table.groups)

    def own(self, name: str) -> bool:
        c = self.catalog
        return name in c.datasets or name in c.aliases or name in c.tasks or name in c.categories

    def name(self, name: str) -> str:
        """The name to write in evalkit's config for AU-Harness's ``name``."""
        if self.table is None or not self.is_theirs(name):
            return name
        self._note_other_upload(name)
        if not self.own(name):
            return name  # only AU-Harness's meaning exists: resolved (or refused, with the reason) as written
        try:
            theirs = [s.name for s in self.catalog.resolve_foreign(PREFIX, name)]
        except RunspecError:
            return f"{PREFIX}:{name}"  # refused by the plan with the reason, never read as evalkit's namesake
        ours = [s.name for s in self.catalog.resolve(name)]
        return name if sorted(ours) == sorted(theirs) else f"{PREFIX}:{name}"

    def datasets(self, name: str) -> list[str]:
        """Evalkit dataset names ``name`` selects in AU-Harness's meaning (for override rules); [] when unknown."""
        try:
            return [s.name for s in self.catalog.resolve(self.name(name))]
        except RunspecError:
            return []

    def metrics(self, name: str) -> list[str]:
        """What AU-Harness's metric ``all`` runs on ``name``: every metric its datasets' task configs list."""
        found: dict[str, None] = {}
        if self.table is not None and self.is_theirs(name):
            members = self.table.groups.get(name, [name])
            for member in members:
                found.update(dict.fromkeys(self.table.datasets[member].metrics))
            skipped = [metric for metric in found if metric in NOT_METRICS]
            for metric in skipped:
                note = f"{name}: metric `all` leaves out {metric!r}: {NOT_METRICS[metric]}"
                if note not in self.notes:
                    self.notes.append(note)
            return [metric for metric in found if metric not in NOT_METRICS]
        try:
            specs = self.catalog.resolve(name)
        except RunspecError:
            return []
        for spec in specs:
            found.update(dict.fromkeys(self.catalog.fitting_metrics(spec)))
        return list(found)

    def _note_other_upload(self, name: str) -> None:
        if self.table is None:
            return
        members = self.table.groups.get(name, [name])
        for member in members:
            entry = self.table.datasets.get(member)
            if entry is None or entry.evalkit_reads is None or entry.evalkit != member:
                continue
            note = (
                f"{member}: AU-Harness reads {entry.hub}, evalkit's entry of that name reads {entry.evalkit_reads} "
                "(the same benchmark, another upload; scores may differ row for row)"
            )
            if note not in self.notes:
                self.notes.append(note)


def translate(
    data: Mapping[str, Any],
    source: str = "config",
    evalkit_keys: Iterable[str] = (),
    catalog: Catalog | None = None,
    base_dir: Path | None = None,
) -> Translation:
    """AU-Harness's config tree as evalkit's; ConfigError listing every key that cannot be honoured.

    ``evalkit_keys`` are evalkit's own top-level keys, accepted beside AU-Harness's
    (``runspecs_dir``, ``output_dir``, ...). ``catalog`` is read when absent, with the
    config's runspecs_dir relative to ``base_dir`` (the config file's folder).
    """
    problems = _Problems(source)
    out = Translation(data={})
    names = _Names(catalog if catalog is not None else _catalog(data.get("runspecs_dir"), base_dir), out.notes)
    own_keys = set(evalkit_keys)
    _check_pairs_of_synonyms(data, problems)
    for key, value in data.items():
        target = TOP_LEVEL.get(key)
        if target is None and key in own_keys:
            known = out.data.get(key)  # `prompts` may already hold the translated system prompts
            out.data[key] = {**value, **known} if isinstance(known, dict) and isinstance(value, dict) else value
            continue
        if target is None:
            problems.add(key, f"unknown key{did_you_mean(str(key), [*TOP_LEVEL, *own_keys])}")
            continue
        handler = _HANDLERS.get(key)
        if handler is None:
            out.data[target] = value
            out.origin[target] = key
        else:
            handler(key, value, out, names, problems)
    _copy_keys(out, names)
    _private_locations(out, names, base_dir)
    out.data.setdefault("report_as", PREFIX)  # its users compare with AU-Harness's table: its names and scale
    problems.raise_any()
    out.pair_labels = [f"{source}: {label}" for label in out.pair_labels]
    for note in out.notes:
        log.warning("%s: %s", source, note)
    return out


def _copy_keys(out: Translation, names: _Names) -> None:
    """``dataset_paths`` keys in AU-Harness's meaning: its ``librispeech_test_clean`` is AudioBench's upload.

    A lab names its local copy by the name its AU-Harness config uses; where evalkit's entry of that name reads
    other data, the key is written ``auharness:<name>`` so the copy stands in for the data AU-Harness reads.
    """
    given = out.data.get("dataset_paths")
    if isinstance(given, dict):
        out.data["dataset_paths"] = {
            (names.name(key) if isinstance(key, str) else key): value for key, value in given.items()
        }


#: where AU-Harness's task configs keep licensed data, relative to the folder AU-Harness runs in
PRIVATE_PREFIX = "private_datasets/"


def _private_locations(out: Translation, names: _Names, base_dir: Path | None) -> None:
    """``dataset_paths`` for the licensed sets the pairs name, where AU-Harness itself reads them.

    AU-Harness reads CallHome from ``private_datasets/<corpus>/hf_dataset`` under the folder it runs in
    (its prepare script writes a parquet file there, which evalkit reads as it is). A path the config gives
    wins; the default is written relative to the config's folder, so a converted config keeps pointing there.
    """
    if names.table is None:
        return
    given = out.data.get("dataset_paths")
    paths: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    added = False
    for pair in out.data.get("dataset_metric", []):
        if not isinstance(pair, list) or not pair or not isinstance(pair[0], str):
            continue
        name = pair[0].removeprefix(f"{PREFIX}:")
        for member in names.table.groups.get(name, [name]):
            entry = names.table.datasets.get(member)
            target = entry.evalkit if entry is not None else None
            hub = entry.hub if entry is not None else None
            if target is None or hub is None or not hub.startswith(PRIVATE_PREFIX):
                continue
            if {target, member, f"{PREFIX}:{member}"} & set(paths) or target not in names.catalog.datasets:
                continue
            location = Path.cwd() / hub.rsplit("/", 1)[0]  # the split is AU-Harness's, not a folder
            base = (base_dir or Path.cwd()).resolve()
            paths[target] = os.path.relpath(location, base)
            added = True
            note = f"{member}: read from AU-Harness's own location {location} (give dataset_paths to read it elsewhere)"
            if note not in out.notes:
                out.notes.append(note)
    if added:
        out.data["dataset_paths"] = paths


def _catalog(runspecs_dir: Any, base_dir: Path | None) -> Catalog:
    """The catalogue the config's names mean, its own runspec folders included (for `all` on their datasets)."""
    base = base_dir if base_dir is not None else Path.cwd()
    folders = (
        [runspecs_dir] if isinstance(runspecs_dir, str) else runspecs_dir if isinstance(runspecs_dir, list) else []
    )
    try:
        return load_catalog([base / str(f) for f in folders], cwd=base)
    except RunspecError:
        return load_catalog(cwd=base)  # the plan reports a bad folder under its own key


def _check_pairs_of_synonyms(data: Mapping[str, Any], problems: _Problems) -> None:
    for one, other in (
        ("task_metric", "dataset_metric"),
        ("filter", "filters"),
        ("judge_settings", "judge_properties"),
    ):
        if one in data and other in data:
            problems.add(other, f"give `{one}` or `{other}`, not both: they are the same setting")


def _pairs(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    if not isinstance(value, list) or not value:
        problems.add(key, "expected a non-empty list of [task, metric] pairs")
        return
    pairs: list[Any] = []
    for i, entry in enumerate(value):
        where = f"{key}[{i}]"
        if isinstance(entry, str):
            pairs.append(entry)  # LALMEval's quoted "[name, metric]": evalkit's validator reads and checks it
            out.pair_labels.append(where)
            continue
        if not (isinstance(entry, list) and len(entry) in (2, 3) and all(isinstance(p, str) for p in entry[:2])):
            problems.add(where, f"expected a [task, metric] pair of two names, got {entry!r}")
            continue
        name, metric = entry[0], entry[1]
        if metric == "all":
            metrics = names.metrics(name)
            if not metrics:
                problems.add(where, f"metric `all` on {name!r}: no dataset, task or group of that name lists metrics")
            for expanded in metrics:
                pairs.append([names.name(name), _their_metric(expanded, out), *entry[2:]])
                out.pair_labels.append(f"{where} ({name}, all -> {expanded})")
            continue
        pairs.append([names.name(name), _their_metric(metric, out), *entry[2:]])
        out.pair_labels.append(f"{where} ({name}, {metric})")
    out.data["dataset_metric"] = pairs
    out.origin["dataset_metric"] = key


def _their_metric(metric: str, out: Translation) -> str:
    """AU-Harness's meaning of a metric name: its computation where evalkit's own of that name differs."""
    theirs = auharness_metric(metric)
    if theirs != metric and metric in SAME_NAME_OTHER_COMPUTATION:
        change = (
            f"metric {metric!r} is AU-Harness's computation, {theirs!r} (evalkit's own {metric!r} is another; "
            "`evalkit info metric` tells both)"
        )
        if change not in out.changes:
            out.changes.append(change)
    return theirs


def _aggregate(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    if not isinstance(value, list):
        problems.add(key, "expected a list of [metric, [tasks or groups]] entries")
        return
    entries: list[Any] = []
    for entry in value:
        if isinstance(entry, list) and len(entry) in (2, 3) and isinstance(entry[1], list):
            metric = _their_metric(entry[0], out) if isinstance(entry[0], str) else entry[0]
            entries.append([metric, [names.name(n) if isinstance(n, str) else n for n in entry[1]], *entry[2:]])
        else:
            entries.append(entry)  # evalkit's validator names what is wrong with it
    out.data["aggregate"] = entries
    out.origin["aggregate"] = key


def _filters(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    if not isinstance(value, dict):
        problems.add(key, "expected a mapping (num_samples, length_filter, accented, language)")
        return
    for name in value:
        if name not in FILTER_KEYS:
            problems.add(f"{key}.{name}", f"not a filter of AU-Harness's format{did_you_mean(str(name), FILTER_KEYS)}")
    applied = {name: setting for name, setting in value.items() if name != "length_filter"}
    if "length_filter" in value:
        bounds = value["length_filter"]
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, (int, float)) for b in bounds)):
            problems.add(f"{key}.length_filter", f"expected [min_seconds, max_seconds], got {bounds!r}")
        note = LENGTH_FILTER_NOTE.format(key=key)
        if note not in out.notes:
            out.notes.append(note)
    out.data.setdefault("filters", {}).update(applied)
    out.origin["filters"] = key


def _judge(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    # the same keys in both formats; evalkit's validator checks them
    if isinstance(value, dict) and _is_placeholder(value.get("judge_type")):
        # AU-Harness ships `judge_type: <JUDGE_MODEL_TYPE>`: both of its types are the same OpenAI-compatible API to
        # evalkit, so a left placeholder cannot change what is asked; its api_version placeholder goes with it
        value = {k: v for k, v in value.items() if k != "judge_type"}
        out.notes.append(
            f"{key}.judge_type is still AU-Harness's placeholder; evalkit asks every judge over the OpenAI-compatible "
            "API, so it needs no type (write vllm or openai to silence this)"
        )
        if _is_placeholder(value.get("judge_api_version")):
            value.pop("judge_api_version")
    out.data["judge_properties"] = value
    out.origin["judge_properties"] = key


def _is_placeholder(value: Any) -> bool:
    """AU-Harness's shipped configs mark what the user fills in as ``<UPPER_CASE>``."""
    return isinstance(value, str) and re.fullmatch(r"<[A-Z0-9_]+>", value.strip()) is not None


def _logging(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    if not isinstance(value, dict):
        problems.add(key, "expected a mapping with log_file")
        return
    for name, setting in value.items():
        if name != "log_file":
            problems.add(f"{key}.{name}", "not a logging setting evalkit knows: AU-Harness's format has only log_file")
        elif setting is not None:
            out.data["log_file"] = setting
            out.origin["log_file"] = f"{key}.log_file"


def _temperature(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    out.data["temperature_overrides"] = _rules(key, value, out, names, problems, lambda rule, where: rule)
    out.origin["temperature_overrides"] = key


def _generation(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    def params(rule: dict[str, Any], where: str) -> dict[str, Any] | None:
        generation = rule.get("generation_params")
        if not isinstance(generation, dict):
            problems.add(f"{where}.generation_params", "expected a mapping of generation parameters")
            return None
        translated = {k: v for k, v in rule.items() if k in ("model", "task")}
        for name, setting in generation.items():
            if name not in GENERATION_KEYS:
                problems.add(
                    f"{where}.generation_params.{name}",
                    f"evalkit sets {', '.join(sorted(set(GENERATION_KEYS)))} per rule; other request fields go in a "
                    "model's extra_body",
                )
                continue
            translated[GENERATION_KEYS[name]] = setting
        for name in rule:
            if name not in ("model", "task", "generation_params"):
                problems.add(f"{where}.{name}", "unknown key (model, task and generation_params are read)")
        # AU-Harness's override replaces the task's settings whole, and its request handler fills what the rule
        # leaves out with its defaults: so a rule giving only a temperature also sends 4096 tokens there
        translated.setdefault("temperature", AUHARNESS_DEFAULT_TEMPERATURE)
        translated.setdefault("max_tokens", AUHARNESS_DEFAULT_MAX_TOKENS)
        return translated

    out.data["generation_overrides"] = _rules(key, value, out, names, problems, params)
    out.origin["generation_overrides"] = key


def _rules(
    key: str, value: Any, out: Translation, names: _Names, problems: _Problems, convert: Callable[..., Any]
) -> list[Any]:
    """Override rules with their task names in evalkit's terms: an AU-Harness group becomes a rule per dataset."""
    if not isinstance(value, list):
        problems.add(key, "expected a list of rules")
        return []
    rules: list[Any] = []
    for i, rule in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(rule, dict):
            rules.append(rule)
            continue
        converted = convert(rule, where)
        if converted is None:
            continue
        task = converted.get("task")
        if not (isinstance(task, str) and names.is_theirs(task)):
            rules.append(converted)
            continue
        if names.name(task) == task and names.own(task):
            rules.append(converted)  # evalkit's name of the same datasets: its rules match it as written
            continue
        members = names.datasets(task)  # rules match evalkit's names only: one rule per dataset
        if not members:
            problems.add(f"{where}.task", f"AU-Harness's {task!r} has datasets evalkit's catalogue lacks")
        rules.extend({**converted, "task": member} for member in members)
    return rules


def _user_prompts(key: str, rules: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    """``user_prompt: [{task, prompt}]``: the instruction of every dataset of that task (``prompts.instructions``).

    AU-Harness's README documents these overrides (its engine at daa0616 looks them up under another key, so
    they do not take effect there); evalkit applies them as documented. A rule naming a model is refused:
    evalkit builds one prompt a sample for every model of a run.
    """
    if not isinstance(rules, list):
        problems.add(key, "expected a list of {task, prompt} rules")
        return
    instructions: dict[str, str] = {}
    for i, rule in enumerate(rules):
        where = f"{key}[{i}]"
        if not isinstance(rule, dict) or not isinstance(rule.get("prompt"), str) or not rule.get("task"):
            problems.add(where, "expected {task, prompt} (a user prompt override names its task)")
            continue
        for extra in rule:
            if extra not in ("task", "model", "prompt"):
                problems.add(f"{where}.{extra}", "unknown key (task, model and prompt are read)")
        if rule.get("model") is not None:
            problems.add(
                f"{where}.model",
                "evalkit cannot honour a user prompt for one model: it sends every model of a run the same prompt "
                "of a sample; drop `model` (every model), or run that model with its own config",
            )
            continue
        members = names.datasets(str(rule["task"]))
        if not members:
            problems.add(f"{where}.task", f"AU-Harness's {rule['task']!r} has datasets evalkit's catalogue lacks")
            continue
        for member in members:
            instructions.setdefault(member, rule["prompt"])  # the first matching rule wins, as for system prompts
    if instructions:
        out.data.setdefault("prompts", {}).setdefault("instructions", {}).update(instructions)
        out.origin["prompts.instructions"] = key


def _prompts(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    if not isinstance(value, dict):
        problems.add(key, "expected a mapping with user_prompt and/or system_prompt lists")
        return
    by_model: dict[str, str] = {}
    for kind, rules in value.items():
        if kind == "user_prompt":
            _user_prompts(f"{key}.user_prompt", rules, out, names, problems)
            continue
        if kind != "system_prompt":
            problems.add(f"{key}.{kind}", "unknown key (user_prompt and system_prompt are read)")
            continue
        if not isinstance(rules, list):
            problems.add(f"{key}.{kind}", "expected a list of {model, prompt} rules")
            continue
        for i, rule in enumerate(rules):
            where = f"{key}.{kind}[{i}]"
            if not isinstance(rule, dict) or not isinstance(rule.get("prompt"), str) or "model" not in rule:
                problems.add(where, "expected {model, prompt} (a system prompt override names its model)")
                continue
            if rule.get("task") is not None:
                problems.add(
                    f"{where}.task",
                    "evalkit cannot honour a system prompt for one model on one task: its system prompts are chosen "
                    "by model or by dataset/task, not both; drop `task` (every task of the model) or write the "
                    "prompt as the dataset's `system_prompt` in a runspec of your own",
                )
                continue
            for extra in rule:
                if extra not in ("model", "task", "prompt"):
                    problems.add(f"{where}.{extra}", "unknown key (model, task and prompt are read)")
            by_model.setdefault(str(rule["model"]), rule["prompt"])  # AU-Harness: the first equal match wins
    if by_model:
        prompts = out.data.setdefault("prompts", {})
        prompts.setdefault("system_prompts", {})["auharness_system_prompt"] = {"by_model": by_model}
        filters = out.data.setdefault("filters", {})
        filters.setdefault("system_prompts", []).append("auharness_system_prompt")
        out.origin["prompts.system_prompts.auharness_system_prompt"] = f"{key}.system_prompt"


def _models(key: str, value: Any, out: Translation, names: _Names, problems: _Problems) -> None:
    if not isinstance(value, list):
        problems.add(key, "expected a list of model entries")
        return
    entries: list[Any] = []
    flat: list[int] = []
    for i, entry in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(entry, dict) or "info" in entry:
            entries.append(entry)  # evalkit's own layout, or a mistake evalkit's validator names
            continue
        info = dict(entry)
        _retries(info, where, out)
        _reasoning(info, where, out)
        _vertex(info, where, out, problems)
        entries.append({"info": info})
        flat.append(i)
        out.origin[f"models[{i}].info"] = where
    _replicas(entries, flat, key, out)
    out.data["models"] = entries
    out.origin["models"] = key


def _replicas(entries: list[Any], flat: list[int], key: str, out: Translation) -> None:
    """Entries sharing a ``model`` id are one model's endpoints in AU-Harness: it shards the data among them.

    evalkit's replicas are entries sharing a name, so they take the model id as
    their name, the key AU-Harness reports their combined results under.
    """
    by_model: dict[str, list[int]] = {}
    for i in flat:
        model = entries[i]["info"].get("model")
        if isinstance(model, str):
            by_model.setdefault(model, []).append(i)
    for model, indices in by_model.items():
        if len(indices) < 2:
            continue
        names = [str(entries[i]["info"].get("name")) for i in indices]
        for i in indices:
            entries[i]["info"]["name"] = model
        out.changes.append(
            f"{key}[{', '.join(map(str, indices))}] ({', '.join(names)}) share model {model!r}: AU-Harness shards "
            f"the data among them; evalkit runs them as replicas of one model named {model!r}"
        )


def _retries(info: dict[str, Any], where: str, out: Translation) -> None:
    """AU-Harness counts attempts (tenacity's stop_after_attempt); evalkit counts retries after the first."""
    attempts = info.get("retry_attempts")
    if isinstance(attempts, int) and not isinstance(attempts, bool):
        info["retry_attempts"] = max(0, attempts - 1)
        out.changes.append(
            f"{where}.retry_attempts: {attempts} attempts in AU-Harness are {info['retry_attempts']} retries in evalkit"
        )


def _reasoning(info: dict[str, Any], where: str, out: Translation) -> None:
    """``reasoning_effort`` is a request field AU-Harness sends as is: evalkit sends it through extra_body."""
    if "reasoning_effort" not in info:
        return
    effort = info.pop("reasoning_effort")
    body = info.get("extra_body")
    info["extra_body"] = {**(body if isinstance(body, dict) else {}), "reasoning_effort": effort}
    out.origin[f"{where}.info.extra_body"] = f"{where}.reasoning_effort"


def _vertex(info: dict[str, Any], where: str, out: Translation, problems: _Problems) -> None:
    """Gemini on Vertex AI: AU-Harness builds the endpoint from location and project_id, as evalkit does here."""
    location, project = info.pop("location", None), info.pop("project_id", None)
    if location is None and project is None:
        return
    if str(info.get("inference_type", "")).strip().lower() != "gemini":
        problems.add(where, "location and project_id address Gemini on Vertex AI: they need inference_type gemini")
        return
    if not (isinstance(location, str) and location and isinstance(project, str) and project):
        problems.add(where, "Gemini on Vertex AI needs both location and project_id (non-empty strings)")
        return
    if not (VERTEX_LOCATION.fullmatch(location) or WHOLE_PLACEHOLDER.fullmatch(location)):
        problems.add(
            f"{where}.location",
            f"{location[:80]!r} is not a Google Cloud region; expected one such as 'us-central1' or 'global' (it "
            "names the host Google's access token is sent to)",
        )
        return
    if not (VERTEX_PROJECT.fullmatch(project) or WHOLE_PLACEHOLDER.fullmatch(project)):
        problems.add(
            f"{where}.project_id",
            f"{project[:80]!r} is not a Google Cloud project id; expected 6 to 30 lowercase letters, digits and "
            "hyphens, starting with a letter",
        )
        return
    if info.get("url") is not None:
        problems.add(f"{where}.url", "give url (any OpenAI-compatible Gemini endpoint) or location + project_id")
        return
    host = "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
    info["url"] = VERTEX_URL.format(host=host, project=project, location=location)
    if not info.get("auth_token") and not info.get("auth_command"):
        # AU-Harness signs in with Google's application-default credentials; gcloud prints their access token
        info["auth_command"] = list(VERTEX_TOKEN_COMMAND)
        out.notes.append(
            f"{where}: Gemini on Vertex AI: the access token comes from `{' '.join(VERTEX_TOKEN_COMMAND)}` (Google's "
            "application-default credentials, as AU-Harness uses them), asked again every 45 minutes"
        )


_HANDLERS: dict[str, Callable[[str, Any, Translation, _Names, _Problems], None]] = {
    "task_metric": _pairs,
    "dataset_metric": _pairs,
    "aggregate": _aggregate,
    "filter": _filters,
    "filters": _filters,
    "judge_settings": _judge,
    "logging": _logging,
    "prompt_overrides": _prompts,
    "generation_params_override": _generation,
    "temperature_overrides": _temperature,
    "models": _models,
}


def convert_text(
    data: Mapping[str, Any], source: str, evalkit_keys: Iterable[str] = (), base_dir: Path | None = None
) -> str:
    """``evalkit convert``'s output: the translated config as YAML, with what changed on the way as comments.

    ``data`` is the file as written (``${VAR}``s unexpanded), so secrets stay
    variables in the converted file too.
    """
    import yaml  # here, not at import: only `evalkit convert` writes YAML

    translation = translate(data, source, evalkit_keys, base_dir=base_dir)
    header = [f"# evalkit's config, converted by `evalkit convert` from AU-Harness's {source}"]
    header += [f"# - {line}" for line in (*translation.changes, *translation.notes)]

    class _Dumper(yaml.SafeDumper):
        """Pairs and number ranges on one line ([name, metric]), mappings as blocks, as evalkit's samples write."""

    def _list(dumper: yaml.SafeDumper, items: list[Any]) -> yaml.Node:
        flat = all(not isinstance(item, (dict, list)) for item in items)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flat)

    _Dumper.add_representer(list, _list)
    body = yaml.dump(translation.data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)
    return "\n".join(header) + "\n" + body
