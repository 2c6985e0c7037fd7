"""METEOR, BERTScore and COMET as AU-Harness computes them, where their data and models can be had offline.

All three score AU-Harness's normalised strings (evalkit/metrics/auharness/text.py,
English rules whatever the language, as AU-Harness calls it) and report the
mean of per-sample scores on 0-1 (AU-Harness prints it x 100):

* ``meteor``: NLTK's ``single_meteor_score`` on the whitespace tokens of the
  normalised reference and answer (Porter stemmer, WordNet synonyms, NLTK's
  default parameters), each sample rounded to 3 places before the mean, as
  AU-Harness rounds it (so 0.64196 counts as 0.642). WordNet is NLTK data that no package registry ships:
  the metric needs a folder holding ``corpora/wordnet`` (``python -m
  nltk.downloader -d DIR wordnet`` on a machine with internet) named by
  ``NLTK_DATA``;
* ``bertscore``: the F1 of ``bert_score.score`` with AU-Harness's model,
  ``bert-base-multilingual-cased`` (bert-score's default layer for it, 9), one
  sample at a time, called as AU-Harness calls it (the reference in the
  candidates' place, the answer in the references'), each F1 rounded to 2
  places before the mean;
* ``comet``: ``Unbabel/wmt22-comet-da``'s segment score of (source, answer,
  reference), the source from ``meta["source"]`` (the transcript of the
  spoken source).

Model weights are never downloaded by a run: BERTScore's model must be in the
local Hugging Face cache or given as a folder (option ``model``), COMET's
checkpoint as a file (option ``checkpoint``). A metric whose package, data or
model is missing stops the config at validation with a message naming what to
install or where to put it; it never scores with something else.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import os
from pathlib import Path
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.auharness.text import MissingPackage, normalize_like_auharness, require_normaliser, smart_round
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings

#: AU-Harness's BERTScore model and COMET checkpoint (metrics/bertscore.py, metrics/comet_score.py)
BERTSCORE_MODEL = "bert-base-multilingual-cased"
COMET_MODEL = "Unbabel/wmt22-comet-da"
EXTRA = "pip install 'evalkit[auharness]'"


def _need(module: str, package: str, metric: str, why: str, install: str = EXTRA) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"metric {metric!r} needs the Python package {package!r} ({why}): {install}") from None


def _normaliser_or_config_error(metric: str) -> None:
    try:
        require_normaliser()
    except MissingPackage as error:
        raise ConfigError(f"metric {metric!r}: {error}") from None


class _OfflineModelMetric(Metric):
    """A mean of per-sample scores computed by a package, off the event loop."""

    bounds = (0.0, 1.0)
    tasks = ("translation", "speech_translation")

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        """Models and WordNet lookups are CPU work: a worker thread, never the event loop."""
        return await asyncio.to_thread(self.score, prediction, sample)


# --- METEOR --------------------------------------------------------------------------------------------------------


def wordnet_corpus() -> Any:
    """NLTK's WordNet reader, or ConfigError naming what to download where when its data is not found."""
    nltk_data = _need("nltk.data", "nltk", "meteor", "NLTK's METEOR")
    try:
        nltk_data.find("corpora/wordnet")
    except LookupError:
        try:
            nltk_data.find("corpora/wordnet.zip")
        except LookupError:
            where = os.environ.get("NLTK_DATA") or "NLTK_DATA unset"
            raise ConfigError(
                "metric 'meteor' needs NLTK's WordNet corpus, which no package registry ships: on a machine with "
                "internet run `python -m nltk.downloader -d DIR wordnet`, bring DIR here and set NLTK_DATA=DIR "
                f"({where})"
            ) from None
    return importlib.import_module("nltk.corpus").wordnet


class Meteor(_OfflineModelMetric):
    """METEOR (NLTK, WordNet synonyms) on AU-Harness's normalised text, each sample rounded to 3 places; the mean."""

    name = "meteor"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)
        _normaliser_or_config_error(self.name)
        self._meteor = _need("nltk.translate.meteor_score", "nltk", self.name, "NLTK's METEOR").single_meteor_score
        self._wordnet = wordnet_corpus()

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        reference = normalize_like_auharness(references[0])
        answer = normalize_like_auharness(prediction or "")
        unrounded = float(self._meteor(reference.split(), answer.split(), wordnet=self._wordnet))
        value = smart_round(unrounded, 3)  # AU-Harness rounds each sample before the mean
        return SampleScore(value, (value, 1.0), details={"normalized_prediction": answer, "unrounded": unrounded})

    def describe(self) -> dict[str, Any]:
        return {
            "normalization": "au-harness normalize_text",
            "meteor": "nltk single_meteor_score defaults",
            "per_sample_rounding": 3,
        }


