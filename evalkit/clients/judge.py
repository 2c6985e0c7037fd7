"""The LLM judge: an endpoint like any other (pool, retries, circuit breaker, response store)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalkit.clients.endpoint import EndpointPool
from evalkit.clients.model_client import ModelClient, RetryPolicy
from evalkit.clients.outcome import Outcome
from evalkit.clients.protocol import EndpointProtocol
from evalkit.clients.request import ModelRequest
from evalkit.clients.usage import JUDGE_TALLY
from evalkit.config import JudgeProperties, RequestKind

if TYPE_CHECKING:
    from evalkit.clients.store import ResponseStore


class JudgeClient:
    """Sends judge prompts; judge metrics get one through their ``judge=`` option."""

    def __init__(self, props: JudgeProperties, store: ResponseStore | None = None) -> None:
        protocol = EndpointProtocol(
            base_url=props.judge_api_endpoint,
            kind=RequestKind.CHAT,
            auth_token=props.judge_api_key,
            api_version=props.judge_api_version if props.judge_type == "openai" else None,
            deployment=props.judge_model,
        )
        pool = EndpointPool(protocol, connections=props.judge_concurrency, timeout=props.judge_timeout)
        self.model = props.judge_model
        self.price = props.judge_price
        self.temperature = props.judge_temperature
        #: whether the config set judge_temperature (a peer's judge sends its own default when it did not)
        self.temperature_given = "judge_temperature" in props.model_fields_set
        #: whose judge prompt to use (prompts may be tuned per judge model)
        self.prompt_model = props.judge_prompt_model_override or props.judge_model
        self.client = ModelClient(
            f"judge:{props.judge_model}",
            [(pool, props.judge_concurrency)],
            RetryPolicy(retry_attempts=props.judge_retry_attempts),
            store=store,
        )

    async def ask(self, messages: list[dict[str, Any]], *, instance: str | None = None, **params: Any) -> Outcome:
        """The judge's answer to ``messages``; ``params`` join (and override) the temperature in the body.

        ``instance`` names the answer being judged when each must be asked on its own: identical requests with
        different instances are each sent (and stored) once, never answered by one another.
        """
        request = ModelRequest(
            kind=RequestKind.CHAT,
            model=self.model,
            messages=messages,
            params={"temperature": self.temperature, **params},
            instance=instance,
        )
        outcome = await self.client.submit(request)
        tally = JUDGE_TALLY.get()
        if tally is not None:  # the sample being scored says what judging it took
            tally.add_outcome(outcome)
        return outcome

    async def close(self) -> None:
        await self.client.close()
