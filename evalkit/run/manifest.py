"""run.json, the manifest of a run folder: what ran, with which config (secrets masked), and whether it finished.

``evalkit run --resume RUN_DIR`` reads it back: the fingerprint refuses a
resume whose config would change the answers, and the masked secrets are
restored from the config file the run was started with. A run of one shard of
a plan (``--shard K/N``) says so in ``shard`` (index, count and the plan's
fingerprint); a folder ``evalkit merge`` wrote lists its shards in ``merged``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from evalkit.config import Config
from evalkit.errors import UserError, WriteFailed
from evalkit.plan import Plan
from evalkit.prompts.library import PROMPT_FILES
from evalkit.util.atomic import write_json_atomic
from evalkit.util.redact import MASK

MANIFEST = "run.json"
MANIFEST_FORMAT = 1
#: model fields that change how a request travels, never what it answers: a resume may change them
_TRANSPORT_FIELDS = frozenset(
    {
        "url",
        "auth_token",
        "auth_command",
        "auth_refresh_s",
        "batch_size",
        "timeout",
        "retry_attempts",
        "delay",
        "requests_per_minute",
        "tokens_per_minute",
        "launch",
        "deadline",
        "max_response_bytes",
        "follow_redirects",
    }
)
_JUDGE_TRANSPORT_FIELDS = frozenset(
    {"judge_api_endpoint", "judge_api_key", "judge_concurrency", "judge_timeout", "judge_retry_attempts", "judge_price"}
)
#: what a run may spend, and what its tokens cost: never what a model answers, so a resume may raise a budget
_SPENDING_FIELDS = ("budget",)


def config_as_given(config: Config) -> dict[str, Any]:
    """The config as the user wrote it: a launched server's address is the run's business, not the config's."""
    data = config.model_dump(mode="json")
    for entry in data.get("models", []):
        info = entry.get("info", {})
        if info.get("launch") is not None:
            info["url"] = None
    return data


