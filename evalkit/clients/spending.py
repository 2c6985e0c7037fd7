"""What a run spends, model by model, and whether its budget allows another request.

Every model's client (and the judge's) has an :class:`Account`: each answer
sent on this run adds the usage its server reported, and its cost when the
model has a price. The accounts share one :class:`Spending`, which holds the
budget: once the tokens or dollars spent reach a limit, :attr:`Spending.exhausted`
turns true and the clients send nothing more (requests already in flight finish
and count, so a run may end a little above its budget, by what was in flight).
What a resumed run spent before is carried in, so a budget is the run's, not
one invocation's.

A server that reports no usage spends nothing a budget can see: the first such
answer of a model with a budget in force is warned about once.
"""

from __future__ import annotations

import logging
from typing import Any

from evalkit.clients.outcome import Usage
from evalkit.clients.usage import Tally, read_usage
from evalkit.config.price import Price

log = logging.getLogger("evalkit")


class Spending:
    """The run's spending against its budget (``tokens``/``usd`` None: no such limit)."""

    def __init__(
        self,
        tokens: int | None = None,
        usd: float | None = None,
        *,
        spent_tokens: int = 0,
        spent_usd: float = 0.0,
    ) -> None:
        self.tokens_limit = tokens
        self.usd_limit = usd
        #: whether there is a limit at all (else spending is only counted)
        self.limited = tokens is not None or usd is not None
        #: spent by earlier invocations of this run (a resume), then added to as answers arrive
        self.before_tokens = spent_tokens
        self.before_usd = spent_usd
        self.spent_tokens = spent_tokens
        self.spent_usd = spent_usd
        #: requests the budget kept from being sent
        self.refused = 0
        self.accounts: dict[str, Account] = {}
        self.exhausted = self._over()

    def _over(self) -> bool:
        if self.tokens_limit is not None and self.spent_tokens >= self.tokens_limit:
            return True
        return self.usd_limit is not None and self.spent_usd >= self.usd_limit

    def account(self, name: str, price: Price | None, *, judge: bool = False) -> Account:
        found = self.accounts.get(name)
        if found is None:
            found = self.accounts[name] = Account(self, name, price, judge)
        return found

    def charge(self, tokens: int, usd: float) -> None:
        self.spent_tokens += tokens
        self.spent_usd += usd
        if self.limited and not self.exhausted and self._over():
            self.exhausted = True
            log.warning(
                "the run's budget is spent (%s): no new request is sent; requests in flight finish",
                self.describe_spent(),
            )

    def describe_spent(self) -> str:
        parts = []
        if self.tokens_limit is not None:
            parts.append(f"{self.spent_tokens:,} of {self.tokens_limit:,} tokens")
        if self.usd_limit is not None:
            parts.append(f"${self.spent_usd:,.4f} of ${self.usd_limit:,.4f}")
        return ", ".join(parts) or f"{self.spent_tokens:,} tokens"

    def as_dict(self) -> dict[str, Any]:
        """For run.json and results.json: the limits, what the run spent in all (earlier invocations included)."""
        return {
            "tokens": self.tokens_limit,
            "usd": self.usd_limit,
            "spent_tokens": self.spent_tokens,
            "spent_usd": round(self.spent_usd, 6),
            "spent_before_tokens": self.before_tokens,
            "spent_before_usd": round(self.before_usd, 6),
            "exhausted": self.exhausted,
            "refused_requests": self.refused,
        }


class Account:
    """One model's (or the judge's) answers sent on this run: their tally and their cost."""

    __slots__ = ("spending", "name", "price", "judge", "tally", "usd", "_warned")

    def __init__(self, spending: Spending, name: str, price: Price | None, judge: bool) -> None:
        self.spending = spending
        self.name = name
        self.price = price
        self.judge = judge
        self.tally = Tally()
        self.usd = 0.0
        self._warned = False

    def add(self, raw_usage: Any) -> Usage:
        """An answer arrived from the endpoint with this ``usage`` object (as the server sent it): counted, and
        returned as read, so the answer's other readers need not read it again."""
        usage = read_usage(raw_usage)
        self.tally.add_usage(usage)
        spending = self.spending
        if not usage.reported:
            if spending.limited and not self._warned:
                self._warned = True
                log.warning(
                    "%s's server reports no token usage: the budget cannot count what its answers cost",
                    self.name,
                )
            return usage
        usd = cost_of(self.price, usage) if self.price is not None else 0.0
        self.usd += usd
        spending.charge(usage.total, usd)
        return usage


def cost_of(price: Price | None, usage: Usage) -> float:
    """USD of one answer (0 without a price, or for counts not reported)."""
    if price is None or not usage.reported:
        return 0.0
    return price.cost(usage.prompt or 0, usage.completion or 0, usage.cached, usage.reasoning)
