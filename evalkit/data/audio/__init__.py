"""Audio, carried encoded until needed.

decode: soundfile + soxr; pcm: 16 kHz pieces cut once for every model; workers: the process pool.
"""
