"""Text processors with arguments: KARMA's ``multilingual_text_processor``, ``devanagari_transliterator`` and
``general_text_processor``.

A processor rewrites both the prediction and the reference(s) before a metric
scores them, as KARMA's dataset processors do, so the two sides are compared
in the same orthography. They chain: each one's output is the next one's
input. A runspec gives a dataset's chain and a metric option gives a pair's
own (appended after the dataset's):

    "processors": ["multilingual_text_processor",
                   {"name": "devanagari_transliterator", "source": "itrans"}]

An entry is a registered name, or an object with ``name`` and the
processor's arguments. An unknown name or argument, or a bad value, is a
ConfigError naming where it was written (the runspec file or the config's
``dataset_metric`` entry), so the run stops before any request with exit 2.
Plugins register more with ``@PROCESSORS.register(name)``.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from evalkit.errors import ConfigError, did_you_mean
from evalkit.processing.indic import OPTION_NAMES, IndicSettings, orthographic_normalizer, require_indic
from evalkit.registry import Registry


class Processor:
    """Base class: ``process`` rewrites one text; the constructor takes the processor's arguments as keywords.

    ``language`` is the dataset's (target) language, given to every processor
    so one that depends on it has a default; ``arguments`` lists the keyword
    arguments a user may give, with a line each for `evalkit list processors`.
    """

    name: ClassVar[str] = ""
    arguments: ClassVar[dict[str, str]] = {}

    def __init__(self, language: str | None = None, **arguments: Any) -> None:
        self.language = language
        self.settings = arguments

    def process(self, text: str) -> str:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """The processor and its arguments as given, for results.json and records."""
        return {"name": self.name, **self.settings}


PROCESSORS: Registry[type[Processor]] = Registry("processor", builtin_modules=("evalkit.processing.processors",))


@dataclass(frozen=True)
class ProcessorChain:
    """Processors applied in order; empty means the text is left as it is."""

    processors: tuple[Processor, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.processors)

    def __add__(self, other: ProcessorChain) -> ProcessorChain:
        return ProcessorChain(self.processors + other.processors)

    def __call__(self, text: str) -> str:
        for processor in self.processors:
            text = processor.process(text)
        return text

    def describe(self) -> list[dict[str, Any]]:
        return [p.describe() for p in self.processors]


def build_processors(entries: Any, where: str, language: str | None = None) -> ProcessorChain:
    """The chain ``entries`` (a runspec's or a metric option's ``processors`` list) describe.

    ``where`` names the key in the file, e.g. ``runspecs/x/asr.json: hindi_asr.processors``.
    """
    if entries is None:
        return ProcessorChain()
    if not isinstance(entries, (list, tuple)):
        raise ConfigError(
            f"{where}: expected a list of processors (names or {{name, argument: value}}), got {entries!r}"
        )
    built: list[Processor] = []
    for i, entry in enumerate(entries):
        here = f"{where}[{i}]"
        if isinstance(entry, str):
            name, arguments = entry, {}
        elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
            name = entry["name"]
            arguments = {k: v for k, v in entry.items() if k != "name"}
        else:
            raise ConfigError(
                f"{here}: expected a processor name or an object with `name` and arguments, got {entry!r}"
            )
        cls = PROCESSORS.get(name, where=here)
        for key in arguments:
            if key not in cls.arguments:
                known = ", ".join(cls.arguments) or "none"
                raise ConfigError(
                    f"{here}: processor {cls.name!r}: unknown argument {key!r}{did_you_mean(key, cls.arguments)}. "
                    f"Known arguments: {known}"
                )
        try:
            built.append(cls(language=language, **arguments))
        except ConfigError as error:
            raise ConfigError(f"{here}: {error}") from None
        except (TypeError, ValueError) as error:
            raise ConfigError(f"{here}: processor {cls.name!r}: bad argument value: {error}") from None
    return ProcessorChain(tuple(built))


def _remove_punctuation(text: str) -> str:
    """Every Unicode punctuation character (danda, comma, quotes, ...) replaced by a space, spaces collapsed."""
    return " ".join("".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text).split())


@PROCESSORS.register("multilingual_text_processor")
class MultilingualTextProcessor(Processor):
    """Indic orthographic normalisation (indic-nlp: nukta, chandrabindu, nasals), digits, punctuation, word map."""

    name = "multilingual_text_processor"
    arguments = {
        "language": "language code of the text (default: the dataset's); no Indic normaliser: digits and glm only",
        "remove_nuktas": "true (default) | false: drop the nukta (ज़ -> ज)",
        "normalize_chandras": "true (default) | false: chandrabindu -> anusvara, chandra vowel signs -> plain",
        "nasals_mode": "to_anusvaara_relaxed (default) | to_anusvaara_strict | to_nasal_consonants | do_nothing",
        "numerals": "ascii (default: २० -> 20) | keep",
        "punctuation": "keep (default) | remove (danda, commas, quotes -> space)",
        "glm": "{word: replacement} applied on whole words after normalising (KARMA's GLM rules); default none",
    }

    def __init__(self, language: str | None = None, **arguments: Any) -> None:
        super().__init__(language, **arguments)
        owner = f"processor {self.name!r}"
        given = arguments.get("language", language)
        if given is not None and not isinstance(given, str):
            raise ConfigError(f"{owner}: argument 'language' must be a language code, not {given!r}")
        self.text_language = given
        settings = IndicSettings.from_options(owner, {k: v for k, v in arguments.items() if k in OPTION_NAMES})
        self.normalizer_name, self.normalize = orthographic_normalizer(given, settings)
        punctuation = arguments.get("punctuation", "keep")
        if punctuation not in ("keep", "remove"):
            raise ConfigError(f"{owner}: argument 'punctuation' must be keep or remove, not {punctuation!r}")
        self.remove_punctuation = punctuation == "remove"
        self.glm = _word_map(owner, arguments.get("glm"))

    def process(self, text: str) -> str:
        text = self.normalize(text)
        if self.remove_punctuation:
            text = _remove_punctuation(text)
        return self.glm(text) if self.glm else text


def _word_map(owner: str, glm: Any) -> Callable[[str], str] | None:
    """A whole-word substitution function from ``{word: replacement}``; longer phrases are tried first."""
    if glm is None:
        return None
    if not isinstance(glm, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in glm.items()):
        raise ConfigError(
            f"{owner}: argument 'glm' must map words to replacements ({{word: replacement}}), not {glm!r}"
        )
    if not glm:
        return None
    # whole words: not next to a letter or a combining mark (re's \w misses Indic vowel signs, so दिन would
    # match inside दिनों); the ``regex`` package (indic-transliteration's dependency) knows \p{M}
    regex = require_indic(owner, "regex")
    ordered = sorted(glm, key=len, reverse=True)
    pattern = regex.compile(r"(?<![\w\p{M}])(" + "|".join(regex.escape(k) for k in ordered) + r")(?![\w\p{M}])")
    return lambda text: pattern.sub(lambda m: glm[m.group(1)], text)


@PROCESSORS.register("devanagari_transliterator", "devnagari_transliterator")
class DevanagariTransliterator(Processor):
    """Transliteration to Devanagari (or another script) with indic-transliteration's sanscript."""

    name = "devanagari_transliterator"
    arguments = {
        "source": "auto (default: each word in an Indic script is detected; romanised words are kept) or a scheme "
        "(itrans, hk, iast, slp1, velthuis, bengali, tamil, ...)",
        "target": "scheme written to (default devanagari)",
        "source_script": "KARMA's name (its docs: source_script=en): accepted and not used, as in KARMA, whose "
        "transliterator detects each text's script itself",
        "target_script": "KARMA's name (target_script=hi): accepted and not used, as in KARMA (Devanagari is written)",
    }

    def __init__(self, language: str | None = None, **arguments: Any) -> None:
        super().__init__(language, **arguments)
        owner = f"processor {self.name!r}"
        self.sanscript = require_indic(owner, "indic_transliteration.sanscript")
        self.detect = require_indic(owner, "indic_transliteration.detect").detect
        schemes = self.sanscript.SCHEMES
        self.source = str(arguments.get("source", "auto")).lower()
        self.target = str(arguments.get("target", "devanagari")).lower()
        for key, value in (("source", self.source), ("target", self.target)):
            if value not in schemes and not (key == "source" and value == "auto"):
                known = ", ".join(sorted(schemes))
                raise ConfigError(
                    f"{owner}: unknown {key} scheme {arguments.get(key)!r}{did_you_mean(value, schemes)}. "
                    f"Known: {'auto, ' if key == 'source' else ''}{known}"
                )
        self.schemes = schemes

    def process(self, text: str) -> str:
        text = unicodedata.normalize("NFC", text)
        if self.source != "auto":
            return unicodedata.normalize("NFC", self.sanscript.transliterate(text, self.source, self.target))
        return " ".join(self._word(word) for word in text.split())

    def _word(self, word: str) -> str:
        """One word from the Indic script it is detected in; a romanised or unknown word is left alone."""
        scheme = str(self.detect(word) or "").lower()
        if scheme not in self.schemes or scheme == self.target or self.schemes[scheme].is_roman:
            return word
        return unicodedata.normalize("NFC", self.sanscript.transliterate(word, scheme, self.target))


