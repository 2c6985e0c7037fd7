"""How an engine asks one model about one sample: a conversation turn by turn, or every option's likelihood.

Every model's request goes through that model's shared client (pools, retries, store). A failed request
(or one failed chunk of long audio) fails the sample with its reason; a turn's chunks go at once, the
turns in order, each with the sample's own history. What was sent is noted in a :class:`Sent` before it
goes, so a failed sample still says what was sent, and the key of its entry in ``records/sent/``
(:mod:`evalkit.run.sent`) is shared by every model that was sent the same thing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from evalkit.clients.model_client import ModelClient
from evalkit.clients.outcome import Outcome, failed
from evalkit.clients.protocol import ParseError, continuation_after, continuation_logprob
from evalkit.clients.request import ModelRequest
from evalkit.clients.usage import Tally
from evalkit.config import RequestKind
from evalkit.data.audio.pcm import PreparedAudio
from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.plan import ModelPlan
from evalkit.prompts.chef.cot import (
    REASONING_MAX_TOKENS,
    context_with_reasoning,
    reasoning_only,
    reasoning_request,
    without_reasoning_turn,
)
from evalkit.prompts.prompt import Prompt
from evalkit.run.media import Prepared
from evalkit.run.requests import (
    RequestContext,
    chat_likelihood_requests,
    history_after,
    joined_answer,
    likelihood_context,
    likelihood_requests,
    turn_requests,
)
from evalkit.run.sent import sent_key
from evalkit.util import jsonutil


@dataclass(slots=True)
class Sent:
    """What one model was sent for one sample so far: each turn's requests, or a likelihood prompt's context."""

    #: the sample's view -> key map, shared by its models (see Asker.view_key)
    shared: dict[Any, str]
    turns: list[list[ModelRequest]] = field(default_factory=list)
    context: str | None = None
    #: requests of a likelihood prompt (one per option, and the context's with images or audio)
    options: int = 0
    #: the key, once fixed when a one-turn sample's requests were built
    key: str | None = None
    #: each turn's answer, in order (chain of thought: the reasoning, then the answer)
    answers: list[str] = field(default_factory=list)
    #: what the answers took: tokens of those sent, and those from the store or shared (evalkit/clients/usage.py)
    tally: Tally = field(default_factory=Tally)


class Asker:
    """One engine's way of asking its models: their clients, their request contexts, its dataset's chain of thought."""

    def __init__(
        self,
        clients: dict[str, ModelClient],
        request_contexts: dict[str, RequestContext],
        *,
        use_store: bool,
        chain_of_thought: bool,
        one_model: bool,
    ) -> None:
        self.clients = clients
        self.request_contexts = request_contexts
        self.use_store = use_store
        self.chain_of_thought = chain_of_thought
        #: an engine of one model: no other model to share a sent key with
        self.one_model = one_model
        #: what of each model's context shapes its messages: models with one view share a sample's sent entry
        self.sent_views = {name: ctx.sent_view() for name, ctx in request_contexts.items()}

    async def reasoned_apart(self, model: ModelPlan, prompt: Prompt, media: Prepared, sent: Sent) -> Outcome:
        """ChEF's GPT client's chain of thought: the reasoning request, then the question as a request of its own.

        The answer request does not carry the reasoning (ChEF's GPT client drops it); the outcome is the reasoning
        followed by the answer, which ChEF's metrics read.
        """
        reasoning = await self.conversation(model, reasoning_request(prompt), media, sent, reasoning=True)
        if not reasoning.ok:
            return reasoning
        answer = await self.conversation(model, prompt, media, sent)
        sent.key = None  # the entry's key covers both requests: the answer alone is not what was sent
        if not answer.ok:
            answer.attempts += reasoning.attempts
            return answer
        return Outcome(
            text=(reasoning.text or "") + (answer.text or ""),
            latency=reasoning.latency + answer.latency,
            attempts=reasoning.attempts + answer.attempts,
            replica=answer.replica,
            cached=reasoning.cached and answer.cached,
        )

    async def conversation(
        self, model: ModelPlan, prompt: Prompt, media: Prepared, sent: Sent, *, reasoning: bool = False
    ) -> Outcome:
        """Ask one model every turn in order, each with this sample's own history; chunks of a turn go at once.

        Each turn's requests are noted in ``sent`` before they go, so a failed sample still says what was sent.
        ``reasoning``: the last turn is a reasoning request (ChEF's 256 new tokens at least).
        """
        prepared, images = media
        client = self.clients[model.name]
        ctx = self.request_contexts[model.name]
        history: list[dict[str, Any]] = []
        history_audio: list = []
        outcome: Outcome | None = None  # made per turn; a prompt without turns answers ""
        total_latency, attempts, cached = 0.0, 0, True
        n_turns = len(prompt.turns)
        if ctx.kind == RequestKind.TRANSCRIPTION and not all(turn in prepared for turn in range(n_turns)):
            # known before anything is sent: no request is spent on a conversation that cannot finish
            return failed(FailureReason.UNSUPPORTED, f"{model.name} ({ctx.kind}) cannot answer a turn without audio")
        if ctx.kind == RequestKind.TRANSCRIPTION and any(turn in images for turn in range(n_turns)):
            return failed(FailureReason.UNSUPPORTED, f"{model.name} ({ctx.kind}) cannot be shown images")
        reasoning_turn = n_turns - 1 if reasoning else n_turns - 2 if self.chain_of_thought else None
        for turn in range(n_turns):
            turn_ctx = ctx
            if turn == reasoning_turn:  # ChEF lets the reasoning run to 256 new tokens, whatever the answer's limit
                limit = max(int(ctx.params.get("max_tokens") or 0), REASONING_MAX_TOKENS)
                turn_ctx = dataclasses.replace(ctx, params={**ctx.params, "max_tokens": limit})
            requests = turn_requests(prompt, turn, history, history_audio, prepared, turn_ctx, images=images)
            if not requests:
                return failed(
                    FailureReason.UNSUPPORTED, f"{model.name} ({ctx.kind}) cannot answer a turn without audio"
                )
            sent.turns.append(requests)
            if n_turns == 1:
                sent.key = self.view_key(self.sent_views[model.name], requests, sent.shared)
            if len(requests) == 1:  # most turns: no gather, and no generator per figure below
                only = await client.submit(requests[0], use_store=self.use_store)
                outcomes = [only]
                sent.tally.add_outcome(only)
                attempts += only.attempts
                total_latency += only.latency
                bad = None if only.ok else 0
            else:
                outcomes = list(await asyncio.gather(*(client.submit(r, use_store=self.use_store) for r in requests)))
                for answer in outcomes:
                    sent.tally.add_outcome(answer)
                attempts += sum(o.attempts for o in outcomes)
                total_latency += max(o.latency for o in outcomes)
                bad = next((i for i, o in enumerate(outcomes) if not o.ok), None)
            if bad is not None:
                # never a silent gap: one failed chunk (or turn) fails the whole sample
                failure = outcomes[bad]
                where = [f"turn {turn + 1}/{n_turns}"] if n_turns > 1 else []
                where += [f"chunk {bad + 1}/{len(requests)}"] if len(requests) > 1 else []
                error = f"{', '.join(where)}: {failure.error}" if where else failure.error
                return failed(
                    failure.failure or FailureReason.ERROR,
                    error or "",
                    status=failure.status,
                    attempts=attempts,
                    latency=total_latency,
                    replica=failure.replica,
                )
            text = joined_answer([o.text for o in outcomes], auharness=ctx.auharness)
            sent.answers.append(text)
            cached = cached and (outcomes[0].cached if len(outcomes) == 1 else all(o.cached for o in outcomes))
            outcome = Outcome(
                text=text, latency=total_latency, attempts=attempts, replica=outcomes[-1].replica, cached=cached
            )
            if turn + 1 < n_turns:
                history, history_audio = history_after(
                    prompt, turn, history, history_audio, prepared, ctx, text, images=images
                )
        return outcome if outcome is not None else Outcome(text="")

    async def _likelihood_reasoning(
        self, model: ModelPlan, prompt: Prompt, sent: Sent
    ) -> tuple[ModelRequest, Outcome] | Outcome:
        """ChEF's PPL with CoT: the reasoning, asked through the chat endpoint, before the options are scored."""
        ctx = self.request_contexts[model.name]
        if ctx.kind != RequestKind.CHAT:
            return failed(
                FailureReason.UNSUPPORTED, f"{model.name} ({ctx.kind}) cannot write chain-of-thought reasoning"
            )
        asking = reasoning_only(prompt)
        if likelihood_context(asking) is None:
            return failed(
                FailureReason.UNSUPPORTED, f"{model.name}: the completions API takes text only, not audio or images"
            )
        limit = max(int(ctx.params.get("max_tokens") or 0), REASONING_MAX_TOKENS)
        turn_ctx = dataclasses.replace(ctx, params={**ctx.params, "max_tokens": limit})
        (request,) = turn_requests(asking, len(asking.turns) - 1, [], [], PreparedAudio({}), turn_ctx)
        outcome = await self.clients[model.name].submit(request, use_store=self.use_store)
        sent.tally.add_outcome(outcome)
        if not outcome.ok:
            return failed(
                outcome.failure or FailureReason.ERROR,
                f"reasoning: {outcome.error}",
                status=outcome.status,
                attempts=outcome.attempts,
                latency=outcome.latency,
                replica=outcome.replica,
            )
        sent.answers.append(outcome.text or "")
        return request, outcome

    async def likelihood(
        self, model: ModelPlan, sample: Sample, prompt: Prompt, sent: Sent, media: Prepared
    ) -> Outcome:
        """Every option's log-likelihood after the prompt, as the JSON prediction metrics/likelihood.py reads."""
        choices = [str(c) for c in sample.meta.get("choices") or []]
        if not choices:
            return failed(FailureReason.UNSUPPORTED, "likelihood scoring needs the sample's choices (choices_column)")
        if likelihood_context(prompt) is None:  # images or audio: the chat endpoint, reasoning first with CoT
            return await self._chat_likelihood(model, prompt, sent, media, choices)
        reasoned: tuple[ModelRequest, Outcome] | None = None
        if self.chain_of_thought:
            found = await self._likelihood_reasoning(model, prompt, sent)
            if not isinstance(found, tuple):
                return found
            reasoned, prompt = found, without_reasoning_turn(prompt)
        context = likelihood_context(prompt)
        if context is None:
            return failed(
                FailureReason.UNSUPPORTED, f"{model.name}: the completions API takes text only, not audio or images"
            )
        if reasoned is not None:
            context = context_with_reasoning(context, reasoned[1].text or "")
        client = self.clients[model.name]
        asked = likelihood_requests(context, choices, self.request_contexts[model.name].model)
        sent.context, sent.options = context, len(asked) + (reasoned is not None)
        if reasoned is not None:  # the context holds this model's own reasoning: its entry is its own
            sent.key = sent_key([reasoned[0], *(request for request, _, _ in asked)])
        else:
            sent.key = self.view_key(RequestKind.COMPLETION, [request for request, _, _ in asked], sent.shared)
        outcomes = list(await asyncio.gather(*(client.submit(r, use_store=self.use_store) for r, _, _ in asked)))
        for answer in outcomes:
            sent.tally.add_outcome(answer)
        attempts = sum(o.attempts for o in outcomes) + (reasoned[1].attempts if reasoned is not None else 0)
        latency = max(o.latency for o in outcomes) + (reasoned[1].latency if reasoned is not None else 0.0)
        stats: dict[str, list[float]] = {"logprobs": [], "tokens": [], "chars": []}
        for index, ((_, start, end), outcome) in enumerate(zip(asked, outcomes)):
            if not outcome.ok:
                reason = outcome.failure or FailureReason.ERROR
                return failed(reason, f"option {index + 1}/{len(choices)}: {outcome.error}", attempts=attempts)
            try:
                total, count = continuation_logprob(outcome.raw, start, end)
            except ParseError as error:
                return failed(FailureReason.PARSE, f"option {index + 1}/{len(choices)}: {error}", attempts=attempts)
            stats["logprobs"].append(total)
            stats["tokens"].append(count)
            stats["chars"].append(end - start - 1)
        return Outcome(
            text=jsonutil.dumps({**stats, "context": context}),
            latency=latency,
            attempts=attempts,
            replica=outcomes[-1].replica,
            cached=all(o.cached for o in outcomes),
        )

    async def _chat_likelihood(
        self, model: ModelPlan, prompt: Prompt, sent: Sent, media: Prepared, choices: list[str]
    ) -> Outcome:
        """A prompt with images or audio, scored through vLLM's chat ``prompt_logprobs`` (the completions API is text).

        One request is the chat with an empty answer (the context), one per option with the option as the answer;
        the option's log-probability is that of the tokens its prompt has beyond the context's.
        """
        ctx = self.request_contexts[model.name]
        if model.info.inference_type != "vllm" or ctx.kind != RequestKind.CHAT:
            return failed(
                FailureReason.UNSUPPORTED,
                f"{model.name}: scoring options of a prompt with images or audio needs vLLM's prompt_logprobs on "
                f"chat completions (inference_type vllm); {model.info.inference_type} gives none",
            )
        cot = self.chain_of_thought
        if len(prompt.turns) != (2 if cot else 1):
            return failed(FailureReason.UNSUPPORTED, "likelihood scoring with images or audio takes one-turn prompts")
        prepared, images = media
        client = self.clients[model.name]
        history: list[dict[str, Any]] = []
        history_audio: list = []
        reasoned: list[Outcome] = []
        if cot:  # ChEF's PPL with CoT: the reasoning first (images shown with it), the options then answer again
            limit = max(int(ctx.params.get("max_tokens") or 0), REASONING_MAX_TOKENS)
            turn_ctx = dataclasses.replace(ctx, params={**ctx.params, "max_tokens": limit})
            first = turn_requests(prompt, 0, [], [], prepared, turn_ctx, images=images)
            if len(first) != 1:
                return failed(FailureReason.UNSUPPORTED, "likelihood scoring takes audio in one piece")
            thinking = first[0]
            sent.turns.append([thinking])
            outcome = await client.submit(thinking, use_store=self.use_store)
            sent.tally.add_outcome(outcome)
            if not outcome.ok:
                return failed(outcome.failure or FailureReason.ERROR, f"reasoning: {outcome.error}",
                              status=outcome.status, attempts=outcome.attempts, latency=outcome.latency)  # fmt: skip
            sent.answers.append(outcome.text or "")
            reasoned.append(outcome)
            history, history_audio = history_after(prompt, 0, [], [], prepared, ctx, outcome.text or "", images=images)
        base = turn_requests(prompt, len(prompt.turns) - 1, history, history_audio, prepared, ctx, images=images)
        if len(base) != 1:
            return failed(
                FailureReason.UNSUPPORTED, "likelihood scoring takes audio in one piece: its audio was cut in chunks"
            )
        asked = chat_likelihood_requests(base[0], choices)
        # the entry shows the context's chat (media by reference) and counts every request; the options are the
        # sample's choices
        sent.turns.append(asked[:1])
        sent.options = len(asked) + len(reasoned)
        if reasoned:  # the context holds this model's own reasoning: its entry is its own
            sent.key = sent_key([*sent.turns[0], *asked])
        else:
            sent.key = self.view_key(self.sent_views[model.name], asked, sent.shared)
        outcomes = list(await asyncio.gather(*(client.submit(r, use_store=self.use_store) for r in asked)))
        for answer in outcomes:
            sent.tally.add_outcome(answer)
        attempts = sum(o.attempts for o in [*reasoned, *outcomes])
        latency = max(o.latency for o in outcomes) + sum(o.latency for o in reasoned)
        bad = next((i for i, o in enumerate(outcomes) if not o.ok), None)
        if bad is not None:
            where = "the context" if bad == 0 else f"option {bad}/{len(choices)}"
            reason = outcomes[bad].failure or FailureReason.ERROR
            return failed(reason, f"{where}: {outcomes[bad].error}", attempts=attempts, latency=latency)
        stats: dict[str, list[float]] = {"logprobs": [], "tokens": [], "chars": []}
        for index, (choice, outcome) in enumerate(zip(choices, outcomes[1:]), start=1):
            try:
                total, count = continuation_after(outcomes[0].raw, outcome.raw)
            except ParseError as error:
                return failed(FailureReason.PARSE, f"option {index}/{len(choices)}: {error}", attempts=attempts)
            stats["logprobs"].append(total)
            stats["tokens"].append(count)
            stats["chars"].append(len(choice))
        return Outcome(
            text=jsonutil.dumps(stats),
            latency=latency,
            attempts=attempts,
            replica=outcomes[-1].replica,
            cached=all(o.cached for o in outcomes),
        )

    def view_key(self, view: Any, requests: list[ModelRequest], shared: dict[Any, str]) -> str:
        """The sent key of a one-turn sample as ``view`` sends it: the first model of the view to build sets it.

        Models start in the config's order and build their requests before their first wait, so the first
        model of a view is the same in every engine, and so is the key: one entry serves every model and metric.
        """
        if self.one_model:
            return sent_key(requests)
        key = shared.get(view)
        if key is None:
            key = shared[view] = sent_key(requests)
        return key
