"""The caption tokenization of the COCO caption evaluation, in Python: no Java.

pycocoevalcap (the COCO caption evaluation, which ChEF's LAMM captioning metric
calls) tokenizes every caption with Stanford CoreNLP 3.4.1's PTBTokenizer
(``-preserveLines -lowerCase``, a Java program) and then drops the tokens of a
fixed punctuation list. CIDEr's n-grams are counted on that output, so a
different tokenization gives a different CIDEr under the same name. This module
reproduces the tokenizer's decisions that matter for captions and model
answers, checked against the Java program's own output
(tests/fixtures/references/chef_ptb_tokenize.json):

- lower-cased; runs of whitespace separate tokens;
- ``, ; : ! ?`` split off (``!?`` stays one token), except ``,`` and ``:``
  between digits (``1,000``, ``10:30``); ``...``, ``--`` and a lone ``-`` are
  tokens; hyphens, ``/``, ``@`` inside a word stay (``well-known``, ``and/or``);
- a word's final ``.`` is split off unless the word is an abbreviation (a
  known title such as ``mr.``, or letters with inner periods such as ``u.s.``);
  ``end.another`` (no space after the period) stays one token;
- brackets become ``-lrb- -rrb- -lsb- -rsb- -lcb- -rcb-``: the filter lists them
  in capitals, so after ``-lowerCase`` they are *kept* as tokens, as in
  pycocoevalcap;
- double quotes become ````` ``''`` (dropped), an opening single quote ````` and a
  closing one ``'`` (dropped);
- contractions: ``n't``, ``'s``, ``'re``, ``'ve``, ``'ll``, ``'d``, ``'m`` split
  (``can't`` -> ``ca n't``), ``cannot`` -> ``can not``, ``gonna`` -> ``gon na``,
  and a plural possessive's ``'`` split (``dogs '``, then dropped);
- ``$``, ``#`` split before what follows, ``%`` after what precedes.

Known differences from the Java tokenizer (not in the fixture): its abbreviation
list is longer than the one here (an unlisted abbreviation before a space loses
its period); a sentence-final abbreviation (``... the u.s.``) gets an extra
``.`` token there (dropped by the filter either way); measures such as ``6'2"``
and rarer symbols (``*``, ``+``, emoticons, URLs) follow simpler rules here.
"""

from __future__ import annotations

import re

#: the tokens pycocoevalcap drops after tokenizing (its PUNCTUATIONS list; the bracket names are in capitals
#: there, so the lower-cased ones the tokenizer writes are kept)
DROPPED = frozenset(
    {"''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-", "--", "...", ";"}
)

#: abbreviations whose final period the tokenizer keeps before a space
_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "jr",
        "sr",
        "vs",
        "etc",
        "inc",
        "co",
        "corp",
        "ltd",
        "mt",
        "ft",
        "no",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "gen",
        "col",
        "lt",
        "sgt",
        "capt",
        "rev",
        "gov",
        "sen",
        "rep",
        "ave",
        "blvd",
    ]
)

_BRACKETS = {"(": "-lrb-", ")": "-rrb-", "[": "-lsb-", "]": "-rsb-", "{": "-lcb-", "}": "-rcb-"}
_CONTRACTION = re.compile(r"^(.+?)(n't|'s|'re|'ve|'ll|'d|'m)$")
_SPLIT_WORDS = {"cannot": ("can", "not"), "gonna": ("gon", "na"), "gotta": ("got", "ta"), "wanna": ("wan", "na")}
#: a run of sentence punctuation (kept together: "!?"), an ellipsis, a double dash
_PUNCT_RUN = re.compile(r"\.\.\.+|--+|[!?]+|[;]")


def _split_quotes(text: str) -> str:
    """Double quotes to `` (opening: at the start or after space/bracket) or '' (closing), spaced apart."""
    out = []
    for i, char in enumerate(text):
        if char == '"':
            opening = i == 0 or text[i - 1].isspace() or text[i - 1] in "([{"
            out.append(" `` " if opening else " '' ")
        else:
            out.append(char)
    return "".join(out)


def _single_quotes(word: str) -> list[str]:
    """A word's leading quote (`) and trailing quote (') split off; contractions and possessives kept for later."""
    if word in ("''", "``"):
        return [word]
    head: list[str] = []
    tail: list[str] = []
    while len(word) > 1 and word[0] == "'" and not _CONTRACTION.match(word):
        head.append("`")
        word = word[1:]
    if len(word) > 1 and word.endswith("'") and not word.endswith("n'"):
        tail.append("'")
        word = word[:-1]
    return [*head, word, *tail]


def _period(word: str, last: bool) -> list[str]:
    """The final period split off, unless ``word`` is an abbreviation: kept, plus a "." token at the line's end."""
    if not word.endswith(".") or word in (".", "...") or word.endswith(".."):
        return [word]
    stem = word[:-1]
    inner_periods = "." in stem and all(part.isalpha() and len(part) <= 2 for part in stem.split("."))
    if stem in _ABBREVIATIONS or inner_periods:
        return [word, "."] if last else [word]
    return [stem, "."]


def _pieces(word: str) -> list[str]:
    """One whitespace-separated chunk split into tokens (brackets, quotes, punctuation, symbols)."""
    tokens: list[str] = []
    current = ""
    i = 0
    while i < len(word):
        char = word[i]
        if char in _BRACKETS:
            tokens += [current, _BRACKETS[char]] if current else [_BRACKETS[char]]
            current = ""
            i += 1
            continue
        run = _PUNCT_RUN.match(word, i)
        if run:
            tokens += [current, run.group()] if current else [run.group()]
            current = ""
            i = run.end()
            continue
        if char in ",:":
            between_digits = 0 < i < len(word) - 1 and word[i - 1].isdigit() and word[i + 1].isdigit()
            if not between_digits:
                tokens += [current, char] if current else [char]
                current = ""
                i += 1
                continue
        if char in "$#" and not current:
            tokens.append(char)
            i += 1
            continue
        if char == "%":
            tokens += [current, char] if current else [char]
            current = ""
            i += 1
            continue
        current += char
        i += 1
    if current:
        tokens.append(current)
    return [t for t in tokens if t]


def _contractions(word: str) -> list[str]:
    if word in _SPLIT_WORDS:
        return list(_SPLIT_WORDS[word])
    match = _CONTRACTION.match(word)
    if match and match.group(1) not in ("'", ""):
        return [match.group(1), match.group(2)]
    return [word]


def ptb_tokens(text: str) -> list[str]:
    """The PTBTokenizer's tokens of one line (``-lowerCase``), before pycocoevalcap's punctuation filter."""
    tokens: list[str] = []
    for chunk in _split_quotes(text.lower()).split():
        for piece in _pieces(chunk):
            for quoted in _single_quotes(piece):
                tokens += _contractions(quoted)
    out: list[str] = []
    for position, token in enumerate(tokens):
        out += _period(token, position == len(tokens) - 1)
    return out


def coco_tokenize(text: str) -> str:
    """A caption as pycocoevalcap's PTBTokenizer.tokenize returns it: tokens joined by spaces, punctuation dropped.

    A newline inside the caption is a space first, as pycocoevalcap replaces it before writing its file.
    """
    return " ".join(t for t in ptb_tokens(text.replace("\n", " ")) if t not in DROPPED)
