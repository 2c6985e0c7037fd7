"""A whole run: plan -> clients -> all engines at once -> results on disk.

A run folder holds ``run.json`` (the manifest: redacted config, where the
response store is, whether the run finished), ``records/`` and the results.
``RunOptions(resume=RUN_DIR)`` finishes a killed run in its own folder: every
answer committed to the store before the kill is taken from it, the rest is
asked, and the results are those an uninterrupted run would have written.
Re-running the same command after a kill does the same in a new folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import gc
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from evalkit.clients.endpoint import EndpointPool
from evalkit.clients.judge import JudgeClient
from evalkit.clients.model_client import ModelClient, RetryPolicy
from evalkit.clients.protocol import EndpointProtocol
from evalkit.config import Config
from evalkit.data.fingerprint import dataset_fingerprint, fingerprint_change
from evalkit.errors import DiskFullError, RunInterrupted, UserError, WriteFailed
from evalkit.languages import target_language
from evalkit.metrics import METRICS, Metric
from evalkit.plan import EngineSpec, ModelPlan, Plan, judge_prompt_for
from evalkit.prompts.library import library_for, prompt_context_for
from evalkit.report.progress import Progress
from evalkit.run.checksums import CHECKSUMS, folder_checksums
from evalkit.run.cost.budget import attach_accounts, check_prices, new_spending, spent
from evalkit.run.cost.usage import PARTIAL_BUDGET, run_usage
from evalkit.run.engine import Engine, ProgressHook
from evalkit.run.engine_result import EngineResult
from evalkit.run.hardstop import GRACE_SECONDS, HardStop
from evalkit.run.manifest import (
    MANIFEST,
    MANIFEST_FORMAT,
    ManifestWriter,
    answer_fingerprint,
    config_as_given,
    earlier_answer_fingerprint,
    read_manifest,
)
from evalkit.run.sent import SentLogs, sent_folder
from evalkit.run.shard import Shard, plan_fingerprint
from evalkit.util import jsonutil
from evalkit.util.atomic import write_json_atomic
from evalkit.util.diskfull import disk_full, is_disk_full
from evalkit.util.redact import (
    redact,
    scrub,
    scrub_tree,
    secrets_filtered,
    secrets_of,
)

if TYPE_CHECKING:
    from evalkit.clients.store import ResponseStore
    from evalkit.report.results import ResultRow
    from evalkit.serve.launch import LaunchedServers

log = logging.getLogger("evalkit")


@dataclass
class RunOptions:
    output_dir: str | None = None
    no_cache: bool = False
    refresh_cache: bool = False
    quiet: bool = False
    window: int = 256
    run_dir: str | None = None
    #: called once per answered (engine, model, sample) with ok=True/False; default: periodic lines
    progress: ProgressHook | None = None
    #: a run folder to finish (``evalkit run --resume RUN_DIR``): its records are rewritten, its store reused
    resume: str | None = None
    #: ``evalkit run --shard K/N``: run only this share of every pair's samples (a Shard or "K/N"); with
    #: ``resume`` it defaults to the resumed run's shard and must equal it when given
    shard: Shard | str | None = None


@dataclass
class RunOutcome:
    run_dir: Path
    rows: list[ResultRow]
    engines: list[EngineResult]
    seconds: float
    #: HTTP requests sent to the models' endpoints (retries included)
    requests_sent: int = 0
    #: answers the response store held from earlier runs
    store_hits: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    #: answers one pair of this run took from another (same dataset, same request), not sent again
    reused: int = 0
    #: reason -> failed answers whose endpoint was not there (run.json "incomplete"; a resume asks them again)
    unanswered: dict[str, int] = field(default_factory=dict)
    #: stored answers whose bytes no longer matched their checksum: not used, asked again
    changed: int = 0
    #: the damaged response store set aside (untouched) and the fresh one used beside it, or None
    damaged_store: tuple[str, str] | None = None
    #: why the run ended before its plan did ("budget": its budget was spent); None: it ran everything
    partial: str | None = None


def build_metric(spec: EngineSpec, config: Config, judge: Any = None) -> Metric:
    """The metric of one pair as the run scores with it (``judge``: the run's judge client, for judge metrics).

    ``evalkit merge`` builds the same object to compute a merged result (with a stand-in judge that only
    names the judge model, as nothing is asked).
    """
    cls = METRICS.get(spec.metric)
    language = target_language(spec.dataset.language)
    if cls.needs_judge:
        prompt = judge_prompt_for(spec.metric, library_for(config).judges)
        return cls(language=language, judge=judge, judge_prompt=prompt, **spec.options)
    return cls(language=language, **spec.options)


def _resumed_shard(given: Shard | str | None, resumed: dict[str, Any] | None, run_dir: Path) -> Shard | None:
    """The run's shard: the one given, or the resumed run's; a resume given another shard is refused."""
    shard = Shard.parse(given) if isinstance(given, str) else given
    if resumed is None:
        return shard
    if resumed.get("merged"):
        raise UserError(
            f"--resume {run_dir}: a merged run (evalkit merge) has nothing to resume; resume one of its shards"
        )
    saved = resumed.get("shard")
    before = Shard(int(saved["index"]), int(saved["count"])) if isinstance(saved, dict) else None
    if shard is not None and shard != before:
        was = f"shard {before}" if before else "the whole plan (no --shard)"
        raise UserError(f"--resume {run_dir}: --shard {shard} differs from the run's {was}; drop --shard")
    return before


def new_run_dir(output_dir: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = output_dir / f"{stamp}_{secrets.token_hex(3)}"
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def build_clients(
    plan: Plan, store: ResponseStore | None, tokens: dict[str, str] | None = None, hidden: Sequence[str] = ()
) -> dict[str, ModelClient]:
    """Every model's client; ``tokens`` are the bearer tokens their ``auth_command`` printed, by model name;
    ``hidden`` the run's secrets, masked in the replicas' names and errors wherever they show."""
    clients = {}
    for model in plan.models.values():
        clients[model.name] = model_client(model, store, (tokens or {}).get(model.name), hidden)
    return clients


def command_tokens(plan: Plan, stop: threading.Event | None = None) -> dict[str, str]:
    """The token each model's ``auth_command`` prints now, by model name (UserError when one fails); ``stop`` set
    ends the command running (the run was interrupted: the command's own process group sees no Ctrl-C)."""
    from evalkit.clients.token_command import command_token

    return {
        model.name: command_token(model.info.auth_command, f"models: {model.name}", stop)
        for model in plan.models.values()
        if model.info.auth_command
    }


def model_client(
    model: ModelPlan, store: ResponseStore | None, token: str | None = None, hidden: Sequence[str] = ()
) -> ModelClient:
    pools: list[tuple[EndpointPool, int]] = []
    for info in model.replicas:
        for url in info.urls:
            protocol = EndpointProtocol(
                base_url=url,
                kind=model.kind,
                auth_token=token or info.auth_token,
                api_version=info.azure_api_version,
                deployment=info.model,
            )
            pool = EndpointPool(
                protocol,
                connections=info.batch_size,
                timeout=info.timeout,
                max_body=info.max_response_bytes,
                follow_redirects=info.follow_redirects,
                hidden=hidden,
            )
            pools.append((pool, info.batch_size))
    info = model.info
    policy = RetryPolicy(retry_attempts=info.retry_attempts, deadline=info.deadline)  # None: derived from timeout
    return ModelClient(
        model.name,
        pools,
        policy,
        store=store,
        delay_ms=info.delay,
        requests_per_minute=info.requests_per_minute,
        tokens_per_minute=info.tokens_per_minute,
    )


@contextlib.contextmanager
def quiet_garbage_collector(young_threshold: int = 20_000) -> Iterator[None]:
    """Fewer, cheaper cyclic collections while requests fly.

    Start-up leaves hundreds of thousands of long-lived objects (modules, the
    catalogue, pydantic models) that every full collection would re-scan;
    ``gc.freeze`` moves them out of the collector's view, and a larger young
    generation collects the per-request garbage in fewer passes. Measured
    (BENCHMARKS.md): GC time in the latency-bound benchmark 7.6 s -> 0.01 s,
    longest pause 114 -> 7 ms, peak RSS unchanged.
    """
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young_threshold, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


async def _run_engines(engines: list[Engine]) -> list[EngineResult]:
    """All engines at once; an engine that stops the run (a full disk) cancels the others and raises."""
    tasks = [asyncio.ensure_future(engine.run()) for engine in engines]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        stopped = [task for task in tasks if not task.done()]
        for task in stopped:
            task.cancel()
        await asyncio.gather(*stopped, return_exceptions=True)
    errors = [task.exception() for task in tasks if not task.cancelled()]  # every one retrieved: no stray log
    first = next((error for error in errors if error is not None), None)
    if first is not None:
        raise first
    return [task.result() for task in tasks]


def _dataset_fingerprints(plan: Plan) -> dict[str, Any]:
    """The fingerprint of every local dataset the plan reads (run.json keeps them for a resume to check)."""
    found: dict[str, Any] = {}
    for spec in plan.engines:
        name = spec.dataset.name
        if name in found:
            continue
        try:
            found[name] = dataset_fingerprint(spec.dataset)
        except Exception:  # unreadable data: its engine reports it, naming the file and row
            found[name] = None
    return found


def _check_datasets_unchanged(plan: Plan, resumed: dict[str, Any], now: dict[str, Any], run_dir: Path) -> None:
    """Refuse a resume whose data changed since the run started: its stored answers belong to other rows."""
    saved = resumed.get("datasets") or {}
    specs = {spec.dataset.name: spec.dataset for spec in plan.engines}
    changes = [
        change
        for name, before in saved.items()
        if isinstance(before, dict) and name in specs
        for change in [fingerprint_change(specs[name], before, now.get(name))]
        if change is not None
    ]
    if changes:
        raise UserError(
            f"--resume {run_dir}: {'; '.join(changes)}. The answers already recorded belong to the data as it "
            "was: restore it, or start a new run"
        )


def _check_plan_unchanged(resumed: dict[str, Any], identity: str, run_dir: Path) -> None:
    """Refuse a resume whose runspec entries or prompts changed since the run started (its data did not)."""
    saved = resumed.get("plan")  # absent in runs of an evalkit from before plan identities: not checked
    if saved is not None and saved != identity:
        raise UserError(
            f"--resume {run_dir}: the plan differs from the one this run started with (a runspec entry, a prompt "
            "of prompts_dir or an in-context examples file changed); restore them as they were, or start a new run"
        )


def _servers_started(plan: Plan, log_dir: Path) -> contextlib.AbstractAsyncContextManager[Any]:
    """The ``launch:`` servers of the plan, started (:func:`evalkit.serve.launch.launched_servers`); None without.

    A run whose config launches nothing never imports the launching code.
    """
    if not any(info.launch is not None for model in plan.models.values() for info in model.replicas):
        return contextlib.nullcontext(None)
    from evalkit.serve.launch import launched_servers

    return launched_servers(plan, log_dir)


def _launched(servers: list[Any] | None) -> TypeGuard[LaunchedServers]:
    """Whether ``servers`` are the servers a run launched (a plain list, or None, needs no launching code)."""
    if servers is None or type(servers) is list:
        return False
    from evalkit.serve.launch import LaunchedServers

    return isinstance(servers, LaunchedServers)


def _store_path(config: Config, output_dir: Path) -> Path:
    return Path(config.cache.path) if config.cache.path else output_dir / "responses.sqlite"


async def execute(plan: Plan, options: RunOptions) -> RunOutcome:
    """Run the plan; servers named by ``launch:`` blocks are started first and always stopped."""
    from evalkit.data.audio.workers import shutdown_audio_workers
    from evalkit.data.hubcache import require_hub_or_stored
    from evalkit.serve.signals import stop_on_signals

    # before any server or engine starts: hub data is stored or the hub answers (else one message, exit 2)
    await asyncio.to_thread(require_hub_or_stored, [spec.dataset for spec in plan.engines])
    config = plan.config
    hidden = secrets_of(config)
    # short-lived tokens from the models' auth_command: fetched before anything starts, hidden like any secret
    stop_commands = threading.Event()
    try:
        tokens = await asyncio.to_thread(command_tokens, plan, stop_commands)
    except BaseException:
        stop_commands.set()
        raise
    hidden.extend(tokens.values())
    state: dict[str, Any] = {"tokens": tokens}
    output_dir = Path(options.output_dir or config.output_dir)
    with (
        stop_on_signals(None, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) as received,
        HardStop(received, lambda: _mark_interrupted(state), lambda signum: _hard_stop(state, signum)),
    ):
        try:
            with secrets_filtered(hidden) as secret_filter:
                state["secret_filter"] = secret_filter
                async with _servers_started(plan, output_dir / "server-logs") as servers:
                    state["servers"] = servers
                    outcome = await _execute(plan, options, hidden, servers, state)
                if servers is not None and (servers or servers.replica_sets):
                    # results.json was written while the servers ran: now it says how each of them ended
                    await asyncio.to_thread(_record_server_ends, outcome, servers.describe(), hidden, state)
                return outcome
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit) as error:
            if isinstance(error, RunInterrupted) or not (received or isinstance(error, KeyboardInterrupt)):
                raise  # a cancellation that is not a signal (a caller's timeout) stays a cancellation
            signum = received[0] if received else int(signal.SIGINT)
            raise RunInterrupted(state.get("run_dir"), signum) from None
        except DiskFullError as error:
            # say where the answers are and how to finish: this folder, once there is room
            error.run_dir = str(state["run_dir"]) if state.get("run_dir") else None
            error.store = state.get("store")
            raise
        except WriteFailed as error:
            error.run_dir = str(state["run_dir"]) if state.get("run_dir") else None
            raise
        except OSError as error:
            if is_disk_full(error):  # a write no narrower handler knew (a folder, a log): still one message
                full = disk_full(error.filename or output_dir)
                full.run_dir = str(state["run_dir"]) if state.get("run_dir") else None
                full.store = state.get("store")
                raise full from None
            raise
        finally:
            # audio worker processes end with the run, also in long-lived hosts such as notebooks; a signal
            # during this shutdown is still watched, so the workers are never left behind
            await asyncio.shield(asyncio.to_thread(shutdown_audio_workers))


def _record_server_ends(
    outcome: RunOutcome, described: list[dict[str, Any]], hidden: list[str], state: dict[str, Any]
) -> None:
    """Put the servers' ends (when, exit code or signal, why) into results.json, and its new checksum in run.json."""
    path = outcome.run_dir / "results.json"
    try:
        payload = jsonutil.loads(path.read_bytes())
        payload["servers"] = outcome.meta["servers"] = scrub_tree(described, hidden)
        write_json_atomic(path, payload)
        writer: ManifestWriter | None = state.get("manifest")
        if writer is not None:
            writer.update(**{CHECKSUMS: folder_checksums(outcome.run_dir)})
    except (OSError, ValueError, UserError) as error:
        log.warning("%s: cannot record how the servers ended: %s", path, error)


def _mark_interrupted(state: dict[str, Any]) -> None:
    """run.json says "interrupted" as soon as a signal came (the hard-stop thread calls it)."""
    writer: ManifestWriter | None = state.get("manifest")
    if writer is not None:
        writer.mark_interrupted()


def _hard_stop(state: dict[str, Any], signum: int) -> None:
    """The last words of a run whose orderly end after a signal took too long: servers killed, one line said."""
    for server in state.get("servers") or []:
        with contextlib.suppress(OSError):
            os.killpg(server.pid, signal.SIGKILL)  # launched servers lead their own process group
    name = signal.Signals(signum).name if signum in signal.valid_signals() else f"signal {signum}"
    run_dir = state.get("run_dir")
    where = (
        f"; {Path(run_dir) / MANIFEST} has status 'interrupted' and every answer committed to the response store is "
        f"kept. Resume it with: evalkit run --resume {run_dir}"
        if run_dir is not None
        else ""
    )
    sys.stderr.write(
        f"evalkit: interrupted ({name}); the orderly shutdown did not finish within "
        f"{GRACE_SECONDS:g} s (a commit, a thread or a server still busy), so evalkit stopped at "
        f"once{where}\n"
    )
    sys.stderr.flush()


def _check_run_dir(run_dir: Path) -> None:
    """A given run folder is new, empty or an earlier evalkit run's: never a folder of someone else's files."""
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise UserError(f"run folder {run_dir}: not a folder; expected a new or empty folder, or an evalkit run's")
    if (run_dir / MANIFEST).is_file() or not any(run_dir.iterdir()):
        return
    raise UserError(
        f"run folder {run_dir}: holds files evalkit did not make (no {MANIFEST}); expected a new or empty folder, "
        "or an evalkit run's. evalkit leaves it untouched: choose another folder"
    )


def _keep_tokens_fresh(
    plan: Plan, clients: dict[str, ModelClient], hidden: list[str], secret_filter: Any
) -> list[asyncio.Task[None]]:
    """One task per model with an ``auth_command``: a new token every ``auth_refresh_s``, hidden from the logs."""
    from evalkit.clients.token_command import keep_fresh

    def use(client: ModelClient) -> Callable[[str], None]:
        def take(token: str) -> None:
            hidden.append(token)
            if secret_filter is not None:
                secret_filter.add(token)
            client.use_token(token)

        return take

    return [
        asyncio.create_task(
            keep_fresh(model.info.auth_command, model.info.auth_refresh_s, f"models: {model.name}", use(clients[name]))
        )
        for name, model in plan.models.items()
        if model.info.auth_command
    ]


async def _execute(
    plan: Plan,
    options: RunOptions,
    hidden: list[str],
    servers: list[Any] | None = None,
    state: dict[str, Any] | None = None,
) -> RunOutcome:
    state = {} if state is None else state
    config = plan.config
    started = time.perf_counter()
    started_unix = time.time()
    output_dir = Path(options.output_dir or config.output_dir)
    fingerprint = answer_fingerprint(config)
    use_store = config.cache.enabled and not options.no_cache
    store_path = _store_path(config, output_dir)
    refresh_since: float | None = started_unix if options.refresh_cache else None
    resumed: dict[str, Any] | None = None
    if options.resume:
        run_dir = Path(options.resume)
        resumed = read_manifest(run_dir)
        if resumed.get("fingerprint") not in (fingerprint, earlier_answer_fingerprint(config)):
            raise UserError(
                f"--resume {run_dir}: the config differs from the one this run started with "
                "(datasets, metrics, models, filters or generation settings changed); start a new run instead"
            )
        saved_store = resumed.get("store") or {}
        # --no-cache with --resume: the run folder is finished by asking every sample again, the store untouched
        if saved_store.get("path") and not config.cache.path:
            store_path = Path(saved_store["path"])
        if saved_store.get("refresh_since") is not None:
            refresh_since = float(saved_store["refresh_since"])  # a refresh run keeps what it already refreshed
    shard = _resumed_shard(options.shard, resumed, Path(options.resume or ""))
    check_prices(plan)  # a dollar budget with a model of no price: refused before anything is made or sent
    spending = new_spending(config, resumed)
    datasets = await asyncio.to_thread(_dataset_fingerprints, plan)
    identity = plan_fingerprint(plan, fingerprint, datasets)
    if resumed is not None:
        _check_datasets_unchanged(plan, resumed, datasets, Path(options.resume or ""))
        _check_plan_unchanged(resumed, identity, Path(options.resume or ""))
    elif options.run_dir:
        run_dir = Path(options.run_dir)
        _check_run_dir(run_dir)
    # the store is opened before the run folder is made: a store evalkit refuses leaves no folder behind
    store: ResponseStore | None = None
    if use_store:
        from evalkit.clients.store import ResponseStore  # sqlite3: not for a run with the store off

        store = await ResponseStore(store_path, refresh_since=refresh_since).open()
    try:
        # what a refusal before the first request takes away again: never a resumed run's or an earlier run's files
        if resumed is None and not options.run_dir:
            run_dir, new_folder = new_run_dir(output_dir), True
        else:
            new_folder = resumed is None and not run_dir.exists()
        new_manifest = resumed is None and not (run_dir / MANIFEST).exists()
        run_dir.mkdir(parents=True, exist_ok=True)
    except BaseException:
        if store is not None:
            await store.close()
        raise
    state["store"] = str(store_path) if use_store else None
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "run_id": run_dir.name,
        "status": "running",
        "started": dt.datetime.now().isoformat(timespec="seconds"),
        "started_unix": started_unix,
        "resumed": [*((resumed or {}).get("resumed") or []), dt.datetime.now().isoformat(timespec="seconds")]
        if resumed
        else [],
        "config_file": str(Path(plan.source).resolve()) if plan.source and Path(plan.source).is_file() else plan.source,
        "config_given": plan.source,  # as typed: a copy of the project elsewhere finds its own file by it
        "command": list(sys.argv),
        "fingerprint": fingerprint,
        "config": redact(config_as_given(config)),
        "store": {
            "enabled": use_store,
            "path": str(store_path.resolve()) if use_store else None,
            "refresh_since": refresh_since,
        },
        "engines": [spec.id for spec in plan.engines],
        "models": list(plan.models),
        "datasets": datasets,
        "plan": identity,
        "spent": spent(spending),
    }
    if shard is not None:  # what `evalkit merge` checks: every shard of one plan, each once
        manifest["shard"] = {"index": shard.index, "count": shard.count, "plan": identity}
    if resumed:
        manifest["started"] = resumed.get("started", manifest["started"])
        manifest["started_unix"] = resumed.get("started_unix", started_unix)
    manifest = scrub_tree(manifest, hidden)
    writer = ManifestWriter(run_dir, manifest)
    started_engines = False
    try:
        writer.update()
        state["manifest"] = writer
        state["run_dir"] = run_dir
        clients = build_clients(plan, store, state.get("tokens"), hidden)
        refreshers = _keep_tokens_fresh(plan, clients, hidden, state.get("secret_filter"))
        if _launched(servers):
            servers.attach(clients)  # a server that is lost or joins mid-run reaches its model's client
            servers.move_logs(run_dir / "server-logs")  # a copied run folder holds its servers' logs
        judge = JudgeClient(config.judge_properties, store) if config.judge_properties is not None else None
        attach_accounts(spending, plan, clients, judge)
        progress = options.progress or Progress(quiet=options.quiet)
        if isinstance(progress, Progress):
            progress.request_counter = lambda: (
                sum(c.sent for c in clients.values()),
                sum(c.store_hits for c in clients.values()),
            )

        # what was sent, once per dataset for all its engines (records/sent/<dataset>.jsonl)
        sent_logs = SentLogs(sent_folder(run_dir / "records"))
        try:
            engines = [
                Engine(
                    spec,
                    plan.models,
                    clients,
                    config.filters,
                    run_dir / "records",
                    prompt_context=prompt_context_for(config, spec.dataset, spec.models),
                    window=options.window,
                    progress=progress,
                    use_store=store is not None,
                    seed=config.filters.seed,
                    metric_factory=lambda spec: build_metric(spec, config, judge),
                    shard=shard,
                    sent_logs=sent_logs,
                    spending=spending,
                    judge_price=judge.price if judge is not None else None,
                )
                for spec in plan.engines
            ]
            if isinstance(progress, Progress):  # a stop_at_ci pair's line shows what it drew, not a total to reach
                for engine in engines:
                    if engine.early_stop is not None:
                        for name in engine.spec.models:
                            progress.stops_early(
                                engine.spec.id, name, functools.partial(engine.early_stop.progress_of, name)
                            )
            started_engines = True
            with quiet_garbage_collector():
                results = await _run_engines(engines)
        finally:
            sent_logs.close()
            for task in refreshers:
                task.cancel()
            try:
                for client in clients.values():
                    await client.close()
                if judge is not None:
                    await judge.close()
            finally:
                if store is not None:
                    await store.close()  # always: its SQLite thread would otherwise keep the process alive
        for result in results:
            if result.error:
                result.error = scrub(result.error, hidden)
        # after the run: not on the way to its first request
        from evalkit.report.results import aggregate_rows, package_versions
        from evalkit.run.result_rows import rows_from_engines
        from evalkit.run.stopping.at_ci import partial_summary
        from evalkit.run.unanswered import unanswered

        rows = rows_from_engines(results, config.max_failure_rate)
        not_asked = unanswered(rows)
        rows += aggregate_rows(rows, config.aggregate, plan.catalog.resolve)
        seconds = time.perf_counter() - started
        meta = {
            "run_id": run_dir.name,
            "finished": dt.datetime.now().isoformat(timespec="seconds"),
            "seconds": round(seconds, 3),
            "config_file": plan.source,
            "config": manifest["config"],
            "versions": package_versions(),
            "requests": {name: c.stats() for name, c in clients.items()},
            "servers": servers.describe() if _launched(servers) else [server.describe() for server in servers or []],
        }
        if shard is not None:  # results of a share of the plan, not of the plan: said where they are read
            meta["shard"] = manifest["shard"]
        answered = [*clients.values(), *([judge.client] if judge is not None else [])]
        meta["usage"] = run_usage(spending, {c.name: (c.store_hits, c.reused + c.deduplicated) for c in answered})
        partial = PARTIAL_BUDGET if any(result.partial == PARTIAL_BUDGET for result in results) else None
        if spending.limited:
            meta["budget"] = spending.as_dict()
        # results over fewer samples than the plan's (stop_at_ci, the budget): never presented as complete,
        # results.json says so beside every row that stopped early and here
        stopped = partial_summary(rows)
        if stopped is None and partial is not None:
            stopped = {"reason": partial, "results": []}
        if stopped is not None:
            meta["partial"] = stopped
        if judge is not None:
            meta["requests"][judge.client.name] = judge.client.stats()
        meta = scrub_tree(meta, hidden)
        for row in rows:
            if row.error:
                row.error = scrub(row.error, hidden)
            row.failure_examples = {k: scrub(v, hidden) for k, v in row.failure_examples.items()}
        _write_results(run_dir, rows, meta)
        # what a merge verifies: the records and results exactly as this run wrote them
        checksums = await asyncio.to_thread(folder_checksums, run_dir)
    except BaseException as error:
        if not started_engines:
            if store is not None:
                await store.close()  # the engines' own `finally` never ran
                store = None
            if isinstance(error, UserError) and new_manifest:
                # refused before the first request: what this run made holds nothing worth keeping
                _remove_new_folder(run_dir, remove_folder=new_folder)
                state.pop("run_dir", None)
                state.pop("manifest", None)
                raise
        # run.json tells the truth: an interrupted run is resumable, a crashed one says why
        interrupted = isinstance(error, (asyncio.CancelledError, KeyboardInterrupt, SystemExit))
        changes: dict[str, Any] = {
            "status": "interrupted" if interrupted else "failed",
            "stopped": dt.datetime.now().isoformat(timespec="seconds"),
        }
        if not interrupted:
            changes["error"] = scrub(f"{type(error).__name__}: {error}", hidden)
        if started_engines:
            changes["spent"] = spent(spending)  # what a resume's budget starts from
        manifest["store"].update(_store_counts(store))
        with contextlib.suppress(OSError, UserError):  # already failing: the first error is the one to tell
            writer.update(**changes)
        raise
    manifest["store"].update(_store_counts(store))
    # samples whose endpoint was not there are not answers: the run is incomplete until a resume asks them
    status: dict[str, Any] = {"status": "incomplete", "unanswered": not_asked} if not_asked else {"status": "finished"}
    writer.data.pop("partial", None)  # a resumed run says what this run did, not what the killed one had
    if "partial" in meta:
        status["partial"] = meta["partial"]
    if partial is not None:  # the budget stopped it: resumable with a larger one
        status.update(status="partial", budget=spending.as_dict())
    status["spent"] = spent(spending)
    writer.update(**status, finished=meta["finished"], seconds=meta["seconds"], **{CHECKSUMS: checksums})
    return RunOutcome(
        run_dir=run_dir,
        rows=rows,
        engines=results,
        seconds=seconds,
        requests_sent=sum(c.sent for c in clients.values()),
        store_hits=sum(c.store_hits for c in clients.values()),
        meta=meta,
        reused=sum(c.reused + c.deduplicated for c in clients.values()),
        changed=store.changed if store is not None else 0,
        damaged_store=(str(store.damaged), str(store.path)) if store is not None and store.damaged else None,
        unanswered=not_asked,
        partial=partial,
    )


