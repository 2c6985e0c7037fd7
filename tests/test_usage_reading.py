"""Usage as servers report it: read as untrusted input, added up, priced; price names and budgets as config."""

from __future__ import annotations

import math
from typing import Any

import pytest

from evalkit.clients.outcome import Outcome
from evalkit.clients.spending import Spending
from evalkit.clients.usage import MAX_TOKENS_PER_ANSWER, Tally, Usage, read_usage, tally_from_dict
from evalkit.config import parse_config
from evalkit.config.price import KNOWN_PRICES, Price
from evalkit.errors import ConfigError
from evalkit.report.results import row_from_dict
from evalkit.report.tables import cut_short, n_cell
from evalkit.report.usage import NOT_REPORTED, budget_line, tokens_text, usage_lines
from evalkit.run.cost.budget import spent_before
from evalkit.run.cost.estimate import SpendEstimate, request_size
from evalkit.run.result_rows import row_partial


def test_chat_and_transcription_usage_are_read_with_their_details() -> None:
    chat = {
        "prompt_tokens": 120,
        "completion_tokens": 40,
        "total_tokens": 160,
        "prompt_tokens_details": {"cached_tokens": 100, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 25},
    }
    assert read_usage(chat) == Usage(prompt=120, completion=40, reasoning=25, cached=100)
    transcription = {"type": "tokens", "input_tokens": 30, "output_tokens": 7, "total_tokens": 37}
    assert read_usage(transcription) == Usage(prompt=30, completion=7)
    assert read_usage({"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": None}).cached is None


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {},
        [],
        "12 tokens",
        {"prompt_tokens": -1, "completion_tokens": -5},
        {"prompt_tokens": "12", "completion_tokens": "3"},
        {"prompt_tokens": 1.5, "completion_tokens": 2.25},
        {"prompt_tokens": True, "completion_tokens": False},
        {"prompt_tokens": math.nan, "completion_tokens": math.inf},
        {"prompt_tokens": MAX_TOKENS_PER_ANSWER + 1, "completion_tokens": 10**30},
        {"prompt_tokens": None, "completion_tokens": [1]},
        {"type": "duration", "seconds": 12},  # whisper-1: seconds, not tokens
    ],
)
def test_a_hostile_or_absent_usage_is_not_reported_never_zero_never_a_crash(raw: Any) -> None:
    usage = read_usage(raw)
    assert usage == Usage() and not usage.reported
    tally = Tally()
    tally.add_usage(usage)
    data = tally.as_dict()
    assert data["requests"] == 1 and data["not_reported"] == 1
    assert data["prompt_tokens"] is None and data["completion_tokens"] is None  # not reported, never 0
    assert NOT_REPORTED in tokens_text(data)


def test_a_part_larger_than_its_whole_is_not_reported_and_a_whole_float_is_a_count() -> None:
    usage = read_usage(
        {
            "prompt_tokens": 10.0,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 11},
            "completion_tokens_details": {"reasoning_tokens": 5},
        }
    )
    assert usage == Usage(prompt=10, completion=4)


def test_a_tally_keeps_store_shared_and_failed_answers_apart_from_what_was_paid() -> None:
    tally = Tally()
    tally.add_outcome(Outcome(text="a", usage={"prompt_tokens": 7, "completion_tokens": 3}))
    tally.add_outcome(Outcome(text="b", usage={"prompt_tokens": 9, "completion_tokens": 1}, cached=True))
    tally.add_outcome(Outcome(text="c", usage={"prompt_tokens": 9, "completion_tokens": 1}, shared=True))
    tally.add_outcome(Outcome(failure="timeout", error="x"))
    tally.add_outcome(Outcome(text="d"))  # a server that reports nothing
    data = tally.as_dict()
    assert data == {
        "requests": 2,
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "reasoning_tokens": None,
        "cached_tokens": None,
        "not_reported": 1,
        "from_store": 1,
        "shared": 1,
    }
    assert tally.as_dict(compact=True) == {
        "requests": 2,
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "not_reported": 1,
        "from_store": 1,
        "shared": 1,
    }
    again = tally_from_dict(data)
    assert again is not None and again.as_dict() == data
    hostile = tally_from_dict({"requests": 2, "prompt_tokens": "lots", "completion_tokens": -1, "shared": 1.5})
    assert hostile is not None
    assert hostile.as_dict()["prompt_tokens"] is None and hostile.as_dict()["completion_tokens"] is None
    assert hostile.as_dict()["shared"] == 0 and tally_from_dict(["not", "a", "tally"]) is None
    nothing = Tally()
    assert nothing.as_dict()["prompt_tokens"] == 0  # nothing sent: nothing spent, which is a known 0


