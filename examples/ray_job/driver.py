"""A Ray job that runs one evalkit plan as N shards across the cluster, then merges them into one run folder.

Submit it from the folder your config's relative paths mean (the project folder), with evalkit installed on
the cluster's nodes (in their image, or add ``--runtime-env-json '{"pip": ["evalkit"]}'``)::

    ray job submit --address http://HEAD:8265 --working-dir . -- \\
        python examples/ray_job/driver.py config.yaml --shards 8 --output /shared/evalkit/merged

Each shard is one Ray task that runs ``evalkit run CONFIG --shard K/N`` as a subprocess, on whatever node Ray
places it (spread over the nodes), in that node's copy of the working directory, with a response store of its
own in a temporary folder there. When the run ends the task returns its run folder as a tar archive through
Ray's object store, so the nodes need no shared filesystem; the driver unpacks every shard next to the
merged folder (``<output>-shards/shard-K/``) and runs ``evalkit merge``, whose scores and confidence
intervals equal one unsharded run's. A shard that fails, or whose node is lost, is run again by Ray
(``--max-retries``), from the start.

Where things must be: every model URL in the config reachable from every node; local datasets inside the
working directory (uploaded with it) or on a path every node mounts; hub datasets are read on each node.
``--output`` is on the node the driver runs on (the head node for ``ray job submit``): give an absolute
path, since a relative one means the job's copy of the working directory, which Ray deletes.

Without a cluster (``--address local``) Ray starts on this machine, which is how the example is tested.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import ray


@ray.remote(scheduling_strategy="SPREAD")
def run_shard(config: str, index: int, count: int) -> tuple[int, int, bytes]:
    """``evalkit run CONFIG --shard index/count`` here; (index, evalkit's exit code, the run folder as .tar.gz).

    Exit codes 1 (a pair failed) and 3 (a result over max_failure_rate) still leave a finished run, which the
    merge takes and judges as a single run would be judged; anything else raises, so Ray runs the shard again.
    """
    work = Path(tempfile.mkdtemp(prefix=f"evalkit-shard-{index}-of-{count}-"))
    try:
        command = [sys.executable, "-m", "evalkit", "run", config, "--shard", f"{index}/{count}"]
        done = subprocess.run(
            [*command, "--output-dir", str(work), "--quiet"], capture_output=True, text=True, check=False
        )
        runs = [manifest.parent for manifest in work.glob("*/run.json")]
        finished = len(runs) == 1 and '"status": "finished"' in (runs[0] / "run.json").read_text(encoding="utf-8")
        if not finished:
            raise RuntimeError(
                f"shard {index}/{count}: evalkit exited {done.returncode} without a finished run: {done.stderr[-3000:]}"
            )
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            tar.add(runs[0], arcname=f"shard-{index}")
        return index, done.returncode, archive.getvalue()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _unpack(archive: bytes, into: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(into, filter="data")  # an evalkit run folder: plain files only
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("config", help="the evalkit config (a path inside the working directory, or absolute)")
    parser.add_argument("--shards", type=int, default=8, help="how many shards (Ray tasks) to split the plan into")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path.home() / "evalkit-ray" / f"merged-{dt.datetime.now():%Y%m%d-%H%M%S}",
        help="the merged run folder, on the driver's node (default ~/evalkit-ray/merged-<time>)",
    )
    parser.add_argument("--cpus-per-shard", type=float, default=2, help="CPUs Ray reserves for each shard task")
    parser.add_argument("--max-retries", type=int, default=2, help="how often Ray runs a failed shard again")
    parser.add_argument(
        "--address",
        default=None,
        help="the Ray cluster (default: the job's own; `local` starts Ray on this machine for a try-out)",
    )
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be at least 1")
    output = args.output.expanduser().resolve()
    shards_dir = output.with_name(output.name + "-shards")
    if shards_dir.exists():
        shutil.rmtree(shards_dir)  # an earlier try of this job's: replaced whole, never merged with
    shards_dir.mkdir(parents=True)

    ray.init(address=args.address)
    task = run_shard.options(num_cpus=args.cpus_per_shard, max_retries=args.max_retries, retry_exceptions=True)
    pending = [task.remote(args.config, index, args.shards) for index in range(args.shards)]
    codes: dict[int, int] = {}
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        index, code, archive = ray.get(ready[0])
        _unpack(archive, shards_dir)
        codes[index] = code
        print(f"shard {index}/{args.shards} done (evalkit exit {code}), {len(codes)} of {args.shards}", flush=True)
    ray.shutdown()

    folders = [str(shards_dir / f"shard-{index}") for index in range(args.shards)]
    merged = subprocess.run([sys.executable, "-m", "evalkit", "merge", *folders, "--output", str(output)], check=False)
    print(f"merged run folder: {output} (evalkit merge exit {merged.returncode})", flush=True)
    return merged.returncode


if __name__ == "__main__":
    raise SystemExit(main())
