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
        """One cell for listings: the project and the first version named ("jiwer 4.0.0", "RUCAIBox/POPE 3df3ba1")."""
        if self.project == _OWN:
            return "evalkit's own"
        first = self.version.split(";")[0].split(" (")[0].strip()
        words = first.split()
        if words and words[0].lower() in (self.project.lower(), self.project.split("/")[-1].lower()):
            words = words[1:]
        if words and words[0] == "commit":
            words = words[1:]
        return " ".join([self.project, *(_abbreviated(w) for w in words)])


_OWN = "evalkit"


def _abbreviated(word: str) -> str:
    """A full commit hash as its first 12 digits; any other word as it is."""
    is_hash = len(word) > 12 and all(c in "0123456789abcdef" for c in word)
    return word[:12] if is_hash else word


def _pope(printed: str) -> Reference:
    """POPE's five figures come from one run of one script: their entries differ only in the line it prints."""
    return Reference(
        "RUCAIBox/POPE",
        f"evaluate.py (module script): answer reading, pooled TP/FP/TN/FN, the printed {printed!r}",
        "commit 3df3ba1 (3df3ba1b110ecce25696989577fad583b67d4239)",
        (
            "table of 50 answers read by running evaluate.py on each alone, and 9 answer sets whose five printed "
            "figures (or the ZeroDivisionError) come from running it (tests/fixtures/references/pope.json)"
        ),
        (
            "where evaluate.py divides by zero (precision with no yes answer, recall with no yes label, F1 with no "
            "true positive, any figure on no samples) it raises and prints nothing further; evalkit reports NaN "
            "(no score) for that figure and still gives the others",
        ),
    )