def test_cost_prices_cached_and_reasoning_tokens_at_their_own_rates() -> None:
    price = Price(
        input_per_million=2.0, output_per_million=8.0, cached_input_per_million=0.5, reasoning_per_million=4.0
    )
    # 1M prompt of which 400k cached, 1M completion of which 250k reasoning
    assert price.cost(1_000_000, 1_000_000, cached=400_000, reasoning=250_000) == pytest.approx(
        0.6 * 2.0 + 0.4 * 0.5 + 0.75 * 8.0 + 0.25 * 4.0
    )
    plain = Price(input_per_million=1.0, output_per_million=3.0)
    assert plain.cost(2_000, 1_000, cached=500, reasoning=100) == pytest.approx((2_000 * 1 + 1_000 * 3) / 1e6)


def _config(info: dict[str, Any], **top: Any) -> Any:
    model = {"name": "m", "inference_type": "openai", "url": "http://127.0.0.1:9/v1", "model": "m", **info}
    return parse_config({"dataset_metric": [["x", "exact_match"]], "models": [{"info": model}], **top})


def test_a_price_is_numbers_or_a_table_entry_named_explicitly_never_guessed_from_the_model_id() -> None:
    named = _config({"price": "gpt-4o-mini-2024-07-18"}).models[0].info.price
    entry = KNOWN_PRICES["gpt-4o-mini-2024-07-18"]
    assert named == Price(
        input_per_million=entry.input_per_million,
        output_per_million=entry.output_per_million,
        cached_input_per_million=entry.cached_input_per_million,
    )
    # a model whose id is in the table gets no price unless it names one
    assert _config({"model": "gpt-4o-mini-2024-07-18"}).models[0].info.price is None
    with pytest.raises(ConfigError) as refused:
        _config({"price": "gpt-4o-mini"})
    assert "unknown price name 'gpt-4o-mini'" in str(refused.value) and "gpt-4o-mini-2024-07-18" in str(refused.value)
    with pytest.raises(ConfigError) as negative:
        _config({"price": {"input_per_million": -1, "output_per_million": 2}})
    assert "price" in str(negative.value)
    with pytest.raises(ConfigError):
        _config({"price": {"input_per_million": 1}})  # the output rate is mandatory


def test_a_budget_needs_a_limit_and_refuses_nonsense() -> None:
    assert _config({}, budget={"tokens": 1000}).budget.tokens == 1000
    for bad in ({}, {"tokens": 0}, {"usd": -1}, {"tokens": 1.5}, {"usd": "lots"}):
        with pytest.raises(ConfigError) as refused:
            _config({}, budget=bad)
        assert "budget" in str(refused.value)


def test_the_price_table_in_the_docs_equals_the_code() -> None:
    from helpers import ROOT

    text = (ROOT / "docs" / "configuration.md").read_text()
    for name, entry in KNOWN_PRICES.items():
        row = (
            f"| `{name}` | {entry.input_per_million:g} | {entry.cached_input_per_million:g} | "
            f"{entry.output_per_million:g} |"
        )
        assert row in text, row
    assert entry.listed in text and entry.source in text


def test_spending_stops_at_either_limit_and_carries_what_a_resume_spent_before() -> None:
    spending = Spending(tokens=100, spent_tokens=60)
    account = spending.account("m", Price(input_per_million=1.0, output_per_million=1.0))
    assert not spending.exhausted
    account.add({"prompt_tokens": 30, "completion_tokens": 9})
    assert not spending.exhausted and spending.spent_tokens == 99
    account.add({"prompt_tokens": 1, "completion_tokens": 0})
    assert spending.exhausted and spending.as_dict()["spent_before_tokens"] == 60
    dollars = Spending(usd=0.001)
    dollars.account("m", Price(input_per_million=10.0, output_per_million=10.0)).add({"prompt_tokens": 100})
    assert dollars.exhausted and dollars.spent_usd == pytest.approx(0.001)
    assert spent_before({"spent": {"tokens": 5, "usd": 0.25}}) == (5, 0.25)
    assert spent_before({"spent": {"tokens": -5, "usd": "x"}}) == (0, 0.0)
    assert spent_before({"spent": [1]}) == (0, 0.0)


