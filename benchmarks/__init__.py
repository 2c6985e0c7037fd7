"""evalkit's benchmark suite: `python -m benchmarks` measures and writes BENCHMARKS.md.

Modules: ``overhead`` (a, a'), ``latency`` (b, e), ``replicas`` (c), ``memory``
(d, e), ``profile`` (py-spy of a); ``raw_loop`` is the yardstick client and
``harness`` runs evalkit's runner in-process with an event-loop lag probe, a
memory probe and a GC clock. Every client and server is its own process on
127.0.0.1; nothing here changes evalkit.
"""
