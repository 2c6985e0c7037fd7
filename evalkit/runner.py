"""A whole run: plan -> clients -> all engines at once -> results on disk."""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.clients.judge import JudgeClient
from evalkit.clients.model_client import ModelClient, RetryPolicy
from evalkit.clients.pool import EndpointPool
from evalkit.clients.protocol import EndpointProtocol
from evalkit.engine import Engine, EngineResult, ProgressHook
from evalkit.languages import target_language
from evalkit.metrics import METRICS, Metric
from evalkit.plan import EngineSpec, ModelPlan, Plan
from evalkit.prompts.library import prompt_context_for
from evalkit.report.progress import Progress
from evalkit.report.redact import redact
from evalkit.report.results import ResultRow, aggregate_rows, package_versions, rows_from_engines, write_results
from evalkit.store import ResponseStore


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


@dataclass
class RunOutcome:
    run_dir: Path
    rows: list[ResultRow]
    engines: list[EngineResult]
    seconds: float
    requests_sent: int = 0
    store_hits: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


def new_run_dir(output_dir: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = output_dir / f"{stamp}_{secrets.token_hex(3)}"
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def build_clients(plan: Plan, store: ResponseStore | None) -> dict[str, ModelClient]:
    clients = {}
    for model in plan.models.values():
        clients[model.name] = model_client(model, store)
    return clients


def model_client(model: ModelPlan, store: ResponseStore | None) -> ModelClient:
    pools: list[tuple[EndpointPool, int]] = []
    for info in model.replicas:
        for url in info.urls:
            protocol = EndpointProtocol(
                base_url=url, kind=model.kind, auth_token=info.auth_token, api_version=info.api_version, deployment=info.model
            )
            pools.append((EndpointPool(protocol, connections=info.batch_size, timeout=info.timeout), info.batch_size))
    info = model.info
    policy = RetryPolicy(retry_attempts=info.retry_attempts)
    return ModelClient(model.name, pools, policy, store=store, delay_ms=info.delay, requests_per_minute=info.requests_per_minute)


async def execute(plan: Plan, options: RunOptions) -> RunOutcome:
    """Run the plan; servers named by ``launch:`` blocks are started first and always stopped."""
    from evalkit.launch import launched_servers

    output_dir = Path(options.output_dir or plan.config.output_dir)
    async with launched_servers(plan, output_dir / "server-logs"):
        return await _execute(plan, options)


async def _execute(plan: Plan, options: RunOptions) -> RunOutcome:
    config = plan.config
    started = time.perf_counter()
    output_dir = Path(options.output_dir or config.output_dir)
    run_dir = Path(options.run_dir) if options.run_dir else new_run_dir(output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = None
    if config.cache.enabled and not options.no_cache:
        store_path = Path(config.cache.path) if config.cache.path else output_dir / "responses.sqlite"
        store = await ResponseStore(store_path, refresh=options.refresh_cache).open()
    clients = build_clients(plan, store)
    judge = JudgeClient(config.judge_properties, store) if config.judge_properties is not None else None
    progress = options.progress or Progress(quiet=options.quiet)

    def make_metric(spec: EngineSpec) -> Metric:
        cls = METRICS.get(spec.metric)
        language = target_language(spec.dataset.language)
        return cls(language=language, judge=judge) if cls.needs_judge else cls(language=language)

    engines = [
        Engine(spec, plan.models, clients, config.filters, run_dir / "records", prompt_context=prompt_context_for(config, spec.dataset, spec.models), window=options.window,
               progress=progress, use_store=store is not None, seed=config.filters.seed, metric_factory=make_metric)
        for spec in plan.engines
    ]
    try:
        results = list(await asyncio.gather(*(engine.run() for engine in engines)))
    finally:
        for client in clients.values():
            await client.close()
        if judge is not None:
            await judge.close()
        if store is not None:
            await store.close()
    rows = rows_from_engines(results, config.max_failure_rate)
    rows += aggregate_rows(rows, config.aggregate, plan.catalog.resolve)
    seconds = time.perf_counter() - started
    meta = {
        "run_id": run_dir.name,
        "finished": dt.datetime.now().isoformat(timespec="seconds"),
        "seconds": round(seconds, 3),
        "config_file": plan.source,
        "config": redact(config.model_dump(mode="json")),
        "versions": package_versions(),
        "requests": {
            name: {"sent": c.sent, "store_hits": c.store_hits, "deduplicated": c.deduplicated, "replicas": c.replica_counts()}
            for name, c in clients.items()
        },
    }
    write_results(run_dir, rows, meta)
    return RunOutcome(
        run_dir=run_dir, rows=rows, engines=results, seconds=seconds,
        requests_sent=sum(c.sent for c in clients.values()), store_hits=sum(c.store_hits for c in clients.values()), meta=meta,
    )
