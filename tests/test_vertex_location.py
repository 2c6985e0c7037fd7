"""AU-Harness's Vertex ``location`` and ``project_id`` name where Google's access token goes: only a region and a
project id pass.

evalkit builds the Vertex endpoint from them and sends it the token ``gcloud`` prints. A location such as
``127.0.0.1:PORT/collect#`` would make that a planted server's address; here a fake ``gcloud`` prints a token and a
planted https server (its certificate trusted, as an attacker's real one would be) waits for it.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import evalkit_cli, text_set, write_config
from test_hostile_http import make_certificate

from evalkit.config import parse_config
from evalkit.errors import ConfigError

TOKEN = "ya29.planted-gcloud-token-0123456789"
PAIRS = [["librispeech_test_clean", "word_error_rate"]]
VERTEX = {"name": "g", "inference_type": "gemini", "model": "google/gemini-2.5-flash"}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("location", "127.0.0.1:8443/collect#"),
        ("location", "evil.example.com/x?"),
        ("location", "us-central1.evil.example.com"),
        ("location", "us-central1@evil"),
        ("location", "US-CENTRAL1"),
        ("location", "us-central1\n"),
        ("project_id", "proj-123/../../x"),
        ("project_id", "proj-123?x=1#"),
        ("project_id", "a"),
    ],
)
def test_a_location_or_project_that_is_no_google_identifier_is_refused_naming_the_key(key: str, value: str) -> None:
    entry = {**VERTEX, "location": "us-central1", "project_id": "proj-123", key: value}
    with pytest.raises(ConfigError, match=rf"models\[0\]\.{key}: .* is not a Google Cloud"):
        parse_config({"task_metric": PAIRS, "models": [entry]})


@pytest.mark.parametrize(
    ("location", "project", "host"),
    [
        ("us-central1", "my-project-42", "us-central1-aiplatform.googleapis.com"),
        ("europe-west4", "proj-123", "europe-west4-aiplatform.googleapis.com"),
        ("northamerica-northeast1", "proj-123", "northamerica-northeast1-aiplatform.googleapis.com"),
        ("global", "example.com:proj-123", "aiplatform.googleapis.com"),
    ],
)
def test_regions_and_project_ids_pass(location: str, project: str, host: str) -> None:
    entry = {**VERTEX, "location": location, "project_id": project}
    config = parse_config({"task_metric": PAIRS, "models": [entry]})
    assert config.models[0].info.url == f"https://{host}/v1/projects/{project}/locations/{location}/endpoints/openapi"


def test_a_planted_location_gets_no_token_and_gcloud_is_never_run(tmp_path: Path, make_server: Any) -> None:
    cert, key = make_certificate(tmp_path)
    server = make_server({"require_auth": TOKEN}, tls=(cert, key))
    port = server.base_url.rsplit(":", 1)[1].split("/", 1)[0]
    ran = tmp_path / "gcloud-ran"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(f"#!{sys.executable}\nopen({str(ran)!r}, 'w').write('x')\nprint({TOKEN!r})\n")
    gcloud.chmod(gcloud.stat().st_mode | stat.S_IXUSR)
    entry = {**VERTEX, "location": f"127.0.0.1:{port}/collect#", "project_id": "proj-123", "retry_attempts": 0}
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["synth_qa", "exact_match"]],
            "models": [entry],
            "runspecs_dir": str(text_set(tmp_path, 2)),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SSL_CERT_FILE": str(cert)}
    done = evalkit_cli(["run", str(config)], tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert "models[0].location: '127.0.0.1:" in done.stderr and "is not a Google Cloud region" in done.stderr
    assert "Traceback" not in done.stderr
    assert not ran.exists()
    assert server.stats()["requests"] == 0
