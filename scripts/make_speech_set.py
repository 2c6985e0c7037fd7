#!/usr/bin/env python3
"""Build evalkit's shipped English speech set with espeak-ng.

The set exists so that a fresh machine can run a real ASR evaluation without
downloading anything: the audio is synthetic but the words are ordinary
English, spoken with several espeak-ng accents and female/male variants, and a
few clips run past 30 seconds so that chunked transcription is exercised.

Only the maintainer who regenerates the set needs espeak-ng; users and tests
read the committed ``data.parquet``. The output is deterministic for a given
espeak-ng/libsndfile/soxr build: the sentence order, the speaker assignment
and the transcripts are fixed in this file (no randomness at all).

    python scripts/make_speech_set.py --out evalkit/assets/speech/espeak_en
    python scripts/make_speech_set.py --out /tmp/x --check-asr 12   # + pocketsphinx WER
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from evalkit.data.audio.decode import resample

PREFIX = "espeak_en"
SAMPLE_RATE = 16000
MIN_LONG_SECONDS = 30.0
AMPLITUDE = 60  # espeak-ng -a (default 100 clips the klatt timbres at full scale)


@dataclass(frozen=True)
class Speaker:
    """One espeak-ng voice + variant, with the labels the dataset columns carry."""

    voice: str  # espeak-ng voice id (language/accent)
    variant: str  # espeak-ng variant (timbre, pitch; decides the gender label)
    accent: str
    accented: bool  # False for standard US / British English
    gender: str
    rate: int  # words per minute

    @property
    def name(self) -> str:
        return f"{self.voice}+{self.variant}"


# Variants were chosen per accent where pocketsphinx's US English model still
# recognises part of the speech (f2, f5, m5 and the klatt-family timbres do
# best; the default male variant is hardly recognised at all), keeping every
# accent. Rates near 150 wpm: slower speech (120) or longer word gaps (-g 3)
# were recognised no better, often worse.
# Plain "en" is espeak-ng's British English voice (gmw/en): its alias "en-gb"
# silently ignores "+variant" in espeak-ng 1.51.
SPEAKERS: tuple[Speaker, ...] = (
    Speaker("en-us", "f5", "us", False, "female", 155),
    Speaker("en-us", "klatt4", "us", False, "male", 150),
    Speaker("en-us", "f2", "us", False, "female", 150),
    Speaker("en-us", "m5", "us", False, "male", 150),
    Speaker("en", "f5", "british", False, "female", 150),
    Speaker("en", "klatt", "british", False, "male", 155),
    Speaker("en-gb-x-rp", "f2", "received_pronunciation", False, "female", 150),
    Speaker("en-gb-x-rp", "klatt4", "received_pronunciation", False, "male", 150),
    Speaker("en-gb-scotland", "f5", "scottish", True, "female", 150),
    Speaker("en-gb-scotland", "klatt4", "scottish", True, "male", 150),
    Speaker("en-gb-x-gbclan", "f2", "lancastrian", True, "female", 150),
    Speaker("en-gb-x-gbclan", "klatt4", "lancastrian", True, "male", 150),
    Speaker("en-gb-x-gbcwmd", "f2", "west_midlands", True, "female", 150),
    Speaker("en-gb-x-gbcwmd", "klatt2", "west_midlands", True, "male", 150),
    Speaker("en-029", "f2", "caribbean", True, "female", 150),
    Speaker("en-029", "klatt4", "caribbean", True, "male", 150),
    Speaker("en-us-nyc", "f2", "new_york", True, "female", 150),
    Speaker("en-us-nyc", "klatt4", "new_york", True, "male", 155),
)

# Written for this set. Numbers are spelled out so that WER compares words,
# not digit formatting; some are questions.
SENTENCES: tuple[str, ...] = (
    "The weather was cold and windy, so we stayed inside and read books all afternoon.",
    "Could you please tell me where the nearest train station is?",
    "She bought three apples, two loaves of bread and a bottle of milk at the market.",
    "My brother moved to a small town by the sea last summer.",
    "The meeting has been moved to half past ten tomorrow morning.",
    "How many people are coming to the party on Saturday night?",
    "Please remember to switch off the lights before you leave the office.",
    "The old bridge over the river was built more than two hundred years ago.",
    "We planted tomatoes, beans and carrots in the garden behind the house.",
    "Is there a pharmacy open on Sunday anywhere near here?",
    "The children laughed when the dog chased its own tail around the kitchen.",
    "Our flight leaves at seven in the evening, so we should be at the airport by five.",
    "He has been learning to play the piano for almost six years.",
    "What time does the library close on weekdays?",
    "A cup of hot tea is the best thing on a rainy day.",
    "The doctor told her to drink more water and get plenty of sleep.",
    "They walked along the beach and collected shells until the sun went down.",
    "Twelve students passed the exam, and only one of them failed.",
    "Would you like to have dinner with us on Friday?",
    "The new restaurant on the corner serves fresh fish every day.",
    "I forgot my umbrella at home, and now my coat is completely wet.",
    "The museum is free for visitors under the age of eighteen.",
    "Can you send me the report before the end of the week?",
    "The train was delayed by forty minutes because of a problem with the signals.",
    "My grandmother keeps a photograph of her wedding day on the shelf.",
    "There are four hundred pages in this book, and I have read half of them.",
    "Why did the shop close so early this afternoon?",
    "The farmer drove his tractor slowly across the muddy field.",
    "We need to buy a new table for the dining room.",
    "The concert was so loud that my ears were ringing for hours.",
    "Where did you put the keys to the car?",
    "The price of the tickets went up by fifteen percent this year.",
    "She wrote a long letter to her friend who lives in another country.",
    "The cat sleeps on the warm windowsill every morning.",
    "Nobody knew the answer to the last question on the quiz.",
    "It takes about twenty minutes to walk from here to the town centre.",
    "Have you ever seen snow falling in the middle of spring?",
    "The baker opens his shop at six o'clock and sells out before noon.",
    "Our neighbours are painting their front door bright yellow.",
    "The teacher asked everyone to read the first chapter by Monday.",
    "Do you know how to fix a flat tyre on a bicycle?",
    "A strong wind blew the leaves off the trees during the night.",
    "My sister works as a nurse at the hospital on the hill.",
    "We counted nine boats sailing slowly out of the harbour.",
    "The soup needs a little more salt and a pinch of pepper.",
    "Which bus should I take to get to the university?",
    "He fixed the broken chair with some glue and a few nails.",
    "The river flooded the fields after three days of heavy rain.",
    "I would like a window seat if there is one available.",
    "The company hired thirty new workers at the start of the year.",
    "Please speak a little more slowly so that everyone can follow.",
    "When does the next ferry leave for the island?",
    "The little girl drew a picture of her family with a purple crayon.",
    "We stayed up late talking about our plans for the holidays.",
    "The mountain path was steep, narrow and covered with loose stones.",
    "Thank you very much for helping me carry these heavy boxes.",
    "Are you sure that you locked the back door before we left?",
)

# Each paragraph is spoken as one clip; at these rates each lasts over 30 s.
PARAGRAPHS: tuple[str, ...] = (
    "Every morning my neighbour takes her two dogs for a long walk through the park. "
    "They always stop at the same bench near the pond, where an old man feeds the ducks. "
    "The dogs sit quietly and watch the birds, but they never try to chase them. "
    "After about twenty minutes they walk back along the river and cross the little bridge. "
    "By the time they reach home, the shops on our street are starting to open. "
    "In winter, when the mornings are still dark, she carries a small torch so that she can see the path. "
    "She says that this walk is the most peaceful part of her whole day.",
    "Last year our town decided to turn an empty car park into a community garden. "
    "At first only a handful of people came to help, but soon there were more than fifty volunteers. "
    "They built wooden boxes for vegetables, planted fruit trees and laid a gravel path. "
    "Children from the local school now grow sunflowers there every spring. "
    "On the first Saturday of each month there is a small market where people swap seeds and plants. "
    "Many neighbours who had never spoken to each other are now good friends. "
    "Everyone agrees that it was the best idea the town has had in years.",
    "When you travel by train across the country, you see how quickly the landscape changes. "
    "In the morning you pass through busy cities with tall buildings and crowded platforms. "
    "By lunchtime the view opens up into wide green fields, farms and quiet villages. "
    "Later in the afternoon the railway climbs into the hills, and the air becomes cooler. "
    "Some passengers read or sleep, while others simply look out of the window. "
    "I always bring a good book, a sandwich and a flask of coffee. "
    "The whole journey takes nine hours, but it never feels boring to me.",
)

# Long clips go to these speakers (both genders, three accents). Three long
# clips and about four seconds per sentence keep the lossless file near 6 MB.
LONG_SPEAKERS: tuple[int, ...] = (0, 5, 14)


def synthesize(text: str, speaker: Speaker, espeak: str) -> np.ndarray:
    """espeak-ng's 22.05 kHz WAV on stdout, resampled to 16 kHz float32 mono."""
    amplitude = AMPLITUDE
    while True:
        cmd = [espeak, "-v", speaker.name, "-s", str(speaker.rate), "-a", str(amplitude), "--stdout", text]
        wav = subprocess.run(cmd, capture_output=True, check=True).stdout
        array, sr = sf.read(io.BytesIO(wav), dtype="float32")
        if array.size == 0:
            raise RuntimeError(f"espeak-ng produced no audio for {speaker.name}: {text!r}")
        if np.abs(array).max() < 0.99 or amplitude <= 10:
            break
        amplitude = amplitude * 4 // 5  # clipped inside espeak: synthesize quieter, never scale a clipped wave
    out = resample(array, sr, SAMPLE_RATE)
    peak = float(np.abs(out).max())
    return out * (0.98 / peak) if peak > 0.98 else out  # resampling can overshoot a near-full-scale peak


