"""How often ``stop_at_ci``'s reported 95% intervals cover the true value: simulated runs through the real rule.

    python -m benchmarks.stop_coverage                    # the table in docs/scoring.md ("Stopping at a precision")
    python -m benchmarks.stop_coverage --runs 4000 --p 0.5,0.9 --h 0.02

Each simulated run scores a fresh sequence of Bernoulli(p) answers (right or wrong: a proportion, the case whose
variance depends on the score) through what a run uses: rounds of :func:`round_size`, the check
:func:`reached`, and the interval of :class:`ScoreAccumulator` (``headline``, the one results.json reports).
A run ends when the rule stops it or its ``n_max`` samples run out. The fixed-n column is the same interval at
a fixed n (the median n at which the rule stopped), so the rule's own effect reads as the difference.
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
    n_median: float
    half_median: float

    @property
    def rate(self) -> float:
        return self.covered / self.runs

    @property
    def error(self) -> float:
        """The binomial standard error of the coverage of ``runs`` runs, at the nominal 95%."""
        return math.sqrt(0.95 * 0.05 / self.runs)


def ci_rule(rule: StopRule) -> Rule:
    """evalkit's own rule: stop once :func:`reached` says the CI is narrow enough."""
    return lambda accumulator, seed: reached(accumulator, rule, seed) is not None


def simulate(
    p: float,
    rule: StopRule,
    runs: int = 1000,
    seed: int = 0,
    n_max: int = 20_000,
    stop: Rule | None = None,
    metric: str = "exact_match",
) -> Coverage:
    """``runs`` simulated runs of a rate ``p``; ``stop`` replaces evalkit's rule (to show what a bad one does)."""
    decide = stop or ci_rule(rule)
    rng = np.random.default_rng(seed)
    scorer = METRICS.get(metric)()
    covered = stopped = 0
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
    return Coverage(p, rule.half_width, runs, covered, stopped, statistics.median(ns), statistics.median(halves))


def fixed_n(p: float, n: int, runs: int = 1000, seed: int = 0, metric: str = "exact_match") -> float:
    """Coverage of the same interval at a fixed n, without any stopping (the interval's own coverage)."""
    rng = np.random.default_rng(seed)
    scorer = METRICS.get(metric)()
    covered = 0
    for _ in range(runs):
        accumulator = ScoreAccumulator(scorer)
        for right in rng.random(n) < p:
            accumulator.add(SampleScore(1.0 if right else 0.0))
        _, low, high, _ = accumulator.headline(0)
        covered += low <= p <= high
    return covered / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--p", default="0.5,0.7,0.9,0.95,0.99")
    parser.add_argument("--h", default="0.05,0.02")
    parser.add_argument("--min-samples", type=int, default=30)
    args = parser.parse_args()
    print("| true rate | stop_at_ci | median n | coverage (stop_at_ci) | coverage (fixed n = median) |")
    print("|---|---|---|---|---|")
    for h in (float(x) for x in args.h.split(",")):
        for p in (float(x) for x in args.p.split(",")):
            found = simulate(p, StopRule(h, args.min_samples), runs=args.runs)
            fixed = fixed_n(p, max(2, int(found.n_median)), runs=args.runs, seed=1)
            print(f"| {p:g} | {h:g} | {found.n_median:g} | {found.rate:.3f} ± {found.error:.3f} | {fixed:.3f} |")


if __name__ == "__main__":
    main()
