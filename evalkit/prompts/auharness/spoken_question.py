"""VoiceBench's and Big Bench Audio's questions asked as AU-Harness asks them.

AU-Harness's VoiceBenchPreprocessor (IFEval, AdvBench) and
BigBenchAudioPreprocessor write one user text: the task's ``user_prompt``
(empty in every task it ships), then

* for the spoken question, the fixed words "Answer the question provided in
  the audio." beside the recording;
* for the written one, the row's question column: VoiceBench's as the row
  holds it, Big Bench Audio's transcript stripped of surrounding white space.

Nothing else is stripped, and the text then goes through AU-Harness's Jinja
rendering, which drops one final newline (jinja_newline.py). evalkit's own
entries of these datasets ask in their own words; AU-Harness's names
(``auharness:voicebench_ifeval_audio``, ``auharness:advbench``, ...) use these.
"""

from __future__ import annotations

from evalkit.data.sample import Sample
from evalkit.prompts.auharness.jinja_newline import without_final_newline
from evalkit.prompts.preprocessors import PREPROCESSORS, Preprocessor, PromptContext
from evalkit.prompts.prompt import Prompt, PromptTurn

#: what AU-Harness sends beside a spoken question
SPOKEN_QUESTION = "Answer the question provided in the audio."


@PREPROCESSORS.register("AuHarnessVoiceBenchPreprocessor", "auharness_voicebench")
class AuHarnessVoiceBenchPreprocessor(Preprocessor):
    """The prompt, then the fixed words (audio) or the row's question as it is (text)."""

    #: whether the written question is stripped first (Big Bench Audio's transcript is)
    strip_question: bool = False

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        text = sample.instruction or ""
        if sample.audio is not None:
            text += SPOKEN_QUESTION
        elif isinstance(sample.text, str):
            text += sample.text.strip() if self.strip_question else sample.text
        sent = "\n\n".join(part for part in (without_final_newline(text), *context.add_ons) if part)
        return Prompt(turns=[PromptTurn(text=sent or None, audio=sample.audio)], system=context.system_prompt)


@PREPROCESSORS.register("AuHarnessBigBenchAudioPreprocessor", "auharness_big_bench_audio")
class AuHarnessBigBenchAudioPreprocessor(AuHarnessVoiceBenchPreprocessor):
    """As VoiceBench's, the written question (its transcript) stripped first."""

    strip_question = True
