"""`evalkit catalogue check` against recorded hub answers: no network, the same answers every time.

tests/fixtures/hub_answers/*.json each hold the exchanges of one case: the
request (path and query) and the answer (status, headers, JSON body), shaped
as the hub API answers ``GET /api/datasets/{id}`` (the fields
``huggingface_hub.hf_api.DatasetInfo`` reads: id, sha, gated, private,
disabled, ...; 401 + ``X-Error-Code: RepoNotFound`` for a missing repo; a 307
with ``Location`` for a moved one) and as the dataset viewer answers ``GET
/info?dataset=`` (its openapi.json at huggingface/dataset-viewer f62009e:
``dataset_info`` per config with features and splits, ``pending``, ``failed``,
``partial``; 401 ``ExternalUnauthenticatedError`` for a gated dataset). Shas,
dates and byte counts are illustrative (nothing here can reach the hub); row
counts, configs, splits and features are those the catalogue's checked
records describe.

The checker is run in-process through a transport that replays the files,
and the command as a user runs it (a child process, the hub library's own
session) against a loopback server replaying the same files.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from helpers import closed_port, evalkit_cli

from evalkit.catalog import DatasetSpec, load_catalog
from evalkit.data.hubcache import HubUnreachable
from evalkit.data.hubcheck import HubChecker, Reply

FIXTURES = Path(__file__).parent / "fixtures" / "hub_answers"
HUB = "https://hub.test"
VIEWER = "https://viewer.test"


def _exchanges() -> dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]]:
    recorded: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]] = {}
    for path in sorted(FIXTURES.glob("*.json")):
        for exchange in json.loads(path.read_text(encoding="utf-8"))["exchanges"]:
            request = exchange["request"]
            recorded[(request["path"], tuple(sorted(request["params"].items())))] = exchange["response"]
    return recorded


class ReplayTransport:
    """Answers from the recorded files; a request nobody recorded is kept (the test asserts there are none)."""

    def __init__(self) -> None:
        self.recorded = _exchanges()
        self.asked: list[str] = []
        self.unrecorded: list[str] = []

    def get(self, url: str, params: Mapping[str, str]) -> Reply:
        path = urlsplit(url).path
        self.asked.append(path)
        response = self.recorded.get((path, tuple(sorted(params.items()))))
        if response is None:
            self.unrecorded.append(f"{url} {dict(params)}")
            return Reply(404, {}, {"error": "not recorded"})
        return Reply(response["status"], response["headers"], response["body"])


class Unreachable:
    def get(self, url: str, params: Mapping[str, str]) -> Reply:
        raise ConnectionRefusedError(111, "Connection refused")


def _spec(name: str, repo: str, split: str, subset: str | None = None, **columns: Any) -> DatasetSpec:
    fields = {"image_column": "image", "textual_input_column": "question", "target_column": "answer", **columns}
    return DatasetSpec(name=name, hf_repo=repo, subset=subset, split=split, language="en", **fields)


@pytest.fixture
def replay() -> Iterator[ReplayTransport]:
    transport = ReplayTransport()
    yield transport
    assert transport.unrecorded == []


def _check(replay: ReplayTransport, *specs: DatasetSpec) -> list[Any]:
    return HubChecker(replay, hub=HUB, viewer=VIEWER).check(specs)


def test_a_clean_entry_matches_with_its_row_count(replay: ReplayTransport) -> None:
    full, default = _check(
        replay,
        _spec("p_random", "lmms-lab-encoder/POPE", "random", "Full", id_column="question_id"),
        _spec("p_test", "lmms-lab-encoder/POPE", "test", id_column="question_id"),
    )
    assert (full.state, full.rows, full.lives_at, full.gated, full.missing) == ("ok", 3000, None, "no", [])
    assert full.columns_checked and sorted(full.columns) == ["answer", "image", "question", "question_id"]
    assert (default.state, default.rows) == ("ok", 9000)  # no subset: the repo's default config
    assert replay.asked.count("/api/datasets/lmms-lab-encoder/POPE") == 1  # one repo, asked once for both


def test_a_moved_repo_is_a_change_and_says_where_it_lives(replay: ReplayTransport) -> None:
    (check,) = _check(replay, _spec("chart", "lmms-lab/ChartQA", "test"))
    assert check.state == "changed" and check.lives_at == "lmms-lab-encoder/ChartQA"
    assert any("moved to lmms-lab-encoder/ChartQA" in p and "redirects" in p for p in check.problems)
    assert check.rows == 2500 and check.missing == []  # the rest is checked where the repo lives now


def test_a_gated_repo_is_said_and_its_columns_left_unchecked(replay: ReplayTransport) -> None:
    (check,) = _check(replay, _spec("massive", "FBK-MT/Speech-MASSIVE-test", "test", image_column=None))
    assert check.gated == "auto" and check.state == "unchecked" and not check.columns_checked
    assert any("gated" in note for note in check.notes)
    assert any("HF_TOKEN" in why for why in check.unchecked)


def test_a_renamed_column_is_a_change_with_the_likely_new_name(replay: ReplayTransport) -> None:
    (check,) = _check(replay, _spec("tv", "lmms-lab-encoder/textvqa", "validation", id_column="question_id"))
    assert check.state == "changed" and check.missing == ["answer"] and check.rows == 5000
    assert check.problems == ["column answer is not in subset default's features (renamed to answers?)"]


def test_a_missing_repo_subset_or_split_is_a_change(replay: ReplayTransport) -> None:
    gone, subset, split = _check(
        replay,
        _spec("gone", "lmms-lab/withdrawn-set", "test"),
        _spec("sub", "lmms-lab-encoder/POPE", "random", "Adversarial"),
        _spec("spl", "lmms-lab-encoder/POPE", "val", "Full"),
    )
    assert gone.state == "changed" and "repo not found" in gone.problems[0]
    assert subset.problems == ["subset Adversarial is not on the hub (it has: Full, default)"]
    assert split.problems == ["split val is not in subset Full (it has: adversarial, popular, random)"]


def test_an_unreachable_hub_stops_the_check_with_one_message() -> None:
    with pytest.raises(HubUnreachable) as raised:
        HubChecker(Unreachable(), hub=HUB, viewer=VIEWER).check([_spec("p", "lmms-lab-encoder/POPE", "test")])
    assert str(raised.value).startswith(f"catalogue check: the Hugging Face hub at {HUB} is unreachable (")
    assert "connection refused" in str(raised.value) and raised.value.exit_code == 2


def test_the_shipped_entries_match_the_recorded_answers_of_their_new_repos(replay: ReplayTransport) -> None:
    catalog = load_catalog()
    names = ["pope", "pope_adversarial", "pope_popular", "pope_random", "chartqa"]
    checks = _check(replay, *(catalog.datasets[name] for name in names))
    assert [(c.name, c.state, c.rows) for c in checks] == [
        ("pope", "ok", 9000),
        ("pope_adversarial", "ok", 3000),
        ("pope_popular", "ok", 3000),
        ("pope_random", "ok", 3000),
        ("chartqa", "ok", 2500),
    ]


# ---------------------------------------------------------------- the command, as a user runs it


class _Replay(http.server.BaseHTTPRequestHandler):
    recorded = _exchanges()

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        response = self.recorded.get((parts.path, tuple(sorted(parse_qsl(parts.query)))))
        status, headers, body = (
            (404, {}, {"error": "not recorded"})
            if response is None
            else (response["status"], response["headers"], response["body"])
        )
        data = json.dumps(body).encode()
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hub_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _runspecs(tmp_path: Path) -> Path:
    folder = tmp_path / "runspecs" / "checks"
    folder.mkdir(parents=True)
    entries = {
        "hc_pope": {"hf_repo": "lmms-lab-encoder/POPE", "subset": "Full", "split": "popular", "language": "en",
                    "image_column": "image", "textual_input_column": "question", "target_column": "answer"},
        "hc_chart": {"hf_repo": "lmms-lab/ChartQA", "split": "test", "language": "en", "image_column": "image",
                     "textual_input_column": "question", "target_column": "answer"},
    }  # fmt: skip
    (folder / "hubcheck.json").write_text(json.dumps(entries), encoding="utf-8")
    return tmp_path / "runspecs"


def _env(hub: str, viewer: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    return {**env, "HF_ENDPOINT": hub, "EVALKIT_DATASETS_SERVER": viewer, "HF_TOKEN": ""}


def test_the_command_prints_a_table_and_exits_1_when_something_moved(tmp_path: Path, hub_server: str) -> None:
    runspecs = _runspecs(tmp_path)
    done = evalkit_cli(
        ["catalogue", "check", "hc_pope", "hc_chart", "--runspecs-dir", str(runspecs)],
        tmp_path,
        env=_env(hub_server, hub_server),
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    pope = next(line for line in lines if line.startswith("│ hc_pope"))
    assert "3,000" in pope and "ok" in pope and "3 found" in pope
    assert any(line.startswith("│ hc_chart") and "changed" in line for line in lines)
    assert "hc_chart: moved to lmms-lab-encoder/ChartQA (the old id redirects, for now)" in done.stdout
    assert lines[-1] == "1 ok, 1 changed, 0 not checked"
    as_json = evalkit_cli(
        ["catalogue", "check", "hc_pope", "--runspecs-dir", str(runspecs), "--format", "json"],
        tmp_path,
        env=_env(hub_server, hub_server),
        timeout=120,
    )
    assert as_json.returncode == 0 and json.loads(as_json.stdout)[0]["rows"] == 3000


def test_the_command_says_in_one_line_that_the_hub_cannot_be_reached(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    done = evalkit_cli(["catalogue", "check", "pope"], tmp_path, env=_env(dead, dead), timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        f"evalkit: error: catalogue check: the Hugging Face hub at {dead} (HF_ENDPOINT) is unreachable (connection "
        "refused); the check asks it for every entry: run it where the hub can be reached"
    )


def test_an_unchecked_entry_fails_only_with_strict(replay: ReplayTransport) -> None:
    from evalkit.cli.catalogue import exit_code

    gated = _check(replay, _spec("massive", "FBK-MT/Speech-MASSIVE-test", "test", image_column=None))
    assert exit_code(gated, strict=False) == 0 and exit_code(gated, strict=True) == 1
