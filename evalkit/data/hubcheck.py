"""Does each catalogue entry still match the hub? Where its repo lives, whether it is gated, its subset, split, columns.

Hub repos move (lmms-lab's sets went to lmms-lab-encoder and lmms-lab-audio in
2026; the old ids redirect only for a while), get gated, and rename columns;
an entry that still names the old state breaks for every user at once and
nothing says why. ``evalkit catalogue check`` asks the hub, per repo, two
documented questions and compares the answers with the entries:

- the hub API, ``GET {HF_ENDPOINT}/api/datasets/{repo}`` (what
  ``HfApi.dataset_info`` reads; ``/revision/{rev}`` when the entry pins one):
  whether the repo exists, its canonical id (a moved repo answers with a
  redirect and with its new ``id``), ``gated`` (false, "auto" or "manual"),
  ``private`` and ``disabled``;
- the dataset viewer, ``GET {viewer}/info?dataset={id}``: per configuration
  (subset), its ``features`` (the columns) and ``splits`` with
  ``num_examples`` (the row count).

All network access goes through one :class:`Transport` (``get`` of a URL
with query parameters, redirects not followed), so tests replay recorded
answers; the default is the hub library's own HTTP session (its proxies,
certificates, user agent, and the user's token, so a gated repo the user
was granted is read as the user reads it). A transport that gets no answer
raises; the checker turns that into :class:`HubUnreachable`, and the command
stops with one message naming the endpoint and why.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import quote, urljoin

from evalkit.catalog import DatasetSpec
from evalkit.data.hubcache import HubUnreachable
from evalkit.data.hubprobe import failure_reason, hub_endpoint

#: the public dataset viewer (the datasets-server); ``EVALKIT_DATASETS_SERVER`` names another (a mirror, a test)
DEFAULT_VIEWER = "https://datasets-server.huggingface.co"
#: seconds one request may take
TIMEOUT = 20.0
#: redirects followed before a repo's answer counts as broken
MAX_REDIRECTS = 5
#: repos asked at once
WORKERS = 8

State = Literal["ok", "changed", "unchecked"]


def viewer_endpoint() -> str:
    """The dataset viewer asked for subsets, columns and row counts."""
    return os.environ.get("EVALKIT_DATASETS_SERVER", "").strip().rstrip("/") or DEFAULT_VIEWER


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: its status, headers (lower-case names) and JSON body (None when it has none)."""

    status: int
    headers: Mapping[str, str]
    body: Any


class Transport(Protocol):
    """GET one URL and return its answer without following redirects; raise (any error) when none comes."""

    def get(self, url: str, params: Mapping[str, str]) -> Reply: ...


class SessionTransport:
    """The hub library's HTTP session, with the user's token when one is saved or set (HF_TOKEN)."""

    def get(self, url: str, params: Mapping[str, str]) -> Reply:
        from huggingface_hub import get_session
        from huggingface_hub.utils import build_hf_headers

        response = get_session().get(
            url, params=dict(params), headers=build_hf_headers(), timeout=TIMEOUT, follow_redirects=False
        )
        try:
            body = response.json()
        except ValueError:
            body = None
        return Reply(response.status_code, {k.lower(): v for k, v in response.headers.items()}, body)


@dataclass
class EntryCheck:
    """What the hub says of one catalogue entry, and whether that still matches it."""

    name: str
    repo: str
    subset: str | None
    split: str
    #: the repo's canonical id when it differs from the entry's (moved or renamed)
    lives_at: str | None = None
    #: "no", "auto" or "manual" (how access is granted), "?" when the hub did not say
    gated: str = "?"
    #: the entry's mapped columns (top-level names) and those the hub's features lack
    columns: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: whether the columns were compared with the hub's features
    columns_checked: bool = False
    rows: int | None = None
    #: what no longer matches (the command exits 1) and what could not be checked or is worth knowing
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    @property
    def state(self) -> State:
        if self.problems:
            return "changed"
        return "unchecked" if self.unchecked else "ok"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repo": self.repo,
            "subset": self.subset,
            "split": self.split,
            "state": self.state,
            "lives_at": self.lives_at,
            "gated": self.gated,
            "columns": self.columns,
            "missing_columns": self.missing,
            "rows": self.rows,
            "problems": self.problems,
            "unchecked": self.unchecked,
            "notes": self.notes,
        }


