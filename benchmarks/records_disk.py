"""Disk use of a run's records/ for N text samples x 3 models x 2 metrics, per checkout.

    python -m benchmarks.records_disk 2000 /path/to/checkout_a /path/to/checkout_b

Each checkout runs the same plan (tests/helpers' synthetic text set, evalkit's test server, no
response store) in a child process with that checkout first on PYTHONPATH, and the bytes of
records/ (and of records/sent/ within it) are printed: issue 32's bound is that what records say
was sent costs at most about 2x the disk of records without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent / "tests"
_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from helpers import config_for, model_entry, run, text_set
    from evalkit.testing import start_test_server
    import evalkit
    tmp, n = Path(sys.argv[1]), int(sys.argv[2])
    specs = text_set(tmp, n, words=12)
    server = start_test_server()
    try:
        models = [model_entry(f"model-{i}", server.base_url, batch_size=64) for i in range(3)]
        out = run(config_for(tmp, specs, models, [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]), no_cache=True)
    finally:
        server.stop()
    records = out.run_dir / "records"
    total = sum(p.stat().st_size for p in records.rglob("*.jsonl"))
    sent = sum(p.stat().st_size for p in (records / "sent").glob("*.jsonl")) if (records / "sent").is_dir() else 0
    n_records = sum(1 for p in records.glob("*.jsonl") for _ in p.open())
    print(evalkit.__file__, total, sent, n_records)
    """
)


def main(argv: list[str]) -> int:
    n, roots = int(argv[0]), argv[1:] or ["."]
    for root in roots:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "PYTHONPATH": str(Path(root).resolve())}
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, tmp, str(n), str(_TESTS)],
                env=env,
                capture_output=True,
                text=True,
                cwd=tmp,
                check=False,
            )
            lines = out.stdout.strip().splitlines()
            print(
                root,
                "evalkit, records/ bytes, records/sent/ bytes, records:",
                lines[-1] if lines else out.stderr[-2000:],
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
