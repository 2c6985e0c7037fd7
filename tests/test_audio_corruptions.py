"""Audio robustness variants: each corruption's effect, the SNR a server receives, sweeps, shards and resume.

The end-to-end runs use the shipped espeak-ng clips (``espeak_en_asr``) against the test server, which writes
every clip it receives to a folder (``received_audio``) named by the sha256 of its bytes: what the sent entry
records. The server answers a clean clip's transcript when it hears that exact clip (an audio-fingerprint
rule) and "nothing" otherwise, so the clean pair scores a WER of 0 and every corrupted variant 1.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
from helpers import ROOT, model_entry, run, write_config

from evalkit.data.audio.corrupt import (
    AUDIO_CORRUPTIONS,
    CLIPPED_FRACTION,
    FRAME_SAMPLES,
    RT60_SECONDS,
    SNR_DB,
    TEMPO,
    AudioCorruption,
    Talker,
    choose_talkers,
    corrupt_pcm,
    dropped_frames,
    snr_db,
    wsola,
)
from evalkit.data.audio.corrupted import corrupt_turn_audio, remake_audio
from evalkit.data.audio.pcm import wav_from_pcm16
from evalkit.data.image.corrupt import sample_seed
from evalkit.data.sample import Audio
from evalkit.testing.audio import audio_fingerprint

RATE = 16000
PARQUET = ROOT / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"


def _pcm(x: np.ndarray) -> bytes:
    return np.clip(np.rint(x * 32768.0), -32768, 32767).astype("<i2").tobytes()


def _samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2").astype(np.float64) / 32768.0


def _tone(seconds: float, hz: float = 440.0, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return amplitude * np.sin(2 * np.pi * hz * t)


def _speech(n: int = 6) -> list[tuple[str, str, bytes]]:
    rows = pq.read_table(PARQUET, columns=["id", "text", "audio"]).to_pylist()[:n]
    return [(str(r["id"]), str(r["text"]), r["audio"]["bytes"]) for r in rows]


def _wav_pcm(data: bytes) -> bytes:
    samples, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == RATE
    return samples.astype("<i2").tobytes()


def _dominant_hz(x: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return float(np.argmax(spectrum) * RATE / x.size)


# --------------------------------------------------------------------------- one property per corruption


@pytest.mark.parametrize("name", ["white_noise", "pink_noise", "babble"])
@pytest.mark.parametrize("level", [1, 2, 3, 4, 5])
def test_noises_are_added_at_the_tables_snr(name: str, level: int) -> None:
    clips = [_wav_pcm(data) for _, _, data in _speech(5)]
    talkers = tuple(Talker(str(i), Audio()) for i in range(1, 5)) if name == "babble" else ()
    corruption = AudioCorruption(name, level, 11, talkers)
    out = corrupt_pcm(clips[0], corruption, 0, clips[1:] if name == "babble" else None)
    assert len(out) == len(clips[0])
    assert snr_db(_samples(clips[0]), _samples(out)) == pytest.approx(SNR_DB[level - 1], abs=0.01)


def test_pink_noise_has_more_power_low_than_high_and_white_noise_is_flat() -> None:
    silence_floor = np.full(RATE * 2, 0.1)  # a constant clip: whatever varies is the noise
    clean = _pcm(silence_floor)
    for name, expect_tilt in (("pink_noise", True), ("white_noise", False)):
        noise = _samples(corrupt_pcm(clean, AudioCorruption(name, 5, 3), 0)) - _samples(clean)
        power = np.abs(np.fft.rfft(noise)) ** 2
        low, high = power[10 : power.size // 8].mean(), power[power.size // 2 :].mean()
        assert (low / high > 10) == expect_tilt


def test_babble_never_uses_the_sample_itself_and_its_choice_is_seeded() -> None:
    pool = [Talker(f"s{i}", Audio(path=f"/data/{i}.wav")) for i in range(10)]
    chosen = choose_talkers(pool, "s3", 99)
    assert len(chosen) == 4 and "s3" not in {t.sample_id for t in chosen}
    assert chosen == choose_talkers(list(reversed(pool)), "s3", 99)  # the pool's order does not matter
    assert chosen != choose_talkers(pool, "s3", 100)
    # the sample's own file under another id is left out too
    assert "s5" not in {t.sample_id for t in choose_talkers(pool, "x", 1, Audio(path="/data/5.wav"))}
    assert choose_talkers([Talker("only", Audio())], "only", 1) == ()
    # a talker whose audio is the clip itself adds nothing: none left is an error, not a silent self-mix
    clip = _wav_pcm(_speech(1)[0][2])
    with pytest.raises(ValueError, match="another clip"):
        corrupt_pcm(clip, AudioCorruption("babble", 3, 1, (Talker("dup", Audio()),)), 0, [clip])


@pytest.mark.parametrize("level", [1, 3, 5])
def test_speed_and_slow_change_the_duration_by_the_factor_and_keep_the_pitch(level: int) -> None:
    clean = _pcm(_tone(2.0, 440.0))
    for name, factor in (("speed", TEMPO[level - 1]), ("slow", 1 / TEMPO[level - 1])):
        out = _samples(corrupt_pcm(clean, AudioCorruption(name, level, 0), 0))
        assert out.size == round(2.0 * RATE / factor)
        assert _dominant_hz(out) == pytest.approx(440.0, abs=2.0)
    # resampling would have moved the pitch: WSOLA keeps it on a chirp-free two-tone signal too
    two = _tone(1.0, 300.0) + _tone(1.0, 1200.0, 0.1)
    faster = wsola(two, 1.5)
    spectrum = np.abs(np.fft.rfft(faster * np.hanning(faster.size)))
    hz = np.arange(spectrum.size) * RATE / faster.size
    low, high = hz < 700, hz >= 700
    assert hz[low][np.argmax(spectrum[low])] == pytest.approx(300, abs=3)
    assert hz[high][np.argmax(spectrum[high])] == pytest.approx(1200, abs=3)


@pytest.mark.parametrize("level", [1, 5])
def test_clipping_caps_the_amplitude_at_the_clean_peak(level: int) -> None:
    clean_x = _tone(1.0, 220.0, 0.5) * np.linspace(0.2, 1.0, RATE)
    clean = _pcm(clean_x)
    out = _samples(corrupt_pcm(clean, AudioCorruption("clipping", level, 0), 0))
    peak = np.abs(_samples(clean)).max()
    assert np.abs(out).max() <= peak + 1 / 32768
    at_cap = np.mean(np.abs(out) >= peak - 1 / 32768)
    assert at_cap >= CLIPPED_FRACTION[level - 1] * 0.9


def test_packet_loss_zeroes_whole_20_ms_frames_and_keeps_the_others() -> None:
    clean_x = _tone(2.0, 300.0) + 0.01  # never zero
    clean = _pcm(clean_x)
    corruption = AudioCorruption("packet_loss", 4, 21)
    out = _samples(corrupt_pcm(clean, corruption, 0))
    dropped = dropped_frames(len(clean) // 2, 4, np.random.default_rng([21, 2**20, 0]))
    assert 0.15 < dropped.mean() < 0.45
    for index, gone in enumerate(dropped):
        frame = out[index * FRAME_SAMPLES : (index + 1) * FRAME_SAMPLES]
        same = _samples(clean)[index * FRAME_SAMPLES : (index + 1) * FRAME_SAMPLES]
        assert (not frame.any()) if gone else np.array_equal(frame, same)


@pytest.mark.parametrize("name", ["mp3", "opus"])
def test_codecs_change_the_bytes_keep_the_duration_and_lose_more_at_higher_levels(name: str) -> None:
    clean = _wav_pcm(_speech(1)[0][2])
    errors = []
    for level in (1, 5):
        out = corrupt_pcm(clean, AudioCorruption(name, level, 0), 0)
        assert len(out) == len(clean) and out != clean
        errors.append(-snr_db(_samples(clean), _samples(out)))
        assert snr_db(_samples(clean), _samples(out)) > 0  # aligned: no encoder delay left
    assert errors[1] > errors[0]


def test_reverb_lengthens_the_decay_more_at_higher_levels() -> None:
    burst = np.concatenate([_tone(0.3, 500.0), np.zeros(RATE)])
    clean = _pcm(burst)
    tails = []
    for level in (1, 5):
        out = _samples(corrupt_pcm(clean, AudioCorruption("reverb", level, 4), 0))
        assert out.size == burst.size
        after = out[int(0.3 * RATE) + int(0.1 * RATE) : int(0.3 * RATE) + int(0.2 * RATE)]  # 100-200 ms after
        tails.append(float(np.sqrt(np.mean(after**2))))
    assert tails[0] > 0.0 and tails[1] > 4 * tails[0]
    assert RT60_SECONDS[4] > RT60_SECONDS[0]


@pytest.mark.parametrize("name", AUDIO_CORRUPTIONS)
def test_every_corruption_is_deterministic_and_seeded(name: str) -> None:
    clips = [_wav_pcm(data) for _, _, data in _speech(3)]
    talkers = tuple(Talker(str(i), Audio()) for i in (1, 2)) if name == "babble" else ()
    extra = clips[1:] if name == "babble" else None
    one = corrupt_pcm(clips[0], AudioCorruption(name, 3, 5, talkers), 0, extra)
    assert one == corrupt_pcm(clips[0], AudioCorruption(name, 3, 5, talkers), 0, extra)
    assert one != clips[0]
    if name in ("white_noise", "pink_noise", "babble", "reverb", "packet_loss"):  # the ones that draw numbers
        assert one != corrupt_pcm(clips[0], AudioCorruption(name, 3, 6, talkers), 0, extra)
        assert one != corrupt_pcm(clips[0], AudioCorruption(name, 3, 5, talkers), 1, extra)


def test_a_chunked_clip_is_corrupted_whole_then_cut_and_remade_from_its_source() -> None:
    _, _, data = _speech(1)[0]
    corruption = AudioCorruption("white_noise", 2, 77)
    shapes = [(None, "chunk"), (2.0, "chunk")]
    prepared = corrupt_turn_audio({0: Audio(data=data)}, shapes, frozenset({"wav"}), corruption)
    (whole,) = prepared.parts(0, None, "chunk")
    pieces = prepared.parts(0, 2.0, "chunk")
    assert len(pieces) > 1
    assert b"".join(p.wav[44:] for p in pieces if p.wav) == whole.wav[44:]  # type: ignore[index]
    note = prepared.notes[0]
    assert note["sha256"] == whole.sha256 and (note["name"], note["severity"], note["seed"]) == ("white_noise", 2, 77)
    assert remake_audio(Audio(data=data), note) == whole.wav
    with pytest.raises(ValueError, match="sha256 mismatch"):
        remake_audio(Audio(data=_speech(2)[1][2]), note)
    # a sent entry comes from a run folder: one naming more clips than babble mixes is refused before any is read
    many = {**note, "name": "babble", "talkers": [{"sample_id": str(i)} for i in range(5000)]}
    with pytest.raises(ValueError, match="at most 4 other clips"):
        remake_audio(Audio(data=data), many, [Audio(data=data)] * 5000)


# --------------------------------------------------------------------------- end to end against the test server


def _pair(levels: list[int], names: list[str], seed: int = 3) -> list[Any]:
    return ["espeak_en_asr", "word_error_rate", {"corruptions": names, "corruption_severity": levels,
                                                 "corruption_seed": seed}]  # fmt: skip


def _server(make_server, folder: Path) -> Any:
    rules = [{"audio_fingerprint": audio_fingerprint(data), "answer": text} for _, text, data in _speech(6)]
    return make_server({"answers": rules, "default_answer": "nothing"}, received_audio=str(folder))


def _config(tmp: Path, url: str, pair: list[Any], n: int = 6, **model: Any) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return write_config(
        tmp / "config.yaml",
        {
            "dataset_metric": [pair],
            "models": [model_entry("m", url, **model)],
            "filters": {"num_samples": n},
            "output_dir": str(tmp / "runs"),
        },
    )


def _records(run_dir: Path, dataset: str) -> list[dict[str, Any]]:
    out = []
    for path in (run_dir / "records").glob("*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        out += [r for r in rows if r.get("dataset") == dataset]
    return sorted(out, key=lambda r: r["sample_id"])


def _sent(run_dir: Path) -> dict[str, dict[str, Any]]:
    entries = {}
    for path in (run_dir / "records" / "sent").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            entries[entry["key"]] = entry
    return entries


def _audio_refs(entry: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["audio"] for m in entry["messages"] for p in m["content"] if p["type"] == "audio"]


def test_a_sweep_runs_a_pair_per_level_and_the_server_receives_the_tables_snr(tmp_path: Path, make_server) -> None:
    received = tmp_path / "received"
    server = _server(make_server, received)
    pair = _pair([1, 3, 5], ["white_noise", "babble"])
    outcome = run(_config(tmp_path, server.base_url, pair))
    rows = {row.dataset: row for row in outcome.rows}
    variants = [f"espeak_en_asr@{n}-{level}" for n in ("white_noise", "babble") for level in (1, 3, 5)]
    assert set(rows) == {"espeak_en_asr", *variants}
    assert rows["espeak_en_asr"].score == 0.0
    clean_pcm = {sid: _wav_pcm(data) for sid, _, data in _speech(6)}
    sent = _sent(outcome.run_dir)
    for name in variants:
        corruption, level = name.split("@")[1].rsplit("-", 1)
        robustness = rows[name].details["robustness"]
        assert (robustness["corruption"], robustness["severity"]) == (corruption, int(level))
        assert rows[name].score == 1.0 and robustness["change"] == 1.0
        assert robustness["paired"]["n_paired"] == 6 and robustness["paired"]["worsened"] == 6
        records = _records(outcome.run_dir, name)
        assert len(records) == 6
        for record in records:
            seed = sample_seed(3, corruption, record["sample_id"])
            assert record["corruption"] == {"name": corruption, "severity": int(level), "seed": seed}
            (ref,) = _audio_refs(sent[record["sent"]])
            note = ref["corruption"]
            assert (note["name"], note["severity"], note["seed"], note["sha256"]) == (
                corruption, int(level), seed, ref["sha256"]
            )  # fmt: skip
            # what the server received, measured against the clean clip as the clean pair sends it
            heard = _wav_pcm((received / f"{ref['sha256']}.wav").read_bytes())
            clean = clean_pcm[record["sample_id"]]
            measured = snr_db(_samples(clean), _samples(heard))
            assert measured == pytest.approx(SNR_DB[int(level) - 1], abs=0.05)
            if corruption == "babble":
                talkers = note["talkers"]
                assert len(talkers) == 4 and record["sample_id"] not in {t["sample_id"] for t in talkers}
    # the report and the viewer draw the score against the level, with each level's paired test
    from evalkit.view.links import Links
    from evalkit.view.pages import run_page
    from evalkit.view.viewer import Viewer

    report = (outcome.run_dir / "report.html").read_text()
    page = run_page(Viewer([outcome.run_dir.parent]).run(outcome.run_dir.name), Links())
    for html in (report, page):
        assert "<h2>Robustness</h2>" in html
        assert html.count('<circle class="point"') == 2 * 4  # two corruptions, clean + three levels, one model
        assert "m, level 5: 1; paired test p = " in html and "espeak_en_asr × word_error_rate: babble" in html


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_every_corruption_reaches_chat_and_transcription_and_chunks_and_is_remade(tmp_path: Path, make_server) -> None:
    from evalkit.util.confine import Roots
    from evalkit.view.media import MediaMissing, MediaPart, audio_wav

    received = tmp_path / "received"
    server = _server(make_server, received)
    pair = _pair([2], list(AUDIO_CORRUPTIONS))
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [pair],
            "models": [
                model_entry("chat", server.base_url),
                model_entry("asr", server.base_url, inference_type="transcription", chunk_size=2),
            ],
            "filters": {"num_samples": 3},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    outcome = run(config)
    sent = _sent(outcome.run_dir)
    sources = {sid: data for sid, _, data in _speech(40)}
    roots = Roots([PARQUET.parent, outcome.run_dir])
    for name in AUDIO_CORRUPTIONS:
        dataset = f"espeak_en_asr@{name}-2"
        records = _records(outcome.run_dir, dataset)
        assert {r["model"] for r in records} == {"chat", "asr"} and len(records) == 6
        for record in records:
            assert record["score"] == 1.0, (name, record.get("error"))
            (ref,) = _audio_refs(sent[record["sent"]])
            shas = ref.get("chunk_sha256") or [ref["sha256"]]
            for sha in shas:  # every piece the server got is a piece of the corrupted clip
                assert (received / f"{sha}.wav").is_file()
            talkers = [Audio(data=sources[t["sample_id"]]) for t in ref["corruption"].get("talkers", [])]
            whole = remake_audio(Audio(data=sources[record["sample_id"]]), ref["corruption"], talkers)
            if len(shas) == 1:
                assert (received / f"{shas[0]}.wav").read_bytes() == whole
            # the viewer serves the corrupted clip as sent (and the clean one beside it)
            part = MediaPart(0, "audio", ref, 0, dataset, roots)
            shown = audio_wav(part)
            assert _wav_pcm(shown) == _wav_pcm(whole)[: len(_wav_pcm(shown))]
            clean = audio_wav(part, clean=True)
            assert _wav_pcm(clean) == _wav_pcm(sources[record["sample_id"]])
    # a run folder is untrusted: a sent entry naming thousands of babble clips is refused before one is read
    (babble,) = _audio_refs(sent[_records(outcome.run_dir, "espeak_en_asr@babble-2")[0]["sent"]])
    many = babble["corruption"]["talkers"] * 2000
    hostile = {**babble, "corruption": {**babble["corruption"], "talkers": many}}
    with pytest.raises(MediaMissing, match="more than the 4 other clips"):
        audio_wav(MediaPart(0, "audio", hostile, 0, "espeak_en_asr@babble-2", roots))
    # the sample page plays the clean clip beside the corrupted one, both through the viewer's media parts
    from evalkit.view.links import Links
    from evalkit.view.pages import sample_page
    from evalkit.view.viewer import Viewer

    viewer = Viewer([outcome.run_dir.parent], [PARQUET.parent])
    rid, dataset = outcome.run_dir.name, "espeak_en_asr@reverb-2"
    sample_id = _records(outcome.run_dir, dataset)[0]["sample_id"]
    data = viewer.sample(rid, dataset, "word_error_rate", sample_id)
    page = sample_page(data, Links())
    assert page.count("clean source") == 2 and "reverb level 2" in page  # chat and transcription
    key = data["conversations"][0]["key"]
    heard, _ = viewer.media_part(rid, dataset, key, "0")
    source, _ = viewer.media_part(rid, dataset, key, "0-clean")
    assert heard != source and _wav_pcm(source) == _wav_pcm(sources[sample_id])


def test_shards_and_a_resume_send_the_same_corrupted_audio(tmp_path: Path, make_server) -> None:
    from evalkit.run.shard import Shard

    server = _server(make_server, tmp_path / "received")
    pair = _pair([4], ["babble", "packet_loss"], seed=9)
    config = _config(tmp_path / "whole", server.base_url, pair)

    def shas(run_dir: Path) -> dict[tuple[str, str], str]:
        sent = _sent(run_dir)
        out = {}
        for dataset in ("espeak_en_asr@babble-4", "espeak_en_asr@packet_loss-4"):
            for record in _records(run_dir, dataset):
                (ref,) = _audio_refs(sent[record["sent"]])
                out[(dataset, record["sample_id"])] = ref["sha256"]
        return out

    whole = shas(run(config).run_dir)
    assert len(whole) == 12
    parts: dict[tuple[str, str], str] = {}
    for k in range(3):
        parts.update(shas(run(config, shard=Shard(k, 3)).run_dir))
    assert parts == whole
    # a resumed run (the store answers) records the same audio
    again = run(config)
    assert shas(again.run_dir) == whole and again.requests_sent == 0


def test_corruption_severity_list_and_audio_needs_an_audio_column(tmp_path: Path) -> None:
    from evalkit.errors import ConfigError
    from evalkit.prompts.chef.recipes import split_recipe

    _, recipe = split_recipe({"corruptions": ["Reverberation", "white"], "corruption_severity": [5, 1, 5]}, "w")
    assert recipe.corruptions == ("reverb", "white_noise") and recipe.sweep == (5, 1)
    _, every = split_recipe({"audio_crp": True}, "w")
    assert every.corruptions == AUDIO_CORRUPTIONS
    for bad in ([], [0], "3", [6]):
        with pytest.raises(ConfigError, match="corruption_severity"):
            split_recipe({"corruptions": ["mp3"], "corruption_severity": bad}, "w")


def test_run_audio_job_pickles_a_corruption_with_talkers() -> None:
    from evalkit.data.audio.workers import run_audio_job, shutdown_audio_workers

    clips = _speech(3)
    talkers = tuple(Talker(sid, Audio(data=data), {"sample_id": sid}) for sid, _, data in clips[1:])
    corruption = AudioCorruption("babble", 1, 5, talkers)
    prepared = asyncio.run(
        run_audio_job(corrupt_turn_audio, {0: Audio(data=clips[0][2])}, [(None, "chunk")], frozenset({"b64"}),
                      corruption)
    )  # fmt: skip
    shutdown_audio_workers()
    (part,) = prepared.parts(0, None, "chunk")
    assert part.b64 and prepared.notes[0]["talkers"][0]["sample_id"] == clips[1][0]
    assert wav_from_pcm16(b"")[:4] == b"RIFF"
