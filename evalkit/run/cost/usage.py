"""Usage and cost of a pair's samples (in each record and per model) and of the whole run (results.json).

A record's ``usage`` says what its model's answers took (:class:`evalkit.clients.usage.Tally`'s compact form:
tokens of the requests sent on this run, and how many answers came from the response store or were shared with
an identical request of this run, which cost nothing here); ``judge_usage`` the same of the judge's answers that
scored it. The pair's totals per model add up its records; the run's come from the models' clients, which count
every answer sent (:mod:`evalkit.clients.spending`). A model with a ``price`` gets a cost (``cost_usd``), one
without shows tokens only.

A sample the budget kept from being sent (:data:`~evalkit.failures.FailureReason.BUDGET`, or its judge's
``judge_budget``) gets no record and is not counted: its pair is marked ``partial: {"reason": "budget"}``, and a
resume asks it.
"""

from __future__ import annotations

from contextvars import Token
from typing import Any

from evalkit.clients.outcome import Outcome
from evalkit.clients.spending import Spending
from evalkit.clients.usage import JUDGE_TALLY, Tally, tally_from_dict
from evalkit.config.price import Price
from evalkit.failures import FailureReason
from evalkit.run.scoring import JUDGE_BUDGET

#: the reason a pair or a run that the budget cut short is partial (``partial`` in results.json and run.json)
PARTIAL_BUDGET = "budget"


def usage_dict(tally: Tally, price: Price | None) -> dict[str, Any]:
    """A tally's JSON form with its total and cost (None without a price, or when no answer reported tokens)."""
    data = tally.as_dict()
    prompt, completion = data["prompt_tokens"], data["completion_tokens"]
    data["total_tokens"] = None if prompt is None and completion is None else (prompt or 0) + (completion or 0)
    known = tally.requests == 0 or tally.not_reported < tally.requests
    data["cost_usd"] = (
        round(price.cost(tally.prompt, tally.completion, tally.value(3), tally.value(2)), 6)
        if price is not None and known
        else None
    )
    return data


class JudgeScope:
    """The judge's answers while one sample is scored, added to a tally of their own (the record's ``judge_usage``)."""

    __slots__ = ("tally", "_token")

    def __init__(self) -> None:
        self.tally = Tally()
        self._token: Token[Tally | None] | None = JUDGE_TALLY.set(self.tally)

    def close(self) -> Tally:
        if self._token is not None:
            JUDGE_TALLY.reset(self._token)
            self._token = None
        return self.tally


class PairUsage:
    """One engine's usage per model, added up from its records, and whether the budget cut the pair short."""

    def __init__(self, prices: dict[str, Price | None], judge_price: Price | None, spending: Spending | None) -> None:
        self.prices = prices
        self.judge_price = judge_price
        self.spending = spending if spending is not None and spending.limited else None
        self.tallies = {name: Tally() for name in prices}
        self.judge_tallies: dict[str, Tally] = {}
        #: why the pair ended before its last sample (None: it ran them all)
        self.partial: str | None = None

    def stop_feeding(self) -> bool:
        """Whether no new sample may start: the run's budget is spent (the pair is then partial)."""
        if self.spending is not None and self.spending.exhausted:
            self.partial = PARTIAL_BUDGET
            return True
        return False

    def refused(self, outcome: Outcome) -> bool:
        """Whether the budget kept the sample's request from being sent: then it gets no record."""
        if outcome.failure == FailureReason.BUDGET:
            self.partial = PARTIAL_BUDGET
            return True
        return False

    def note(self, model: str, record: dict[str, Any], tally: Tally, judged: JudgeScope | None) -> bool:
        """Put the sample's usage in its record and the pair's totals; False when the record must not be written
        (its judge's request was not sent: the budget was spent)."""
        judge = judged.close() if judged is not None else None
        if record.get("failure") == JUDGE_BUDGET:
            self.partial = PARTIAL_BUDGET
            return False
        if not tally.empty:
            record["usage"] = tally.as_dict(compact=True)
            self.tallies[model].merge(tally)
        if judge is not None and not judge.empty:
            record["judge_usage"] = judge.as_dict(compact=True)
            self.judge_tallies.setdefault(model, Tally()).merge(judge)
        return True

    def of_model(self, model: str) -> dict[str, Any]:
        return usage_dict(self.tallies[model], self.prices.get(model))

    def of_judge(self, model: str) -> dict[str, Any] | None:
        tally = self.judge_tallies.get(model)
        return usage_dict(tally, self.judge_price) if tally is not None else None


