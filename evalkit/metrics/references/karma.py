"""The references of KARMA-OpenMedEvalKit's computations (evalkit/metrics/karma/): its files at the compared commit."""

from __future__ import annotations

from evalkit.metrics.references.reference import Reference

_KARMA = "eka-care/KARMA-OpenMedEvalKit"
_KARMA_COMMIT = "commit fe151014e7c6fefcafb5fa9fcf0abcbf276f1359"


def _karma(source: str, checked_by: str, *differences: str, version: str = "") -> Reference:
    """A KARMA metric: its file and class at the compared commit, checked against a table from running it."""
    return Reference(_KARMA, source, _KARMA_COMMIT + (f"; {version}" if version else ""), checked_by, differences)


KARMA_REFERENCES: dict[str, Reference] = {
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
