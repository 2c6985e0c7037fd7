"""NLTK's WordNet and stop words for the tests of ChEF's WordNet metrics, built from Debian's WordNet files.

No package registry ships NLTK's corpora; Debian's wordnet-base and wordnet-sense-index hold WordNet 3.0, the
data NLTK's own wordnet corpus is. One folder serves the whole session: NLTK keeps a corpus reader once loaded,
so tests that each built their own folder would leave the next reading the previous one's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REFERENCES = Path(__file__).resolve().parent / "fixtures" / "references"
#: Debian's WordNet 3.0 (the data NLTK's wordnet corpus ships), from wordnet-base and wordnet-sense-index
DEBIAN_WORDNET = Path("/usr/share/wordnet")
MISSING = "WordNet 3.0 files absent: apt-get install wordnet-base wordnet-sense-index"
#: the stop words of NLTK's English list as ChEF's reference runs saw them
STOPWORDS: list[str] = json.loads((REFERENCES / "chef_facial_winoground.json").read_text(encoding="utf-8"))["stopwords"]
#: the lexicographer files NLTK's reader lists on opening WordNet (Debian keeps them out of /usr/share/wordnet)
LEXNAMES = (
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
)


def debian_wordnet_present() -> bool:
    return (DEBIAN_WORDNET / "data.noun").is_file() and (DEBIAN_WORDNET / "index.sense").is_file()


def build_nltk_data(root: Path) -> Path:
    """An NLTK data folder under ``root``: corpora/wordnet from Debian's files, corpora/stopwords/english."""
    wordnet = root / "corpora" / "wordnet"
    wordnet.mkdir(parents=True)
    for path in DEBIAN_WORDNET.iterdir():
        if path.is_file() and "." in path.name:
            shutil.copyfile(path, wordnet / path.name)  # NLTK refuses links that leave its folder
    pos = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
    lines = [f"{i:02d}\t{name}\t{pos[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES)]
    (wordnet / "lexnames").write_text("".join(lines), encoding="utf-8")
    stopwords = root / "corpora" / "stopwords"
    stopwords.mkdir(parents=True)
    (stopwords / "english").write_text("\n".join(STOPWORDS) + "\n", encoding="utf-8")
    return root
