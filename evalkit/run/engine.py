"""One (dataset, metric) pair end to end: stream samples, ask every model, score, record.

Samples are read in a worker thread in small batches and at most ``window``
samples are in flight, so memory is bounded by the window, not the dataset.
A sample's media is made ready once for every model (:mod:`evalkit.run.media`),
each model is asked through its shared client (:mod:`evalkit.run.asking`), and
each answer is scored and written to the pair's records file
(:mod:`evalkit.run.records_file`). A failed request (or one failed chunk of
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
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.clients.model_client import ModelClient
from evalkit.clients.outcome import Outcome, failed
from evalkit.clients.spending import Spending
from evalkit.config import Filters, RequestKind
from evalkit.config.price import Price
from evalkit.data.audio.pcm import Shape
from evalkit.data.filters import apply_filters
from evalkit.data.image.prepare import ImageLimit
from evalkit.data.loading import iter_samples
from evalkit.data.sample import Sample
from evalkit.errors import DiskFullError, UserError, WriteFailed
from evalkit.failures import FailureReason
from evalkit.languages import target_language
from evalkit.metrics import METRICS, Metric
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.plan import EngineSpec, ModelPlan, dataset_processors
from evalkit.processing.postprocessors import POSTPROCESSORS
from evalkit.prompts import examples as icl
from evalkit.prompts.assemble import PromptAssembler
from evalkit.prompts.chef.cot import REASONING_PROMPT, with_reasoning_turn
from evalkit.prompts.preprocessors import PREPROCESSORS, PromptContext
from evalkit.prompts.prompt import Prompt
from evalkit.run.asking import Asker, Sent
from evalkit.run.corpus import fit_corpus
from evalkit.run.cost.usage import JudgeScope, PairUsage
from evalkit.run.data_problems import DataProblems
from evalkit.run.engine_result import EngineResult, ModelResult
from evalkit.run.media import NO_IMAGES, MediaPreparer, Prepared
from evalkit.run.records_file import RecordsFile
from evalkit.run.requests import RequestContext
from evalkit.run.scoring import metric_settings, new_record, score_into_record, summarize, where
from evalkit.run.sent import SentLog, SentLogs, SentParams, sent_folder, sent_key
from evalkit.run.shard import Shard, read_share, shard_samples
from evalkit.util.feed import Feed, drain
from evalkit.util.idindex import IdIndex
from evalkit.util.safe_names import safe_path

if TYPE_CHECKING:
    from evalkit.catalog import DatasetSpec

    # a robustness variant's corruptions, ``stop_at_ci`` and the sent log's references are imported where used:
    # a plain pair never loads the first two, and the references only once its first answer is back
    from evalkit.data.audio.corrupt import AudioCorruption
    from evalkit.data.audio.variant import AudioVariant
    from evalkit.data.image.corrupt import ImageCorruption
    from evalkit.run.sentrefs import Sources
    from evalkit.run.stopping.at_ci import EarlyStop

log = logging.getLogger("evalkit")


ProgressHook = Callable[[str, str, bool], None]


class Engine:
    """One pair's run for all its models: the runner builds one per pair, the dry run one whose clients send nothing."""

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
        spending: Spending | None = None,
        judge_price: Price | None = None,
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
                auharness=dataset.request_style == "auharness",
                karma=dataset.request_style == "karma",
            )
            for m in self.models
        }
        #: ChEF's GPT client's chain of thought: two requests of their own, the reasoning joined to the answer
        self._reasoning_apart = (
            dataset.chain_of_thought
            and dataset.chain_of_thought_form == "separate"
            and self.metric.scoring != "loglikelihood"
        )
        self.asker = Asker(
            clients,
            self.request_contexts,
            use_store=use_store,
            chain_of_thought=dataset.chain_of_thought,
            one_model=len(self.models) == 1,
        )
        #: every way this engine's models cut audio, so a sample's pieces are made once, in a thread
        self.shapes: list[Shape] = list(dict.fromkeys(ctx.shape for ctx in self.request_contexts.values()))
        self.encodings = frozenset(ctx.kind.audio_encoding for ctx in self.request_contexts.values())
        #: every image limit of this engine's models, so an image is downsized once per limit
        self.image_limits: list[ImageLimit] = list(dict.fromkeys(c.image_limit for c in self.request_contexts.values()))
        self.media = MediaPreparer(self.shapes, self.encodings, self.image_limits)
        #: an audio robustness variant's corruption (babble's clips read once), made in the audio worker pool
        self._audio_variant = _audio_variant(dataset)
        if self._audio_variant is not None:
            self.media.example_corruption = self._audio_variant.corruption
        self.n_samples = 0
        #: the records file: the sent log is flushed before its records are, so no record names a lost entry
        self._records = RecordsFile(self.records_path)
        self._example_pool: list[Sample] = []
        self._assembler: PromptAssembler | None = None
        #: bad rows by failure reason, for one warning each at the end
        self.data_problems = DataProblems()
        #: what was sent, once per content per dataset (records/sent/): the run's logs are shared by its engines
        self._sent_logs = sent_logs if sent_logs is not None else SentLogs(sent_folder(records_dir))
        self._sent: SentLog | None = None
        self._sources: Sources | None = None
        #: ``stop_at_ci``: the seeded order, its rounds and the models still asked (evalkit/run/stopping/at_ci.py)
        self.early_stop = _early_stop(spec, seed, self.metric, shard)
        #: tokens per record and model, and whether the run's budget cut the pair short (evalkit/run/cost/usage.py)
        self.usage = PairUsage({m.name: m.info.price for m in self.models}, judge_price, spending)
        self._sent_params = SentParams()

    def corpus_samples(self) -> Iterator[Sample]:
        """The plan's samples before a shard is taken: filtered, then expanded by the preprocessor (circular copies).

        Corpus-wide counts (CIDEr's document frequencies) are taken over these, so every shard agrees.
        """
        filtered = apply_filters(iter_samples(self.spec.dataset), self.filters, self.spec.dataset.name)
        return self.preprocessor.expand(filtered)

    def planned_samples(self) -> Iterator[Sample]:
        # after the filters and the expansion: shards split exactly the plan's samples
        share = read_share(self.spec.dataset, self.shard, self.filters, self.preprocessor)
        return share if share is not None else shard_samples(self.corpus_samples(), self.shard)

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
        self.data_problems.warn(self.spec.id)
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
                partial=self.early_stop.partial(name) if self.early_stop is not None else None,
                usage=self.usage.of_model(name),
                judge_usage=self.usage.of_judge(name),
            )
        result.partial = self.usage.partial
        return result

    async def _run_recorded(self) -> None:
        """Run the samples into the records file; a full disk raises one DiskFullError naming it."""
        self._records.open()
        self._sent = self._sent_logs.acquire(self.spec.dataset.name)
        self._records.sent = self._sent
        try:
            await self._sent.open()
            await self._run_samples()
            self._records.close()
        finally:
            # stopped (a signal, another engine's full disk): what was answered is kept, as far as it goes
            self._records.abandon()
            self._sent_logs.release(self._sent)

    async def _run_samples(self) -> None:
        # ``window`` workers take the samples in file order (evalkit/util/feed.py): no task per sample
        seen = IdIndex()  # sample id -> its first row: a repeat is recorded as duplicate_id, never sent

        def start(sample: Sample) -> Awaitable[None]:
            # counted and checked when taken, before any wait: in file order, as the rows are numbered
            self.n_samples += 1
            row = sample.meta.get("index")
            first = seen.setdefault(sample.id, row if isinstance(row, int) else self.n_samples - 1)
            if first != row and isinstance(row, int):
                return self._duplicate(sample, first)
            return self._sample(sample)

        fatal = (DiskFullError, WriteFailed)  # nothing more can be kept: answers still coming would be lost
        if self.early_stop is None:
            feed = Feed(self.planned_samples(), heavy=_carries_media)
            await drain(feed, self.window, start, fatal=fatal, stop=self.usage.stop_feeding)
            return
        # rounds in a seeded order, each answered in full before the CI is checked
        async for batch in self.early_stop.rounds(self.planned_samples, self.accumulators):
            await drain(
                Feed(iter(batch), heavy=_carries_media), self.window, start, fatal=fatal, stop=self.usage.stop_feeding
            )
            if self.usage.partial:
                break

    def _corrupt(self, sample: Sample) -> tuple[Sample, ImageCorruption | None]:
        """A robustness variant's sample: its text corrupted here, its images' corruption for the worker pool.

        The seeds come from the corruption seed, the corruption's name and the sample id (never the order of
        arrival), and the sample's ``meta["corruption"]`` says what was done, for its record.
        """
        spec = self.spec.dataset.corruption
        if not spec:
            return sample, None
        from evalkit.data.audio.corrupt import AUDIO_CORRUPTIONS
        from evalkit.data.image.corrupt import IMAGE_CORRUPTIONS, ImageCorruption, sample_seed
        from evalkit.prompts.corrupt_text import corrupt_sample

        name, severity, seed = str(spec["name"]), int(spec["severity"]), int(spec["seed"])
        if name in IMAGE_CORRUPTIONS:
            corruption = ImageCorruption(name, severity, sample_seed(seed, name, sample.id))
            sample.meta["corruption"] = corruption.describe()
            return sample, corruption
        if name in AUDIO_CORRUPTIONS:
            return sample, None  # the audio is corrupted in the worker pool (see AudioVariant)
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
        corruption: ImageCorruption | AudioCorruption | None
        sample, corruption = self._corrupt(sample)
        if self._audio_variant is not None:
            corruption = await self._audio_variant.corruption(sample)
        prompt, examples = self._build_prompt(sample, query)
        if self._reasoning_apart:
            prompt = replace(prompt, info={**prompt.info, "chain_of_thought": REASONING_PROMPT})
        elif self.spec.dataset.chain_of_thought:
            prompt = with_reasoning_turn(prompt)  # ChEF's CoT: reason, then answer (evalkit/prompts/chef/cot.py)
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
            prepared = await self.media.prepare(prompt, examples, corruption)
        if (
            sample.audio is not None
            and "duration" not in sample.meta
            and isinstance(prepared, tuple)
            and 0 in prepared[0]
        ):
            sample.meta["duration"] = prepared[0].seconds[0]
        shared: dict[Any, str] = {}  # sent view -> key: models that were sent the same thing share one entry
        models = self._asked()
        if len(models) == 1:
            # a gather over one awaitable costs a Task and a future per sample: measurable at thousands of req/s
            await self._ask(models[0], sample, prompt, prepared, examples, shared)
        else:
            await asyncio.gather(*(self._ask(model, sample, prompt, prepared, examples, shared) for model in models))

    def _asked(self) -> list[ModelPlan]:
        """The models a sample is asked of: all, or with ``stop_at_ci`` those that have not stopped yet."""
        if self.early_stop is None:
            return self.models
        return self.early_stop.asked_of(self.models, lambda model: model.name)

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
            outcome = await self.asker.likelihood(model, sample, prompt, sent, prepared)
        elif self._reasoning_apart:
            outcome = await self.asker.reasoned_apart(model, prompt, prepared, sent)
        else:
            outcome = await self.asker.conversation(model, prompt, prepared, sent)
        if self.usage.refused(outcome):
            return  # not sent (the budget is spent): no record, a resume asks it
        judged = JudgeScope() if self.metric.needs_judge else None
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
        if not self.usage.note(model.name, record, sent.tally, judged):
            return  # its judge was not asked (the budget is spent): no record, a resume asks it
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
        assert self._sent is not None
        turns = sent.turns
        key = sent.key or sent_key([request for turn in turns for request in turn])
        if key in self._sent:
            return key
        from evalkit.run.sentrefs import MediaRefs, Sources, completion_messages, sent_messages

        if self._sources is None:
            self._sources = Sources.of(self.spec.dataset)  # once per engine: a local path is resolved on disk
        params: list[dict[str, Any]] = []
        if sent.context is not None:
            kind, requests, messages = RequestKind.COMPLETION, sent.options, completion_messages(sent.context)
        else:
            ctx = self.request_contexts[model.name]
            refs = None
            if isinstance(prepared, tuple) and (prepared[0].seconds or prepared[1] is not NO_IMAGES):
                refs = MediaRefs(self._sources, sample, prompt, examples, prepared[0], prepared[1], ctx)
            kind = ctx.kind
            requests = sent.options or sum(len(turn) for turn in turns)
            messages = sent_messages(kind, turns, refs)
            # a credential some proxies take in the body (extra_body.api_key) is masked here as in run.json
            params = [self._sent_params.of(turn[0]) for turn in turns if turn]
        self._sent.add(key, self.spec.dataset.name, sample.id, kind.value, requests, messages, prompt.tools, params)
        return key

    async def _duplicate(self, sample: Sample, first: int) -> None:
        """A row whose sample id an earlier row has: one failed record per model, nothing sent."""
        for model in self._asked():
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
        self._records.add(record)
        if model == self.models[0].name:
            self.data_problems.note(record, sample)
        if self.progress is not None:
            self.progress(self.spec.id, model, scored)


def _audio_variant(dataset: DatasetSpec) -> AudioVariant | None:
    """An audio robustness variant's corruption; a dataset without ``corruption`` never loads the audio corruptions."""
    if not dataset.corruption:
        return None
    from evalkit.data.audio.variant import AudioVariant
    from evalkit.run.sentrefs import Sources

    return AudioVariant.of(dataset, lambda: Sources.of(dataset).clip_of)


def _early_stop(spec: EngineSpec, seed: int, metric: Metric, shard: Shard | None) -> EarlyStop | None:
    """``stop_at_ci``'s rounds; a pair without it never loads the stop rule (~800 lines with its CI and checks)."""
    if spec.stop is None:
        return None
    from evalkit.run.stopping.at_ci import EarlyStop

    return EarlyStop.of(spec.stop, seed, spec.dataset.name, metric, list(spec.models), shard)


def _carries_media(sample: Sample) -> bool:
    """Whether a sample holds audio or images (megabytes): its engine reads the data in small batches."""
    return sample.audio is not None or bool(sample.images) or bool(sample.turns)