def answer_fingerprint(config: Config) -> str:
    """A hash of what decides the run's answers and scores, the same for every copy of the project.

    The config without transport settings and secrets, and without any path of
    this machine: a copy of the project elsewhere (another node, a container, a
    job's scratch folder) is the same run. What the paths lead to counts by its
    content: the prompts of ``prompts_dir`` here, the runspec entries and the
    data in the plan fingerprint (:func:`evalkit.run.shard.plan_fingerprint`).
    """
    data = config.model_dump(mode="json")
    for entry in data.get("models", []):
        info = entry.get("info", {})
        for key in (*_TRANSPORT_FIELDS, "price"):
            info.pop(key, None)
    # replicas are infrastructure too: entries left equal once their transport is gone count once
    data["models"] = list({json.dumps(entry, sort_keys=True): entry for entry in data.get("models", [])}.values())
    judge = data.get("judge_properties")
    if isinstance(judge, dict):
        for key in _JUDGE_TRANSPORT_FIELDS:
            judge.pop(key, None)
    # where results go and how they are judged, and the folders that hold the runspecs and prompts
    for key in ("output_dir", "cache", "max_failure_rate", "log_file", "runspecs_dir", *_SPENDING_FIELDS):
        data.pop(key, None)
    data["prompts_dir"] = prompts_content(config.prompts_dir)
    data["dataset_paths"] = sorted(data.get("dataset_paths") or {})  # which are local copies; the data's hash says what
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def earlier_answer_fingerprint(config: Config) -> str:
    """The answer fingerprint as evalkit computed it before it left paths out, so older runs still resume."""
    data = config.model_dump(mode="json")
    for entry in data.get("models", []):
        info = entry.get("info", {})
        for key in (*(_TRANSPORT_FIELDS - {"auth_command", "auth_refresh_s"}), "price"):
            info.pop(key, None)
    judge = data.get("judge_properties")
    if isinstance(judge, dict):
        for key in _JUDGE_TRANSPORT_FIELDS:
            judge.pop(key, None)
    for key in ("output_dir", "cache", "max_failure_rate", *_SPENDING_FIELDS):
        data.pop(key, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def prompts_content(folder: str | None) -> dict[str, str] | None:
    """SHA-256 of each prompt file a ``prompts_dir`` may hold, by its name there; None without one.

    The files the prompt library reads (:mod:`evalkit.prompts.library`), so a
    copy of the folder elsewhere is the same prompts and an edited one is not.
    """
    if not folder:
        return None
    base = Path(folder)
    names = [name for name in PROMPT_FILES.values() if (base / name).is_file()]
    names += sorted(f"judges/{path.name}" for path in (base / "judges").glob("*.yaml") if path.is_file())
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = hashlib.sha256((base / name).read_bytes()).hexdigest()
        except OSError:
            found[name] = "unreadable"  # the library reports it, naming the file, when the plan is built
    return found


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write run.json atomically: a kill leaves the old manifest or the new one, never half of one."""
    write_json_atomic(run_dir / MANIFEST, manifest)


class ManifestWriter:
    """run.json of a run in progress, written from the event loop and, after a signal, from the hard-stop thread.

    One lock orders the writes (the two threads would otherwise share the
    temporary file of :func:`write_manifest`), and :meth:`mark_interrupted`
    changes only a run still "running": a run that finished or failed keeps
    what it says.
    """

    def __init__(self, run_dir: Path, data: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.data = data
        self._lock = threading.Lock()

    def update(self, **changes: Any) -> None:
        """Apply ``changes`` and write run.json; an error other than a full disk stops the run naming the file."""
        with self._lock:
            self.data.update(changes)
            try:
                write_manifest(self.run_dir, self.data)
            except OSError as error:  # a full disk is already a DiskFullError, not an OSError
                raise WriteFailed(str(self.run_dir / MANIFEST), error) from None

    def mark_interrupted(self) -> bool:
        """Status "interrupted" (with the time) if the run is still "running"; True when written."""
        with self._lock:
            if self.data.get("status") != "running":
                return False
            self.data.update(status="interrupted", stopped=dt.datetime.now().isoformat(timespec="seconds"))
            write_manifest(self.run_dir, self.data)
            return True


def read_manifest(run_dir: str | Path, what: str = "--resume") -> dict[str, Any]:
    """The manifest of a run folder; UserError (starting with ``what``, e.g. "merge") when it is not an evalkit run."""
    path = Path(run_dir) / MANIFEST
    if not Path(run_dir).is_dir():
        raise UserError(f"{what} {run_dir}: no such run folder")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{what} {run_dir}: not an evalkit run folder (no {MANIFEST})") from None
    except (OSError, ValueError) as error:
        raise UserError(f"{what} {run_dir}: cannot read {MANIFEST}: {error}") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise UserError(f"{what} {run_dir}: {MANIFEST} is not a run manifest this evalkit can read")
    return data


def plan_for_resume(run_dir: str | Path, what: str = "--resume") -> Plan:
    """The plan of a recorded run, for ``evalkit run --resume RUN_DIR`` without a config argument.

    The manifest keeps the effective config (command-line overrides applied)
    with secrets masked; the secrets come back from the config file the run
    was started with (re-read, so ``${VAR}`` are expanded again), matched by
    model name and id. So do the models' endpoints: a resume sends to the
    URLs, tokens and replicas the config file names now (a shard resubmitted
    after its server moved), not to those the run started with. A run folder
    read on another machine, or in another copy of the project, finds its
    config file where it was given relative to the working directory, and the
    folders of runspecs, prompts and datasets where that file names them.
    """
    from evalkit.config import load_config
    from evalkit.plan import build_plan

    manifest = read_manifest(run_dir, what)
    saved = manifest.get("config") or {}
    source = config_file_here(manifest)
    fresh: Config | None = None
    if source and Path(source).is_file():
        fresh = load_config(source)
    data = _paths_here(_follow_infrastructure(_restore_secrets(saved, fresh), fresh), fresh)
    from pydantic import ValidationError

    from evalkit.config import format_validation_error
    from evalkit.errors import ConfigError

    try:
        config = Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, f"{Path(run_dir) / MANIFEST}")) from None
    if source and Path(source).is_file():
        config.anchor(Path(source).parent)  # the run's paths meant the config file's folder
    return build_plan(config, source=str(source))


def _restore_secrets(saved: dict[str, Any], fresh: Config | None) -> dict[str, Any]:
    """The saved config with every masked value (tokens, keys, URLs with credentials) taken from the fresh one.

    Model entries are matched by name and model id (the saved config may hold
    fewer models than the file after ``--model``); everything else by its path.
    """
    data = json.loads(json.dumps(saved))
    if fresh is None:
        return _unmask(data, None)
    current = fresh.model_dump(mode="json")
    fresh_models = current.get("models") or []
    for entry in data.get("models") or []:
        info = entry.get("info", {}) if isinstance(entry, dict) else {}
        match = next(
            (
                m
                for m in fresh_models
                if m["info"].get("name") == info.get("name") and m["info"].get("model") == info.get("model")
            ),
            None,
        )
        entry["info"] = _unmask(info, match["info"] if match else None)
    for key, value in data.items():
        if key != "models":
            data[key] = _unmask(value, current.get(key))
    return data


def config_file_here(manifest: dict[str, Any]) -> str:
    """The run's config file on this machine: where it was, else where it was given from the working directory.

    A run folder merged or resumed in another copy of the project (another
    node, a container) names a config file of the machine it ran on; the path
    as typed (``config.yaml``) finds the copy's own. Whatever is found is
    checked by the fingerprints, never trusted.
    """
    recorded = str(manifest.get("config_file") or "config")
    given = manifest.get("config_given")
    elsewhere = not Path(recorded).is_file() and isinstance(given, str) and bool(given)
    if elsewhere and not Path(str(given)).is_absolute() and Path(str(given)).is_file():
        return str(given)
    return recorded


def _paths_here(data: dict[str, Any], fresh: Config | None) -> dict[str, Any]:
    """The saved config with the folders it reads (runspecs, prompts, dataset copies, log) and its budget as ``fresh``
    names them.

    Paths are not part of a run's identity (:func:`answer_fingerprint`): the
    saved ones are the machine's the run started on, the fresh ones this one's.
    """
    if fresh is None:
        return data
    current = fresh.model_dump(mode="json")
    for key in ("runspecs_dir", "prompts_dir", "dataset_paths", "log_file", *_SPENDING_FIELDS):
        data[key] = current.get(key)
    return data


def _follow_infrastructure(data: dict[str, Any], fresh: Config | None) -> dict[str, Any]:
    """The saved config with each model's replicas, transport (URLs, tokens, timeouts, launch) and price as ``fresh``
    has them.

    Endpoints are not part of a run's identity: a model keeps everything that
    decides its answers from the saved config, and takes its replicas (their
    number and each one's transport settings) from the config file as it is
    now. A model the file no longer names keeps what was saved; so does the
    judge's endpoint when the file has no judge.
    """
    if fresh is None:
        return data
    current = fresh.model_dump(mode="json")
    now: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for entry in current.get("models") or []:
        info = entry["info"]
        now.setdefault((info.get("name"), info.get("model")), []).append(info)
    models: list[dict[str, Any]] = []
    taken: set[tuple[Any, Any]] = set()
    for entry in data.get("models") or []:
        info = entry.get("info", {}) if isinstance(entry, dict) else {}
        key = (info.get("name"), info.get("model"))
        if key not in now:
            models.append(entry)
        elif key not in taken:  # the model's first saved entry stands for all its replicas, in the file's number
            taken.add(key)
            for replica in now[key]:
                transport = {k: v for k, v in replica.items() if k in _TRANSPORT_FIELDS or k == "price"}
                kept = {k: v for k, v in info.items() if k not in _TRANSPORT_FIELDS and k != "price"}
                models.append({**entry, "info": {**kept, **transport}})
    data["models"] = models
    judge, judge_now = data.get("judge_properties"), current.get("judge_properties")
    if isinstance(judge, dict) and isinstance(judge_now, dict):
        judge.update({k: v for k, v in judge_now.items() if k in _JUDGE_TRANSPORT_FIELDS})
    return data


def _unmask(saved: Any, fresh: Any) -> Any:
    if isinstance(saved, str):
        return (fresh if fresh is not None else None) if MASK in saved else saved
    if isinstance(saved, dict):
        return {k: _unmask(v, fresh.get(k) if isinstance(fresh, dict) else None) for k, v in saved.items()}
    if isinstance(saved, list):
        return [
            _unmask(v, fresh[i] if isinstance(fresh, list) and i < len(fresh) else None) for i, v in enumerate(saved)
        ]
    return saved
