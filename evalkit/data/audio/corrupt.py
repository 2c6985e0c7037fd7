"""Seeded audio corruptions for robustness runs: noise, babble, reverb, tempo, lossy codecs, clipping, packet loss.

Speech models are deployed into noisy rooms, phone lines and lossy codecs; these corruptions let any audio
dataset be measured there, level by level. Like the image corruptions (:mod:`evalkit.data.image.corrupt`),
every random number comes from the run's corruption seed, the corruption's name, the sample id and the clip's
place in the sample, never from global state, so a shard, a resume or the viewer makes the same samples.

A corruption works on the clip as the clean pair sends it (16 kHz mono int16 PCM, decoded once) and gives
16 kHz mono int16 PCM of its own, which is then cut and encoded like any clip: a chunked clip is corrupted
whole, before it is cut. Levels 1-5 (docs/robustness.md has the table):

- ``white_noise``, ``pink_noise`` (1/f power), ``babble`` (four other clips of the same dataset, each at equal
  loudness, summed): added at an SNR of 20, 15, 10, 5, 0 dB, measured over the whole clip as
  ``10 log10(sum(clean^2) / sum((sent - clean)^2))`` on the int16 samples, so the rounding to 16 bits is counted
  in and the SNR is the table's to within 0.01 dB (full-scale clipping of a loud clip at 0 dB can add a little).
- ``reverb``: convolved with a synthetic room impulse response (a direct path plus Gaussian noise decaying by
  60 dB over RT60 = 0.25, 0.5, 0.8, 1.2, 1.6 s), rescaled to the clean clip's RMS, cut to its length.
- ``speed`` / ``slow``: tempo times 1.1, 1.2, 1.35, 1.5, 1.75 (``slow``: divided by it) with the pitch kept,
  by WSOLA (waveform-similarity overlap-add, Verhelst & Roelands 1993): 24 ms Hann frames at a 12 ms output
  hop, each taken within +/-10 ms of its nominal place where it best continues the previous one.
- ``mp3`` (LAME, constant bitrate 64, 32, 24, 16, 8 kbit/s) and ``opus`` (libopus, target 32, 16, 12, 8, 6
  kbit/s): encoded and decoded by libsndfile (through soundfile), aligned to the clean clip and cut to its length.
- ``clipping``: the level driven up until 1%, 2%, 5%, 10%, 20% of the samples exceed the clean clip's peak,
  and those capped there.
- ``packet_loss``: each 20 ms frame (320 samples) dropped (zeroed) with probability 5%, 10%, 20%, 30%, 40%.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalkit.data.sample import Audio

if TYPE_CHECKING:
    import numpy as np

SAMPLE_RATE = 16000
#: the level used when a config names none (as for the image corruptions)
DEFAULT_SEVERITY = 3

SNR_DB = (20.0, 15.0, 10.0, 5.0, 0.0)
RT60_SECONDS = (0.25, 0.5, 0.8, 1.2, 1.6)
TEMPO = (1.1, 1.2, 1.35, 1.5, 1.75)
MP3_KBPS = (64, 32, 24, 16, 8)
OPUS_KBPS = (32, 16, 12, 8, 6)
CLIPPED_FRACTION = (0.01, 0.02, 0.05, 0.1, 0.2)
FRAME_LOSS = (0.05, 0.1, 0.2, 0.3, 0.4)
#: packet_loss's frame: 20 ms, a common VoIP packet
FRAME_SAMPLES = 320
#: how many other clips a babble mixes
BABBLE_TALKERS = 4
#: how many clips from the start of the dataset babble draws from (the same for every shard and resume)
BABBLE_POOL = 32

_NOISES = ("white_noise", "pink_noise", "babble")
#: every audio corruption by its evalkit name
AUDIO_CORRUPTIONS: tuple[str, ...] = (
    *_NOISES,
    "reverb",
    "speed",
    "slow",
    "mp3",
    "opus",
    "clipping",
    "packet_loss",
)
#: other spellings users bring
AUDIO_ALIASES = {
    "white": "white_noise",
    "gaussian_white_noise": "white_noise",
    "pink": "pink_noise",
    "babble_noise": "babble",
    "reverberation": "reverb",
    "tempo": "speed",
    "speed_up": "speed",
    "faster": "speed",
    "slow_down": "slow",
    "slowdown": "slow",
    "slower": "slow",
    "mp3_compression": "mp3",
    "opus_compression": "opus",
    "clip": "clipping",
    "packet_drop": "packet_loss",
    "dropouts": "packet_loss",
}


@dataclass(frozen=True, slots=True)
class Talker:
    """Another clip of the dataset a babble mixes in: its id, its audio, and where it came from (for the record)."""

    sample_id: str
    audio: Audio
    ref: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AudioCorruption:
    """One corruption at one level, seeded for one sample (picklable: it travels to the worker processes)."""

    name: str
    severity: int
    #: the sample's seed (:func:`evalkit.data.image.corrupt.sample_seed`); each clip mixes in its own place
    seed: int
    #: babble's other clips (chosen by :func:`choose_talkers`), empty for every other corruption
    talkers: tuple[Talker, ...] = ()

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "severity": self.severity, "seed": self.seed}


def choose_talkers(pool: list[Talker], sample_id: str, seed: int, own: Audio | None = None) -> tuple[Talker, ...]:
    """Babble's clips for one sample: a seeded draw from ``pool`` that never holds the sample itself.

    The pool is sorted by id first, so the draw depends on the seed and the pool's content, never on the
    order it was read in; a clip with the sample's id or the sample's own file is left out.
    """
    import numpy as np

    own_path = own.path if own is not None and own.data is None else None
    candidates = sorted(
        (t for t in pool if t.sample_id != sample_id and (own_path is None or t.audio.path != own_path)),
        key=lambda t: t.sample_id,
    )
    if not candidates:
        return ()
    rng = np.random.default_rng([seed, 7])
    picked = rng.choice(len(candidates), size=min(BABBLE_TALKERS, len(candidates)), replace=False)
    return tuple(candidates[int(i)] for i in picked)


def _rng(seed: int, place: int, stream: int = 0) -> np.random.Generator:
    import numpy as np

    # place: the turn (0, 1, ...) or in-context example (negative) the clip belongs to
    return np.random.default_rng([seed, place + 2**20, stream])


# --------------------------------------------------------------------------- additive noise at a target SNR


def _pink(n: int, rng: np.random.Generator) -> np.ndarray:
    """Gaussian noise whose power falls as 1/f: white noise shaped by 1/sqrt(f) in the frequency domain."""
    import numpy as np

    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.arange(spectrum.size, dtype=np.float64)
    freqs[0] = 1.0
    shaped = np.fft.irfft(spectrum / np.sqrt(freqs), n)
    return shaped - shaped.mean()


def _babble(n: int, talkers: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """The talkers at equal loudness, each looped to the clip's length from a seeded offset, summed."""
    import numpy as np

    total = np.zeros(n, dtype=np.float64)
    for voice in talkers:
        power = float(np.mean(voice * voice)) if voice.size else 0.0
        if power <= 0.0:
            continue
        start = int(rng.integers(0, voice.size))
        looped = np.resize(np.roll(voice, -start), n)
        total += looped / np.sqrt(power)
    return total


