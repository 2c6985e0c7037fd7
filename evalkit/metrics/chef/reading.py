"""How ChEF reads a model's answer: numbers, boxes, points, cleaned words, and class names by WordNet synonyms.

Written from OpenGVLab/LAMM ``src/ChEF/metric/utils.py`` at commit ea571363883ceba58a0f724ef197ed7205e07465
(``ennum2numerical``, ``parse_bbox``, ``parse_keypoints``, ``parse_num``, ``cal_iou``, ``check_inside_bbox``,
``parse_caption_sentence``, ``Cleaner``, ``classification_acc``) and checked against tables from running those
functions (tests/fixtures/references/chef_reading.json). ChEF's figures depend on these readings to the letter
(an answer "3 dogs" counts 3, "three" counts 3, "3." counts 0), so they are reproduced as they are, quirks
included; each quirk is named where it is implemented.

The WordNet synonym check (``classification_acc``) needs NLTK's WordNet corpus, which no package registry
ships: :func:`wordnet` says where to put it when it is missing.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from typing import Any

from evalkit.errors import ConfigError
from evalkit.metrics.vision.vqa import CONTRACTIONS, PERIOD, PERIOD_LIMIT, PUNCTUATION, VQA_NUMBER_WORDS

#: ChEF's number words (utils.num_dict): what ``count_in`` reads besides digits
NUMBER_WORDS = {
    "no": 0,
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
}

#: ChEF's VOC synonyms (utils.voc_syndict): answer words that also count as the VOC class they name
VOC_SYNONYMS = {
    "man": "person",
    "men": "person",
    "woman": "person",
    "women": "person",
    "baby": "person",
    "people": "person",
    "child": "person",
    "children": "person",
    "girl": "person",
    "boy": "person",
    "guy": "person",
    "ship": "boat",
    "sailboat": "boat",
    "yacht": "boat",
    "puppy": "dog",
    "table": "diningtable",
    "calf": "cow",
    "hummingbird": "bird",
    "bike": "bicycle",
    "kayaker": "person",
    "motorcycle": "motorbike",
    "pony": "horse",
}

_DECIMAL = re.compile(r"[0-9]+\.?[0-9]*")
_QUOTED = re.compile(r"(?<=['\"])(.*?)(?=['\"])")

Box = list[float]


def count_in(text: str) -> int:
    """ChEF's count of an answer: the first word that is all digits, or a number word; 0 when there is none.

    Words are split at whitespace after lower-casing, so "3 dogs" is 3, "3." and "(3)" are not numbers and a
    later word decides ("(3) three" is 3 from "three"). A digit string Python's ``int`` cannot read (superscripts
    pass ``str.isdigit``) makes ChEF raise; here it raises ValueError too, and the sample fails.
    """
    for word in text.lower().split():
        if word.isdigit():
            return int(word)
        if word in NUMBER_WORDS:
            return NUMBER_WORDS[word]
    return 0


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _numbers_between(numbers: list[float], opening: str, closing: str, text: str) -> list[float]:
    """The numbers inside ``opening``...``closing`` pairs, split at commas and spaces (ChEF's parse_num).

    As in ChEF, text still gathered when an opening mark repeats is kept and joins the next number, and a
    number is taken only when a comma, space or the closing mark ends it.
    """
    inside = False
    current = ""
    for char in text:
        if char == opening:
            inside = True
        elif char == closing:
            inside = False
            if _is_number(current):
                numbers.append(float(current))
                current = ""
        elif not inside:
            continue
        elif char not in ", ":
            current += char
        elif _is_number(current):
            numbers.append(float(current))
            current = ""
    return numbers


def _numbers(text: str, group: int) -> list[float]:
    """Numbers in brackets, then parentheses, cut to a multiple of ``group``; else every decimal in the text."""
    numbers = _numbers_between([], "[", "]", text)
    numbers = _numbers_between(numbers, "(", ")", text)
    numbers = numbers[: (len(numbers) // group) * group]
    if not numbers:
        numbers = [float(x) for x in _DECIMAL.findall(text)]
        numbers = numbers[: (len(numbers) // group) * group]
    return numbers


def boxes_in(text: str) -> list[Box]:
    """ChEF's boxes of an answer (parse_bbox): groups of four numbers; a box whose corners are both reversed is
    turned round, and one still not ordered (x1 <= x2 and y1 <= y2) is dropped."""
    numbers = _numbers(text, 4)
    boxes = []
    for i in range(0, len(numbers), 4):
        box = numbers[i : i + 4]
        if box[0] > box[2] and box[1] > box[3]:
            box = [box[2], box[3], box[0], box[1]]
        if box[0] <= box[2] and box[1] <= box[3]:
            boxes.append(box)
    return boxes


def points_in(text: str) -> list[list[float]]:
    """ChEF's points of an answer (parse_keypoints): the numbers read as boxes are, in pairs."""
    numbers = _numbers(text, 2)
    return [numbers[i : i + 2] for i in range(0, len(numbers), 2)]


def iou(box_a: Box, box_b: Box) -> float:
    """Intersection over union of two [x1, y1, x2, y2] boxes (ChEF's cal_iou: no +1 pixel, 0/0 is NaN)."""
    width = max(min(box_a[2], box_b[2]) - max(box_a[0], box_b[0]), 0.0)
    height = max(min(box_a[3], box_b[3]) - max(box_a[1], box_b[1]), 0.0)
    inter = width * height
    union = (box_b[2] - box_b[0]) * (box_b[3] - box_b[1]) + (box_a[2] - box_a[0]) * (box_a[3] - box_a[1]) - inter
    if union == 0:
        return float("nan")  # numpy's 0/0 in ChEF: never above a threshold
    return inter / union


def inside(points: list[list[float]], box: Box) -> bool:
    """True when some point lies strictly inside ``box`` (ChEF's check_inside_bbox)."""
    return any(box[0] < x < box[2] and box[1] < y < box[3] for x, y, *_ in points)


def quoted_or_all(text: str) -> str:
    """The quoted parts of an answer joined by ". ", or the whole answer when nothing is quoted
    (ChEF's parse_caption_sentence; a quote opens or closes with ' or " alike)."""
    parts = _QUOTED.findall(text)
    return ". ".join(parts) if parts else text


def chef_clean(answer: str) -> str:
    """ChEF's Cleaner.clean: the VQA answer normalisation without its digit,digit comma rule.

    Newlines and tabs to spaces, stripped; each punctuation mark touching a space is deleted, any other is a
    space; a period not before a digit is deleted (at most 32, as the VQA code passes re.UNICODE as the count);
    lower-cased, number words to digits, articles dropped, apostrophe-less contractions restored.
    """
    text = answer.replace("\n", " ").replace("\t", " ").strip()
    out = text
    for mark in PUNCTUATION:
        out = out.replace(mark, "") if (mark + " " in text or " " + mark in text) else out.replace(mark, " ")
    out = PERIOD.sub("", out, count=PERIOD_LIMIT)
    words = [VQA_NUMBER_WORDS.get(w, w) for w in out.lower().split()]
    return " ".join(CONTRACTIONS.get(w, w) for w in words if w not in ("a", "an", "the"))


@functools.lru_cache(maxsize=1)
def wordnet(metric: str = "chef") -> Any:
    """NLTK's WordNet reader; ConfigError naming what to download where when the corpus is missing."""
    try:
        data = importlib.import_module("nltk.data")
    except ModuleNotFoundError:
        raise ConfigError(f"metric {metric!r} needs the nltk package: pip install nltk") from None
    for name in ("corpora/wordnet", "corpora/wordnet.zip"):
        try:
            data.find(name)
            return importlib.import_module("nltk.corpus").wordnet
        except LookupError:
            continue
    where = os.environ.get("NLTK_DATA") or "NLTK_DATA unset"
    raise ConfigError(
        f"metric {metric!r} matches class names by WordNet synonyms, as ChEF does, and needs NLTK's WordNet "
        f"corpus, which no package registry ships: on a machine with internet run `python -m nltk.downloader -d "
        f"DIR wordnet`, bring DIR here and set NLTK_DATA=DIR ({where})"
    )


def label_in(label: str, answer: str, metric: str = "chef") -> bool:
    """ChEF's classification_acc: does the answer name ``label`` or one of its WordNet synonyms?

    The answer is split at single spaces (punctuation stays on its word: "dog." is not "dog"), VOC synonyms
    add their class ("puppy" adds "dog"), every word is lemmatized as a noun, and the label matches when a
    lemma name of any of its synsets is one of the words. A label WordNet does not know ("pottedplant",
    "tvmonitor") has no synonyms and so never matches, as in ChEF.
    """
    corpus = wordnet(metric)
    words = answer.split(" ")
    words += [VOC_SYNONYMS[w] for w in list(words) if w in VOC_SYNONYMS]
    lemmas = [_lemmatize(corpus, w) for w in words]
    names = [name for synset in corpus.synsets(label) for name in synset.lemma_names()]
    return any(name in lemmas for name in names)


def _lemmatize(corpus: Any, word: str) -> str:
    """NLTK's WordNetLemmatizer.lemmatize(word, 'n'): the shortest of WordNet's noun base forms, else the word."""
    forms = corpus._morphy(word, "n")
    return min(forms, key=len) if forms else word
