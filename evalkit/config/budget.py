"""``budget:``: the most a run may spend, in tokens and/or US dollars, before it sends nothing more.

A run's spending is what its models' and judge's servers report in ``usage`` for the answers sent on it (answers
from the response store cost nothing); a resumed run counts what it spent before. ``--budget-tokens`` and
``--budget-usd`` on the command line replace the config's values.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from evalkit.config.base import Strict

#: the largest token budget (a quadrillion tokens) and dollar budget a config may name
MAX_BUDGET_TOKENS = 10**15
MAX_BUDGET_USD = 1_000_000_000


class Budget(Strict):
    """Stop sending once either limit is reached; requests already in flight finish and count."""

    tokens: int | None = Field(
        None,
        ge=1,
        le=MAX_BUDGET_TOKENS,
        description="Most tokens (prompt + completion, as the servers report them, judge included) the run may "
        "spend (1 to 1000000000000000); absent: no token limit.",
    )
    usd: float | None = Field(
        None,
        gt=0,
        le=MAX_BUDGET_USD,
        description="Most US dollars the run may spend, from each model's `price` (and the judge's `judge_price`), "
        "which every model then needs (more than 0, at most 1000000000); absent: no dollar limit.",
    )

    @model_validator(mode="after")
    def _one_limit_at_least(self) -> Budget:
        if self.tokens is None and self.usd is None:
            raise ValueError("give `tokens`, `usd` or both (a budget without a limit limits nothing)")
        return self
