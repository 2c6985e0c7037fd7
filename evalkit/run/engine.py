"""One (dataset, metric) pair end to end: stream samples, ask every model, score, record.

Samples are read in a worker thread in small batches and at most ``window``
samples are in flight, so memory is bounded by the window, not the dataset.
A sample's audio is decoded and cut for every model once, in an audio
worker process (:func:`evalkit.data.audio.workers.run_media_job`), and shared
by all models; its images are read, checked and downsized for every model's
limit there too (:mod:`evalkit.data.image.prepare`). Media already in the form
sent (16 kHz mono 16-bit audio, images within every limit) is read, hashed and
base64-encoded in a thread instead, so no large result crosses a process pipe;
every model's request goes through that model's shared
client (pools, retries, store). A failed request (or one failed chunk of
long audio) is recorded with its reason and excluded from the score. Each
record's ``prompt`` says what shaped the prompt: template pool and index,
in-context example ids, add-on and system prompt names; its ``sent`` names
what was sent (the messages, media as references) in ``records/sent/``
(:mod:`evalkit.run.sent`), written once per key however many metrics and
models sent it, and always before the record that names it reaches the disk;
``row``, ``groups`` and ``stats`` make a score and its CI recomputable from
the records alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.clients.model_client import ModelClient
from evalkit.clients.outcome import Outcome, failed
from evalkit.clients.protocol import ParseError, continuation_after, continuation_logprob
from evalkit.clients.request import ModelRequest
from evalkit.config import Filters, RequestKind
from evalkit.data.audio.direct import prepare_example_audio_direct, prepare_turn_audio_direct
from evalkit.data.audio.pcm import (
    PreparedAudio,
    Shape,
    example_key,
    prepare_example_audio,
    prepare_turn_audio,
)
from evalkit.data.audio.workers import run_media_job
from evalkit.data.filters import apply_filters
from evalkit.data.image.corrupt import IMAGE_CORRUPTIONS, ImageCorruption, sample_seed
from evalkit.data.image.prepare import ImageLimit, PreparedImages, prepare_images, prepare_images_as_is
from evalkit.data.loading import iter_samples
from evalkit.data.sample import Sample
from evalkit.errors import DiskFullError, UserError, WriteFailed
from evalkit.failures import FailureReason
from evalkit.languages import target_language
from evalkit.metrics import METRICS, Metric, MetricResult
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.plan import EngineSpec, ModelPlan, dataset_processors
from evalkit.processing.postprocessors import POSTPROCESSORS
from evalkit.prompts import examples as icl
from evalkit.prompts.assemble import PromptAssembler
from evalkit.prompts.corrupt_text import corrupt_sample
from evalkit.prompts.cot import (
    REASONING_MAX_TOKENS,
    context_with_reasoning,
    reasoning_only,
    with_reasoning_turn,
    without_reasoning_turn,
)
from evalkit.prompts.preprocessors import PREPROCESSORS, PromptContext
from evalkit.prompts.prompt import Prompt
from evalkit.report.results import ResultRow
from evalkit.run.corpus import fit_corpus
from evalkit.run.requests import (
    RequestContext,
    chat_likelihood_requests,
    history_after,
    joined_answer,
    likelihood_context,
    likelihood_requests,
    turn_requests,
)
from evalkit.run.robustness import add_robustness
from evalkit.run.scoring import metric_settings, new_record, score_into_record, summarize, where
from evalkit.run.sent import SentLog, SentLogs, sent_folder, sent_key, write_all
from evalkit.run.sentrefs import MediaRefs, Sources, completion_messages, sent_messages
from evalkit.run.shard import Shard, shard_samples
from evalkit.util import jsonutil
from evalkit.util.diskfull import disk_full, is_disk_full
from evalkit.util.idindex import IdIndex
from evalkit.util.safe_names import safe_path

log = logging.getLogger("evalkit")

_READ_BATCH = 32
#: records buffered before they are written (a kill loses at most these; a resume asks the store for them again)
_RECORDS_BUFFER = 8192
#: a sample's audio and images, made ready for every model of the engine
Prepared = tuple[PreparedAudio, PreparedImages]
_NO_IMAGES = PreparedImages()
#: failures that come from the data, not the model: each kind gets one warning naming its first row
DATA_PROBLEMS = frozenset({FailureReason.DUPLICATE_ID, FailureReason.NO_REFERENCE, FailureReason.NO_SCORE})


@dataclass(slots=True)
class Sent:
    """What one model was sent for one sample so far: each turn's requests, or a likelihood prompt's context."""

    #: the sample's view -> key map, shared by its models (see Engine._view_key)
    shared: dict[Any, str]
    turns: list[list[ModelRequest]] = field(default_factory=list)
    context: str | None = None
    #: requests of a likelihood prompt (one per option, and the context's with images or audio)
    options: int = 0
    #: the key, once fixed when a one-turn sample's requests were built
    key: str | None = None
    #: each turn's answer, in order (chain of thought: the reasoning, then the answer)
    answers: list[str] = field(default_factory=list)


@dataclass
class ModelResult:
    model: str
    result: MetricResult | None
    n_failed: int = 0
    failure_reasons: dict[str, int] = field(default_factory=dict)
    #: reason -> the first failure message seen with it
    failure_examples: dict[str, str] = field(default_factory=dict)


@dataclass
class EngineResult:
    spec: EngineSpec
    models: dict[str, ModelResult] = field(default_factory=dict)
    n_samples: int = 0
    seconds: float = 0.0
    error: str | None = None
    metric_info: dict[str, Any] = field(default_factory=dict)
    #: where the engine wrote its records (a robustness variant is compared with its clean pair's, sample by sample)
    records_path: Path | None = None


ProgressHook = Callable[[str, str, bool], None]


class Engine:
    def __init__(
        self,
        spec: EngineSpec,
        models: dict[str, ModelPlan],
        clients: dict[str, ModelClient],
        filters: Filters,
        records_dir: Path,
        prompt_context: PromptContext | None = None,
        window: int = 256,
        progress: ProgressHook | None = None,
        use_store: bool = True,
        seed: int = 0,
        metric_factory: Callable[[EngineSpec], Metric] | None = None,
        shard: Shard | None = None,
        sent_logs: SentLogs | None = None,
    ) -> None:
        self.spec = spec
        #: ``evalkit run --shard K/N``: only this share of the filtered samples runs (see evalkit/run/shard.py)
        self.shard = shard
        self.models = [models[name] for name in spec.models]
        self.clients = clients
        self.filters = filters
        # a dataset named "../.." or "/abs" must not write outside the records folder: one safe, unique name
        self.records_path = safe_path(records_dir, spec.dataset.name, spec.metric, suffix=".jsonl")
        self.context = prompt_context or PromptContext()
        self.window = window
        self.progress = progress
        self.use_store = use_store
        self.seed = seed
        dataset = spec.dataset
        self.language = target_language(dataset.language)
        self.metric = (
            metric_factory(spec) if metric_factory else METRICS.get(spec.metric)(language=self.language, **spec.options)
        )
        self.preprocessor = PREPROCESSORS.get(dataset.preprocessor)()
        self.postprocessor = POSTPROCESSORS.get(dataset.postprocessor)()
        self.processors = dataset_processors(dataset)
        self.accumulators = {m.name: ScoreAccumulator(self.metric) for m in self.models}
        self.request_contexts = {
            m.name: RequestContext(
                model=m.info.model,
                kind=m.kind,
                params=spec.params.get(m.name, {}),
                chunk_size=m.info.chunk_size,
                long_audio=dataset.long_audio,
                language=self.language,
                system=self.context.system_by_model.get(m.name),
                system_override=m.name in self.context.system_by_model,
                image_limit=(m.info.max_image_side, m.info.max_image_pixels),
                image_position=dataset.image_position,
            )
            for m in self.models
        }
        #: what of each model's context shapes its messages: models with one view share a sample's sent entry
        self._sent_views = {name: ctx.sent_view() for name, ctx in self.request_contexts.items()}
        #: every way this engine's models cut audio, so a sample's pieces are made once, in a thread
        self.shapes: list[Shape] = list(dict.fromkeys(ctx.shape for ctx in self.request_contexts.values()))
        self.encodings = frozenset(ctx.kind.audio_encoding for ctx in self.request_contexts.values())
        #: every image limit of this engine's models, so an image is downsized once per limit
        self.image_limits: list[ImageLimit] = list(dict.fromkeys(c.image_limit for c in self.request_contexts.values()))
        self.n_samples = 0
        self._records: io.FileIO | None = None
        #: records not yet written: the sent log is flushed before they are, so no record names a lost entry
        self._buffer = bytearray()
        self._example_pool: list[Sample] = []
        self._example_audio: dict[str, asyncio.Future[PreparedAudio]] = {}
        self._assembler: PromptAssembler | None = None
        #: bad rows by failure reason: (count, the first one's error), for one warning each at the end
        self.data_problems: dict[str, tuple[int, str]] = {}
        #: what was sent, once per content per dataset (records/sent/): the run's logs are shared by its engines
        self._sent_logs = sent_logs if sent_logs is not None else SentLogs(sent_folder(records_dir))
        self._sent: SentLog | None = None
        self._sources: Sources | None = None

    def corpus_samples(self) -> Iterator[Sample]:
        """The plan's samples before a shard is taken: filtered, then expanded by the preprocessor (circular copies).

        Corpus-wide counts (CIDEr's document frequencies) are taken over these, so every shard agrees.
        """
        filtered = apply_filters(iter_samples(self.spec.dataset), self.filters, self.spec.dataset.name)
        return self.preprocessor.expand(filtered)

    def planned_samples(self) -> Iterator[Sample]:
        # after the filters and the expansion: shards split exactly the plan's samples
        return shard_samples(self.corpus_samples(), self.shard)

    async def run(self) -> EngineResult:
        started = time.perf_counter()
        settings, broken = metric_settings(self.metric)  # a metric that raises fails its pair, never the run
        result = EngineResult(spec=self.spec, metric_info=settings, error=broken, records_path=self.records_path)
        try:
            if self.spec.dataset.in_context:
                self._example_pool = await asyncio.to_thread(icl.load_pool, self.spec.dataset)
            self._assembler = PromptAssembler(
                self.spec.dataset, self.preprocessor, self.context, self.seed, self._example_pool
            )
            if await fit_corpus(self.metric, self.corpus_samples):
                result.metric_info, broken = metric_settings(self.metric)  # now with what it counted
                result.error = result.error or broken
            await self._run_recorded()
        except (DiskFullError, WriteFailed):
            raise  # the whole run stops: nothing more can be kept
        except UserError as error:
            result.error = str(error)
        except Exception as error:
            log.exception("engine %s failed", self.spec.id)
            result.error = f"{type(error).__name__}: {error}"
        self._warn_data_problems()
        result.n_samples = self.n_samples
        result.seconds = time.perf_counter() - started
        for name, acc in self.accumulators.items():
            # bootstrap CIs are CPU work: summarize runs them off the loop, so other engines keep their endpoints busy
            scored, crashed = await summarize(acc, self.seed)
            result.error = result.error or crashed
            result.models[name] = ModelResult(
                model=name,
                result=scored,
                n_failed=acc.n_failed,
                failure_reasons=dict(acc.failures),
                failure_examples=dict(acc.failure_examples),
            )
        return result

    async def _run_recorded(self) -> None:
        """Run the samples into the records file; a full disk raises one DiskFullError naming it."""
        try:
            self.records_path.parent.mkdir(parents=True, exist_ok=True)
            # unbuffered file, own 8 KiB buffer (_write): a kill loses little, and the sent log goes first
            self._records = open(self.records_path, "wb", buffering=0)  # noqa: SIM115 - closed below
        except OSError as error:
            if is_disk_full(error):
                raise disk_full(self.records_path) from None
            raise WriteFailed(str(self.records_path), error) from None
        self._sent = self._sent_logs.acquire(self.spec.dataset.name)
        try:
            self._sources = Sources.of(self.spec.dataset)
            await self._sent.open()
            await self._run_samples()
            self._flush()
            try:
                self._records.close()
            except OSError as error:
                if is_disk_full(error):
                    raise disk_full(self.records_path) from None
                raise WriteFailed(str(self.records_path), error) from None
        finally:
            if not self._records.closed:
                # stopped (a signal, another engine's full disk): what was answered is kept, as far as it goes
                with contextlib.suppress(OSError, DiskFullError, WriteFailed):
                    self._flush()
                with contextlib.suppress(OSError):  # already failing: a second full-disk error says nothing new
                    self._records.close()
            self._sent_logs.release(self._sent)

    async def _run_samples(self) -> None:
        iterator = self.planned_samples()
        slots = asyncio.Semaphore(self.window)
        pending: set[asyncio.Task[None]] = set()
        first_error: list[BaseException] = []
        seen = IdIndex()  # sample id -> its first row: a repeat is recorded as duplicate_id, never sent

        def done(task: asyncio.Task[None]) -> None:
            pending.discard(task)
            slots.release()
            if not task.cancelled() and task.exception() is not None and not first_error:
                first_error.append(task.exception())  # type: ignore[arg-type]

        try:
            await self._feed(iterator, slots, pending, first_error, seen, done)
        except asyncio.CancelledError:
            # the run stops (another engine hit a full disk, a signal): no sample task may outlive its engine,
            # or it would go on sending after the clients and the store are closed
            for task in list(pending):
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            raise
        if pending:
            if first_error and isinstance(first_error[0], (DiskFullError, WriteFailed)):
                for task in list(pending):  # nothing more can be kept: answers still coming would be lost
                    task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if first_error:
            raise first_error[0]

    async def _feed(
        self,
        iterator: Iterator[Sample],
        slots: asyncio.Semaphore,
        pending: set[asyncio.Task[None]],
        first_error: list[BaseException],
        seen: IdIndex,
        done: Callable[[asyncio.Task[None]], None],
    ) -> None:
        """Start a task per sample as window slots free up, until the data ends or a sample fails the run."""
        while True:
            batch = await asyncio.to_thread(lambda: list(itertools.islice(iterator, _READ_BATCH)))
            if not batch:
                break
            for sample in batch:
                await slots.acquire()
                if first_error:
                    break
                self.n_samples += 1
                row = sample.meta.get("index")
                first = seen.setdefault(sample.id, row if isinstance(row, int) else self.n_samples - 1)
                if first != row and isinstance(row, int):
                    task = asyncio.create_task(self._duplicate(sample, first))
                else:
                    task = asyncio.create_task(self._sample(sample))
                pending.add(task)
                task.add_done_callback(done)
            if first_error:
                break

    async def _example(self, example: Sample) -> PreparedAudio:
        """An in-context example's audio pieces, made once per engine however many samples show it."""
        future = self._example_audio.get(example.id)
        if future is None:
            assert example.audio is not None
            future = asyncio.ensure_future(
                run_media_job(
                    prepare_example_audio_direct, prepare_example_audio, example.audio, self.shapes, self.encodings
                )
            )
            self._example_audio[example.id] = future
        return await asyncio.shield(future)

    async def _prepare(
        self, prompt: Prompt, examples: list[Sample], corruption: ImageCorruption | None = None
    ) -> Prepared | Outcome:
        """Decode the sample's audio once and cut it for every model, and ready its images, in a worker process."""
        audio = {index: turn.audio for index, turn in enumerate(prompt.turns) if turn.audio is not None}
        try:
            prepared = (
                await run_media_job(prepare_turn_audio_direct, prepare_turn_audio, audio, self.shapes, self.encodings)
                if audio
                else PreparedAudio({})
            )
        except (ValueError, OSError, RuntimeError) as error:
            return failed(FailureReason.AUDIO, f"could not decode audio: {error}")
        for index, ((turn, _), example) in enumerate(zip(prompt.examples, examples)):
            if turn.audio is not None:
                try:
                    prepared.adopt(example_key(index), await self._example(example), -1)
                except (ValueError, OSError, RuntimeError) as error:
                    return failed(
                        FailureReason.AUDIO, f"could not decode the audio of in-context example {example.id}: {error}"
                    )
        images = {index: turn.images for index, turn in enumerate(prompt.turns) if turn.images}
        images.update({example_key(i): turn.images for i, (turn, _) in enumerate(prompt.examples) if turn.images})
        if not images:
            return prepared, _NO_IMAGES
        try:
            pictures = await run_media_job(prepare_images_as_is, prepare_images, images, self.image_limits, corruption)
        except (ValueError, OSError, RuntimeError) as error:
            return failed(FailureReason.IMAGE, f"could not read the image: {error}")
        return prepared, pictures

    def _corrupt(self, sample: Sample) -> tuple[Sample, ImageCorruption | None]:
        """A robustness variant's sample: its text corrupted here, its images' corruption for the worker pool.

        The seeds come from the corruption seed, the corruption's name and the sample id (never the order of
        arrival), and the sample's ``meta["corruption"]`` says what was done, for its record.
        """
        spec = self.spec.dataset.corruption
        if not spec:
            return sample, None
        name, severity, seed = str(spec["name"]), int(spec["severity"]), int(spec["seed"])
        if name in IMAGE_CORRUPTIONS:
            corruption = ImageCorruption(name, severity, sample_seed(seed, name, sample.id))
            sample.meta["corruption"] = corruption.describe()
            return sample, corruption
        index_base = self.spec.options.get("index_base", 0)
        changed, note = corrupt_sample(sample, name, seed, severity, index_base if isinstance(index_base, int) else 0)
        changed.meta = {**changed.meta, "corruption": note}
        return changed, None

    def _build_prompt(self, sample: Sample, query: Any = icl.UNSET) -> tuple[Prompt, list[Sample]]:
        if self._assembler is None:
            self._assembler = PromptAssembler(
                self.spec.dataset, self.preprocessor, self.context, self.seed, self._example_pool
            )
        return self._assembler.build(sample, query)

    async def _sample(self, sample: Sample) -> None:
        query: Any = icl.UNSET
        if isinstance(self._example_pool, icl.ExamplePool) and icl.needs_query_vector(self.spec.dataset):
            # topk_img: the sample's image is decoded and embedded in a thread, never on the loop
            query = await asyncio.to_thread(icl.query_vector, self._example_pool, sample)
        sample, corruption = self._corrupt(sample)
        prompt, examples = self._build_prompt(sample, query)
        if self.spec.dataset.chain_of_thought:
            prompt = with_reasoning_turn(prompt)  # ChEF's CoT: reason, then answer (evalkit/prompts/cot.py)
        audio_error = sample.meta.pop("audio_error", None)
        image_error = sample.meta.pop("image_error", None)
        conversation_error = sample.meta.pop("conversation_error", None)
        prepared: Prepared | Outcome
        if conversation_error is not None:
            prepared = failed(FailureReason.CONVERSATION, f"unusable conversation in the dataset: {conversation_error}")
        elif audio_error is not None:
            prepared = failed(FailureReason.AUDIO, f"unreadable audio value in the dataset: {audio_error}")
        elif image_error is not None:
            prepared = failed(FailureReason.IMAGE, f"unreadable image value in the dataset: {image_error}")
        else:
            prepared = await self._prepare(prompt, examples, corruption)
        if (
            sample.audio is not None
            and "duration" not in sample.meta
            and isinstance(prepared, tuple)
            and 0 in prepared[0]
        ):
            sample.meta["duration"] = prepared[0].seconds[0]
        shared: dict[Any, str] = {}  # sent view -> key: models that were sent the same thing share one entry
        if len(self.models) == 1:
            # a gather over one awaitable costs a Task and a future per sample: measurable at thousands of req/s
            await self._ask(self.models[0], sample, prompt, prepared, examples, shared)
        else:
            await asyncio.gather(
                *(self._ask(model, sample, prompt, prepared, examples, shared) for model in self.models)
            )

    async def _conversation(self, model: ModelPlan, prompt: Prompt, media: Prepared, sent: Sent) -> Outcome:
        """Ask one model every turn in order, each with this sample's own history; chunks of a turn go at once.

        Each turn's requests are noted in ``sent`` before they go, so a failed sample still says what was sent.
        """
        prepared, images = media
        client = self.clients[model.name]
        ctx = self.request_contexts[model.name]
        history: list[dict[str, Any]] = []
        history_audio: list = []
        outcome = Outcome(text="")
        total_latency, attempts, cached = 0.0, 0, True
        n_turns = len(prompt.turns)
        if ctx.kind == RequestKind.TRANSCRIPTION and not all(turn in prepared for turn in range(n_turns)):
            # known before anything is sent: no request is spent on a conversation that cannot finish
            return failed(FailureReason.UNSUPPORTED, f"{model.name} ({ctx.kind}) cannot answer a turn without audio")
        if ctx.kind == RequestKind.TRANSCRIPTION and any(turn in images for turn in range(n_turns)):
            return failed(FailureReason.UNSUPPORTED, f"{model.name} ({ctx.kind}) cannot be shown images")
        reasoning_turn = n_turns - 2 if self.spec.dataset.chain_of_thought else None
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
                sent.key = self._view_key(self._sent_views[model.name], requests, sent.shared)
            if len(requests) == 1:
                outcomes = [await client.submit(requests[0], use_store=self.use_store)]
            else:
                outcomes = list(await asyncio.gather(*(client.submit(r, use_store=self.use_store) for r in requests)))
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
            text = joined_answer([o.text for o in outcomes])
            sent.answers.append(text)
            cached = cached and all(o.cached for o in outcomes)
            outcome = Outcome(
                text=text, latency=total_latency, attempts=attempts, replica=outcomes[-1].replica, cached=cached
            )
            if turn + 1 < n_turns:
                history, history_audio = history_after(
                    prompt, turn, history, history_audio, prepared, ctx, text, images=images
                )
        return outcome

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

    async def _likelihood(
        self, model: ModelPlan, sample: Sample, prompt: Prompt, sent: Sent, media: Prepared
    ) -> Outcome:
        """Every option's log-likelihood after the prompt, as the JSON prediction metrics/likelihood.py reads."""
        choices = [str(c) for c in sample.meta.get("choices") or []]
        if not choices:
            return failed(FailureReason.UNSUPPORTED, "likelihood scoring needs the sample's choices (choices_column)")
        if likelihood_context(prompt) is None:  # images or audio: the chat endpoint, reasoning first with CoT
            return await self._chat_likelihood(model, prompt, sent, media, choices)
        reasoned: tuple[ModelRequest, Outcome] | None = None
        if self.spec.dataset.chain_of_thought:
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
            sent.key = self._view_key(RequestKind.COMPLETION, [request for request, _, _ in asked], sent.shared)
        outcomes = list(await asyncio.gather(*(client.submit(r, use_store=self.use_store) for r, _, _ in asked)))
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
        cot = self.spec.dataset.chain_of_thought
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
            sent.key = self._view_key(self._sent_views[model.name], asked, sent.shared)
        outcomes = list(await asyncio.gather(*(client.submit(r, use_store=self.use_store) for r in asked)))
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

    async def _ask(
        self,
        model: ModelPlan,
        sample: Sample,
        prompt: Prompt,
        prepared: Prepared | Outcome,
        examples: list[Sample],
        shared: dict[Any, str],
    ) -> None:
        likelihood = self.metric.scoring == "loglikelihood"
        sent = Sent(shared)
        if isinstance(prepared, Outcome):
            outcome = prepared
        elif likelihood:
            outcome = await self._likelihood(model, sample, prompt, sent, prepared)
        else:
            outcome = await self._conversation(model, prompt, prepared, sent)
        record = new_record(sample, model.name, self.spec.dataset.name, self.spec.metric)
        scored = await score_into_record(
            record,
            self.accumulators[model.name],
            self.metric,
            sample,
            response=outcome.text if outcome.ok else None,
            prediction=None
            if not outcome.ok
            else outcome.text
            if likelihood
            else self.postprocessor.process(outcome.text or ""),
            failure=outcome.failure,
            error=outcome.error,
            processors=self.processors,
            # a dataset's conversation: every turn's answer, for the record and for a metric that rates each turn
            answers=sent.answers if sample.turns and sent.answers and not self.spec.dataset.chain_of_thought else None,
        )
        record.update(
            latency=round(outcome.latency, 4), attempts=outcome.attempts, cached=outcome.cached, replica=outcome.replica
        )
        if sample.meta.get("duration") is not None:
            record["duration"] = sample.meta["duration"]
        if isinstance(prepared, tuple) and 0 in prepared[1]:
            # what the model was shown, by reference: path or hash, format, size (never the pixels)
            record["images"] = [
                part.ref for part in prepared[1].parts(0, self.request_contexts[model.name].image_limit)
            ]
        if prompt.info:
            record["prompt"] = prompt.info
        if self.spec.dataset.chain_of_thought and sent.answers:
            # the reasoning is not scored; it is kept beside what the metric said about the answer
            found = record.get("details")
            details: dict[str, Any] = found if isinstance(found, dict) else {}
            reasoning = sent.answers[-2] if len(sent.answers) >= 2 else sent.answers[-1]
            record["details"] = {**details, "reasoning": reasoning}
        if "corruption" in sample.meta:
            record["corruption"] = sample.meta["corruption"]
        if sent.turns or sent.context is not None:
            # the entry reaches the disk before the record naming it is buffered: no record names a lost key
            record["sent"] = self._sent_entry(model, sample, prompt, examples, prepared, sent)
        self._write(record, sample, model.name, scored)

    def _view_key(self, view: Any, requests: list[ModelRequest], shared: dict[Any, str]) -> str:
        """The sent key of a one-turn sample as ``view`` sends it: the first model of the view to build sets it.

        Models start in the config's order and build their requests before their first wait, so the first
        model of a view is the same in every engine, and so is the key: one entry serves every model and metric.
        """
        if len(self.models) == 1:
            return sent_key(requests)
        key = shared.get(view)
        if key is None:
            key = shared[view] = sent_key(requests)
        return key

    def _sent_entry(
        self,
        model: ModelPlan,
        sample: Sample,
        prompt: Prompt,
        examples: list[Sample],
        prepared: Prepared | Outcome,
        sent: Sent,
    ) -> str:
        """The key of what ``model`` was sent for ``sample``; its entry is built and buffered only when new.

        A later turn carries the model's own earlier answers, so a conversation's key is its own (every
        request's key, answers included), shared by another model only when it answered alike.
        """
        assert self._sent is not None and self._sources is not None
        turns = sent.turns
        key = sent.key or sent_key([request for turn in turns for request in turn])
        if key in self._sent:
            return key
        if sent.context is not None:
            kind, requests, messages = RequestKind.COMPLETION, sent.options, completion_messages(sent.context)
        else:
            ctx = self.request_contexts[model.name]
            refs = None
            if isinstance(prepared, tuple) and (prepared[0].seconds or prepared[1] is not _NO_IMAGES):
                refs = MediaRefs(self._sources, sample, prompt, examples, prepared[0], prepared[1], ctx)
            kind = ctx.kind
            requests = sent.options or sum(len(turn) for turn in turns)
            messages = sent_messages(kind, turns, refs)
        self._sent.add(key, self.spec.dataset.name, sample.id, kind.value, requests, messages, prompt.tools)
        return key

    async def _duplicate(self, sample: Sample, first: int) -> None:
        """A row whose sample id an earlier row has: one failed record per model, nothing sent."""
        for model in self.models:
            record = new_record(sample, model.name, self.spec.dataset.name, self.spec.metric)
            error = f"{where(record, sample)}: the sample id is already row {first + 1}'s; not sent, not scored"
            await score_into_record(
                record,
                self.accumulators[model.name],
                self.metric,
                sample,
                response=None,
                prediction=None,
                failure=FailureReason.DUPLICATE_ID,
                error=error,
            )
            self._write(record, sample, model.name, False)

    def _write(self, record: dict[str, Any], sample: Sample, model: str, scored: bool) -> None:
        """Append one record (a full disk raises DiskFullError naming the records file) and report progress."""
        buffer = self._buffer
        buffer += jsonutil.dumps_bytes(record)  # UTF-8 JSON straight from the encoder: no str round trip
        buffer += b"\n"
        if len(buffer) >= _RECORDS_BUFFER:
            self._flush()
        if model == self.models[0].name:
            self._note_data_problem(record, sample)
        if self.progress is not None:
            self.progress(self.spec.id, model, scored)

    def _flush(self) -> None:
        """Write the buffered records, after the sent entries they name (a full disk raises DiskFullError)."""
        if not self._buffer:
            return
        assert self._records is not None
        if self._sent is not None:
            self._sent.flush()
        try:
            write_all(self._records, self._buffer)
        except (OSError, ValueError) as error:  # ValueError: the file was closed under it
            if isinstance(error, OSError) and is_disk_full(error):
                raise disk_full(self.records_path, len(self._buffer)) from None
            raise WriteFailed(str(self.records_path), error) from None
        self._buffer.clear()

    def _note_data_problem(self, record: dict[str, Any], sample: Sample) -> None:
        """Count a bad row by kind, keeping the first one's message for the warning at the end."""
        failure = record.get("failure")
        if failure in DATA_PROBLEMS:
            problem, message = str(failure), record.get("error") or ""
        elif failure is None and _blank(sample.reference):
            # a metric may define a score against "" (WER counts insertions): scored as is, but said once
            problem, message = "empty reference", f"{where(record, sample)}: the reference is empty; scored as is"
        else:
            return
        count, first = self.data_problems.get(problem, (0, message))
        self.data_problems[problem] = (count + 1, first)

    def _warn_data_problems(self) -> None:
        """One warning per kind of bad row (duplicate id, empty reference, non-finite score), naming the first."""
        for reason, (count, first) in self.data_problems.items():
            rows = "1 row" if count == 1 else f"{count} rows"
            what = (
                "scored against an empty reference" if reason == "empty reference" else f"counted as failed ({reason})"
            )
            log.warning("%s: %s %s; the first: %s", self.spec.id, rows, what, first)


def _blank(reference: Any) -> bool:
    """A reference that is there but says nothing: "", blanks, or a list of only those."""
    if isinstance(reference, str):
        return not reference.strip()
    if isinstance(reference, (list, tuple)):
        return bool(reference) and all(isinstance(r, str) and not r.strip() for r in reference)
    return False


def rows_from_engines(results: list[EngineResult], max_failure_rate: float) -> list[ResultRow]:
    """One result row per (engine, model).

    A pair whose share of failed samples exceeds ``max_failure_rate`` is marked unreliable.
    """
    rows = []
    for res in results:
        spec = res.spec
        for model, mres in res.models.items():
            metric_result = mres.result
            n = metric_result.n if metric_result else 0
            # a metric scored over groups counts groups in n; failures are samples, so the rate is over samples
            scored = metric_result.details.get("n_samples", n) if metric_result else 0
            total = scored + mres.n_failed
            rate = mres.n_failed / total if total else 0.0
            rows.append(
                ResultRow(
                    dataset=spec.dataset.name,
                    task=spec.dataset.task,
                    category=spec.dataset.category,
                    metric=spec.metric,
                    model=model,
                    score=metric_result.score if metric_result else None,
                    ci_low=metric_result.ci_low if metric_result else None,
                    ci_high=metric_result.ci_high if metric_result else None,
                    n=n,
                    n_failed=mres.n_failed,
                    failure_rate=rate,
                    unreliable=rate > max_failure_rate or res.error is not None,
                    seconds=round(res.seconds, 3),
                    failure_reasons=mres.failure_reasons,
                    failure_examples=mres.failure_examples,
                    details={**res.metric_info, **(metric_result.details if metric_result else {})},
                    error=res.error,
                    reported_as=spec.reported_as.as_dict() if spec.reported_as is not None else None,
                )
            )
    add_robustness(rows, results)  # a corrupted variant's row: the clean score, the change, the paired test
    return rows
