#!/usr/bin/env python3
"""Compare, per sample, the chat request a peer tool sends for its dataset names with the one evalkit sends.

The peer's requests come from a reference fixture made by running the peer's own code on the rows of a local
file (tests/fixtures/references/karma_requests.json, made by make_karma_requests.py there). evalkit's come from
a real run: for each name, the catalogue entry it resolves to reads the same file, and the project's test server
(evalkit.testing) answers and logs every request. The table says, per name, whether the user text, the message
shape (roles, where the images sit) and the generation settings agree, and shows the first difference. KARMA's
speech sets are compared by the transcription request KARMA's OpenAIASR sends (its form fields and file name),
against evalkit's to a transcription model.

    PYTHONPATH=$PWD python scripts/peer_requests.py                      # the markdown table on stdout
    PYTHONPATH=$PWD python scripts/peer_requests.py --json OUT.json      # and every pair of requests
    PYTHONPATH=$PWD python scripts/peer_requests.py --chef               # ChEF's names (chef_requests.json)

Generation settings depend on the model for KARMA (its model classes, not its datasets, set them): the
fixture holds what KARMA's OpenAILLM sends for ``gpt-4o``; evalkit's are the entry's own (its ``generation``),
which a config or ``--model-args`` sets for a model, so they are reported, not counted as a difference. ChEF's
are its recipe's (``max_new_tokens`` sent as ``max_tokens``, no temperature), so for ChEF they are compared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KARMA = ROOT / "tests" / "fixtures" / "references" / "karma_requests.json"
CHEF = ROOT / "tests" / "fixtures" / "references" / "chef_requests.json"
#: keys of a hub entry that do not apply to a local copy of its data
HUB_ONLY = ("hf_repo", "revision", "subset", "checked", "url", "license", "data_files")


def _local_runspecs(folder: Path, entry: str, data: Path) -> str:
    """A runspecs folder holding catalogue entry ``entry`` reading ``data``; returns the local entry's name."""
    from evalkit.catalog import load_catalog

    catalog = load_catalog()
    spec = catalog.datasets[entry]
    task = catalog.tasks[spec.task]
    raw = {k: v for k, v in catalog.raw_entries[entry].items() if k not in HUB_ONLY}
    raw["path"] = str(data)
    raw.pop("private", None)
    target = folder / spec.category
    target.mkdir(parents=True, exist_ok=True)
    local = f"local_{entry}"
    task_meta: dict[str, Any] = {"description": task.description, "metrics": task.metrics}
    if task.generation.model_dump(exclude_none=True):
        task_meta["generation"] = task.generation.model_dump(exclude_none=True)
    (target / f"{spec.task}.json").write_text(json.dumps({"_task": task_meta, local: raw}), encoding="utf-8")
    return local


def _metrics_for(entry: str) -> list[str]:
    """The entry's metrics, those needing no judge first (the request to the model does not depend on the metric;
    a judge, when one is needed, is the same test server under another model name)."""
    from evalkit.catalog import load_catalog
    from evalkit.metrics import METRICS

    catalog = load_catalog()
    spec = catalog.datasets[entry]
    names = list(dict.fromkeys([*(spec.metrics or []), *catalog.tasks[spec.task].metrics]))
    return sorted(names, key=lambda name: bool(getattr(METRICS.get(name), "needs_judge", False)))


def evalkit_requests(entry: str, data: Path, *, transcription: bool = False) -> list[dict[str, Any]]:
    """The chat requests evalkit sends for catalogue entry ``entry`` reading ``data``, as the test server logs them.

    ``transcription``: the model is a transcription endpoint; each request is its form fields and file name.
    """
    import yaml

    from evalkit.catalog import load_catalog
    from evalkit.config import load_config
    from evalkit.errors import ConfigError
    from evalkit.plan import build_plan
    from evalkit.run.runner import RunOptions, execute
    from evalkit.testing.process import start_test_server

    spec = load_catalog().datasets[entry]
    private = bool(spec.private)  # read from the folder dataset_paths names, as shipped
    if spec.variant_of is not None:  # another tool's variant (karma:<id>): a local copy of its base entry's data
        return _variant_requests(entry, spec.variant_of, data, transcription)
    kind = "transcription" if transcription else "vllm"
    with tempfile.TemporaryDirectory(prefix="peer-requests-") as tmp:
        folder = Path(tmp)
        local = entry if private else _local_runspecs(folder / "runspecs", entry, data)
        (folder / "runspecs").mkdir(exist_ok=True)
        server = start_test_server({"answers": [{"match": "", "answer": "A"}]}, request_log=True)
        try:
            for metric in _metrics_for(entry):
                config = {
                    "dataset_metric": [[local, metric]],
                    "models": [{"info": {"name": "m", "inference_type": kind, "url": server.base_url, "model": "m"}}],
                    "judge_properties": {
                        "judge_model": "judge",
                        "judge_type": "vllm",
                        "judge_api_endpoint": server.base_url,
                        "judge_api_key": "k",
                    },
                    "runspecs_dir": str(folder / "runspecs"),
                    "output_dir": str(folder / "runs"),
                }
                if private:
                    config["dataset_paths"] = {entry: str(data)}
                path = folder / "config.yaml"
                path.write_text(yaml.safe_dump(config), encoding="utf-8")
                try:
                    plan = build_plan(load_config(path), source=str(path))
                except ConfigError:
                    continue  # a task metric that does not fit this entry
                asyncio.run(execute(plan, RunOptions(quiet=True)))
                break
            if transcription:
                return [
                    {"form": event["form"], "filename": event["filename"]}
                    for event in server.log_events("completed")
                    if event.get("model") == "m"
                ]
            return [
                {"messages": event["messages"], "params": event["params"]}
                for event in server.log_events("completed")
                if event.get("model") == "m"
            ]
        finally:
            server.stop()


