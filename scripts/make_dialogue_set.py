"""Build evalkit's shipped two-speaker conversation set with espeak-ng (speaker diarization, cpWER/WDER).

Six short conversations between a female (en-us+f5) and a male (en-us+klatt4)
espeak-ng voice, turns joined with 0.4 s of silence, 16 kHz mono FLAC. The
reference of each is its list of turns ({speaker, text}) and the same as
``A: ...`` / ``B: ...`` lines. Only a maintainer regenerating the set needs
espeak-ng; users and tests read the committed parquet file.

Run: python scripts/make_dialogue_set.py --out evalkit/assets/speech/espeak_dialogues
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from make_speech_set import SAMPLE_RATE, Speaker, flac_bytes, synthesize

VOICES = {
    "A": Speaker("en-us", "f5", "us", False, "female", 155),
    "B": Speaker("en-us", "klatt4", "us", False, "male", 150),
}
GAP_SECONDS = 0.4

CONVERSATIONS: tuple[tuple[tuple[str, str], ...], ...] = (
    (
        ("A", "Good morning, did you sleep well?"),
        ("B", "Not really, the neighbours were loud."),
        ("A", "That is a shame."),
    ),
    (
        ("B", "Where did you park the car?"),
        ("A", "Near the station, on the left."),
        ("B", "Thank you, I will find it."),
    ),
    (("A", "Can you bring some bread home?"), ("B", "Yes, white or brown?"), ("A", "Brown, please, and some milk.")),
    (("B", "The train is late again."), ("A", "How long do we have to wait?"), ("B", "About twenty minutes.")),
    (("A", "I finished the report."), ("B", "Great, send it to me today."), ("A", "I will do it after lunch.")),
    (
        ("B", "Is the meeting still at three?"),
        ("A", "No, it moved to four."),
        ("B", "Then I have time for coffee."),
        ("A", "Bring me one too."),
    ),
)


def build(out: Path, espeak: str) -> list[dict[str, object]]:
    rows = []
    gap = np.zeros(int(GAP_SECONDS * SAMPLE_RATE), dtype=np.float32)
    for index, turns in enumerate(CONVERSATIONS):
        pieces = []
        for k, (speaker, text) in enumerate(turns):
            if k:
                pieces.append(gap)
            pieces.append(synthesize(text, VOICES[speaker], espeak))
        audio = np.concatenate(pieces)
        rows.append(
            {
                "id": f"dialogue_{index:02d}",
                "audio": flac_bytes(audio),
                "turns": [{"speaker": s, "text": t} for s, t in turns],
                "transcript": "\n".join(f"{s}: {t}" for s, t in turns),
                "duration": round(len(audio) / SAMPLE_RATE, 3),
            }
        )
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out / "data.parquet", row_group_size=2)
    (out / "README.md").write_text(
        "# espeak_dialogues\n\n"
        f"{len(rows)} two-speaker English conversations made with espeak-ng (speaker A: en-us+f5, female; "
        "speaker B: en-us+klatt4, male), turns joined with 0.4 s of silence, 16 kHz mono FLAC in `audio`.\n"
        "`turns` is the reference as a list of {speaker, text}; `transcript` the same as `A: ...` lines.\n\n"
        "Regenerate with `python scripts/make_dialogue_set.py --out evalkit/assets/speech/espeak_dialogues` "
        "(needs espeak-ng). Generated from text written for evalkit; ships under evalkit's licence "
        "(Apache-2.0).\n",
        encoding="utf-8",
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        print("espeak-ng is not installed (apt-get install espeak-ng)", file=sys.stderr)
        return 2
    rows = build(args.out, espeak)
    print(f"wrote {len(rows)} conversations to {args.out / 'data.parquet'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
