"""The dry run's estimate of what a run would spend: tokens from the prompts it would send, cost from the prices.

No tokenizer is used (a model's own is not at hand, and evalkit has no
tokenizer dependency): a prompt's tokens are estimated as its text's
characters divided by :data:`CHARS_PER_TOKEN` (4, the usual rule of thumb
for English with GPT-style tokenizers; other scripts and code run higher).
Audio and images are not counted (their token cost is the model's own
business), only counted as parts. A completion is bounded by the request's
output limit (``max_tokens``, ``max_completion_tokens``); a request without one
has no bound, and is counted as such. The estimate is therefore a guide, not
a bill: the upper bound of the completions and a rough figure for the prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.config.price import Price

#: characters per token of the estimate
CHARS_PER_TOKEN = 4
_LIMIT_KEYS = ("max_completion_tokens", "max_tokens", "max_new_tokens", "max_output_tokens")


def _text_chars(value: Any) -> int:
    """Characters of the text in a message's content (strings and ``text`` parts; media parts count none)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_text_chars(part) for part in value)
    if isinstance(value, dict):
        text = value.get("text")
        return len(text) if isinstance(text, str) else 0
    return 0


def output_limit(params: dict[str, Any]) -> int | None:
    for key in _LIMIT_KEYS:
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


@dataclass(frozen=True, slots=True)
class RequestSize:
    """One request's estimated prompt tokens, its output limit (None: none) and its media parts."""

    prompt_tokens: int
    limit: int | None
    media_parts: int


def request_size(request: Any) -> RequestSize:
    chars = sum(_text_chars(m.get("content")) for m in request.messages if isinstance(m, dict))
    chars += len(request.prompt or "")
    return RequestSize(
        -(-chars // CHARS_PER_TOKEN), output_limit(request.params), len(request.audio) + len(request.images)
    )


@dataclass
class SpendEstimate:
    """What one model's requests to send would take, by estimate."""

    requests: int = 0
    prompt_tokens: int = 0
    #: the sum of the output limits of the requests that have one
    completion_bound: int = 0
    #: requests without an output limit: their completions have no bound
    unbounded: int = 0
    #: audio and image parts, whose tokens are not estimated
    media_parts: int = 0

    def add(self, size: RequestSize) -> None:
        self.requests += 1
        self.prompt_tokens += size.prompt_tokens
        if size.limit is None:
            self.unbounded += 1
        else:
            self.completion_bound += size.limit
        self.media_parts += size.media_parts

    def cost(self, price: Price | None) -> float | None:
        """USD at most (prompt estimate + every completion at its limit); None without a price or with no bound."""
        if price is None or self.unbounded:
            return None
        return price.cost(self.prompt_tokens, self.completion_bound)

    def as_dict(self, price: Price | None) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prompt_tokens_estimate": self.prompt_tokens,
            "completion_tokens_bound": None if self.unbounded else self.completion_bound,
            "unbounded_requests": self.unbounded,
            "media_parts_not_counted": self.media_parts,
            "cost_usd_bound": None if self.cost(price) is None else round(self.cost(price) or 0.0, 6),
        }

    def describe(self, price: Price | None) -> str:
        text = f"~{self.prompt_tokens:,} prompt tokens (characters / {CHARS_PER_TOKEN})"
        if self.unbounded:
            text += f" + completions without a bound ({self.unbounded:,} requests have no max_tokens)"
        else:
            text += f" + at most {self.completion_bound:,} completion tokens (max_tokens)"
        if self.media_parts:
            text += f"; {self.media_parts:,} audio/image parts not counted"
        cost = self.cost(price)
        if price is None:
            text += "; no price: no cost"
        elif cost is None:
            text += "; cost: no bound"
        else:
            text += f"; at most ${cost:,.4f}" if cost >= 0.0001 else f"; at most ${cost:.6f}"
        return text