def _remove_new_folder(run_dir: Path, remove_folder: bool) -> None:
    """Take back what a refused run wrote: its run.json, then (``remove_folder``) the folder if it is empty.

    Only what this run made goes: a folder that holds anything else (the user's, or a file written before the
    refusal) is left as it is.
    """
    with contextlib.suppress(OSError):
        (run_dir / MANIFEST).unlink(missing_ok=True)
        if remove_folder:
            run_dir.rmdir()  # fails, and keeps the folder, unless it is empty


def _store_counts(store: ResponseStore | None) -> dict[str, Any]:
    """What the response store met, for run.json: answers that changed (asked again), unverified ones, damage.

    A damaged store names the file set aside and the one written instead, so a resume (which opens ``path`` again
    and is led to the same replacement) and a reader of run.json both know where the answers are.
    """
    if store is None:
        return {}
    counts: dict[str, Any] = {"changed_answers": store.changed, "unverified_answers": store.unverified}
    if store.damaged is not None:
        counts["damaged"] = {
            "path": str(store.damaged.resolve()),
            "problem": store.damage,
            "replacement": str(store.path.resolve()),
            "answers_saved": store.salvaged,
        }
    return counts


def _write_results(run_dir: Path, rows: list[ResultRow], meta: dict[str, Any]) -> None:
    """results.json and its views; a write error other than a full disk stops the run naming the file (exit 1)."""
    from evalkit.report.files import write_results  # the writers load at the end, not before the first request

    try:
        write_results(run_dir, rows, meta)
    except OSError as error:
        if is_disk_full(error):
            raise
        raise WriteFailed(str(error.filename or run_dir / "results.json"), error) from None