def add_at_snr(clean: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """int16 samples of ``clean`` (int16 values as floats) plus ``noise`` scaled so the sent SNR is ``snr_db``.

    The gain is corrected on the rounded result (a few passes), so the SNR a server measures against the clean
    clip as sent is the target, rounding included. A silent clip has no SNR: it is sent as it is.
    """
    import numpy as np

    signal_power = float(np.mean(clean * clean))
    noise_power = float(np.mean(noise * noise))
    if signal_power <= 0.0 or noise_power <= 0.0:
        return clean.copy()
    gain = np.sqrt(signal_power / (noise_power * 10.0 ** (snr_db / 10.0)))
    mixed = clean
    for _ in range(6):
        mixed = np.clip(np.rint(clean + gain * noise), -32768.0, 32767.0)
        error = mixed - clean
        error_power = float(np.mean(error * error))
        if error_power <= 0.0:
            break
        actual = 10.0 * np.log10(signal_power / error_power)
        if abs(actual - snr_db) < 0.002:
            break
        gain *= 10.0 ** ((actual - snr_db) / 20.0)
    return mixed


def snr_db(clean: np.ndarray, sent: np.ndarray) -> float:
    """The SNR of ``sent`` against ``clean`` (same length) in dB, as the noise corruptions define it."""
    import numpy as np

    clean = np.asarray(clean, dtype=np.float64)
    error = np.asarray(sent, dtype=np.float64) - clean
    return float(10.0 * np.log10(np.sum(clean * clean) / np.sum(error * error)))


# --------------------------------------------------------------------------- reverb


def room_impulse(rt60: float, rng: np.random.Generator) -> np.ndarray:
    """A synthetic room impulse response: the direct path, then Gaussian noise decaying 60 dB over ``rt60`` s."""
    import numpy as np

    length = int(rt60 * SAMPLE_RATE)
    t = np.arange(length, dtype=np.float64) / SAMPLE_RATE
    tail = 0.05 * rng.standard_normal(length) * np.exp(-6.907755 * t / rt60)  # ln(1000): 60 dB of amplitude
    tail[0] = 1.0
    return tail


def _reverb(x: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    import numpy as np
    from scipy.signal import fftconvolve

    wet = fftconvolve(x, room_impulse(RT60_SECONDS[level - 1], rng))[: x.size]
    before, after = float(np.sqrt(np.mean(x * x))), float(np.sqrt(np.mean(wet * wet)))
    return wet * (before / after) if after > 0.0 else wet


# --------------------------------------------------------------------------- tempo without pitch (WSOLA)

_WSOLA_FRAME = 384  # 24 ms
_WSOLA_HOP = _WSOLA_FRAME // 2  # the output hop: Hann frames at half overlap sum to a constant
_WSOLA_TOLERANCE = 160  # 10 ms either way


def wsola(x: np.ndarray, tempo: float) -> np.ndarray:
    """``x`` played ``tempo`` times as fast with its pitch kept (length ``round(len(x) / tempo)``).

    Each output frame is read from the input near its nominal place (``tempo`` input hops per output hop),
    shifted within the tolerance to where it best continues the previous frame's natural continuation
    (largest cross-correlation), so periods line up and no pitch changes.
    """
    import numpy as np

    n_out = max(1, int(round(x.size / tempo)))
    frame, hop, tol = _WSOLA_FRAME, _WSOLA_HOP, _WSOLA_TOLERANCE
    window = np.hanning(frame + 1)[:frame]  # periodic Hann
    frames = n_out // hop + 2
    padded = np.concatenate([np.zeros(tol), x, np.zeros(int(frames * hop * tempo) + frame + 2 * tol)])
    out = np.zeros(frames * hop + frame)
    weight = np.zeros_like(out)
    previous = tol
    for k in range(frames):
        nominal = tol + int(round(k * hop * tempo))
        if k == 0:
            position = nominal
        else:
            natural = padded[previous + hop : previous + hop + frame]
            region = padded[nominal - tol : nominal + tol + frame]
            score = np.correlate(region, natural, mode="valid")
            position = nominal - tol + int(np.argmax(score))
        out[k * hop : k * hop + frame] += padded[position : position + frame] * window
        weight[k * hop : k * hop + frame] += window
        previous = position
    out /= np.maximum(weight, 1e-3)
    return out[:n_out]


# --------------------------------------------------------------------------- lossy codecs


def _codec(x: np.ndarray, name: str, level: int) -> np.ndarray:
    """``x`` through MP3 or Opus at the level's bitrate and back, aligned to ``x`` and cut to its length."""
    import numpy as np
    import soundfile as sf

    buffer = io.BytesIO()
    if name == "mp3":
        # libsndfile's constant-bitrate LAME maps compression c to 160 - 152 c kbit/s at 16 kHz (1.0 is refused)
        level_c = min(0.99, (160.0 - MP3_KBPS[level - 1]) / 152.0)
        sf.write(buffer, x.astype(np.float32), SAMPLE_RATE, format="MP3", subtype="MPEG_LAYER_III",
                 compression_level=level_c, bitrate_mode="CONSTANT")  # fmt: skip
    else:
        # libsndfile's Opus maps compression c to a target of 256 - 250 c kbit/s per channel
        level_c = min(1.0, (256.0 - OPUS_KBPS[level - 1]) / 250.0)
        sf.write(buffer, x.astype(np.float32), SAMPLE_RATE, format="OGG", subtype="OPUS", compression_level=level_c)
    decoded, rate = sf.read(io.BytesIO(buffer.getvalue()), dtype="float64", always_2d=True)
    y = decoded.mean(axis=1)
    if rate != SAMPLE_RATE:
        import soxr

        y = np.asarray(soxr.resample(y, rate, SAMPLE_RATE, quality="HQ"), dtype=np.float64)
    if y.size > x.size:  # an encoder delay the decoder kept (LAME at low bitrates): find it and cut it off
        from scipy.signal import correlate

        spare = y.size - x.size
        head = x[: min(x.size, 4 * SAMPLE_RATE)]
        score = correlate(y[: head.size + spare], head, mode="valid", method="fft")  # direct: ~80 M products
        y = y[int(np.argmax(score)) :]
    if y.size < x.size:
        y = np.concatenate([y, np.zeros(x.size - y.size)])
    return y[: x.size]


# --------------------------------------------------------------------------- clipping and packet loss


def _clipping(x: np.ndarray, level: int) -> np.ndarray:
    import numpy as np

    magnitude = np.abs(x)
    peak = float(magnitude.max()) if x.size else 0.0
    k = int(np.ceil(CLIPPED_FRACTION[level - 1] * x.size))
    if k <= 0 or peak <= 0.0:
        return x.copy()
    threshold = float(np.partition(magnitude, x.size - k)[x.size - k])
    if threshold <= 0.0:
        return x.copy()
    return np.clip(x, -threshold, threshold) * (peak / threshold)


def dropped_frames(n_samples: int, level: int, rng: np.random.Generator) -> np.ndarray:
    """Which 20 ms frames ``packet_loss`` drops (a bool per frame; the last frame may be short)."""
    return rng.random(-(-n_samples // FRAME_SAMPLES)) < FRAME_LOSS[level - 1]


def _packet_loss(x: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    import numpy as np

    y = x.copy()
    for index in np.flatnonzero(dropped_frames(x.size, level, rng)):
        y[index * FRAME_SAMPLES : (index + 1) * FRAME_SAMPLES] = 0.0
    return y


# --------------------------------------------------------------------------- the whole clip


def check(corruption: AudioCorruption) -> None:
    if corruption.name not in AUDIO_CORRUPTIONS:
        raise ValueError(f"unknown audio corruption {corruption.name!r}; known: {', '.join(AUDIO_CORRUPTIONS)}")
    if not 1 <= corruption.severity <= 5:
        raise ValueError(f"corruption severity must be 1-5, got {corruption.severity}")


def corrupt_pcm(pcm: bytes, corruption: AudioCorruption, place: int, talkers: list[bytes] | None = None) -> bytes:
    """16 kHz mono int16 PCM ``pcm`` corrupted as ``corruption`` says, deterministically (blocking).

    ``talkers`` is babble's other clips as the same PCM, in :attr:`AudioCorruption.talkers`' order; one equal
    to the clip itself is left out, and ValueError says so when none is left.
    """
    import numpy as np

    check(corruption)
    name, level = corruption.name, corruption.severity
    clean = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    rng = _rng(corruption.seed, place)
    if name in _NOISES:
        if name == "white_noise":
            noise = rng.standard_normal(clean.size)
        elif name == "pink_noise":
            noise = _pink(clean.size, rng)
        else:
            voices = [np.frombuffer(t, dtype="<i2").astype(np.float64) for t in talkers or [] if t != pcm and t]
            if not voices:
                raise ValueError("babble needs another clip of the dataset than the sample's own; there is none")
            noise = _babble(clean.size, voices, rng)
        mixed = add_at_snr(clean, noise, SNR_DB[level - 1])
        return mixed.astype("<i2").tobytes()
    x = clean / 32768.0
    if name == "reverb":
        y = _reverb(x, level, rng)
    elif name == "speed":
        y = wsola(x, TEMPO[level - 1])
    elif name == "slow":
        y = wsola(x, 1.0 / TEMPO[level - 1])
    elif name in ("mp3", "opus"):
        y = _codec(x, name, level)
    elif name == "clipping":
        y = _clipping(x, level)
    else:
        y = _packet_loss(x, level, rng)
    return np.clip(np.rint(y * 32768.0), -32768, 32767).astype("<i2").tobytes()


def note(corruption: AudioCorruption, place: int, wav: bytes) -> dict[str, Any]:
    """What a sent entry says of a corrupted clip: the corruption, its place, the sha256 of the whole clip sent."""
    out: dict[str, Any] = {**corruption.describe(), "place": place, "sha256": hashlib.sha256(wav).hexdigest()}
    if corruption.talkers:
        out["talkers"] = [{"sample_id": t.sample_id, **t.ref} for t in corruption.talkers]
    return out