#: by canonical metric name; a test checks every built-in metric has an entry
REFERENCES: dict[str, Reference] = {
    "word_error_rate": Reference(
        "jiwer",
        "jiwer.wer over the corpus (jiwer.process_words per sample) on whisper-normalizer's text "
        "(EnglishTextNormalizer for English, BasicTextNormalizer otherwise)",
        "4.0.0 (whisper-normalizer 0.1.15)",
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
        "4.0.0 (whisper-normalizer 0.1.15)",
        "tests/test_metrics_wer.py calls jiwer on the same normalized strings, per sample and for the corpus",
        ("an empty normalized reference counts as for word_error_rate",),
    ),
    "bleu": Reference(
        "sacrebleu",
        "sacrebleu.metrics.BLEU.corpus_score (per sample: sentence_score)",
        "2.6.0",
        "tests/test_metrics_bleu.py calls sacrebleu on generated cases, per sample and for the corpus",
        ("the tokenizer follows the target language (zh, ja-mecab, ko-mecab, flores200) as sacrebleu's CLI does",),
    ),
    "chrf": Reference(
        "sacrebleu",
        "sacrebleu.metrics.CHRF.corpus_score (char_order=6, word_order=0, beta=2)",
        "2.6.0",
        "tests/test_metrics_bleu.py calls sacrebleu on generated cases, per sample and for the corpus",
    ),
    "chrf++": Reference(
        "sacrebleu",
        "sacrebleu.metrics.CHRF.corpus_score (word_order=2)",
        "2.6.0",
        "tests/test_metrics_bleu.py calls sacrebleu on generated cases, per sample and for the corpus",
    ),
    "ter": Reference(
        "sacrebleu",
        "sacrebleu.metrics.TER.corpus_score",
        "2.6.0",
        "tests/test_metrics_bleu.py calls sacrebleu on generated cases, per sample and for the corpus",
    ),
    "exact_match": Reference(
        _OWN,
        "evalkit.metrics.exact_match.normalize_answer (NFKC, casefold, whitespace folded, edge punctuation "
        "stripped), then string equality with any reference",
        "evalkit's own definition",
        "tests/test_metrics_text.py: hand-made cases of each normalisation step",
        (
            "more lenient than lm-eval's exact_match, which compares raw strings unless its ignore_case / "
            "ignore_punctuation options are set; `normalize: false` compares the stripped strings",
        ),
    ),
    "loglikelihood_accuracy": Reference(
        "EleutherAI/lm-evaluation-harness",
        "lm_eval/api/task.py, ConfigurableTask.process_results, output_type multiple_choice: `acc` "
        "(argmax of the options' summed log-likelihoods; a list gold: any of them)",
        "0.4 (process_results read, not run; its formula is a few lines)",
        "tests/test_likelihood.py: log-likelihoods from a real server's echo, argmax as lm-eval takes it",
        ("ties go to the first option, as numpy.argmax does",),
    ),
    "loglikelihood_accuracy_per_char": Reference(
        "EleutherAI/lm-evaluation-harness",
        "lm_eval/api/task.py, ConfigurableTask.process_results: `acc_norm` (log-likelihood divided by the "
        "option's length in characters, len(choice))",
        "0.4 (process_results read, not run; its formula is a few lines)",
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
        "healthbench_eval.py: calculate_score (points of the met criteria over the positive points, per "
        "example, not clipped) and _compute_clipped_stats (the corpus value: their mean clipped to [0, 1])",
        "simple-evals (HealthBench release)",
        "tests/test_judges.py: scripted verdicts; calculate_score's formula and the clipped mean",
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
    "vqa_accuracy": Reference(
        "GT-Vision-Lab/VQA",
        "PythonEvaluationTools/vqaEvaluation/vqaEval.py: VQAEval.evaluate (processPunctuation, processDigitArticle)",
        "commit a013f00 (a013f0043c1e2cdc995922dfe257f7149aa9af06)",
        "table of 66 cases from running vqaEval.py's evaluate on in-memory VQA objects "
        "(tests/fixtures/references/vqa_accuracy.json), per question and the overall mean",
        (
            "the corpus figure is the mean per-question accuracy in [0, 1]; the official prints 100 x it, "
            "rounded to 2 places (scale only)",
            "follows the official file run under Python 3 (as lmms-eval, LAVIS and mmpretrain run it); unmodified "
            "under Python 2.7 its \\d matches ASCII digits only, 'İ' lower-cases to 'i' and letters cased after "
            "Unicode 5.2 stay as they are (2 of the 66 cases differ)",
            "option normalize_agreeing (off by default) also normalises unanimous human answers and the prediction; "
            "not the official reading",
        ),
    ),
    "pope_accuracy": _pope("Accuracy"),
    "pope_precision": _pope("Precision"),
    "pope_recall": _pope("Recall"),
    "pope_f1": _pope("F1 score"),
    "pope_yes_ratio": _pope("Yes ratio"),
    # --- end vqa_accuracy, pope_* ---
    # --- anls, relaxed_accuracy, f1 (helper: text answers) ---
    "anls": Reference(
        "EvolvingLMMs-Lab/lmms-eval",
        "lmms_eval/api/metrics.py anls (the per-question rule of the RRC DocVQA/InfographicVQA script, "
        "evaluate_method, as in QwenLM/Qwen-VL eval_mm/infographicsvqa_eval.py); corpus: the mean",
        "lmms-eval 75571cf; Qwen-VL aa00ed0",
        "table of cases from running lmms-eval's anls and the RRC script (tests/fixtures/references/anls.json), "
        "per sample and for the corpus",
        (
            "pix2struct's anls_metric (lower case only, a distance of exactly 0.5 scores 0) is another reading, "
            "not followed",
            "a sample without references is a failure (the reference fails on it)",
        ),
    ),
    "relaxed_accuracy": Reference(
        "google-research/pix2struct",
        "pix2struct/metrics.py relaxed_correctness, max over targets, mean over questions (aggregate_metrics); "
        "the same function as lmms-eval's lmms_eval/tasks/chartqa/utils.py relaxed_correctness",
        "pix2struct 945f27e; lmms-eval 75571cf",
        "table of cases from running both functions (tests/fixtures/references/relaxed_accuracy.json), "
        "per sample and for the corpus",
        (
            "the corpus value is 0-1 (pix2struct prints it times 100)",
            "Qwen-VL's ChartQA driver strips the prediction before the call; the function (and evalkit) does not",
        ),
    ),
    "f1": Reference(
        "SQuAD v2.0",
        "evaluate-v2.0.py normalize_answer, compute_f1, get_raw_scores (max over the answers whose normalised "
        "form is not empty, [''] when none) for English or no language; facebookresearch/MLQA "
        "mlqa_evaluation_v1.py f1_score, metric_max_over_ground_truths, evaluate for other languages",
        "evaluate-v2.0.py (as in huggingface/evaluate a7dd338 metrics/squad_v2); MLQA 24bf470",
        "table of cases from running both scripts (tests/fixtures/references/f1.json), per sample and for the "
        "corpus of each answer language",
        (
            "the corpus value is 0-1 (both scripts print it times 100)",
            "languages MLQA does not know (it stops on them) use its rule for a language without articles (hi), "
            "or its Chinese segmentation for languages written without spaces (ja, th, yue, ...)",
            "an empty reference list is a SQuAD v2.0 no-answer question in English, a failure under MLQA; "
            "a missing reference (None) is a failure",
            "options normalization (squad/mlqa) and characters (character tokens) depart from the default rule",
        ),
    ),
    # --- end anls, relaxed_accuracy, f1 ---
    # --- semantic_wer, semantic_cer, entity_wer (helper: KARMA ASR) ---
    "semantic_wer": Reference(
        "eka-care/KARMA-OpenMedEvalKit",
        "karma/metrics/asr/asr_semantic_metrics.py: ASRSemanticMetrics.evaluate (metric 'asr_semantic_metric')"
        " -> EvalResult.semantic_wer; alignment BaseCERAligner.align_words_dp (base_aligner.py) with"
        " EnglishCERAligner / HindiCERAligner (lang/)",
        "commit fe151014e7c6fefcafb5fa9fcf0abcbf276f1359",
        "tests/test_reference_karma_asr.py: table of 83 English/Hindi cases (tests/fixtures/references/"
        "semantic_wer.json) produced by running KARMA's code, per sample (word groups, counts, value) and pooled",
        (
            "KARMA reports round(x, 3); evalkit reports the value unrounded",
            "KARMA has aligners for English and Hindi only and raises for other languages; evalkit refuses them"
            " with a config error (no language: English, KARMA's benchmark default)",
            "an utterance KARMA's aligner raises on (a digit int() cannot read, e.g. '²' in English) is skipped by"
            " KARMA; evalkit counts it as a failed sample (metric_error), also left out of the corpus value",
            "where two different spoken expansions of one token both match the answer word for word, KARMA takes"
            " the first in Python set order (varies with PYTHONHASHSEED); evalkit takes the first in generation"
            " order",
            "several references: the first is scored (KARMA takes one string)",
        ),
    ),
    "semantic_cer": Reference(
        "eka-care/KARMA-OpenMedEvalKit",
        "karma/metrics/asr/asr_semantic_metrics.py: ASRSemanticMetrics.evaluate -> EvalResult.semantic_cer"
        " (_process_utterance_regular: group CER x reference characters of groups with words on both sides)",
        "commit fe151014e7c6fefcafb5fa9fcf0abcbf276f1359",
        "tests/test_reference_karma_asr.py: the same 83 cases (tests/fixtures/references/semantic_wer.json),"
        " per sample and pooled",
        (
            "KARMA reports round(x, 3); evalkit reports the value unrounded",
            "languages, failed utterances, expansion order and several references as for semantic_wer",
        ),
    ),
    "entity_wer": Reference(
        "eka-care/KARMA-OpenMedEvalKit",
        "karma/metrics/asr/asr_semantic_metrics.py: ASRSemanticMetrics.evaluate(entities=...) ->"
        " EvalResult.entity_wer (compute_kw_wer_from_sem_alignment; keywords by"
        " BaseCERAligner.extract_keywords_from_text)",
        "commit fe151014e7c6fefcafb5fa9fcf0abcbf276f1359",
        "tests/test_reference_karma_asr.py: 31 cases in 4 datasets (tests/fixtures/references/entity_wer.json)"
        " produced by running KARMA's evaluate, per sample (a one-sample dataset) and per dataset",
        (
            "KARMA builds one keyword list for the whole dataset and counts it in every sentence; a streaming"
            " engine scores a sample before seeing the others, so by default a sample counts its own keywords:"
            " the corpus value equals KARMA's unless a sample says, as a one-word group, a keyword that only"
            " another sample tags. Option entity_words takes the dataset-wide list; with it the value equals"
            " KARMA's",
            "KARMA reports round(x, 3); evalkit reports the value unrounded",
            "KARMA reads only its annotation string [[text, category, [[start, end]]], ...] and skips other"
            " values; evalkit also reads that structure unparsed and, beyond it, lists of entity texts, objects"
            " with 'text' and objects of lists by type (the words of the texts)",
            "no keyword in the dataset: KARMA reports none; evalkit NaN. A sample without keywords has no"
            " per-sample value",
            "languages, failed utterances and several references as for semantic_wer",
        ),
    ),
    # --- end semantic_wer, semantic_cer, entity_wer ---
    # --- cpwer, wder, mcq_accuracy (helper: speakers and choices) ---
    "cpwer": Reference(
        "meeteval",
        "meeteval.wer.cp_word_error_rate per sample (speaker -> words in transcript order, no normaliser, "
        "meeteval's default); corpus: meeteval.wer.combine_error_rates / sum of the per-sample ErrorRates "
        "(summed errors over summed reference words)",
        "0.4.3",
        "tests/test_reference_speakers_choices.py calls meeteval on generated turns (substitutions, deletions, "
        "insertions, speaker swaps, digits, punctuation, Unicode, empty and unlabelled answers, more answer than "
        "reference speakers), per sample and for the corpus",
        (
            "a sample whose reference has no words fails (no reference); meeteval would count the answer's words "
            "as insertions over 0 reference words and add them to the corpus",
            "the normalizer option (diarizationlm, lower,rm(.?!,), or evalkit's Whisper-based auto/english/basic) "
            "changes the words; the value then equals meeteval on the normalised words, and Whisper's English "
            "normaliser can join spoken digits ('one two' -> '12'), so it changes the number of words",
            "DiarizationLM's cpWER is another quantity and is not what this metric computes: it assigns speakers by "
            "most correct words, leaves out the words of speakers without a partner, and normalises the text",
        ),
    ),
    "wder": Reference(
        "diarizationlm",
        "DiarizationLM (google/speaker-id), DiarizationLM/diarizationlm/metrics.py: "
        "compute_utterance_metrics (wder_sub / wder_total) per sample, "
        "compute_metrics_on_json_dict's WDER (summed wder_sub over summed wder_total) for the corpus; its "
        "utils.normalize_text, its levenshtein_with_edits alignment and its Hungarian speaker mapping",
        "0.1.5 (PyPI), with word-levenshtein 0.0.3",
        "tests/test_reference_speakers_choices.py calls diarizationlm on generated turns, per sample and for the "
        "corpus, and compares the alignment and the normalisation with its own functions",
        (
            "an answer with no words: DiarizationLM raises (nothing aligned); evalkit scores 0 wrong of 0 aligned "
            "words, so the sample adds nothing to the corpus",
            "a sample whose reference has no words fails (no reference); DiarizationLM raises",
            "the normalizer option (none, lower,rm(.?!,), or evalkit's Whisper-based auto/english/basic) replaces "
            "DiarizationLM's normalisation; the value is then no longer DiarizationLM's",
        ),
    ),
    "mcq_accuracy": Reference(
        _OWN,
        "evalkit/metrics/choice.py read_choice (its own reading rules, module docstring); compared with lmms-eval's "
        "MMMU parser, lmms_eval/tasks/_task_utils/mmmu_mcq_utils.py parse_mmmu_multi_choice_response "
        "(called by lmms_eval/tasks/mmmu/utils.py parse_multi_choice_response); corpus: the mean",
        "mcq-v2 (describe: evalkit-mcq-v2), compared with lmms-eval 75571cfe0fa3",
        "tests/test_reference_speakers_choices.py: a table of 62 cases whose lmms-eval readings come from running "
        "parse_mmmu_multi_choice_response (tests/fixtures/references/mcq_accuracy.json); agrees on 28, "
        "differs on 34 by design, each case naming its class",
        (
            "nothing can be read: lmms-eval picks a random option, evalkit reads no answer and scores 0",
            "a hedge naming two or more options together (A or B, either A or B, between B and C, A and/or B, A, B, "
            "A/B, both A and C): lmms-eval takes the last one named, evalkit reads no answer (details: reading)",
            "lower-case letters (b, Answer: b, (b)): lmms-eval reads upper-case letters only",
            "markdown and punctuation (**C**, B), B: Paris): lmms-eval sees a letter only as (B), 'B ' or 'B.'",
            "full-width forms: evalkit reads the response after NFKC, lmms-eval as written",
            "the article and the pronoun: lmms-eval reads any 'A ' or 'I ' as a letter; evalkit not before a "
            "lower-case word",
            "option texts: lmms-eval looks for them only in responses of more than five words, as substrings, the "
            "last found winning; evalkit reads a response that is an option's text, or exactly one option named "
            "as whole words",
            "evalkit prefers an explicit answer statement ('the answer is C') to other letters; lmms-eval prefers "
            "bracketed letters, then the letter written last",
        ),
    ),
    # --- end cpwer, wder, mcq_accuracy ---
}


def reference_of(name: str) -> Reference | None:
    """The reference of a built-in metric by canonical name, or None."""
    return REFERENCES.get(name)