def flac_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.clip(array, -1.0, 1.0), SAMPLE_RATE, format="FLAC", subtype="PCM_16", compression_level=1.0)
    return buf.getvalue()


def plan() -> list[tuple[str, Speaker]]:
    """(text, speaker) in dataset order: short sentences round-robin, then the long clips.

    The short sentences cycle through the speakers with a stride that keeps
    neighbouring sentences on different accents and genders.
    """
    rows = [(text, SPEAKERS[(i * 7) % len(SPEAKERS)]) for i, text in enumerate(SENTENCES)]
    rows += [(text, SPEAKERS[s]) for text, s in zip(PARAGRAPHS, LONG_SPEAKERS)]
    return rows


SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("text", pa.string()),
        ("language", pa.string()),
        ("accent", pa.string()),
        ("accented", pa.bool_()),
        ("gender", pa.string()),
        ("voice", pa.string()),
        ("speaker", pa.string()),
        ("duration", pa.float64()),
    ]
)


def build(out: Path, espeak: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for n, (text, spk) in enumerate(plan(), start=1):
        sid = f"{PREFIX}_{n:04d}"
        array = synthesize(text, spk, espeak)
        rows.append(
            {
                "id": sid,
                "audio": {"bytes": flac_bytes(array), "path": f"{sid}.flac"},
                "text": text,
                "language": "en",
                "accent": spk.accent,
                "accented": spk.accented,
                "gender": spk.gender,
                "voice": spk.voice,
                "speaker": spk.name,
                "duration": round(len(array) / SAMPLE_RATE, 4),
            }
        )
        print(f"{sid} {spk.name:24s} {rows[-1]['duration']:6.2f}s  {text[:60]}", flush=True)
    long_clips = [r for r in rows if float(r["duration"]) > MIN_LONG_SECONDS]  # type: ignore[arg-type]
    if len(long_clips) < len(PARAGRAPHS):
        raise SystemExit(f"only {len(long_clips)} clips exceed {MIN_LONG_SECONDS} s; lengthen PARAGRAPHS")
    out.mkdir(parents=True, exist_ok=True)
    # Plain pyarrow schema, no Hugging Face "features" metadata: datasets then
    # leaves the audio struct as raw bytes instead of decoding it.
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    pq.write_table(table, out / "data.parquet", compression="zstd")
    return rows


def _tool_versions(espeak: str) -> str:
    version = subprocess.run([espeak, "--version"], capture_output=True, text=True).stdout.split("Data at")[0]
    import soxr

    return f"{version.strip()}; libsndfile {sf.__libsndfile_version__}; soxr {soxr.__version__}"


def write_readme(
    out: Path, rows: list[dict[str, object]], tools: str, asr: list[tuple[str, int, float]] | None
) -> None:
    """README.md from the rows themselves, so its counts can never drift from the data."""
    durations = sorted(float(r["duration"]) for r in rows)  # type: ignore[arg-type]
    size_mb = (out / "data.parquet").stat().st_size / 1e6
    accents: dict[str, dict[str, int]] = {}
    accented: dict[str, bool] = {}
    voices: dict[str, set[str]] = {}
    for r in rows:
        a = str(r["accent"])
        accents.setdefault(a, {"female": 0, "male": 0})[str(r["gender"])] += 1
        accented[a] = bool(r["accented"])
        voices.setdefault(a, set()).add(str(r["speaker"]))
    long_count = sum(d > MIN_LONG_SECONDS for d in durations)
    lines = [
        "# espeak_en: a small synthetic English speech set",
        "",
        f"{len(rows)} English utterances ({sum(durations) / 60:.1f} minutes) spoken by espeak-ng with "
        f"{len(accents)} accents and female/male voice variants, 16 kHz mono FLAC inside one parquet file "
        f"({size_mb:.2f} MB). It lets evalkit run a real speech-recognition evaluation on a fresh machine "
        "with no download. Being synthetic, it tests the pipeline and gives a rough, accent-sensitive "
        "signal; it is not a benchmark of human speech.",
        "",
        "## How it was made",
        "",
        "`python scripts/make_speech_set.py --out evalkit/assets/speech/espeak_en` (needs espeak-ng; "
        "users and tests do not). The sentences were written for evalkit: everyday English, numbers "
        "spelled out as words so that WER compares words rather than digit formatting, "
        f"{sum(t.endswith('?') for t in SENTENCES)} of the {len(SENTENCES)} sentences are questions. "
        f"The last {len(PARAGRAPHS)} clips are paragraphs of seven sentences spoken "
        "in one go, longer than 30 seconds, so that chunked transcription is exercised. Sentences are "
        "assigned to speakers round-robin; nothing is random, so re-running the script gives the same "
        "transcripts in the same order (and the same bytes with the same tool versions).",
        "",
        "espeak-ng writes 22.05 kHz 16-bit WAV (amplitude `-a "
        f"{AMPLITUDE}`, lowered further if a clip would clip); it is resampled to 16 kHz with soxr "
        "and stored as 16-bit FLAC. Voice variants were picked per accent among those that "
        "pocketsphinx's US English model recognises at least in part; sentences were not tuned to "
        "any recogniser.",
        "",
        f"Built with: {tools}.",
        "",
        "## Columns",
        "",
        "| column | type | meaning |",
        "|---|---|---|",
        "| `id` | string | `espeak_en_0001` ... |",
        "| `audio` | struct{bytes: binary, path: string} | FLAC file bytes (16 kHz mono); `path` is a file name only |",
        "| `text` | string | the transcript, exactly the text given to espeak-ng |",
        "| `language` | string | `en` |",
        "| `accent` | string | the espeak-ng voice family (see below) |",
        "| `accented` | bool | true for accents other than standard US / British English |",
        "| `gender` | string | `female` or `male` (from the espeak-ng variant) |",
        "| `voice` | string | espeak-ng voice id (`en` is espeak-ng's British English) |",
        "| `speaker` | string | voice+variant, e.g. `en-us+f5` |",
        "| `duration` | double | seconds |",
        "",
        "The file carries no Hugging Face `features` metadata, so `datasets` leaves `audio` as raw bytes "
        "(its own audio decoding needs torchcodec); evalkit decodes it with `evalkit.data.audio.decode`.",
        "",
        "## Counts",
        "",
        "| accent | accented | female | male | speakers |",
        "|---|---|---|---|---|",
    ]
    for a in sorted(accents):
        c = accents[a]
        lines.append(
            f"| {a} | {'yes' if accented[a] else 'no'} | {c['female']} | {c['male']} | {', '.join(sorted(voices[a]))} |"
        )
    females = sum(c["female"] for c in accents.values())
    lines += [
        f"| **all** | | {females} | {len(rows) - females} | |",
        "",
        "## Durations",
        "",
        f"- total {sum(durations):.1f} s; min {durations[0]:.2f} s; median {float(np.median(durations)):.2f} s; "
        f"mean {float(np.mean(durations)):.2f} s; max {durations[-1]:.2f} s",
        f"- {long_count} clips longer than {MIN_LONG_SECONDS:.0f} s",
        "",
    ]
    if asr:
        from importlib.metadata import version

        lines += [
            "## Recognisability check",
            "",
            f"pocketsphinx {version('pocketsphinx')} with its default US English model "
            "(`Decoder()` defaults, 16 kHz int16 PCM), "
            "scored with jiwer after whisper's English normalizer "
            "(`make_speech_set.py --check-asr N`):",
            "",
            "| accent | clips | WER |",
            "|---|---|---|",
        ]
        lines += [f"| {a} | {n} | {w:.3f} |" for a, n, w in asr]
        lines.append("")
    lines += [
        "## Licence",
        "",
        "Generated by espeak-ng from text written for evalkit: free to use, modify and redistribute; "
        "it ships with evalkit under evalkit's licence (Apache-2.0). espeak-ng's own licence "
        "(GPL-3.0) covers the program, not the speech it produces.",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines), encoding="utf-8")


