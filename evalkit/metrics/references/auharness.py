"""The references of AU-Harness's computations (evalkit/metrics/auharness/): its files at the compared commit."""

from __future__ import annotations

from evalkit.metrics.references.reference import Reference


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


AUHARNESS_REFERENCES: dict[str, Reference] = {
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
    "meteor": Reference(
        "ServiceNow/AU-Harness",
        "metrics/meteor_score.py MeteorScore: metrics/word_error_rate_metrics.py normalize_text on both strings, then "
        "nltk.translate.meteor_score.single_meteor_score(reference tokens, answer tokens) with NLTK's defaults; "
        "corpus: the mean",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; nltk 3.10.4, num2words 0.5.14",
        "tests/test_reference_meteor.py: 11 and 16 pairs scored by running MeteorScore as load_metric builds it, "
        "both sides given the same WordNet stand-in (tests/fixtures/references/meteor.json, auharness_meteor.json), "
        "per sample and corpus; tests/test_metric_translation_models.py: the normalisation against normalize_text's "
        "output",
        (
            "the corpus value is 0-1 (AU-Harness reports it x 100, rounded to 2 places); each sample is rounded to 3 "
            "places before the mean, as AU-Harness rounds it (the record keeps the unrounded value in details)",
            "AU-Harness normalises every language by English rules (its loader passes no language): so does evalkit, "
            "and a run on other text says so once",
            "needs NLTK's WordNet data (no package registry ships it) in NLTK_DATA: without it the config is refused; "
            "AU-Harness downloads it at run time",
            "several references: the first is scored",
        ),
    ),
    "bertscore": Reference(
        "ServiceNow/AU-Harness",
        "metrics/bertscore.py BertScore: normalize_text on both strings, then bert_score.score([reference], "
        "[answer], model_type='bert-base-multilingual-cased') per sample, its F1 rounded to 2 places; corpus: the mean",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; bert-score 0.3.13",
        "tests/test_reference_auharness_text.py: what reached bert_score.score and the scores, per sample and corpus, "
        "from running BertScore with a stand-in bert_score (tests/fixtures/references/auharness_bertscore.json); "
        "tests/test_metric_translation_models.py: the refusals when the package or the model is missing; the model "
        "itself is not run in the tests (its weights are not on any package registry)",
        (
            "the corpus value is 0-1: each F1 rounded to 2 places as AU-Harness rounds it, whose records then show it "
            "x 100 and whose corpus is the mean rounded to 2 places",
            "the model must be on the machine (Hugging Face cache, or option model: a folder); AU-Harness downloads it",
            "called as AU-Harness calls it, the reference in the candidates' place (F1 is the same either way: "
            "precision and recall swap)",
        ),
    ),
    "comet": Reference(
        "ServiceNow/AU-Harness",
        "metrics/comet_score.py CometScore: normalize_text on source, answer and reference, then "
        "comet.load_from_checkpoint(download_model('Unbabel/wmt22-comet-da')).predict segment scores; corpus: the mean",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; unbabel-comet 2",
        "tests/test_reference_auharness_text.py: what reached predict (normalised src/mt/ref, batch size, gpus) and "
        "the scores from running CometScore with a stand-in comet module "
        "(tests/fixtures/references/auharness_comet.json); "
        "tests/test_metric_translation_models.py: the refusals when the package or the checkpoint is missing; the "
        "model itself is not run in the tests (its checkpoint is not on any package registry)",
        (
            "the corpus value is 0-1 (AU-Harness reports it x 100, rounded to 2 places)",
            "the checkpoint must be on the machine (option checkpoint); AU-Harness downloads it",
            "the source sentence comes from meta['source']; a sample without one fails",
        ),
    ),
    "auharness:word_error_rate": Reference(
        "ServiceNow/AU-Harness",
        "metrics/word_error_rate_metrics.py WERMetrics as utils/metric_utils.py load_metric builds it (language 'en' "
        "whatever the task's): normalize_text on both strings, jiwer.process_words per sample; overall_wer (the "
        "headline) = errors summed / reference words summed, average_sample_wer = the mean of per-sample rates",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; jiwer 4.0.0, num2words 0.5.14",
        "tests/test_reference_auharness_text.py: 26 pairs in English, Hindi, Tamil, Bengali and Japanese scored by "
        "running WERMetrics (tests/fixtures/references/auharness_word_error_rate.json), per sample, per language and "
        "for the corpus",
        (
            "the corpus value is 0-1 (AU-Harness reports overall_wer and average_sample_wer x 100, rounded to 2 "
            "places); average_sample_wer is in the corpus details",
            "reproduces AU-Harness's defect: every language is normalised by English rules, so Indic vowel signs, "
            "nasal marks, nukta and virama are deleted or turned into spaces, and Japanese or Chinese is scored by "
            "whitespace words, not characters; the run warns once and names word_error_rate, which avoids it",
            "a reference that normalises to nothing counts the answer's words as errors over one reference word",
            "several references: the first is scored (AU-Harness takes one string)",
        ),
    ),
    "auharness:bleu": Reference(
        "ServiceNow/AU-Harness",
        "metrics/bleu_metrics.py BleuMetrics: normalize_text on both strings, sacrebleu.corpus_bleu(tokenize='13a', "
        "or 'zh' for covost2_en_zh-CN); records: sacrebleu.sentence_bleu",
        "commit daa06166e3bb7a5837f010867d2bcc16531955c2; sacrebleu 2.5.1 (AU-Harness's pin; 2.6.0 here)",
        "tests/test_reference_auharness_text.py: three sets (English, German, Chinese) scored by running BleuMetrics "
        "with their covost2 task names (tests/fixtures/references/auharness_bleu.json), per sample and corpus",
        (
            "0-100, as AU-Harness (which rounds the corpus to 2 places)",
            "AU-Harness picks 'zh' from the task name; evalkit from the dataset's language pair (a translation into "
            "Chinese), which names the same datasets among AU-Harness's",
            "every language is normalised by English rules, as in AU-Harness: the run warns once and names bleu",
            "several references: the first is scored (AU-Harness takes one string)",
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
            "AU-Harness's names (an AU-Harness config, auharness:mtbench_*) send each category's answers at "
            "AU-Harness's temperature (writing and roleplay 0.7, stem and humanities 0.1, others 0) and an empty "
            "answer as one space in the next turn's history; evalkit's own mtbench_* entries send the run's "
            "temperature and the answer as it came",
            "the corpus value is the mean of the per-sample 0-100 scores, each rounded to 2 places, and the mean "
            "rounded to 2 places, as AU-Harness rounds them",
        ),
    ),
}
