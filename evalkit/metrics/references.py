"""The reference implementation each built-in metric equals, and how that was checked.

A score is worth publishing only when it means what the field means by its
name, so every metric names the code whose value it reproduces: the project,
the file and function, the version or commit it was compared with, and every
difference known. ``evalkit info metric NAME`` prints the entry and
``evalkit list metrics`` shows the project in a column. The tests compare each
metric with its reference: by calling it where it is a package (jiwer,
sacrebleu, meeteval), or against a table of cases whose values were produced
by running the reference's own script (``tests/fixtures/references/``).

Kept apart from the metric modules so listing stays import-light: this file
imports nothing but the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    """Where a metric's definition comes from."""

    #: the project, as a user would find it ("jiwer", "RUCAIBox/POPE", "evalkit" for evalkit's own definition)
    project: str
    #: file and function (or the package's function) whose value the metric equals
    source: str
    #: the package version or the repository commit the metric was compared with
    version: str
    #: how the comparison is made in the tests ("calls jiwer", "table of cases from running evaluate.py")
    checked_by: str
    #: every known way evalkit's value can differ from the reference's (empty: none known)
    differences: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        """One cell for listings: the project and its version."""
        return f"{self.project} {self.version}".strip()


_OWN = "evalkit"

#: by canonical metric name; a test checks every built-in metric has an entry
REFERENCES: dict[str, Reference] = {
    "word_error_rate": Reference(
        "jiwer",
        "jiwer.wer / jiwer.process_words on Whisper-normalized text (whisper-normalizer's EnglishTextNormalizer)",
        "jiwer 3.x, whisper-normalizer 0.1.x",
        "tests call jiwer on the same normalized strings, per sample and pooled for the corpus",
        (
            "spaceless languages (zh, ja, th, ...) are scored at the character level, as jiwer.cer",
            "an empty reference contributes 0 reference words (jiwer raises on it)",
        ),
    ),
    "cer": Reference(
        "jiwer",
        "jiwer.cer / jiwer.process_characters on Whisper-normalized text",
        "jiwer 3.x",
        "tests call jiwer on the same normalized strings, per sample and pooled for the corpus",
    ),
    "bleu": Reference(
        "sacrebleu",
        "sacrebleu.metrics.BLEU.corpus_score / sentence_score",
        "sacrebleu 2.x",
        "tests call sacrebleu on generated cases, per sample and for the corpus",
    ),
    "chrf": Reference(
        "sacrebleu",
        "sacrebleu.metrics.CHRF (char_order=6, word_order=0, beta=2)",
        "sacrebleu 2.x",
        "tests call sacrebleu on generated cases, per sample and for the corpus",
    ),
    "chrf++": Reference(
        "sacrebleu",
        "sacrebleu.metrics.CHRF (word_order=2)",
        "sacrebleu 2.x",
        "tests call sacrebleu on generated cases, per sample and for the corpus",
    ),
    "ter": Reference(
        "sacrebleu",
        "sacrebleu.metrics.TER.corpus_score",
        "sacrebleu 2.x",
        "tests call sacrebleu on generated cases, per sample and for the corpus",
    ),
    # --- vqa_accuracy, pope_* (helper: vision answers) ---
    # --- end vqa_accuracy, pope_* ---
    # --- anls, relaxed_accuracy, f1 (helper: text answers) ---
    # --- end anls, relaxed_accuracy, f1 ---
    # --- semantic_wer, semantic_cer, entity_wer (helper: KARMA ASR) ---
    # --- end semantic_wer, semantic_cer, entity_wer ---
    # --- cpwer, wder, mcq_accuracy (helper: speakers and choices) ---
    # --- end cpwer, wder, mcq_accuracy ---
}


def reference_of(name: str) -> Reference | None:
    """The reference of a built-in metric by canonical name, or None."""
    return REFERENCES.get(name)