def check_asr(rows: list[dict[str, object]], count: int) -> list[tuple[str, int, float]]:
    """Score pocketsphinx's default US English model on the first ``count`` clips.

    A sanity check that the speech is recognisable by an off-the-shelf
    offline recogniser (the default evalkit run scores one on this set).
    """
    import jiwer
    from pocketsphinx import Decoder
    from whisper_normalizer.english import EnglishTextNormalizer

    from evalkit.data.audio.decode import decode
    from evalkit.data.sample import Audio

    normalize = EnglishTextNormalizer()
    decoder = Decoder(loglevel="FATAL")
    by_accent: dict[str, tuple[list[str], list[str]]] = {}
    for row in rows[:count]:
        array, _ = decode(Audio(data=row["audio"]["bytes"]))  # type: ignore[index]
        pcm = (np.clip(array, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        ref, got = normalize(str(row["text"])), normalize(hyp.hypstr if hyp else "")
        refs, hyps = by_accent.setdefault(str(row["accent"]), ([], []))
        refs.append(ref)
        hyps.append(got)
        print(f"{row['id']} {row['speaker']:24s} WER={jiwer.wer(ref, got):.2f}  {got}", flush=True)
    all_refs = [r for refs, _ in by_accent.values() for r in refs]
    all_hyps = [h for _, hyps in by_accent.values() for h in hyps]
    summary = [(accent, len(refs), float(jiwer.wer(refs, hyps))) for accent, (refs, hyps) in sorted(by_accent.items())]
    summary.append(("all", len(all_refs), float(jiwer.wer(all_refs, all_hyps))))
    for accent, n, wer in summary:
        print(f"  {accent:24s} {n:3d} clips  WER={wer:.3f}")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("evalkit/assets/speech/espeak_en"))
    parser.add_argument("--espeak", default="espeak-ng", help="espeak-ng executable")
    parser.add_argument(
        "--check-asr",
        type=int,
        default=0,
        metavar="N",
        help="afterwards, transcribe the first N clips with pocketsphinx and print WER",
    )
    args = parser.parse_args()
    espeak = shutil.which(args.espeak)
    if espeak is None:
        raise SystemExit(f"{args.espeak} not found; install espeak-ng (apt-get install espeak-ng)")
    rows = build(args.out, espeak)
    size = (args.out / "data.parquet").stat().st_size
    total = sum(float(r["duration"]) for r in rows)  # type: ignore[arg-type]
    print(f"wrote {len(rows)} clips, {total:.1f} s of audio, {size / 1e6:.2f} MB -> {args.out / 'data.parquet'}")
    asr = check_asr(rows, args.check_asr) if args.check_asr else None
    write_readme(args.out, rows, _tool_versions(espeak), asr)


if __name__ == "__main__":
    main()