@dataclass
class RepoAnswer:
    """The hub's answers for one repo (at one revision), shared by every entry that reads it."""

    asked: str
    canonical: str | None = None
    moved_by_redirect: bool = False
    gated: str = "?"
    problem: str | None = None
    unchecked: str | None = None
    configs: dict[str, Any] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    partial: bool = False
    viewer_unchecked: str | None = None


def mapped_columns(spec: DatasetSpec) -> list[str]:
    """The columns an entry reads, as the hub's features name them (a nested path ``a.b`` needs column ``a``)."""
    named = [
        value
        for key, value in spec.model_dump().items()
        if key.endswith("_column") and isinstance(value, str) and value
    ]
    named += [value for value in spec.extra_columns.values() if isinstance(value, str)]
    return list(dict.fromkeys(named))


def _error_text(reply: Reply) -> str:
    body = reply.body if isinstance(reply.body, dict) else {}
    text = str(body.get("error") or reply.headers.get("x-error-message") or "").strip()
    return f"HTTP {reply.status}" + (f": {text}" if text else "")


class HubChecker:
    """Asks the hub about catalogue entries: one API and one viewer request per repo, answers shared."""

    def __init__(self, transport: Transport | None = None, hub: str | None = None, viewer: str | None = None) -> None:
        self.transport: Transport = transport or SessionTransport()
        self.hub = (hub or hub_endpoint()).rstrip("/")
        self.viewer = (viewer or viewer_endpoint()).rstrip("/")

    def check(self, specs: Iterable[DatasetSpec]) -> list[EntryCheck]:
        """One EntryCheck per hub entry, in the order given; raises HubUnreachable when the hub gives no answer."""
        hub_specs = [spec for spec in specs if spec.hf_repo is not None]
        keys = list(dict.fromkeys((str(spec.hf_repo), spec.revision) for spec in hub_specs))
        with ThreadPoolExecutor(max_workers=min(WORKERS, max(1, len(keys)))) as pool:
            answers = dict(zip(keys, pool.map(lambda key: self.ask(*key), keys)))
        return [compare(spec, answers[(str(spec.hf_repo), spec.revision)]) for spec in hub_specs]

    def ask(self, repo: str, revision: str | None = None) -> RepoAnswer:
        """What the hub API and the dataset viewer say of ``repo`` (at ``revision``)."""
        answer = RepoAnswer(asked=repo)
        path = f"/api/datasets/{repo}" + (f"/revision/{quote(revision, safe='')}" if revision else "")
        reply, url = self._get(self.hub + path, {}, viewer=False)
        if url != self.hub + path:
            answer.moved_by_redirect = True
        if reply.status in (401, 404) or reply.headers.get("x-error-code") in ("RepoNotFound", "RevisionNotFound"):
            if reply.headers.get("x-error-code") == "RevisionNotFound":
                answer.problem = f"revision {revision} not found ({_error_text(reply)})"
            else:
                answer.problem = f"repo not found on the hub, or private ({_error_text(reply)})"
            return answer
        if reply.status >= 300 or not isinstance(reply.body, dict):
            answer.unchecked = f"the hub API answered {_error_text(reply)}"
            return answer
        info = reply.body
        answer.canonical = str(info.get("id") or repo)
        gated = info.get("gated")
        answer.gated = "no" if gated in (False, None) else str(gated)
        if info.get("disabled"):
            answer.problem = "the repo is disabled on the hub"
        elif info.get("private"):
            answer.problem = "the repo is private"
        self._ask_viewer(answer)
        return answer

    def _ask_viewer(self, answer: RepoAnswer) -> None:
        reply, _ = self._get(self.viewer + "/info", {"dataset": str(answer.canonical)}, viewer=True)
        body = reply.body if isinstance(reply.body, dict) else {}
        if reply.status != 200 or not isinstance(body.get("dataset_info"), dict):
            gated = answer.gated not in ("no", "?")
            why = "gated: the viewer answers only a logged-in user granted access (HF_TOKEN)" if gated else ""
            answer.viewer_unchecked = why or f"the dataset viewer answered {_error_text(reply)}"
            return
        answer.configs = {str(k): v for k, v in body["dataset_info"].items() if isinstance(v, dict)}
        answer.pending = [str(item.get("config")) for item in body.get("pending") or [] if isinstance(item, dict)]
        answer.failed = [str(item.get("config")) for item in body.get("failed") or [] if isinstance(item, dict)]
        answer.partial = bool(body.get("partial"))

    def _unreachable(self, viewer: bool, error: BaseException) -> str:
        if viewer:
            what, base, variable = "the dataset viewer", self.viewer, "EVALKIT_DATASETS_SERVER"
        else:
            what, base, variable = "the Hugging Face hub", self.hub, "HF_ENDPOINT"
        named = f" ({variable})" if os.environ.get(variable, "").strip() else ""
        return (
            f"catalogue check: {what} at {base}{named} is unreachable ({failure_reason(error)}); the check asks it "
            "for every entry: run it where the hub can be reached"
        )

    def _get(self, url: str, params: Mapping[str, str], viewer: bool) -> tuple[Reply, str]:
        """GET, following redirects (each counted); returns the last answer and the URL that gave it."""
        for _ in range(MAX_REDIRECTS + 1):
            try:
                reply = self.transport.get(url, params)
            except Exception as error:  # no answer at all, whatever the reason: the reason says which
                raise HubUnreachable(self._unreachable(viewer, error)) from None
            location = reply.headers.get("location")
            if reply.status not in (301, 302, 303, 307, 308) or not location:
                return reply, url
            url = urljoin(url, location)
        return Reply(310, {}, {"error": f"more than {MAX_REDIRECTS} redirects"}), url