def _flag(owner: str, arguments: dict[str, Any], key: str) -> bool:
    value = arguments.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{owner}: argument {key!r} must be true or false, not {value!r}")
    return value


@PROCESSORS.register("general_text_processor")
class GeneralTextProcessor(Processor):
    """KARMA's general_text_processor: digits to English words (optional), punctuation removed, lower case."""

    # KARMA's flags keep its names and its sense: use_punc / use_lowercasing true *keep* punctuation / case
    name = "general_text_processor"
    arguments = {
        "use_num2text": "true | false (default): whole-word digit runs to English words (num2words), first",
        "use_punc": "false (default): Unicode punctuation removed (jiwer RemovePunctuation) | true: kept",
        "use_lowercasing": "false (default): lower-cased | true: case kept (KARMA's flag, as it behaves)",
    }

    def __init__(self, language: str | None = None, **arguments: Any) -> None:
        super().__init__(language, **arguments)
        owner = f"processor {self.name!r}"
        self.num2text = _flag(owner, arguments, "use_num2text")
        self.keep_punctuation = _flag(owner, arguments, "use_punc")
        self.keep_case = _flag(owner, arguments, "use_lowercasing")
        import jiwer

        # built once: jiwer collects every Unicode punctuation character when the transform is made
        self.remove_punctuation = jiwer.RemovePunctuation()
        self.collapse_spaces = jiwer.RemoveMultipleSpaces()
        self.to_words: Callable[[int], str] | None = None
        if self.num2text:
            try:
                num2words = importlib.import_module("num2words").num2words
            except ImportError:
                raise ConfigError(
                    f"{owner}: use_num2text needs the num2words package: pip install 'evalkit[karma]'"
                ) from None
            self.to_words = num2words

    def process(self, text: str) -> str:
        if self.to_words is not None:
            to_words = self.to_words
            text = _DIGIT_RUN.sub(lambda m: to_words(int(m.group())), text)
        if not self.keep_punctuation:
            text = self.remove_punctuation(text)
        if not self.keep_case:
            text = text.lower()
        return str(self.collapse_spaces(text))


_DIGIT_RUN = re.compile(r"\b\d+\b")


def processor_rows() -> Iterable[tuple[str, type[Processor]]]:
    """Every registered processor (built-ins and plugins), for listings."""
    return PROCESSORS.items()
