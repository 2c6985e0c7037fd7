"""``price:`` of a model (and ``judge_price:`` of the judge): USD per million tokens, to turn usage into cost.

A price is given as numbers, or by naming an entry of :data:`KNOWN_PRICES` (``price: gpt-4o-mini-2024-07-18``).
The table is a convenience the user opts into by name: a model's id never selects an entry by itself, so a model
without ``price`` shows tokens only, never a guessed cost. Each entry says where its numbers come from and the day
they were listed there; prices change, so a run's cost is only as right as the price it was given.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import Field

from evalkit.config.base import Strict
from evalkit.errors import did_you_mean

#: the highest rate a price may name (USD per million tokens): beyond any published rate by orders of magnitude
MAX_PRICE_PER_MILLION = 1_000_000


class Price(Strict):
    """USD per million tokens. Cached prompt tokens and reasoning tokens are parts of the prompt and completion
    counts a server reports; they cost their own rate when one is given, else the input and output rates."""

    input_per_million: float = Field(
        ge=0, le=MAX_PRICE_PER_MILLION, description="Mandatory: USD per million prompt (input) tokens (0 to 1000000)."
    )
    output_per_million: float = Field(
        ge=0,
        le=MAX_PRICE_PER_MILLION,
        description="Mandatory: USD per million completion (output) tokens (0 to 1000000).",
    )
    cached_input_per_million: float | None = Field(
        None,
        ge=0,
        le=MAX_PRICE_PER_MILLION,
        description="USD per million prompt tokens the server reports as cached (prompt_tokens_details."
        "cached_tokens; 0 to 1000000); absent: the input rate.",
    )
    reasoning_per_million: float | None = Field(
        None,
        ge=0,
        le=MAX_PRICE_PER_MILLION,
        description="USD per million reasoning tokens (completion_tokens_details.reasoning_tokens, counted within "
        "the completion tokens; 0 to 1000000); absent: the output rate.",
    )

    def cost(self, prompt: int, completion: int, cached: int | None = None, reasoning: int | None = None) -> float:
        """USD for these token counts; cached and reasoning tokens are within prompt and completion."""
        cached = min(max(cached or 0, 0), prompt)
        reasoning = min(max(reasoning or 0, 0), completion)
        cached_rate = self.input_per_million if self.cached_input_per_million is None else self.cached_input_per_million
        reasoning_rate = self.output_per_million if self.reasoning_per_million is None else self.reasoning_per_million
        return (
            (prompt - cached) * self.input_per_million
            + cached * cached_rate
            + (completion - reasoning) * self.output_per_million
            + reasoning * reasoning_rate
        ) / 1_000_000


class KnownPrice(NamedTuple):
    """One entry of the table: the rates, and where and since when they were published."""

    input_per_million: float
    output_per_million: float
    cached_input_per_million: float | None
    source: str
    #: the day ``source`` showed these rates (entered without re-checking the page since: prices change)
    listed: str

    def price(self) -> Price:
        return Price(
            input_per_million=self.input_per_million,
            output_per_million=self.output_per_million,
            cached_input_per_million=self.cached_input_per_million,
        )


_OPENAI_PRICING = "https://openai.com/api/pricing/"
_LISTED = "2025-04-14"
#: well-known public list prices (USD per million text tokens, standard tier), by dated model id, as OpenAI's
#: pricing page showed them when GPT-4.1 was released (2025-04-14). docs/configuration.md shows the table (a test
#: keeps the two equal). Audio and image tokens have rates of their own that this table does not hold.
KNOWN_PRICES: dict[str, KnownPrice] = {
    "gpt-4o-2024-08-06": KnownPrice(2.50, 10.00, 1.25, _OPENAI_PRICING, _LISTED),
    "gpt-4o-mini-2024-07-18": KnownPrice(0.15, 0.60, 0.075, _OPENAI_PRICING, _LISTED),
    "gpt-4.1-2025-04-14": KnownPrice(2.00, 8.00, 0.50, _OPENAI_PRICING, _LISTED),
    "gpt-4.1-mini-2025-04-14": KnownPrice(0.40, 1.60, 0.10, _OPENAI_PRICING, _LISTED),
    "gpt-4.1-nano-2025-04-14": KnownPrice(0.10, 0.40, 0.025, _OPENAI_PRICING, _LISTED),
}


def named_price(value: Any) -> Any:
    """A price given by name becomes the table's numbers; an unknown name is refused with the names there are.

    Used as a ``mode="before"`` validator: any other value (a mapping, None) is left to the schema.
    """
    if not isinstance(value, str):
        return value
    entry = KNOWN_PRICES.get(value.strip())
    if entry is None:
        raise ValueError(
            f"unknown price name {value!r}{did_you_mean(value, KNOWN_PRICES)}; expected one of "
            f"{', '.join(KNOWN_PRICES)} (evalkit's table of public prices) or a mapping "
            "{input_per_million: X, output_per_million: Y}"
        )
    return entry.price().model_dump(exclude_none=True)