def test_text_of_a_copied_results_file_never_trusts_its_numbers() -> None:
    meta = {
        "usage": {"models": {"m": {"requests": "9", "prompt_tokens": -4, "cost_usd": math.nan}}, "total": "x"},
        "budget": {"tokens": 10, "spent_tokens": 12, "exhausted": True, "refused_requests": 3},
        "partial": "budget",
    }
    lines = usage_lines(meta)
    assert lines[0].startswith("model m: ") and NOT_REPORTED in lines[0] and "no cost" in lines[0]
    assert "12 of 10 tokens" in budget_line(meta["budget"]) and "3 requests not sent" in lines[1]
    assert lines[-1].startswith("PARTIAL RESULTS (budget)")


def test_the_dry_run_estimate_counts_text_characters_and_bounds_completions_by_max_tokens() -> None:
    from evalkit.clients.request import ModelRequest
    from evalkit.config import RequestKind

    asked = ModelRequest(
        kind=RequestKind.CHAT,
        model="m",
        messages=[{"role": "user", "content": [{"type": "text", "text": "x" * 40}, {"type": "image_url"}]}],
        params={"max_tokens": 16},
    )
    estimate = SpendEstimate()
    estimate.add(request_size(asked))
    estimate.add(request_size(ModelRequest(kind=RequestKind.CHAT, model="m", messages=[{"content": "abcde"}])))
    assert (estimate.prompt_tokens, estimate.completion_bound, estimate.unbounded) == (10 + 2, 16, 1)
    price = Price(input_per_million=1.0, output_per_million=1.0)
    assert estimate.cost(price) is None  # a request without max_tokens: no bound
    assert "no max_tokens" in estimate.describe(price)


def test_the_test_servers_usage_script_is_checked_and_builds_what_it_says() -> None:
    from evalkit.testing import chat
    from evalkit.testing.script import load_script

    with pytest.raises(ConfigError) as refused:
        load_script({"usage": {"reasoning_tokens": -1, "reasonning": 2, "report": "yes"}})
    problems = str(refused.value)
    assert "usage.reasoning_tokens" in problems and "usage.reasonning: unknown key" in problems
    assert "usage.report" in problems
    spec = load_script({"usage": {"reasoning_tokens": 3, "cached_tokens": 99}}).spec.usage
    body = chat.usage(10, 4, spec)
    assert body["completion_tokens"] == 7 and body["total_tokens"] == 17
    assert body["prompt_tokens_details"] == {"cached_tokens": 10}  # at most the prompt's tokens
    assert read_usage(body) == Usage(prompt=10, completion=7, reasoning=3, cached=10)
    assert chat.usage(10, 4, load_script({"usage": {"report": False}}).spec.usage) is chat.OMIT
    assert chat.usage(10, 4, load_script({"usage": {"raw": None}}).spec.usage) is None  # `usage: null`, sent as is


def test_a_rows_partial_is_one_form_for_the_budget_and_stop_at_ci() -> None:
    stopped = {"reason": "stopped_at_ci", "half_width": 0.04, "drawn": 60}
    assert row_partial(None, None) is None and row_partial(stopped, None) == stopped
    assert row_partial(None, "budget") == {"reason": "budget"}
    both = row_partial(stopped, "budget")  # the budget cut a stopping pair first: its precision was never reached
    assert both == {"reason": "budget", "half_width": 0.04, "drawn": 60}

    base = {"dataset": "d", "task": "t", "category": "text", "metric": "m", "model": "x", "score": 0.5, "n": 60}
    base |= {"ci_low": 0.4, "ci_high": 0.6, "n_failed": 0, "failure_rate": 0.0, "unreliable": False, "seconds": 1.0}
    old = row_from_dict({**base, "partial": "budget"})  # a reason alone, as a results.json may hold it
    assert old.partial == {"reason": "budget"} and cut_short(old) and n_cell(old) == "60 (partial: budget)"
    precise = row_from_dict({**base, "partial": stopped})
    assert not cut_short(precise) and n_cell(precise).startswith("60 (stopped at ±")
    assert row_from_dict({**base, "partial": 7}).partial is None  # neither form: untrusted, dropped
