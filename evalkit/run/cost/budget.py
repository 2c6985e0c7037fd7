"""A run's budget: its limits (config and command line), what it spent before a resume, and how it ends.

The limits are the config's ``budget:`` with ``--budget-tokens``/``--budget-usd`` in their place; a dollar budget
needs every model's ``price`` (and the judge's ``judge_price``), or the run is refused before anything is sent:
a model whose answers cost an unknown amount cannot be held to a dollar limit. run.json keeps what the run spent
(``spent``: tokens and dollars, over every invocation), so ``evalkit run --resume RUN`` with a larger budget goes on
from there, and answers already in the response store cost nothing again.

A run the budget stopped writes everything it answered, says ``"status": "partial"`` and
``"partial": {"reason": "budget", ...}`` in run.json (its results and every row it cut short say ``partial``
too) and ``evalkit run`` exits with :data:`EXIT_BUDGET`.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from evalkit.clients.judge import JudgeClient
from evalkit.clients.model_client import ModelClient
from evalkit.clients.spending import Spending
from evalkit.config import Config, format_validation_error
from evalkit.config.budget import Budget
from evalkit.errors import UserError
from evalkit.plan import Plan

#: `evalkit run`'s exit code for a run its budget stopped: everything answered is written, the results are partial
EXIT_BUDGET = 6


def apply_budget_flags(config: Config, tokens: int | None, usd: float | None) -> None:
    """``--budget-tokens``/``--budget-usd`` in place of the config's limits (each flag replaces its own limit)."""
    if tokens is None and usd is None:
        return
    given = config.budget.model_dump() if config.budget is not None else {}
    if tokens is not None:
        given["tokens"] = tokens
    if usd is not None:
        given["usd"] = usd
    try:
        config.budget = Budget.model_validate(given)
    except ValidationError as error:
        flags = format_validation_error(error, "--budget-tokens/--budget-usd")
        raise UserError(flags) from None


def check_prices(plan: Plan) -> None:
    """A dollar budget needs a price for every model (and the judge): refused, naming those without, otherwise."""
    budget = plan.config.budget
    if budget is None or budget.usd is None:
        return
    missing = [f"models: {m.name}" for m in plan.models.values() if m.info.price is None]
    judge = plan.config.judge_properties
    if judge is not None and judge.judge_price is None:
        missing.append("judge_properties (judge_price)")
    if missing:
        raise UserError(
            f"budget.usd {budget.usd:g}: a dollar budget needs the price of every model that may be asked; "
            f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} none. Give `price: "
            "{input_per_million: X, output_per_million: Y}` (or a table entry's name), or budget in tokens instead"
        )


def spent_before(manifest: dict[str, Any] | None) -> tuple[int, float]:
    """Tokens and dollars an earlier invocation of a resumed run spent (run.json's ``spent``; 0 when absent or bad)."""
    spent = (manifest or {}).get("spent")
    if not isinstance(spent, dict):
        return 0, 0.0
    tokens, usd = spent.get("tokens"), spent.get("usd")
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else 0
    usd = float(usd) if isinstance(usd, (int, float)) and not isinstance(usd, bool) and usd >= 0 else 0.0
    return tokens, usd if usd == usd and usd != float("inf") else 0.0


def new_spending(config: Config, resumed: dict[str, Any] | None) -> Spending:
    budget = config.budget
    tokens, usd = spent_before(resumed)
    return Spending(
        budget.tokens if budget is not None else None,
        budget.usd if budget is not None else None,
        spent_tokens=tokens,
        spent_usd=usd,
    )


def attach_accounts(spending: Spending, plan: Plan, clients: dict[str, ModelClient], judge: JudgeClient | None) -> None:
    """Each model's client (and the judge's) counts its answers into the run's spending, and obeys its budget."""
    for name, client in clients.items():
        client.account = spending.account(name, plan.models[name].info.price)
    if judge is not None:
        judge.client.account = spending.account(judge.client.name, judge.price, judge=True)


def spent(spending: Spending) -> dict[str, Any]:
    """run.json's ``spent``: the run's tokens and dollars over all its invocations (what a resume starts from)."""
    return {"tokens": spending.spent_tokens, "usd": round(spending.spent_usd, 6)}