def _which_config(spec: DatasetSpec, answer: RepoAnswer, check: EntryCheck) -> str | None:
    """The configuration the entry reads (its subset, else the default one); None, with the reason, when unknown."""
    names = sorted(answer.configs)
    if spec.subset is not None:
        if spec.subset in answer.configs:
            return spec.subset
        if spec.subset in answer.pending or spec.subset in answer.failed:
            state = "still being processed" if spec.subset in answer.pending else "failed there"
            check.unchecked.append(f"subset {spec.subset}: the dataset viewer's info {state}")
        else:
            check.problems.append(f"subset {spec.subset} is not on the hub (it has: {', '.join(names) or 'none'})")
        return None
    if "default" in answer.configs or len(names) == 1:
        return "default" if "default" in answer.configs else names[0]
    if names:
        check.problems.append(f"no subset given and the repo has several: {', '.join(names)}")
    else:
        check.unchecked.append("the dataset viewer lists no subset yet")
    return None


def compare(spec: DatasetSpec, answer: RepoAnswer) -> EntryCheck:
    """The entry against what the hub said of its repo."""
    check = EntryCheck(spec.name, str(spec.hf_repo), spec.subset, spec.split, gated=answer.gated)
    check.columns = [column.split(".")[0] for column in mapped_columns(spec)]
    check.columns = list(dict.fromkeys(check.columns))
    if answer.problem is not None:
        check.problems.append(answer.problem)
    if answer.unchecked is not None:
        check.unchecked.append(answer.unchecked)
    if answer.canonical is None:
        return check
    if answer.canonical != answer.asked or answer.moved_by_redirect:
        check.lives_at = answer.canonical
        how = "the old id redirects, for now" if answer.moved_by_redirect else "the hub names it so"
        check.problems.append(f"moved to {answer.canonical} ({how}): set hf_repo to {answer.canonical}")
    if answer.gated not in ("no", "?"):
        check.notes.append(f"gated ({answer.gated}): a user needs access granted on the hub and a token (HF_TOKEN)")
    if answer.viewer_unchecked is not None:
        check.unchecked.append(answer.viewer_unchecked)
        return check
    config = _which_config(spec, answer, check)
    if config is None:
        return check
    info = answer.configs[config]
    splits = info.get("splits") if isinstance(info.get("splits"), dict) else {}
    if spec.split not in splits:
        check.problems.append(f"split {spec.split} is not in subset {config} (it has: {', '.join(sorted(splits))})")
    else:
        rows = splits[spec.split].get("num_examples")
        check.rows = rows if isinstance(rows, int) else None
    features = info.get("features") if isinstance(info.get("features"), dict) else {}
    check.missing = [column for column in check.columns if column not in features]
    check.columns_checked = True
    for column in check.missing:
        close = difflib.get_close_matches(column, list(features), n=1, cutoff=0.6)
        hint = f" (renamed to {close[0]}?)" if close else ""
        check.problems.append(f"column {column} is not in subset {config}'s features{hint}")
    if answer.partial:
        check.notes.append("the viewer's info covers part of the data only: the row count is a lower bound")
    if spec.revision is not None:
        check.notes.append(f"the viewer describes the main branch; the entry pins revision {spec.revision}")
    if spec.data_files is not None:
        check.notes.append("the entry names data_files: its columns were checked against the subset's whole info")
    return check