def _variant_requests(name: str, base: str, data: Path, transcription: bool) -> list[dict[str, Any]]:
    """What another tool's variant of ``base`` sends: a runspecs folder holds a local copy of ``base`` and a config
    asks for the variant by its tool's name, its data given in ``dataset_paths`` under the base's name."""
    import yaml

    from evalkit.config import load_config
    from evalkit.plan import build_plan
    from evalkit.run.runner import RunOptions, execute
    from evalkit.testing.process import start_test_server

    kind = "transcription" if transcription else "vllm"
    with tempfile.TemporaryDirectory(prefix="peer-requests-") as tmp:
        folder = Path(tmp)
        server = start_test_server({"answers": [{"match": "", "answer": "A"}]}, request_log=True)
        try:
            config = {
                "dataset_metric": [[name, _metrics_for(base)[0]]],
                "models": [{"info": {"name": "m", "inference_type": kind, "url": server.base_url, "model": "m"}}],
                "dataset_paths": {base: str(data)},
                "output_dir": str(folder / "runs"),
            }
            path = folder / "config.yaml"
            path.write_text(yaml.safe_dump(config), encoding="utf-8")
            asyncio.run(execute(build_plan(load_config(path), source=str(path)), RunOptions(quiet=True)))
            events = [event for event in server.log_events("completed") if event.get("model") == "m"]
            if transcription:
                return [{"form": event["form"], "filename": event["filename"]} for event in events]
            return [{"messages": event["messages"], "params": event["params"]} for event in events]
        finally:
            server.stop()


def compare_transcriptions(peer: list[dict[str, Any]], ours: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-request agreement of a transcription form: its fields besides the model, and the file's name."""
    theirs = sorted(({k: v for k, v in r.items() if k not in ("file", "model")}, r["file"]["name"]) for r in peer)
    mine = sorted(({k: v for k, v in r["form"].items() if k != "model"}, r["filename"]) for r in ours)
    result: dict[str, Any] = {"peer_n": len(peer), "evalkit_n": len(ours)}
    result["fields"] = len(theirs) == len(mine) and all(a[0] == b[0] for a, b in zip(theirs, mine))
    result["filename"] = len(theirs) == len(mine) and all(a[1] == b[1] for a, b in zip(theirs, mine))
    result["first_difference"] = next(
        (f"request {i}: peer {a} / evalkit {b}" for i, (a, b) in enumerate(zip(theirs, mine)) if a != b),
        None if len(theirs) == len(mine) else f"{len(theirs)} vs {len(mine)} requests",
    )
    return result


def _shape(role: str, kinds: list[str]) -> str:
    """A message's place in the shape: its role, and with images the order of its parts ("user[text,image_url]")."""
    return f"{role}[{','.join(kinds)}]" if "image_url" in kinds else role


def _peer_shape(messages: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], str | None, str]:
    """(role, text) of each peer message with text, the system text, and the shape (roles, where images stand)."""
    texts, system, shape = [], None, []
    for message in messages:
        role = "system" if message["role"] in ("system", "developer") else message["role"]
        content = message["content"]
        if isinstance(content, list):
            text = "\n".join(part.get("text", "") for part in content if part.get("type") == "text")
            shape.append(_shape(role, [str(part.get("type")) for part in content]))
            if text:
                texts.append((role, text))
            continue
        if role == "system":
            system = content
        else:
            texts.append((role, content))
        shape.append(role)
    return texts, system, ",".join(shape)


def _evalkit_shape(messages: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], str | None, str]:
    texts, system, shape = [], None, []
    for message in messages:
        role, text = message["role"], message.get("text") or ""
        if role == "system":
            system = text
            shape.append(role)
            continue
        if text:
            texts.append((role, text))
        shape.append(_shape(role, list(message.get("parts") or [])))
    return texts, system, ",".join(shape)


