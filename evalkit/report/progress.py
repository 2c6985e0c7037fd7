"""Live progress: a rich display on a terminal, plain periodic lines otherwise (CI logs stay readable).

The runner calls a progress object once per finished (engine, model,
sample) with ``ok`` (scored, or failed); that call only bumps counters, so it
costs nothing next to a request. Lines count samples of a dataset-metric
pair; the overall line adds the requests sent and the answers the response
store gave (from the runner's request counter), since a request can serve
several pairs and a sample can need several requests. Rendering happens elsewhere: rich's refresh thread
redraws the live table a few times a second, and the plain variant writes
one line per engine x model (plus an overall line) every ``interval``
seconds and once more at the end.

Totals are known only when cheap (row counts of local files, or
``num_samples``); otherwise "?" is shown and no ETA is given. A shard's
(``--shard K/N``) share of a pair is known only once its ids are read, so its
lines show the expected share, total / N, as ``~31`` (raised to what is done
when a shard holds more) and an ETA from it. A pair with ``stop_at_ci`` shows
the samples drawn so far of those it may draw (``drawn 450/10000``) and no ETA:
where it stops is known only from its answers.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

Key = tuple[str, str]


@dataclass
class _Line:
    total: int | None = None
    #: the total is an expectation (a shard's share), not a count: shown as ``~N``, never taken for the end
    estimated: bool = False
    done: int = 0
    failed: int = 0
    first: float | None = None
    last: float | None = None
    printed_done: int = field(default=-1, repr=False)
    #: ``stop_at_ci``: () -> (samples drawn for this model so far, the pair's samples or None, stopped)
    drawn: Callable[[], tuple[int, int | None, bool]] | None = None


def _duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "-"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    """Counts done/failed per engine x model; prints plain summary lines every ``interval`` seconds.

    Also the base of :class:`LiveProgress`; both are context managers, and
    ``close()`` prints the final state (so a CI log always ends with totals).
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        interval: float = 10.0,
        quiet: bool = False,
        totals: dict[Key, int | None] | None = None,
        estimated: bool = False,
    ) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self.quiet = quiet
        self.lines: dict[Key, _Line] = {}
        for key, total in (totals or {}).items():
            self.lines[key] = _Line(total=total, estimated=estimated and total is not None)
        self.started = time.monotonic()
        self._last = self.started
        self._closed = False
        #: () -> (requests sent, answers from the store); set by the runner
        self.request_counter: Callable[[], tuple[int, int]] | None = None

    # -- counting (called by the engines, on the event loop)

    def __call__(self, engine: str, model: str, ok: bool) -> None:
        line = self.lines.get((engine, model))
        if line is None:
            line = self.lines[(engine, model)] = _Line()
        now = time.monotonic()
        if line.first is None:
            line.first = now
        line.last = now
        line.done += 1
        if not ok:
            line.failed += 1
        if not self.quiet and now - self._last >= self.interval:
            self._last = now
            self.tick()

    def stops_early(self, engine: str, model: str, drawn: Callable[[], tuple[int, int | None, bool]]) -> None:
        """The line of a pair that may stop before its last sample (``stop_at_ci``): it shows what was drawn."""
        line = self.lines.get((engine, model))
        if line is None:
            line = self.lines[(engine, model)] = _Line()
        line.drawn = drawn

    # -- numbers shared by both renderings

    def rate(self, line: _Line) -> float:
        """Samples per second since the run started (engines start together, so this is comparable across lines)."""
        finished = line.total is not None and not line.estimated and line.done >= line.total
        elapsed = (line.last if finished and line.last else time.monotonic()) - self.started
        return line.done / elapsed if elapsed > 0 else 0.0

    def eta(self, line: _Line) -> float | None:
        if line.total is None or line.drawn is not None:
            return None
        remaining = max(line.total - line.done, 0)
        if remaining == 0:
            return None if line.estimated else 0.0  # past an expected share: the end is not known
        rate = self.rate(line)
        return remaining / rate if rate > 0 else None

    def overall(self) -> _Line:
        lines = list(self.lines.values())
        totals = [line.total for line in lines]
        known = lines and all(t is not None and x.drawn is None for t, x in zip(totals, lines))
        total = sum(t for t in totals if t is not None) if known else None
        estimated = any(x.estimated for x in lines)
        return _Line(
            total=total, estimated=estimated, done=sum(x.done for x in lines), failed=sum(x.failed for x in lines)
        )

    @staticmethod
    def shown_total(line: _Line) -> str:
        """``?`` (unknown), the total, or ``~N`` for an expected share (never below what is done)."""
        if line.total is None:
            return "?"
        return f"~{max(line.total, line.done)}" if line.estimated else str(line.total)

    def drawn_text(self, line: _Line) -> str:
        """``drawn 450/10000`` (``, stopped`` once the model reached its CI) for a stop_at_ci line, else ''."""
        if line.drawn is None:
            return ""
        drawn, planned, stopped = line.drawn()
        planned = planned if planned is not None else line.total
        return f"drawn {drawn}/{'?' if planned is None else planned}" + (", stopped at its CI" if stopped else "")

    def describe(self, line: _Line) -> str:
        drawn = self.drawn_text(line)
        done = f"{line.done} samples done ({drawn})" if drawn else f"{line.done}/{self.shown_total(line)} samples done"
        text = f"{done}, {line.failed} failed, {self.rate(line):.1f} samples/s"
        eta = self.eta(line)
        if eta is not None:
            text += f", ETA {_duration(eta)}"
        return text

    def requests(self) -> str:
        """``N requests sent, M answers from the store`` when the runner gave a counter, else ''."""
        if self.request_counter is None:
            return ""
        sent, stored = self.request_counter()
        return f"{sent} requests sent, {stored} answers from the response store"

    def summary(self) -> str:
        elapsed = time.monotonic() - self.started
        requests = self.requests()
        requests = f"; {requests}" if requests else ""
        return f"[evalkit] overall: {self.describe(self.overall())}{requests}; {_duration(elapsed)} elapsed"

    # -- plain rendering

    def tick(self) -> None:
        """One line per engine x model that moved since the last tick, then the overall line."""
        out = []
        for (engine, model), line in self.lines.items():
            if line.done != line.printed_done:
                line.printed_done = line.done
                out.append(f"[evalkit] {engine} · {model}: {self.describe(line)}")
        out.append(self.summary())
        self.stream.write("\n".join(out) + "\n")
        self.stream.flush()

    def start(self) -> Progress:
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self.quiet:
            for line in self.lines.values():
                line.printed_done = -1
            self.tick()

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LiveProgress(Progress):
    """The terminal view: a rich table redrawn by rich's refresh thread.

    One row per engine x model, and an overall row.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        totals: dict[Key, int | None] | None = None,
        refresh_per_second: float = 4.0,
        estimated: bool = False,
    ) -> None:
        super().__init__(stream=stream, interval=float("inf"), quiet=False, totals=totals, estimated=estimated)
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=self.stream)
        self.live = Live(
            console=self.console,
            refresh_per_second=refresh_per_second,
            get_renderable=self.render,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def render(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, padding=(0, 1), show_edge=False)
        for column, justify in (
            ("engine", "left"),
            ("model", "left"),
            ("", "left"),
            ("samples", "right"),
            ("samples/s", "right"),
            ("failed", "right"),
            ("ETA", "right"),
        ):
            table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        rows = list(self.lines.items())
        for (engine, model), line in rows:
            table.add_row(*self._cells(Text(engine), Text(model), line, ProgressBar))
        table.add_row(*self._cells(Text("overall", style="bold"), Text(""), self.overall(), ProgressBar))
        requests = self.requests()
        if not requests:
            return table
        from rich.console import Group

        return Group(table, Text(requests, style="dim"))

    def _cells(self, engine: Any, model: Any, line: _Line, bar_cls: Any) -> list[Any]:
        total = line.total if line.drawn is None else None
        bar = bar_cls(
            total=float(total) if total else None,
            completed=float(line.done),
            width=24,
            pulse=total is None and line.done > 0,
        )
        drawn = self.drawn_text(line)
        done = f"{line.done} ({drawn})" if drawn else f"{line.done}/{self.shown_total(line)}"
        failed = f"[red]{line.failed}[/red]" if line.failed else "0"
        return [engine, model, bar, done, f"{self.rate(line):.1f}", failed, _duration(self.eta(line))]

    def start(self) -> LiveProgress:
        self.started = time.monotonic()
        self.live.start(refresh=True)
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.live.refresh()
        self.live.stop()


def make_progress(
    *,
    quiet: bool = False,
    interval: float = 10.0,
    totals: dict[Key, int | None] | None = None,
    stream: TextIO | None = None,
    live: bool | None = None,
    estimated: bool = False,
) -> Progress:
    """Live rich display when both stdout and the progress stream are terminals, plain lines otherwise.

    ``estimated``: the totals are expected shares (a shard's), shown as ``~N``.
    """
    stream = stream or sys.stderr
    if live is None:
        live = not quiet and _isatty(sys.stdout) and _isatty(stream)
    if live:
        return LiveProgress(stream=stream, totals=totals, estimated=estimated)
    return Progress(stream=stream, interval=interval, quiet=quiet, totals=totals, estimated=estimated)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def expected_totals(plan: Any, shards: int = 1) -> dict[Key, int | None]:
    """(engine id, model) -> the samples each line will see, when cheap to know (else None).

    With ``shards`` > 1 (a run of one of them), each total is the expected share, total / shards rounded: the
    hash of each sample id decides its shard, so shares differ by a few samples (see :mod:`evalkit.run.shard`).
    """
    from evalkit.data.counts import known_sample_count

    totals: dict[Key, int | None] = {}
    for spec in plan.engines:
        try:
            count = known_sample_count(spec.dataset, plan.config.filters)
        except Exception:
            count = None
        if count is not None and shards > 1:
            count = round(count / shards)
        for model in spec.models:
            totals[(spec.id, model)] = count
    return totals
