"""``stop_at_ci``: a dataset_metric pair that stops once its score is known as precisely as the user asked.

A pair's options are its metric's, except these two (and ChEF's recipes), which say how much of the dataset
is asked:

- ``stop_at_ci: H``: the 95% CI half-width at which the pair stops asking, on the scale of the score in
  results.json (accuracy 0.02 is ±2 points; a WER of 0.01 is ±1 point of WER). The half-width of an
  asymmetric interval (a bootstrap's, one clipped at a bound) is half its length, ``(ci_high - ci_low) / 2``.
- ``stop_min_samples: M`` (default 30): never stop before M samples are scored, so the interval that decides
  rests on enough samples for its approximation, and a lucky first few never end the pair.

The rule's run-time half (the seeded order, the check points) is :mod:`evalkit.run.stopping.at_ci`; the
statistics behind it are in docs/stopping.md ("Why the interval stays honest").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from evalkit.errors import ConfigError

#: the pair options this module reads (never passed to the metric)
STOP_OPTIONS = ("stop_at_ci", "stop_min_samples")
#: how many scored samples a pair takes at least before it may stop
DEFAULT_MIN_SAMPLES = 30


@dataclass(frozen=True, slots=True)
class StopRule:
    """Stop a pair once its 95% CI half-width is at most ``half_width``, after ``min_samples`` scored samples."""

    half_width: float
    min_samples: int = DEFAULT_MIN_SAMPLES

    def as_dict(self) -> dict[str, Any]:
        return {"stop_at_ci": self.half_width, "stop_min_samples": self.min_samples}

    def scaled(self, factor: float) -> StopRule:
        """The rule with its half-width times ``factor`` (a shard's share: see :mod:`evalkit.run.stopping.at_ci`)."""
        return StopRule(self.half_width * factor, self.min_samples)


def split_stop(options: dict[str, Any], where: str) -> tuple[dict[str, Any], StopRule | None]:
    """The pair's other options, and its stop rule (None without ``stop_at_ci``); ConfigError names a bad value."""
    rest = {k: v for k, v in options.items() if k not in STOP_OPTIONS}
    given = options.get("stop_at_ci")
    if given is None:
        if "stop_min_samples" in options:
            raise ConfigError(f"{where}: option 'stop_min_samples' needs 'stop_at_ci' (the half-width to stop at)")
        return rest, None
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not math.isfinite(given) or given <= 0:
        raise ConfigError(
            f"{where}: option 'stop_at_ci': expected a positive number, the 95% CI half-width to stop at on the "
            f"score's scale (0.02 for ±2 points of accuracy), got {given!r}"
        )
    least = options.get("stop_min_samples", DEFAULT_MIN_SAMPLES)
    if isinstance(least, bool) or not isinstance(least, int) or least < 2:
        raise ConfigError(
            f"{where}: option 'stop_min_samples': expected a whole number >= 2 (scored samples before the pair may "
            f"stop), got {least!r}"
        )
    return rest, StopRule(float(given), least)
