"""Samples a run could not ask because their endpoint was not there: not answers, and a resume asks them again.

A sample that failed with ``endpoint_unavailable`` (every replica of its model
stopped answering: the circuit breaker found it dead) says nothing about the
model: the server was down, moved, or out of reach. A run with such failures is
not finished: run.json says ``"incomplete"`` with their count, ``evalkit run``
exits with :data:`EXIT_INCOMPLETE`, and ``--resume`` (which sends to the URLs
the config names now) asks them again, with every other failed sample, since
failures are never kept in the response store. Scripts that rerun what did not
finish (examples/slurm) and ``evalkit merge`` (which takes only finished
shards) so never take a moved server for a model's failures.

A lone ``connection`` failure (refused or reset, a TLS certificate refused, an
answer cut off) does not make a run incomplete: it may be the server's own
doing, and a server that went away fails enough requests in a row to be found
dead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from evalkit.failures import FailureReason
from evalkit.report.results import ResultRow

#: failure reasons that say the endpoint was not there, not what the model answered
REASKABLE = frozenset({str(FailureReason.ENDPOINT_UNAVAILABLE)})
#: `evalkit run`'s exit code for a run that wrote everything but holds samples a resume can ask again
EXIT_INCOMPLETE = 5


def unanswered(rows: Iterable[ResultRow]) -> dict[str, int]:
    """Reason -> failed answers of ``rows`` (each model on each pair; no aggregate rows) a resume can ask again."""
    counts: Counter[str] = Counter()
    for row in rows:
        for reason, count in (row.failure_reasons or {}).items():
            if reason in REASKABLE and count:
                counts[reason] += int(count)
    return dict(sorted(counts.items()))
