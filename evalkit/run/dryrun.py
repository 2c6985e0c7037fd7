"""`evalkit run --dry-run`: the plan, the samples, the requests, and what the store already holds; nothing is sent.

The dry run drives the real :class:`~evalkit.run.engine.Engine` of every
dataset-metric pair, with a :class:`DryClient` in place of each model
client: the engine streams and filters the samples, builds the prompts
(templates, in-context examples, system prompts), decodes and cuts the audio
and makes its requests exactly as in a run, and the dry client records each
request's store key instead of sending it. A stored answer is handed back,
so a multi-turn conversation continues as far as the store can take it.
"stored" is therefore what a real run would take from the store, and
"to send" what it would ask the endpoints.

Hub data is never streamed: a dry run must be quick. A hub dataset whose
rows are all stored locally (``evalkit fetch``) is walked like a local one;
any other counts as "unknown (hub)", after one check: its rows are partly
stored or the hub answers (one probe), else the dry run stops with the
message a run would give (exit 2). Two checks go further than the plan:
every local file a dataset names (audio and image paths) must exist, and
every endpoint is asked ``GET /v1/models`` (never a generation) to see that
it answers and serves the configured model id. Missing files make the dry
run exit 2; an endpoint that does not answer, or serves other ids, is a
warning naming what it serves.
Module import is light: the cheap counting helpers are also used by
`evalkit info` and the live progress totals.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.run.cost.estimate import CHARS_PER_TOKEN, RequestSize, SpendEstimate, request_size

if TYPE_CHECKING:
    from evalkit.clients.store import ResponseStore
    from evalkit.config import Config
    from evalkit.config.budget import Budget
    from evalkit.config.price import Price
    from evalkit.plan import EngineSpec, Plan

# ---------------------------------------------------------------- the dry run


@dataclass
class PairEstimate:
    """One engine x model: what a run would ask."""

    engine: str
    dataset: str
    metric: str
    model: str
    samples: int | None
    #: distinct request keys; None when the samples are unknown (hub)
    requests: int | None
    stored: int | None
    unsupported: int = 0
    audio_errors: int = 0
    image_errors: int = 0
    note: str = ""

    @property
    def to_send(self) -> int | None:
        if self.requests is None:
            return None
        return self.requests - (self.stored or 0)


@dataclass
class ModelEstimate:
    model: str
    kind: str
    endpoints: int
    batch_size: int
    requests: int | None
    stored: int | None
    partial: bool = False
    #: tokens and cost of the requests to send, by estimate (evalkit/run/cost/estimate.py)
    spend: SpendEstimate = field(default_factory=SpendEstimate)
    price: Price | None = None

    @property
    def to_send(self) -> int | None:
        if self.requests is None:
            return None
        return self.requests - (self.stored or 0)


@dataclass
class MissingFiles:
    """Local files a dataset names that are not there."""

    dataset: str
    runspec: str
    count: int = 0
    examples: list[str] = field(default_factory=list)


@dataclass
class EndpointCheck:
    """What ``GET /v1/models`` said about one endpoint of a model."""

    model: str
    url: str
    ok: bool
    message: str


@dataclass
class DryRunReport:
    pairs: list[PairEstimate] = field(default_factory=list)
    missing_files: list[MissingFiles] = field(default_factory=list)
    endpoints: list[EndpointCheck] = field(default_factory=list)
    models: list[ModelEstimate] = field(default_factory=list)
    engines: int = 0
    store_path: str | None = None
    store_state: str = "disabled"  # disabled | absent | present | refresh
    num_samples: int | None = None
    #: the config's budget (after --budget-tokens/--budget-usd), to compare the estimate with
    budget: Budget | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "engines": self.engines,
            "store": {"path": self.store_path, "state": self.store_state},
            "pairs": [{**p.__dict__, "to_send": p.to_send} for p in self.pairs],
            "models": [
                {
                    **{k: v for k, v in m.__dict__.items() if k not in ("spend", "price")},
                    "to_send": m.to_send,
                    "estimate": m.spend.as_dict(m.price),
                }
                for m in self.models
            ],
            "missing_files": [m.__dict__ for m in self.missing_files],
            "endpoints": [e.__dict__ for e in self.endpoints],
        }

    @property
    def exit_code(self) -> int:
        """2 when a dataset names local files that are missing (a data mistake), else 0."""
        return 2 if self.missing_files else 0


def store_path_for(config: Config, output_dir: str | None = None) -> Path:
    """Where the runner keeps the response store (mirrors runner.execute)."""
    if config.cache.path:
        return Path(config.cache.path)
    return Path(output_dir or config.output_dir) / "responses.sqlite"


class DryClient:
    """Stands in for a ModelClient during a dry run: records every request's store key, sends nothing.

    A stored answer is returned as the real client would return it, so a
    multi-turn conversation goes on exactly as far as the store can take it;
    any other request comes back as a ``dry_run`` failure (never sent).
    """

    def __init__(self, name: str, store: ResponseStore | None, use_store: bool = True) -> None:
        self.name = name
        self.store = store if use_store else None
        self.keys: set[str] = set()
        self.stored: set[str] = set()
        #: the estimated size of each request a run would send, by key (evalkit/run/cost/estimate.py)
        self.sizes: dict[str, RequestSize] = {}
        self._key_of = _key_function()

    async def submit(self, request: Any, *, use_store: bool = True) -> Any:
        from evalkit.clients.outcome import Outcome, failed

        key = self._key_of(self.name, request)
        self.keys.add(key)
        if use_store and self.store is not None:
            answer = await self.store.get(key)
            if answer is not None:
                self.stored.add(key)
                return Outcome(
                    text=answer.get("text"), raw=answer.get("raw"), cached=True, usage=answer.get("usage") or {}
                )
        if key not in self.sizes:
            self.sizes[key] = request_size(request)
        return failed("dry_run", "not sent (dry run)")

    async def close(self) -> None:
        return None


def _key_function() -> Any:
    """The store key of (configured model name, request), as the model client computes it."""
    try:
        from evalkit.clients.store_key import response_key
    except ImportError:  # stores keyed by the request alone
        return lambda model_name, request: request.key
    return response_key


def _no_score_metric() -> Any:
    """A metric that scores nothing (a dry run must not call judges or spend CPU on scores)."""
    from evalkit.metrics.base import Metric, SampleScore

    class NotScored(Metric):
        name = "dry_run"

        def score(self, prediction: str, sample: Any) -> SampleScore:
            return SampleScore(None, failure="stored")

    return NotScored()


async def _walk_engine(
    plan: Plan, spec: EngineSpec, store: ResponseStore | None, records_dir: Path
) -> tuple[dict[str, PairEstimate], dict[str, DryClient]]:
    """Run the real engine for one dataset-metric pair against dry clients: its prompts, audio and keys, no requests."""
    from evalkit.errors import UserError
    from evalkit.prompts.library import prompt_context_for
    from evalkit.run.engine import Engine

    config = plan.config
    clients = {name: DryClient(name, store) for name in spec.models}
    engine = Engine(
        spec,
        plan.models,
        clients,  # type: ignore[arg-type]  # a DryClient answers the engine's calls like a ModelClient
        config.filters,
        records_dir,
        prompt_context=prompt_context_for(config, spec.dataset, spec.models),
        progress=None,
        use_store=store is not None,
        seed=config.filters.seed,
        metric_factory=lambda _: _no_score_metric(),
    )
    result = await engine.run()
    if result.error:
        raise UserError(result.error)
    pairs = {}
    for name in spec.models:
        failures = engine.accumulators[name].failures
        pairs[name] = PairEstimate(
            spec.id,
            spec.dataset.name,
            spec.metric,
            name,
            samples=result.n_samples,
            requests=len(clients[name].keys),
            stored=len(clients[name].stored),
            unsupported=int(failures.get("unsupported", 0)),
            audio_errors=int(failures.get("audio", 0)),
            image_errors=int(failures.get("image", 0)),
            note="later turns after an answer that is not stored are not counted" if spec.dataset.turns_column else "",
        )
    return pairs, clients


async def dry_run(
    plan: Plan, *, output_dir: str | None = None, no_cache: bool = False, refresh_cache: bool = False
) -> DryRunReport:
    """Count samples and requests per engine x model and look the keys up in the response store; sends nothing."""
    import asyncio

    from evalkit.clients.store import ResponseStore
    from evalkit.data.hubcache import require_hub_or_stored, stored_whole
    from evalkit.errors import UserError

    # what a run checks first: a hub dataset without stored rows needs a hub that answers (exit 2 otherwise)
    await asyncio.to_thread(require_hub_or_stored, [spec.dataset for spec in plan.engines])
    config = plan.config
    report = DryRunReport(engines=len(plan.engines), num_samples=config.filters.num_samples, budget=config.budget)
    store: ResponseStore | None = None
    if config.cache.enabled and not no_cache:
        path = store_path_for(config, output_dir)
        report.store_path = str(path)
        if refresh_cache:
            report.store_state = "refresh"
        elif path.is_file():
            report.store_state = "present"
            store = await ResponseStore(path).open()
        else:
            report.store_state = "absent"
    per_model: dict[str, set[str]] = {name: set() for name in plan.models}
    sizes: dict[str, dict[str, RequestSize]] = {name: {} for name in plan.models}
    stored_keys: dict[str, set[str]] = {name: set() for name in plan.models}
    unknown_models: set[str] = set()
    try:
        with tempfile.TemporaryDirectory(prefix="evalkit-dry-run-") as records_dir:
            for spec in plan.engines:
                if spec.dataset.path is None and not stored_whole(spec.dataset):
                    limit = config.filters.num_samples
                    for name in spec.models:
                        unknown_models.add(name)
                        note = "unknown (hub)" if limit is None else f"≤ {limit} (hub)"
                        report.pairs.append(
                            PairEstimate(
                                spec.id,
                                spec.dataset.name,
                                spec.metric,
                                name,
                                samples=None,
                                requests=None,
                                stored=None,
                                note=note,
                            )
                        )
                    continue
                try:
                    pairs, clients = await _walk_engine(plan, spec, store, Path(records_dir))
                except UserError as error:
                    for name in spec.models:
                        unknown_models.add(name)
                        report.pairs.append(
                            PairEstimate(
                                spec.id,
                                spec.dataset.name,
                                spec.metric,
                                name,
                                None,
                                None,
                                None,
                                note=f"engine would fail: {error}",
                            )
                        )
                    continue
                for name, pair in pairs.items():
                    per_model[name] |= clients[name].keys
                    stored_keys[name] |= clients[name].stored
                    sizes[name].update(clients[name].sizes)
                    report.pairs.append(pair)
        for name, model in plan.models.items():
            spend = SpendEstimate()
            for key, size in sizes[name].items():
                if key not in stored_keys[name]:  # a key stored by a later engine's walk costs nothing either
                    spend.add(size)
            report.models.append(
                ModelEstimate(
                    name,
                    model.kind,
                    endpoints=sum(max(len(info.urls), 1) for info in model.replicas),
                    batch_size=sum(info.batch_size for info in model.replicas),
                    requests=len(per_model[name]),
                    stored=len(stored_keys[name]),
                    partial=name in unknown_models,
                    spend=spend,
                    price=model.info.price,
                )
            )
    finally:
        if store is not None:
            await store.close()
    report.missing_files = await asyncio.to_thread(missing_local_files, plan)
    report.endpoints = await check_endpoints(plan)
    return report


# ---------------------------------------------------------------- checks


def _sample_paths(sample: Any) -> Any:
    if sample.audio is not None and sample.audio.path is not None:
        yield sample.audio.path
    for image in sample.images or ():
        if image.path is not None:
            yield image.path
    for turn in sample.turns or ():
        if turn.audio is not None and turn.audio.path is not None:
            yield turn.audio.path


def missing_local_files(plan: Plan, examples: int = 5) -> list[MissingFiles]:
    """Per local dataset of the plan: the files its samples name (audio and image paths) that do not exist."""
    from evalkit.data.filters import apply_filters
    from evalkit.data.loading import iter_samples

    found: list[MissingFiles] = []
    seen: set[str] = set()
    for spec in plan.engines:
        dataset = spec.dataset
        if dataset.path is None or dataset.name in seen:
            continue
        seen.add(dataset.name)
        missing = MissingFiles(dataset.name, dataset.file)
        checked: set[str] = set()
        for sample in apply_filters(iter_samples(dataset), plan.config.filters, dataset.name):
            for path in _sample_paths(sample):
                if path in checked:
                    continue
                checked.add(path)
                if not Path(path).is_file():
                    missing.count += 1
                    if len(missing.examples) < examples:
                        missing.examples.append(str(path))
        if missing.count:
            found.append(missing)
    return found


async def check_endpoints(plan: Plan, timeout: float = 5.0) -> list[EndpointCheck]:
    """Ask every endpoint ``GET /v1/models``: does it answer, and does it serve the configured model id?"""
    import asyncio

    import aiohttp

    from evalkit.clients.protocol import EndpointProtocol
    from evalkit.util.redact import redact_url

    jobs = []
    by_command = {model.name for model in plan.models.values() if model.info.auth_command}
    for model in plan.models.values():
        for info in model.replicas:
            if info.launch is not None:
                continue  # evalkit starts it at run time and checks it then
            for url in info.urls:
                protocol = EndpointProtocol(
                    base_url=url, kind=model.kind, auth_token=info.auth_token, api_version=info.api_version
                )
                jobs.append((model.name, info.model, url, protocol))
    if not jobs:
        return []

    async def one(session: aiohttp.ClientSession, name: str, model_id: str, url: str, protocol: Any) -> EndpointCheck:
        shown = redact_url(url)
        if protocol.api_version is not None:
            return EndpointCheck(name, shown, True, "Azure OpenAI deployment: not checked (no /models listing)")
        if name in by_command:  # its short-lived token is asked for when the run starts, not for a listing
            return EndpointCheck(name, shown, True, "token from auth_command: not asked for in a dry run, not checked")
        target = url.split("?", 1)[0].rstrip("/") + "/models"
        try:
            async with session.get(target, headers=protocol.headers) as response:
                if response.status != 200:
                    text = (await response.text())[:200]
                    return EndpointCheck(name, shown, False, f"GET /models answered HTTP {response.status}: {text}")
                payload = await response.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as error:
            return EndpointCheck(name, shown, False, f"does not answer GET /models: {error or type(error).__name__}")
        data = payload.get("data") if isinstance(payload, dict) else None
        ids = [str(m.get("id")) for m in data or [] if isinstance(m, dict) and m.get("id") is not None]
        if model_id in ids:
            return EndpointCheck(name, shown, True, f"serves {model_id!r}")
        served = ", ".join(repr(i) for i in ids) or "no model"
        return EndpointCheck(
            name, shown, False, f"serves {served}, not the configured model {model_id!r} (models[].info.model)"
        )

    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(timeout=client_timeout) as session:
        return list(await asyncio.gather(*(one(session, *job) for job in jobs)))


def _n(value: int | None, note: str = "") -> str:
    if value is None:
        return note or "unknown"
    return f"{value:,}"


def print_dry_run(report: DryRunReport, plan: Plan, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(highlight=False, width=max(120, Console().width))
    store = {
        "disabled": "response store disabled (--no-cache or cache.enabled: false)",
        "absent": f"response store {report.store_path} does not exist yet: every request is new",
        "present": f"response store {report.store_path}",
        "refresh": f"--refresh-cache: every request is asked again ({report.store_path})",
    }[report.store_state]
    console.print(
        Text.assemble(("Dry run", "bold"), f" of {plan.source}: {report.engines} engines x {len(plan.models)} models"),
        soft_wrap=True,
    )
    console.print(store[0].upper() + store[1:], soft_wrap=True, markup=False)
    table = Table(title="engines x models", title_justify="left")
    for column, justify in (
        ("engine", "left"),
        ("model", "left"),
        ("samples", "right"),
        ("requests", "right"),
        ("stored", "right"),
        ("to send", "right"),
        ("notes", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for p in report.pairs:
        notes = [p.note] if p.note and p.samples is not None else []
        if p.unsupported:
            notes.append(f"{p.unsupported} samples unsupported by this model kind")
        if p.audio_errors:
            notes.append(f"{p.audio_errors} samples with undecodable audio")
        if p.image_errors:
            notes.append(f"{p.image_errors} samples with unreadable images")
        if p.samples is None and p.note.startswith("engine"):
            notes.append(p.note)
        samples = _n(p.samples, p.note if p.samples is None and not p.note.startswith("engine") else "")
        table.add_row(
            *(
                Text(c)
                for c in (p.engine, p.model, samples, _n(p.requests), _n(p.stored), _n(p.to_send), "; ".join(notes))
            )
        )
    console.print(table)
    models = Table(title="models (requests shared by engines are sent once)", title_justify="left")
    for column, justify in (
        ("model", "left"),
        ("kind", "left"),
        ("endpoints", "right"),
        ("in flight", "right"),
        ("requests", "right"),
        ("stored", "right"),
        ("to send", "right"),
    ):
        models.add_column(column, justify=justify)  # type: ignore[arg-type]
    for m in report.models:
        plus = "+" if m.partial else ""
        models.add_row(
            Text(m.model),
            m.kind,
            str(m.endpoints),
            str(m.batch_size),
            _n(m.requests) + plus,
            _n(m.stored) + plus,
            _n(m.to_send) + plus,
        )
    console.print(models)
    to_send = sum(m.to_send or 0 for m in report.models)
    stored = sum(m.stored or 0 for m in report.models)
    suffix = " (+ unknown for hub datasets)" if any(m.partial for m in report.models) else ""
    for missing in report.missing_files:
        console.print(
            Text.assemble(
                ("missing files: ", "red"),
                f"{missing.dataset} ({missing.runspec}) names {missing.count} local file(s) that do not exist: "
                + ", ".join(missing.examples)
                + (" ..." if missing.count > len(missing.examples) else ""),
            ),
            soft_wrap=True,
        )
    for check in report.endpoints:
        style, label = ("green", "ok") if check.ok else ("yellow", "warning")
        console.print(
            Text.assemble((f"{label}: ", style), f"{check.model} at {check.url}: {check.message}"), soft_wrap=True
        )
    for line in spend_lines(report):
        console.print(Text(line), soft_wrap=True)
    console.print(
        f"No request was sent to a model (only GET /models). A run would send {to_send:,} requests and take "
        f"{stored:,} from the response store{suffix}.",
        soft_wrap=True,
    )


def spend_lines(report: DryRunReport) -> list[str]:
    """What the requests to send would spend, by estimate, model by model, and against the budget."""
    lines = [
        f"estimate for {m.model}: {m.spend.describe(m.price)}{' (+ unknown for hub datasets)' if m.partial else ''}"
        for m in report.models
        if m.spend.requests
    ]
    if lines:
        lines.insert(0, f"Tokens and cost, estimated without a tokenizer ({CHARS_PER_TOKEN} characters a token):")
    budget = report.budget
    if budget is not None:
        tokens = sum(m.spend.prompt_tokens + m.spend.completion_bound for m in report.models)
        unbounded = any(m.spend.unbounded for m in report.models)
        costs = [m.spend.cost(m.price) for m in report.models if m.spend.requests]
        parts = []
        if budget.tokens is not None:
            fits = "fits within" if tokens <= budget.tokens and not unbounded else "may exceed"
            parts.append(f"~{tokens:,} tokens {fits} the budget of {budget.tokens:,}")
        if budget.usd is not None:
            if any(c is None for c in costs):
                parts.append(f"the cost has no bound to compare with the budget of ${budget.usd:,.2f}")
            else:
                total = sum(c or 0.0 for c in costs)
                fits = "fits within" if total <= budget.usd else "may exceed"
                parts.append(f"at most ${total:,.4f} {fits} the budget of ${budget.usd:,.2f}")
        lines.append("budget: " + "; ".join(parts) + " (a run stops sending once its budget is spent)")
    return lines
