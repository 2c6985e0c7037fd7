"""The process's entry point (the ``evalkit`` command, ``python -m evalkit``): a finished run ends at once.

When ``evalkit run`` returns, everything it keeps is written, flushed and
closed: records and sent entries, results, the report, the response store's
commits. What would follow is the interpreter tearing down every module and
object the run made, about 0.07 s of CPU on a 2-core machine: over a
5,000-request run, ~14 µs a request, more than a request's sent entry and
record cost together (BENCHMARKS.md, issue 45). So after a run the process
runs its exit handlers (logging's flush and close, weakref finalizers,
multiprocessing's), flushes stdout and stderr, and ends with the run's exit
code. Other commands end as Python ends, and an in-process caller
(:func:`evalkit.cli.main.main`, the API) is never ended.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

from evalkit.cli.main import main


def console(argv: list[str] | None = None) -> int:
    """``evalkit ...`` as a process: :func:`~evalkit.cli.main.main`, then, after a run, :func:`end_process`."""
    args = list(sys.argv[1:] if argv is None else argv)
    code = main(args)
    if args[:1] == ["run"]:
        end_process(code)
    return code


def end_process(code: int) -> NoReturn:
    """Run the exit handlers, flush the standard streams and end the process with ``code``, without teardown."""
    _flush()
    # first what the interpreter does first: the executors' own exit hooks (they tell a process pool's workers
    # to stop) and the join of non-daemon threads; without it multiprocessing's exit handler below waits
    # forever for pool workers nobody told to stop (a dry run's media workers)
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    _flush()  # what an exit handler printed
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that left (`evalkit run ... | head`), a closed stream
            stream.flush()
