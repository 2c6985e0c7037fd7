"""The stable plugin contracts: what a package that adds a metric, a preprocessor or a postprocessor builds on.

Import from here, not from the modules behind it: evalkit's layout may move
(it did once), these names keep their meaning. A plugin registers its parts
with the decorators and is found through the ``evalkit.plugins`` entry-point
group::

    # my_plugin.py
    from evalkit.plugin import METRICS, Metric, Sample, SampleScore

    @METRICS.register("exact_length")
    class ExactLength(Metric):
        \"\"\"1 when the answer has as many words as the reference.\"\"\"

        def score(self, prediction: str, sample: Sample) -> SampleScore:
            # sample.references: every acceptable answer as a string (a reference may be a list)
            same = any(len(prediction.split()) == len(ref.split()) for ref in sample.references)
            return SampleScore(float(same), (float(same), 1.0))

    # pyproject.toml of the plugin package
    [project.entry-points."evalkit.plugins"]
    my_plugin = "my_plugin"

A metric that reproduces another implementation says which with a class
attribute ``reference = Reference(project, source, version, checked_by,
differences)``; ``evalkit info metric`` shows it.

A sample that cannot be scored returns ``SampleScore(None, failure=...)``
with a :class:`FailureReason` (or a short reason of its own): it is counted
as failed, never as a score.
"""

from __future__ import annotations

from evalkit.data.sample import Audio, Sample, Turn
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, MetricResult, SampleScore, check_options, reference_strings
from evalkit.metrics.references import Reference
from evalkit.metrics.table import METRICS
from evalkit.processing.postprocessors import POSTPROCESSORS, Postprocessor
from evalkit.prompts.preprocessors import PREPROCESSORS, Preprocessor, PromptContext
from evalkit.prompts.prompt import Prompt, PromptTurn

__all__ = [
    "METRICS",
    "POSTPROCESSORS",
    "PREPROCESSORS",
    "Audio",
    "FailureReason",
    "Metric",
    "MetricResult",
    "Postprocessor",
    "Preprocessor",
    "Prompt",
    "PromptContext",
    "PromptTurn",
    "Reference",
    "Sample",
    "SampleScore",
    "Turn",
    "check_options",
    "reference_strings",
]