def run_usage(spending: Spending, not_paid: dict[str, tuple[int, int]] | None = None) -> dict[str, Any]:
    """results.json's ``usage``: each model's and the judge's answers sent on this run, from their clients, and the
    run's total (the cost of the models that have a price; ``unpriced`` names those that sent without one).

    ``not_paid``: by client name, the answers that cost nothing here (from the store, shared within the run).
    """
    models: dict[str, Any] = {}
    judges: dict[str, Any] = {}
    total = Tally()
    cost = 0.0
    unpriced: list[str] = []
    unknown = False
    for name, account in spending.accounts.items():
        account.tally.from_store, account.tally.shared = (not_paid or {}).get(name, (0, 0))
        data = usage_dict(account.tally, account.price)
        if account.price is not None:
            data["cost_usd"] = round(account.usd, 6) if data["cost_usd"] is not None else None
        (judges if account.judge else models)[name] = data
        total.merge(account.tally)
        if account.tally.requests:
            if account.price is None:
                unpriced.append(name)
            elif data["cost_usd"] is None:
                unknown = True
            else:
                cost += account.usd
    summary = usage_dict(total, None)
    summary["cost_usd"] = None if unknown or (unpriced and not cost) else round(cost, 6)
    summary["unpriced"] = unpriced
    return {"models": models, "judges": judges, "total": summary}


def summed_usage(found: list[Any], price: Price | None) -> dict[str, Any] | None:
    """The usage of shards' rows of one pair and model, added up (read from their results.json: untrusted); None
    when no shard has one (shards of an evalkit from before usage was counted)."""
    tallies = [tally for tally in (tally_from_dict(data) for data in found) if tally is not None]
    if not tallies:
        return None
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return usage_dict(total, price)


def merged_run_usage(
    shards: list[Any], model_prices: dict[str, Price | None], judge_price: Price | None
) -> dict[str, Any] | None:
    """A merged run's ``usage``: each shard's results.json ``usage`` (untrusted) added up per model and judge, costed
    at today's prices as :func:`run_usage` does; None when no shard counted usage (shards from before it was)."""
    sums: dict[str, dict[str, Tally]] = {"models": {}, "judges": {}}
    for payload in shards:
        usage = payload.get("usage") if isinstance(payload, dict) else None
        if not isinstance(usage, dict):
            continue
        for part, tallies in sums.items():
            found = usage.get(part)
            for name, data in found.items() if isinstance(found, dict) else ():
                tally = tally_from_dict(data)
                if tally is not None:
                    tallies.setdefault(str(name), Tally()).merge(tally)
    if not sums["models"] and not sums["judges"]:
        return None
    out: dict[str, Any] = {"models": {}, "judges": {}}
    total = Tally()
    cost, unpriced, unknown = 0.0, [], False
    for part, tallies in sums.items():
        for name, tally in sorted(tallies.items()):
            price = judge_price if part == "judges" else model_prices.get(name)
            data = out[part][name] = usage_dict(tally, price)
            total.merge(tally)
            if not tally.requests:
                continue
            if price is None:
                unpriced.append(name)
            elif data["cost_usd"] is None:
                unknown = True
            else:
                cost += float(data["cost_usd"])
    summary = usage_dict(total, None)
    summary["cost_usd"] = None if unknown or (unpriced and not cost) else round(cost, 6)
    summary["unpriced"] = unpriced
    out["total"] = summary
    return out
