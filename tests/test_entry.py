"""The ``evalkit`` process (evalkit/cli/entry.py): a finished run ends at once, with everything it keeps written.

The interpreter's teardown is skipped after a run; these check, through a real
``python -m evalkit run`` with its output piped, that nothing is lost by it: the
exit code, every line printed, the log file, the records and the run's files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, config_for, evalkit_cli, model_entry, text_set

from evalkit.cli.entry import console

N = 40


def test_a_finished_run_keeps_its_output_its_log_and_its_files(tmp_path: Path, make_server) -> None:
    server = make_server()
    config = config_for(tmp_path, text_set(tmp_path, N), [model_entry("m", server.base_url)])
    done = evalkit_cli(["run", str(config)], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{N} samples scored and 0 failed" in done.stdout  # the last lines printed reach the pipe
    run = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    assert len((run / "records" / "synth_qa__exact_match.jsonl").read_text().splitlines()) == N
    assert (run / "report.html").read_text().endswith("</html>\n")
    assert json.loads((run / "results.json").read_text())["results"][0]["n"] == N


def test_the_exit_handlers_run_before_the_process_ends(tmp_path: Path, make_server) -> None:
    """Logging's flush, weakref finalizers and multiprocessing's clean-up are exit handlers: they must still run."""
    server = make_server()
    config = config_for(tmp_path, text_set(tmp_path, 4), [model_entry("m", server.base_url)])
    marker = tmp_path / "handler-ran"
    script = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
        "from evalkit.cli.entry import console\n"
        f"console(['run', {str(config)!r}, '--quiet'])\n"
        "sys.exit(99)  # never reached: the finished run ended the process with its own code\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "ran"


def test_a_failed_run_keeps_its_exit_code(tmp_path: Path, make_server) -> None:
    server = make_server({"faults": {"seed": 1, "rates": {"500": 1.0}}})
    config = config_for(tmp_path, text_set(tmp_path, 6), [model_entry("m", server.base_url, retry_attempts=0)])
    done = evalkit_cli(["run", str(config), "--quiet"], tmp_path, timeout=120)
    assert done.returncode == 3, done.stderr  # every sample failed: over max_failure_rate
    assert "Traceback" not in done.stderr


def test_other_commands_and_in_process_calls_return() -> None:
    assert console(["--version"]) == 0  # only a finished run ends the process; this one returns


def test_evalkit_cli_main_runs_in_process_and_the_command_ends_the_process(tmp_path: Path, make_server) -> None:
    import evalkit.cli

    # `from evalkit.cli import main` is what scripts and tests call: a run through it returns its code
    assert evalkit.cli.main is sys.modules["evalkit.cli.main"].main
    server = make_server()
    config = config_for(tmp_path, text_set(tmp_path, 3), [model_entry("m", server.base_url)])
    assert evalkit.cli.main(["run", str(config), "--quiet"]) == 0  # this process goes on
    # the installed command is the one that ends at once after a run
    # (read as text: tomllib is 3.11's, and the quick-start venvs start at the oldest Python supported)
    scripts = (ROOT / "pyproject.toml").read_text().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^evalkit = "evalkit\.cli\.entry:console"$', scripts, re.M), scripts
