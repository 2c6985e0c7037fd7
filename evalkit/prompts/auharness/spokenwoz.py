"""SpokenWOZ's agent turns asked as AU-Harness asks them: the dialogue so far in the text (``SpokenWozPreprocessor``).

pirxus/spokenwoz-whisper has one row per user turn: its recording
(``audio``), its transcript (``text``), the agent's reply (``agent_text``,
the reference), the annotated state (``slots``) and the dialogue before it
(``context``: ``{"turn_index": [...], "text": [...], "agent_text": [...]}``).
AU-Harness (preprocessors/spoken_woz_preprocessor.py) sends one user text,
lines joined by newlines and the whole stripped:

* the runspec's instruction (its ``user_prompt``);
* when the context has turns, ``"\\n[Dialogue History]"`` and a ``User: ...``
  and an ``Agent: ...`` line per earlier turn;
* when the turn has a transcript, ``"\\n[Current User Input (Audio
  Transcription)]: <transcript>"``: also in the audio task, which so gets the
  words as well as the recording;
* ``"\\nPlease provide an appropriate agent response based on the user's
  spoken input and dialogue history."``

The runspec maps ``context`` and ``slots`` into the sample's meta (the
dialogue-state metrics read ``slots``, evalkit/metrics/auharness/dialogue_state.py),
and ``text`` to the sample's text (the text task) or to ``meta["user_text"]``
(the audio task, whose turn is spoken).
"""

from __future__ import annotations

import json
from typing import Any

from evalkit.data.sample import Sample
from evalkit.prompts.preprocessors import PREPROCESSORS, Preprocessor, PromptContext
from evalkit.prompts.prompt import Prompt, PromptTurn

HISTORY_HEAD = "\n[Dialogue History]"
CURRENT_HEAD = "\n[Current User Input (Audio Transcription)]: "
CLOSING = "\nPlease provide an appropriate agent response based on the user's spoken input and dialogue history."


def _context(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def spokenwoz_text(instruction: str | None, context: Any, user_text: Any) -> str:
    """The user text AU-Harness writes for one SpokenWOZ turn (rules in the module docstring)."""
    parts = [instruction] if instruction else []
    history = _context(context)
    turns = history.get("turn_index") or []
    if turns:
        users = history.get("text") or []
        agents = history.get("agent_text") or []
        parts.append(HISTORY_HEAD)
        for j in range(len(turns)):
            parts.append(f"User: {users[j] if j < len(users) else ''}")
            parts.append(f"Agent: {agents[j] if j < len(agents) else ''}")
    if user_text:
        parts.append(f"{CURRENT_HEAD}{user_text}")
    parts.append(CLOSING)
    return "\n".join(parts).strip()


@PREPROCESSORS.register("SpokenWozPreprocessor", "spokenwoz")
class SpokenWozPreprocessor(Preprocessor):
    """The instruction, the dialogue history and the turn's transcript in one user text, with the turn's audio."""

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        transcript = sample.meta.get("user_text", sample.text)
        text = spokenwoz_text(sample.instruction, sample.meta.get("context"), transcript)
        sent = "\n\n".join(part for part in (text, *context.add_ons) if part)
        return Prompt(turns=[PromptTurn(text=sent, audio=sample.audio)], system=context.system_prompt)