# --- BERTScore -----------------------------------------------------------------------------------------------------


def _local_model(model: str, metric: str) -> None:
    """ConfigError unless ``model`` is a folder or already in the local Hugging Face cache: runs never download."""
    if Path(model).expanduser().is_dir():
        return
    hub = _need("huggingface_hub", "huggingface_hub", metric, "finding the model in the local cache")
    cached = hub.try_to_load_from_cache(model, "config.json")
    if not isinstance(cached, str):
        raise ConfigError(
            f"metric {metric!r} needs the model {model!r} on this machine and evalkit does not download models during "
            f"a run: fetch it once (`huggingface-cli download {model}`) into the Hugging Face cache, or give its "
            "folder as the metric option 'model'"
        )


class BertScore(_OfflineModelMetric):
    """BERTScore F1 (bert-base-multilingual-cased), AU-Harness's normalised text, rounded to 2 places; the mean."""

    name = "bertscore"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("model", "num_layers"))
        super().__init__(language, **options)
        _normaliser_or_config_error(self.name)
        self.model = str(options.get("model", BERTSCORE_MODEL))
        num_layers = options.get("num_layers")
        self.num_layers = int(num_layers) if num_layers is not None else None
        self._bert_score = _need(
            "bert_score", "bert-score", self.name, "the BERTScore implementation", "pip install bert-score (with torch)"
        )
        _local_model(self.model, self.name)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        reference = normalize_like_auharness(references[0])
        answer = normalize_like_auharness(prediction or "")
        options: dict[str, Any] = {"model_type": self.model}
        if self.num_layers is not None:
            options["num_layers"] = self.num_layers
        # AU-Harness's order: the reference as the candidate, the answer as the reference (precision and recall swap)
        _, _, f1 = self._bert_score.score([reference], [answer], **options)
        unrounded = float(f1[0])
        value = smart_round(unrounded, 2)  # AU-Harness rounds each F1 to 2 places (then x 100)
        return SampleScore(value, (value, 1.0), details={"normalized_prediction": answer, "unrounded": unrounded})

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "num_layers": self.num_layers,
            "normalization": "au-harness normalize_text",
            "per_sample_rounding": 2,
        }


# --- COMET ---------------------------------------------------------------------------------------------------------


@functools.cache
def _comet_model(checkpoint: str) -> Any:
    comet = importlib.import_module("comet")
    return comet.load_from_checkpoint(checkpoint)


class Comet(_OfflineModelMetric):
    """COMET (Unbabel wmt22-comet-da) of source, answer and reference on AU-Harness's normalised text; the mean."""

    name = "comet"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("checkpoint", "batch_size"))
        super().__init__(language, **options)
        _normaliser_or_config_error(self.name)
        _need("comet", "unbabel-comet", self.name, "the COMET implementation", "pip install unbabel-comet")
        checkpoint = options.get("checkpoint")
        if checkpoint is None or not Path(str(checkpoint)).expanduser().is_file():
            given = f" ({str(checkpoint)!r} is not a file)" if checkpoint is not None else ""
            raise ConfigError(
                f"metric {self.name!r} needs {COMET_MODEL}'s checkpoint on this machine{given}: on a machine with "
                f"internet run `python -c \"from comet import download_model; print(download_model('{COMET_MODEL}'))\"`"
                ", bring the folder here and give its checkpoints/model.ckpt as the metric option 'checkpoint'"
            )
        self.checkpoint = str(Path(str(checkpoint)).expanduser())
        self.batch_size = int(options.get("batch_size", 1))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        source = sample.meta.get("source")
        if not isinstance(source, str):
            return SampleScore(
                None,
                failure=FailureReason.UNRESOLVABLE_REFERENCE,
                details={"error": "COMET needs the source sentence: map the source text column to meta['source']"},
            )
        segment = {
            "src": normalize_like_auharness(source),
            "mt": normalize_like_auharness(prediction or ""),
            "ref": normalize_like_auharness(references[0]),
        }
        output = _comet_model(self.checkpoint).predict([segment], batch_size=self.batch_size, gpus=0)
        value = float(output.scores[0])
        return SampleScore(value, (value, 1.0), details={"normalized_prediction": segment["mt"]})

    def describe(self) -> dict[str, Any]:
        return {"checkpoint": Path(self.checkpoint).name, "model": COMET_MODEL, "normalization": "au-harness"}
