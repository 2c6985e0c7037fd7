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

Hub datasets are not touched ("unknown (hub)"): a dry run must be quick and
offline. Module import is light: the cheap counting helpers are also used by
`evalkit info` and the live progress totals.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.clients.store import ResponseStore
    from evalkit.config import Config
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

    @property
    def to_send(self) -> int | None:
        if self.requests is None:
            return None
        return self.requests - (self.stored or 0)


@dataclass
class DryRunReport:
    pairs: list[PairEstimate] = field(default_factory=list)
    models: list[ModelEstimate] = field(default_factory=list)
    engines: int = 0
    store_path: str | None = None
    store_state: str = "disabled"  # disabled | absent | present | refresh
    num_samples: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "engines": self.engines,
            "store": {"path": self.store_path, "state": self.store_state},
            "pairs": [{**p.__dict__, "to_send": p.to_send} for p in self.pairs],
            "models": [{**m.__dict__, "to_send": m.to_send} for m in self.models],
        }


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
        return failed("dry_run", "not sent (dry run)")

    async def close(self) -> None:
        return None


def _key_function() -> Any:
    """The store key of (configured model name, request), as the model client computes it."""
    try:
        from evalkit.clients.store import response_key
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
            note="later turns after an answer that is not stored are not counted" if spec.dataset.turns_column else "",
        )
    return pairs, clients


async def dry_run(
    plan: Plan, *, output_dir: str | None = None, no_cache: bool = False, refresh_cache: bool = False
) -> DryRunReport:
    """Count samples and requests per engine x model and look the keys up in the response store; sends nothing."""
    from evalkit.clients.store import ResponseStore
    from evalkit.errors import UserError

    config = plan.config
    report = DryRunReport(engines=len(plan.engines), num_samples=config.filters.num_samples)
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
    stored_keys: dict[str, set[str]] = {name: set() for name in plan.models}
    unknown_models: set[str] = set()
    try:
        with tempfile.TemporaryDirectory(prefix="evalkit-dry-run-") as records_dir:
            for spec in plan.engines:
                if spec.dataset.path is None:
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
                    report.pairs.append(pair)
        for name, model in plan.models.items():
            report.models.append(
                ModelEstimate(
                    name,
                    model.kind,
                    endpoints=sum(max(len(info.urls), 1) for info in model.replicas),
                    batch_size=sum(info.batch_size for info in model.replicas),
                    requests=len(per_model[name]),
                    stored=len(stored_keys[name]),
                    partial=name in unknown_models,
                )
            )
    finally:
        if store is not None:
            await store.close()
    return report


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
    console.print(
        f"Nothing was sent. A run would send {to_send:,} requests and take {stored:,} from the response store{suffix}.",
        soft_wrap=True,
    )
