"""How often ``stop_at_ci``'s reported 95% intervals cover the true value: simulated runs through the real rule.

    python -m benchmarks.stop_coverage           # the table in docs/stopping.md
    python -m benchmarks.stop_coverage --runs 4000 --p 0.5,0.9 --h 0.02 --rule plain,evalkit

Each simulated run scores a fresh sequence of Bernoulli(p) answers (right or wrong: a proportion, the case whose
variance depends on the score) through what a run uses: rounds of :func:`round_size`, the check
:func:`reached`, and the interval of :class:`ScoreAccumulator` (``headline``, the one results.json reports).
A run ends when the rule stops it or its ``n_max`` samples run out.

The control, "fixed n", is the same interval over fresh answers at each run's own n (run by run, so the
sizes match exactly and nothing decided them): the rule's own effect on coverage is the difference between
the two columns, and where the fixed-n column itself is below 95% that is the interval's property, not the
rule's. ``--rule`` compares candidate decisions (``evalkit``: the one :func:`reached` makes).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evalkit.config.stopping import StopRule
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.base import SampleScore
from evalkit.metrics.ci import Z95
from evalkit.run.stopping.at_ci import reached, round_size

#: a rule: (accumulator, the run's seed) -> stop now?
Rule = Callable[[ScoreAccumulator, int], bool]


@dataclass
class Coverage:
    p: float
    half_width: float
    runs: int
    covered: int
    stopped: int
    ns: list[int]
    half_median: float
    #: the same interval at each run's n over fresh answers (None: not measured)
    fixed_covered: int | None = None

    @property
    def rate(self) -> float:
        return self.covered / self.runs

    @property
    def fixed_rate(self) -> float:
        return math.nan if self.fixed_covered is None else self.fixed_covered / self.runs

    @property
    def error(self) -> float:
        """The binomial standard error of the coverage of ``runs`` runs, at the nominal 95%."""
        return math.sqrt(0.95 * 0.05 / self.runs)

    @property
    def difference_error(self) -> float:
        """The standard error of (coverage with stopping - coverage at fixed n), at the coverages measured."""
        a, b = self.rate, self.fixed_rate
        return math.sqrt((a * (1 - a) + b * (1 - b)) / self.runs)

    @property
    def n_median(self) -> float:
        return statistics.median(self.ns)

    @property
    def n_mean(self) -> float:
        return statistics.fmean(self.ns)


def _reported_half(accumulator: ScoreAccumulator, rule: StopRule, seed: int) -> float | None:
    if accumulator.n < rule.min_samples:
        return None
    _, low, high, _ = accumulator.headline(seed)
    half = (high - low) / 2
    return half if math.isfinite(half) and 0 < half <= rule.half_width else None


def candidate(name: str, rule: StopRule) -> Rule:
    """A decision by name: ``evalkit`` (:func:`reached`), ``plain`` (the reported width alone, the first version),
    ``chow-robbins`` (the reported width and sqrt(half² + (z/n)²), for every score)."""
    if name == "evalkit":
        return lambda accumulator, seed: reached(accumulator, rule, seed) is not None
    if name == "plain":
        return lambda accumulator, seed: _reported_half(accumulator, rule, seed) is not None
    if name == "chow-robbins":

        def chow_robbins(accumulator: ScoreAccumulator, seed: int) -> bool:
            half = _reported_half(accumulator, rule, seed)
            return half is not None and math.hypot(half, Z95 / accumulator.n) <= rule.half_width

        return chow_robbins
    raise ValueError(f"unknown rule {name!r}: expected evalkit, plain or chow-robbins")


def _covers(answers: np.ndarray, p: float, scorer: object) -> bool:
    accumulator = ScoreAccumulator(scorer)  # type: ignore[arg-type]
    for right in answers:
        accumulator.add(SampleScore(1.0 if right else 0.0))
    _, low, high, _ = accumulator.headline(0)
    return bool(low <= p <= high)


def simulate(
    p: float,
    rule: StopRule,
    runs: int = 1000,
    seed: int = 0,
    n_max: int = 20_000,
    stop: Rule | None = None,
    metric: str = "exact_match",
    fixed: bool = True,
) -> Coverage:
    """``runs`` simulated runs of a rate ``p``; ``stop`` replaces evalkit's rule (a candidate, or a bad one).

    With ``fixed``, each run's n is also scored over fresh answers without any stopping (the control).
    """
    decide = stop or candidate("evalkit", rule)
    rng = np.random.default_rng(seed)
    control = np.random.default_rng([seed, 1])
    scorer = METRICS.get(metric)()
    covered = stopped = fixed_covered = 0
    ns: list[int] = []
    halves: list[float] = []
    for _ in range(runs):
        answers = rng.random(n_max) < p
        accumulator = ScoreAccumulator(scorer)
        drawn = 0
        done = False
        while drawn < n_max and not done:
            size = min(round_size(drawn, rule), n_max - drawn)
            for right in answers[drawn : drawn + size]:
                accumulator.add(SampleScore(1.0 if right else 0.0))
            drawn += size
            done = decide(accumulator, 0)
        stopped += done
        _, low, high, n = accumulator.headline(0)
        covered += low <= p <= high
        ns.append(n)
        halves.append((high - low) / 2)
        if fixed:
            fixed_covered += _covers(control.random(n) < p, p, scorer)
    return Coverage(
        p, rule.half_width, runs, covered, stopped, ns, statistics.median(halves), fixed_covered if fixed else None
    )


def needed(p: float, half_width: float) -> int:
    """The n at which a fixed design's normal interval of a rate ``p`` is ±``half_width``: z² p(1-p) / H²."""
    return math.ceil(Z95 * Z95 * p * (1 - p) / half_width**2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--p", default="0.5,0.7,0.9,0.95,0.99")
    parser.add_argument("--h", default="0.05,0.02")
    parser.add_argument("--min-samples", type=int, default=30)
    parser.add_argument("--rule", default="evalkit", help="comma-separated: evalkit, plain, chow-robbins")
    args = parser.parse_args()
    print("| rule | true rate | stop_at_ci | coverage (stopping) | coverage (fixed n) | mean n | fixed-n n needed |")
    print("|---|---|---|---|---|---|---|")
    for name in args.rule.split(","):
        for h in (float(x) for x in args.h.split(",")):
            for p in (float(x) for x in args.p.split(",")):
                rule = StopRule(h, args.min_samples)
                found = simulate(p, rule, runs=args.runs, stop=candidate(name, rule))
                print(
                    f"| {name} | {p:g} | {h:g} | {found.rate:.3f} | {found.fixed_rate:.3f} | {found.n_mean:.0f} | "
                    f"{needed(p, h)} |",
                    flush=True,
                )
    print(f"\n± for {args.runs} runs: {math.sqrt(0.95 * 0.05 / args.runs):.3f} on a coverage near 95%")


if __name__ == "__main__":
    main()
