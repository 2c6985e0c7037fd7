"""How a peer tool reports a pair: its dataset name, its metric name and its scale, decided once per pair.

A config in AU-Harness's format asks for AU-Harness's table: its users lay
evalkit's results next to AU-Harness's leaderboard, which names datasets as
AU-Harness's task configs do (``librispeech_test_clean``, not evalkit's entry
``librispeech_test_clean_audiollms``) and prints most metrics ×100. evalkit's
scores stay what they are (results.json keeps them, and the CI); each result
row also carries the peer's names and the factor that turns evalkit's value
into the peer's, so every view shows the peer's number with evalkit's n and
CI on the same scale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from evalkit.catalog import Catalog, DatasetSpec
from evalkit.config.foreign.auharness_names import SAME_NAME_OTHER_COMPUTATION, is_auharness_name
from evalkit.errors import UserError

#: the config key's values: whose names and scale results use
REPORT_STYLES = ("evalkit", "auharness")
#: AU-Harness's prefix (runspecs/_names/auharness.json)
AUHARNESS = "auharness"
TOOL = "AU-Harness"

#: AU-Harness's metric name -> the factor from evalkit's value of it to the number AU-Harness prints, read in
#: AU-Harness's metrics/*.py (commit daa0616): most scale a 0-1 mean by 100 (``* 100.0`` before smart_round);
#: its BLEU is sacrebleu's 0-100, as evalkit's; its detailed judge (×20), CallHome judge ((score + 1) × 10) and
#: MT-Bench judge (×10) are on evalkit's side already on the scale AU-Harness prints.
AUHARNESS_SCALE: dict[str, float] = {
    "word_error_rate": 100.0,  # word_error_rate_metrics.py: average_sample_wer, overall_wer * 100
    "bleu": 1.0,  # bleu_metrics.py: sacrebleu's score, "already in the range of [0, 100]"
    "meteor": 100.0,  # meteor_score.py: mean * 100
    "bertscore": 100.0,  # bertscore.py: each F1 * 100
    "comet": 100.0,  # comet_score.py: mean * 100
    "llm_judge_binary": 100.0,  # llm_judge.py: BinaryLLMJudgeMetric, mean * 100
    "llm_judge_redteaming": 100.0,  # llm_judge.py: RedTeamingJudgeMetric, mean * 100
    "llm_judge_big_bench_audio": 100.0,  # llm_judge.py: num_correct * 100 / total
    "llm_judge_detailed": 1.0,  # llm_judge.py: mean * 20; evalkit's llm_judge_detailed is rating x 20 already
    "llm_judge_callhome": 1.0,  # llm_judge.py: (mean + 1) * 10; evalkit's llm_judge_callhome reports the same
    "mt_bench_llm_judge": 1.0,  # llm_judge.py: turns' mean * 10; evalkit's mt_bench_llm_judge reports the same
    "gsm8k_exact_match": 100.0,  # gsm8k_metrics.py: accuracy * 100
    "instruction_following": 100.0,  # voice_bench_ifeval_score.py: each accuracy * 100
    "sql_score": 100.0,  # sql_score.py: exec accuracy / exact set match * 100
    "bfcl_match_score": 100.0,  # bfcl_metric.py: sum * 100 / n
    "diarization_metrics": 100.0,  # diarization_metrics.py: WDER, cpWER * 100
    "joint_goal_accuracy": 100.0,  # dialogue_metrics.py: mean * 100
    "slot_accuracy": 100.0,  # dialogue_metrics.py: mean * 100
    "slot_f1": 100.0,  # dialogue_metrics.py: mean * 100
}


@dataclass(frozen=True)
class ReportedAs:
    """One pair as a peer tool reports it."""

    tool: str
    dataset: str
    metric: str
    scale: float

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "dataset": self.dataset, "metric": self.metric, "scale": self.scale}


def auharness_metric(metric: str, known: Callable[[str], bool]) -> str:
    """The metric ``auharness:<name>`` runs: AU-Harness's computation of ``name``, as ``known`` (the registry) has it.

    An evalkit config keeps AU-Harness's meaning with the prefix, as ``evalkit convert`` writes it. Where a
    metric is registered under the prefixed name (AU-Harness computes it otherwise than evalkit's metric of the
    bare name), that one runs; where evalkit's metric of the bare name computes AU-Harness's number, it does.
    Anything else is returned as written, for the caller's "unknown metric" message.
    """
    if not metric.startswith(f"{AUHARNESS}:") or known(metric):
        return metric
    bare = bare_metric(metric)
    return bare if bare in AUHARNESS_SCALE and known(bare) else metric


def prefixed_metric(metric: str) -> str:
    """How a config of evalkit's own names AU-Harness's metric ``metric``: ``auharness:<metric>``."""
    return f"{AUHARNESS}:{metric}" if metric in AUHARNESS_SCALE else metric


def bare_metric(metric: str) -> str:
    """AU-Harness's metric name without the ``auharness:`` prefix that keeps its meaning in evalkit's configs."""
    return metric.removeprefix(f"{AUHARNESS}:")


def reported_as(catalog: Catalog, style: str, name: str, metric: str, spec: DatasetSpec) -> ReportedAs | None:
    """How the pair (``name`` as the config writes it, the metric it runs) reads in ``style``'s tables; None: evalkit's.

    Only a name written in AU-Harness's terms (its dataset or group, ``auharness:``-prefixed or a bare name evalkit
    does not use itself) is reported as AU-Harness reports it; the dataset shown is AU-Harness's name of the entry
    within that group. ``metric`` is the metric the pair runs, not as written: an alias gets its metric's scale, and
    evalkit's own computation of a name AU-Harness computes otherwise (``word_error_rate`` asked for without the
    prefix, as a re-score may) stays in evalkit's terms rather than pass for AU-Harness's number.
    """
    if style != AUHARNESS or not is_auharness_name(catalog, name) or metric in SAME_NAME_OTHER_COMPUTATION:
        return None
    table = catalog.foreign.get(AUHARNESS)
    bare = name.removeprefix(f"{AUHARNESS}:")
    if table is None or (bare not in table.datasets and bare not in table.groups):
        return None
    members = table.groups.get(bare, [bare]) if bare not in table.datasets else [bare]
    entry = spec.variant_of or spec.name  # AU-Harness's variant of an entry names the entry whose data it reads
    shown = next((m for m in members if table.datasets.get(m) and table.datasets[m].evalkit == entry), None)
    if shown is None:  # a group member reached through its nested group: AU-Harness's name of the entry anywhere
        shown = next((m for m, e in table.datasets.items() if e.evalkit == entry), entry)
    theirs = bare_metric(metric)
    return ReportedAs(TOOL, shown, theirs, AUHARNESS_SCALE.get(theirs, 1.0))


def reported_in_run(
    catalog: Catalog, style: str, names: Iterable[str], metric: str, spec: DatasetSpec
) -> ReportedAs | None:
    """How a finished run's pair of ``spec`` reads when ``metric`` scores it again (a re-score, a merge).

    The run's config names its datasets (``names``, its pairs' as written); the first that selects ``spec`` (the
    entry, or the entry another tool's variant reads) decides, as it did when the run was planned. A name the
    catalogue no longer knows is passed over.
    """
    if style != AUHARNESS:
        return None
    for name in dict.fromkeys(names):
        try:
            selected = catalog.resolve(name)
        except UserError:
            continue
        if any(s.name == spec.name for s in selected):
            return reported_as(catalog, style, name, metric, spec)
    return None
