"""A Ray job that runs one evalkit plan as N shards across the cluster, then merges them into one run folder.

Submit it from the folder your config's relative paths mean (the project folder), with evalkit installed on
the cluster's nodes (in their image, or add ``--runtime-env-json '{"pip": ["evalkit"]}'``)::

    ray job submit --address http://HEAD:8265 --working-dir . -- \\
        python examples/ray_job/driver.py config.yaml --shards 8 --output /shared/evalkit/merged

Each shard is one Ray task that runs ``evalkit run CONFIG --shard K/N`` as a subprocess, on whatever node Ray
places it (spread over the nodes), in that node's copy of the working directory. The copies' paths differ from
node to node; a plan's identity is its content (the config's settings, the runspec entries, the data), so the
shards still merge.

- **Environment.** The variables the config uses (``${VAR}``), evalkit's own (``EVALKIT_*``, ``HF_*``) and any
  ``--env NAME`` are taken from the driver's environment and given to every shard task through Ray's
  ``runtime_env`` (``env_vars``), so a task on another node expands the config as the driver would. A variable
  the config needs and the driver lacks stops the job before any task starts (exit 2). Ray shows a task's
  ``runtime_env`` to whoever can read the cluster's dashboard: a token passed this way is as private as the
  cluster.
- **Where each shard keeps its work.** Shard K's run folder and response store live in
  ``<shards-dir>/shard-K/`` on the node that runs it (default ``<output>-shards``, the same absolute path on
  every node). A task that runs again (Ray retried it, or you ran the job again with the same ``--output``)
  finds its run there and resumes it: answers already stored are not asked again, and a finished shard is not
  run again. On a filesystem every node mounts, that holds wherever the retry lands; on node-local disks, when
  it lands on the same node. ``<shards-dir>/shard-K/attempts.jsonl`` says where and how each try went.
- **Retries.** A shard that ends without a finished run (a crash, a lost node, an endpoint that was not there:
  evalkit's exit 5) is run again by Ray, up to ``--max-retries`` times, resuming as above. A mistake in the
  config, a runspec or a flag (evalkit's exit 2) is the same on every try and is never retried: the job stops
  with its message.
- **The merge.** A finished task returns its run folder as a tar archive through Ray's object store, so the
  nodes need no shared filesystem; the driver uses the folder in place when it sees it (the same node, or a
  shared filesystem), else unpacks it into ``<shards-dir>/copies/shard-K/``, and runs ``evalkit merge``,
  whose scores and confidence intervals equal one unsharded run's.

Where things must be: every model URL in the config reachable from every node; local datasets inside the
working directory (uploaded with it) or on a path every node mounts; hub datasets are read on each node.
``--output`` is on the node the driver runs on (the head node for ``ray job submit``): give an absolute
path, since a relative one means the job's copy of the working directory, which Ray deletes.

Without a cluster (``--address local``) Ray starts on this machine, which is how the example is tried out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import ray

from evalkit.config.envvars import referenced_names
from evalkit.util.yaml_safe import load_yaml_file

#: evalkit's exit code for a mistake in the config, a runspec or a flag: the same on every try
USER_ERROR = 2
#: variables evalkit reads itself, passed on when the driver has them
OWN_PREFIXES = ("EVALKIT_", "HF_")


class ShardFailed(RuntimeError):
    """A shard that ended without a finished run and may finish when run again: Ray retries it."""


class ShardRefused(RuntimeError):
    """evalkit refused the shard (exit 2: config, runspec or flag); no retry can change that."""


def _latest_run(work: Path) -> Path | None:
    runs = sorted(manifest.parent for manifest in work.glob("*/run.json"))
    return runs[-1] if runs else None


def _status(run_dir: Path | None) -> str | None:
    if run_dir is None:
        return None
    try:
        return str(json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("status"))
    except (OSError, ValueError, AttributeError):
        return None


def _note(work: Path, **attempt: Any) -> None:
    """One line per try in ``attempts.jsonl``: the node, what ran, how it ended."""
    with (work / "attempts.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"time": dt.datetime.now().isoformat(timespec="seconds"), **attempt}) + "\n")


@ray.remote(scheduling_strategy="SPREAD")
def run_shard(config: str, index: int, count: int, shards_dir: str) -> tuple[int, int | None, str, bytes]:
    """Shard ``index`` of ``count`` here: (index, evalkit's exit code or None if it had finished, run folder, .tar.gz).

    Exit codes 1 (a pair failed) and 3 (a result over max_failure_rate) still leave a finished run, which the
    merge takes and judges as a single run would be judged.
    """
    work = Path(shards_dir) / f"shard-{index}"
    work.mkdir(parents=True, exist_ok=True)
    previous = _latest_run(work)
    code: int | None = None
    if _status(previous) != "finished":
        command = [sys.executable, "-m", "evalkit", "run", config, "--quiet"]
        if previous is not None:  # an earlier try of this shard: finish it from its store
            command += ["--resume", str(previous)]
        else:
            command += ["--shard", f"{index}/{count}", "--output-dir", str(work)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        code = done.returncode
        previous = _latest_run(work)
        status = _status(previous)
        _note(
            work,
            node=socket.gethostname(),
            resumed="--resume" in command,
            exit=code,
            status=status,
            run=str(previous) if previous else None,
        )
        if code == USER_ERROR:
            raise ShardRefused(f"shard {index}/{count}: evalkit refused it (exit 2): {done.stderr.strip()[-3000:]}")
        if status != "finished":
            raise ShardFailed(
                f"shard {index}/{count}: evalkit exited {code}, run {status or 'not started'}: "
                f"{done.stderr.strip()[-3000:]}"
            )
    assert previous is not None
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        tar.add(previous, arcname=previous.name)
    return index, code, str(previous), archive.getvalue()


def _local_folder(run_dir: str, archive: bytes, copies: Path) -> Path:
    """The shard's run folder as this node sees it: in place when it is here and finished, else unpacked."""
    here = Path(run_dir)
    if _status(here) == "finished":
        return here
    into = copies / here.parent.name
    shutil.rmtree(into, ignore_errors=True)  # an earlier copy of this shard's: replaced whole
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(into, filter="data")  # an evalkit run folder: plain files only
    return into / here.name


def environment_for(config: Path, extra: list[str]) -> dict[str, str]:
    """The variables shard tasks need from the driver's environment; SystemExit(2) naming those it lacks."""
    used = referenced_names(load_yaml_file(config))
    missing = sorted(name for name, defaulted in used.items() if not defaulted and name not in os.environ)
    missing += sorted(name for name in extra if name not in os.environ)
    if missing:
        print(
            f"driver: {config} uses {', '.join('${' + name + '}' for name in missing)}, not set in the driver's "
            "environment; set them where the job starts (e.g. ray job submit --runtime-env-json "
            "'{\"env_vars\": {...}}'), as every shard task takes them from here",
            file=sys.stderr,
        )
        raise SystemExit(USER_ERROR)
    names = set(used) | set(extra) | {name for name in os.environ if name.startswith(OWN_PREFIXES)}
    return {name: os.environ[name] for name in sorted(names) if name in os.environ}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("config", help="the evalkit config (a path inside the working directory, or absolute)")
    parser.add_argument("--shards", type=int, default=8, help="how many shards (Ray tasks) to split the plan into")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path.home() / "evalkit-ray" / f"merged-{dt.datetime.now():%Y%m%d-%H%M%S}",
        help="the merged run folder, on the driver's node (default ~/evalkit-ray/merged-<time>); run the job "
        "again with the same --output to finish one that stopped",
    )
    parser.add_argument(
        "--shards-dir",
        type=Path,
        default=None,
        help="where each shard keeps its run folder and response store (shard-K/), the same absolute path on "
        "every node; on a filesystem all nodes mount, a retry on any node resumes (default <output>-shards)",
    )
    parser.add_argument("--cpus-per-shard", type=float, default=2, help="CPUs Ray reserves for each shard task")
    parser.add_argument(
        "--max-retries", type=int, default=2, help="how often Ray runs a shard again that did not finish"
    )
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME", help="pass this variable on to the tasks as well"
    )
    parser.add_argument(
        "--address",
        default=None,
        help="the Ray cluster (default: the job's own; `local` starts Ray on this machine for a try-out)",
    )
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be at least 1")
    if not Path(args.config).is_file():
        parser.error(f"{args.config}: config file not found")
    env_vars = environment_for(Path(args.config), args.env)
    output = args.output.expanduser().resolve()
    shards_dir = (args.shards_dir or output.with_name(output.name + "-shards")).expanduser().resolve()
    shards_dir.mkdir(parents=True, exist_ok=True)  # kept: a later try of this job finds its shards there

    ray.init(address=args.address)
    task = run_shard.options(
        num_cpus=args.cpus_per_shard,
        max_retries=args.max_retries,
        retry_exceptions=[ShardFailed],  # never ShardRefused: a config mistake is the same on every try
        runtime_env={"env_vars": env_vars},
    )
    pending = {task.remote(args.config, index, args.shards, str(shards_dir)): index for index in range(args.shards)}
    folders: dict[int, Path] = {}
    failed: dict[int, str] = {}
    refused = False
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        index = pending.pop(ready[0])
        try:
            _, code, run_dir, archive = ray.get(ready[0])
        except Exception as error:  # the task's own error after its retries (RayTaskError wraps it), or a lost node
            cause = getattr(error, "cause", None) or error
            refused = refused or isinstance(cause, ShardRefused)
            failed[index] = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
            print(f"shard {index}/{args.shards} did not finish: {failed[index]}", file=sys.stderr, flush=True)
            continue
        folders[index] = _local_folder(run_dir, archive, shards_dir / "copies")
        said = "already finished" if code is None else f"done (evalkit exit {code})"
        print(f"shard {index}/{args.shards} {said}, {len(folders)} of {args.shards}", flush=True)
    ray.shutdown()
    if failed:
        print(
            f"driver: {len(failed)} of {args.shards} shards did not finish; nothing merged. "
            + (
                "Correct the config and run the job again with a new --output"
                if refused
                else f"Run the job again with --output {output}: finished shards are kept, the others resume"
            ),
            file=sys.stderr,
        )
        return USER_ERROR if refused else 1

    merged = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalkit",
            "merge",
            *(str(folders[i]) for i in range(args.shards)),
            "--output",
            str(output),
        ],
        check=False,
    )
    print(f"merged run folder: {output} (evalkit merge exit {merged.returncode})", flush=True)
    return merged.returncode


if __name__ == "__main__":
    raise SystemExit(main())