def compare(peer: list[dict[str, Any]], ours: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-sample agreement of text, system prompt and shape; the first difference found."""
    result: dict[str, Any] = {"peer_n": len(peer), "evalkit_n": len(ours), "text": True, "system": True}
    result["shape"] = True
    result["first_difference"] = None if len(peer) == len(ours) else f"{len(peer)} vs {len(ours)} requests"
    # requests run concurrently, so the server logs them in arrival order: both sides are put in text order
    theirs_all = sorted((_peer_shape(r["messages"]) for r in peer), key=lambda shape: str(shape[0]))
    mine_all = sorted((_evalkit_shape(r["messages"]) for r in ours), key=lambda shape: str(shape[0]))
    for index, ((p_texts, p_system, p_shape), (e_texts, e_system, e_shape)) in enumerate(zip(theirs_all, mine_all)):
        for key, a, b in (("text", p_texts, e_texts), ("system", p_system, e_system), ("shape", p_shape, e_shape)):
            if a != b:
                result[key] = False
                if result["first_difference"] is None:
                    result["first_difference"] = (
                        f"sample {index} {key}: peer {str(a)[:160]!r} / evalkit {str(b)[:160]!r}"
                    )
    if peer:
        result["peer_params"] = peer[0]["params"]
    if ours:
        result["evalkit_params"] = {k: v for k, v in ours[0]["params"].items() if v is not None}
    return result


def karma_entry(name: str) -> str:
    """The catalogue entry KARMA's id ``name`` reaches today (the fixture records the one it reached when made)."""
    from evalkit.catalog import load_catalog

    return load_catalog().resolve(f"karma:{name}")[0].name


def karma_table(fixture: Path = KARMA) -> dict[str, dict[str, Any]]:
    """Every KARMA id of the fixture: its entry and the comparison (or why it could not be made)."""
    ids = json.loads(fixture.read_text(encoding="utf-8"))["ids"]
    table: dict[str, dict[str, Any]] = {}
    for name, record in ids.items():
        row: dict[str, Any] = {"entry": karma_entry(name)}
        table[name] = row
        if "error" in record:
            row["error"] = "KARMA's class did not run here: " + record["error"]
            continue
        if record.get("transcriptions"):  # KARMA sends their audio to its ASR classes: its OpenAIASR's request
            ours = evalkit_requests(row["entry"], ROOT / record["rows"], transcription=True)
            row.update(compare_transcriptions(record["transcriptions"], ours))
            row.update(text=row["fields"], system=True, shape=row["filename"])
            row["peer_requests"], row["evalkit_requests"] = record["transcriptions"], ours
            continue
        if not record["requests"]:
            kept = len(record.get("audio") or [])
            row["error"] = f"KARMA's class made {kept} items and its OpenAI client sent no request for them"
            continue
        ours = evalkit_requests(row["entry"], ROOT / record["rows"])
        row.update(compare(record["requests"], ours))
        row["peer_requests"], row["evalkit_requests"] = record["requests"], ours
    return table


def chef_entry(name: str) -> str:
    """The catalogue entry ChEF's scenario name ``name`` reaches."""
    from evalkit.catalog import load_catalog

    return load_catalog().resolve(f"chef:{name}")[0].name


def params_agree(peer: dict[str, Any], ours: dict[str, Any]) -> bool:
    """ChEF's GPT client's generation settings: its max_tokens, and a temperature only where it sends one."""
    return all(ours.get(key) == peer.get(key) for key in ("max_tokens", "temperature"))


def chef_table(fixture: Path = CHEF) -> dict[str, dict[str, Any]]:
    """Every ChEF name of the fixture: its entry and the comparison, generation settings included."""
    data = json.loads(fixture.read_text(encoding="utf-8"))
    folder = ROOT / data["reference"]["data"].split(" ", 1)[0]
    table: dict[str, dict[str, Any]] = {}
    for name, record in data["names"].items():
        row: dict[str, Any] = {"entry": chef_entry(name)}
        table[name] = row
        if "error" in record:
            row["error"] = "ChEF's recipe does not run: " + record["error"]
            continue
        ours = evalkit_requests(row["entry"], ROOT / record["rows"] if "rows" in record else folder)
        row.update(compare(record["requests"], ours))
        row["params"] = params_agree(record["requests"][0]["params"], row.get("evalkit_params", {}))
        row["peer_requests"], row["evalkit_requests"] = record["requests"], ours
    return table


def markdown(table: dict[str, dict[str, Any]]) -> str:
    lines = ["| name | evalkit entry | text | system | shape | first difference / note |", "|---|---|---|---|---|---|"]
    for name, row in table.items():
        if "error" in row:
            lines.append(f"| `{name}` | `{row['entry']}` | - | - | - | {row['error']} |")
            continue
        marks = ["same" if row[key] else "DIFFERS" for key in ("text", "system", "shape")]
        note = (row["first_difference"] or "").replace("|", "\\|").replace("\n", "\\n")
        lines.append(f"| `{name}` | `{row['entry']}` | {' | '.join(marks)} | {note} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--karma", type=Path, default=KARMA, help="KARMA's requests fixture")
    parser.add_argument(
        "--chef", action="store_true", help="ChEF's names (tests/fixtures/references/chef_requests.json)"
    )
    parser.add_argument("--json", type=Path, help="also write every compared request here")
    args = parser.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    table = chef_table() if args.chef else karma_table(args.karma)
    sys.stdout.write(markdown(table))
    if args.json:
        args.json.write_text(json.dumps(table, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
