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
        "jiwer.wer over the corpus (jiwer.process_words per sample) on whisper-normalizer's text "
        "(EnglishTextNormalizer for English, BasicTextNormalizer otherwise)",
        "jiwer 4.0.0, whisper-normalizer 0.1.15",
        "tests/test_metrics_wer.py calls jiwer on the same normalized strings, per sample and for the corpus",
        (
            "spaceless languages (zh, ja, th, ...) are scored at the character level, as jiwer.cer, "
            "and the record says level=character",
            "an empty normalized reference adds its insertions to the corpus numerator and 0 reference words "
            "(jiwer refuses an empty reference)",
            "several references: only the first is used",
        ),
    ),
    "cer": Reference(
        "jiwer",
        "jiwer.cer over the corpus (jiwer.process_characters per sample) on whisper-normalizer's text",
        "jiwer 4.0.0, whisper-normalizer 0.1.15",
        "tests/test_metrics_wer.py calls jiwer on the same normalized strings, per sample and for the corpus",
        ("an empty normalized reference counts as for word_error_rate",),
    ),
    "bleu": Reference(
        "sacrebleu",
        "sacrebleu.metrics.BLEU.corpus_score (per sample: sentence_score)",
        "sacrebleu 2.6.0",
        "tests/test_metrics_bleu.py calls sacrebleu on generated cases, per sample and for the corpus",
        ("the tokenizer follows the target language (zh, ja-mecab, ko-mecab, flores200) as sacrebleu's CLI does",),
    ),
    "chrf": Reference(
        "sacrebleu",
        "sacrebleu.metrics.CHRF.corpus_score (char_order=6, word_order=0, beta=2)",
        "sacrebleu 2.6.0",
        "tests/test_metrics_bleu.py calls sacrebleu on generated cases, per sample and for the corpus",
    ),
    "chrf++": Reference(
        "sacrebleu",
        "sacrebleu.metrics.CHRF.corpus_score (word_order=2)",
        "sacrebleu 2.6.0",
        "tests/test_metrics_bleu.py calls sacrebleu on generated cases, per sample and for the corpus",
    ),
    "ter": Reference(
        "sacrebleu",
        "sacrebleu.metrics.TER.corpus_score",
        "sacrebleu 2.6.0",
        "tests/test_metrics_bleu.py calls sacrebleu on generated cases, per sample and for the corpus",
    ),
    "exact_match": Reference(
        _OWN,
        "evalkit.metrics.exact_match.normalize_answer (NFKC, casefold, whitespace folded, edge punctuation "
        "stripped), then string equality with any reference",
        "evalkit's own definition",
        "tests/test_metrics_text.py: hand-made cases of each normalisation step",
        (
            "not lm-eval's exact_match (raw equality unless ignore_case/ignore_punctuation are set) nor "
            "KARMA's (case-insensitive, no punctuation stripping): `normalize: false` compares stripped strings",
        ),
    ),
    "loglikelihood_accuracy": Reference(
        "EleutherAI/lm-evaluation-harness",
        "lm_eval/api/task.py, ConfigurableTask.process_results, output_type multiple_choice: `acc` "
        "(argmax of the options' summed log-likelihoods; a list gold: any of them)",
        "lm-eval 0.4.x",
        "tests/test_likelihood.py: log-likelihoods from a real server's echo, argmax as lm-eval takes it",
        ("ties go to the first option, as numpy.argmax does",),
    ),
    "loglikelihood_accuracy_per_char": Reference(
        "EleutherAI/lm-evaluation-harness",
        "lm_eval/api/task.py, ConfigurableTask.process_results: `acc_norm` (log-likelihood divided by the "
        "option's length in characters, len(choice))",
        "lm-eval 0.4.x",
        "tests/test_likelihood.py",
        ("an option of length 0 keeps its raw log-likelihood (lm-eval divides by zero)",),
    ),
    "loglikelihood_accuracy_per_token": Reference(
        _OWN,
        "the option with the highest mean log-likelihood per token of ' <option>'",
        "evalkit's own definition",
        "tests/test_likelihood.py",
        ("lm-eval has no per-token normalisation; its acc_norm is per character (loglikelihood_accuracy_per_char)",),
    ),
    "llm_judge_binary": Reference(
        _OWN,
        "evalkit/prompts/judges/llm_judge_binary.yaml (LALMEval's binary judge: correct/incorrect verdict)",
        "evalkit's own prompts",
        "tests/test_judges.py against a scripted judge server",
        ("a judge's value depends on the judge model and its prompt: compare only runs with the same judge",),
    ),
    "llm_judge_detailed": Reference(
        _OWN,
        "evalkit/prompts/judges/llm_judge_detailed.yaml (a 0-5 rating, x 20, as AudioBench reports it)",
        "evalkit's own prompts",
        "tests/test_judges.py against a scripted judge server",
        ("a judge's value depends on the judge model and its prompt: compare only runs with the same judge",),
    ),
    "rubric_evaluation": Reference(
        "openai/simple-evals",
        "healthbench_eval.py, calculate_score: points of the met criteria over the positive points, "
        "clipped to [0, 1]; the corpus value their mean",
        "simple-evals (HealthBench release)",
        "tests/test_judges.py: scripted verdicts, scores by the formula",
        (
            "the grader prompt is evalkit's (evalkit/prompts/judges), not simple-evals' GRADER_TEMPLATE verbatim",
            "a criterion the judge cannot answer fails the whole sample (simple-evals retries until it parses)",
        ),
    ),
    "json_rubric_evaluation": Reference(
        _OWN,
        "evalkit.metrics.json_rubric: the reference JSON's fields as 1-point items, matched after light "
        "normalisation; the score is matched points over all points",
        "evalkit's own definition",
        "tests/test_vision_metrics.py: hand-made JSON answers",
        ("not KARMA's json_rubric_evaluation, which asks an LLM judge with the dataset's rubric as its prompt",),
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
