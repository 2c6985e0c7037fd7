"""A run refused before its first request leaves no run folder behind (and no run.json in a folder it was given)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import config_for, evalkit_cli, model_entry, run, text_set

from evalkit.errors import UserError


def test_a_run_whose_store_is_refused_leaves_no_run_folder(tmp_path: Path, make_server) -> None:  # type: ignore[no-untyped-def]
    server = make_server()
    runspecs = text_set(tmp_path, 3)
    not_a_file = tmp_path / "a-folder"
    not_a_file.mkdir()
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)], cache={"path": str(not_a_file)})
    done = evalkit_cli(["run", str(config), "--quiet"], tmp_path)
    assert done.returncode == 2 and "response store" in done.stderr and "Traceback" not in done.stderr
    runs = tmp_path / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []

    new = tmp_path / "given"
    with pytest.raises(UserError, match="response store"):
        run(config, run_dir=str(new))
    assert not new.exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="response store"):
        run(config, run_dir=str(empty))
    assert empty.is_dir() and list(empty.iterdir()) == []  # the user's folder stays, as it was

    done = evalkit_cli(["run", str(config), "--quiet", "--no-cache"], tmp_path)  # the same run, accepted
    assert done.returncode == 0, done.stderr
    assert len(list(runs.iterdir())) == 1
