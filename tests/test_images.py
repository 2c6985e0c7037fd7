"""Images as an input: a local image set made here, sent as data URIs to a test server that reads the pixels.

The test server (``image_answer``) decodes every ``image_url`` it receives and
answers with each image's dominant colour or decoded size, so the exact-match
score of a run is known by hand, and what the server reports is what the
client really sent (downsizing included).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, config_for, evalkit_cli, model_entry, run
from PIL import Image as PILImage

from evalkit.data.image.codec import fit_size, probe
from evalkit.data.image.prepare import prepare_images
from evalkit.data.image.values import ImageDecodeError, images_from_cell
from evalkit.data.sample import Image

COLOURS = {"red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 160, 0), "yellow": (255, 255, 0)}


def picture(colour: str, size: tuple[int, int], fmt: str) -> bytes:
    """A one-colour image with a small white corner (so it is not trivially uniform), encoded as ``fmt``."""
    image = PILImage.new("RGB", size, COLOURS[colour])
    image.paste((255, 255, 255), (0, 0, max(1, size[0] // 10), max(1, size[1] // 10)))
    out = io.BytesIO()
    image.save(out, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return out.getvalue()


def write_runspec(root: Path, name: str, data_file: str, **fields: Any) -> Path:
    specs = root / "runspecs" / "vision"
    specs.mkdir(parents=True, exist_ok=True)
    entry = {
        "path": f"../../{data_file}",
        "language": "en",
        "modality": "image+text",
        "id_column": "id",
        "image_column": "image",
        "textual_input_column": "question",
        "target_column": "answer",
        **fields,
    }
    (specs / f"{name}.json").write_text(json.dumps({"_task": {"metrics": ["exact_match"]}, name: entry}))
    return root / "runspecs"


def image_set(root: Path) -> list[dict[str, Any]]:
    """PNG and JPEG files in two sizes, a multi-image row, one truncated file; rows of a jsonl file."""
    images = root / "images"
    images.mkdir(parents=True, exist_ok=True)
    files = {
        "red_small.png": picture("red", (64, 48), "PNG"),
        "blue_big.png": picture("blue", (640, 480), "PNG"),
        "green_small.jpg": picture("green", (80, 60), "JPEG"),
        "yellow_big.jpg": picture("yellow", (800, 600), "JPEG"),
    }
    for name, data in files.items():
        (images / name).write_bytes(data)
    whole = picture("red", (300, 200), "PNG")
    (images / "truncated.png").write_bytes(whole[: len(whole) // 2])
    rows = [
        {"id": "r1", "image": "images/red_small.png", "question": "Colour?", "answer": "red"},
        {"id": "r2", "image": "images/blue_big.png", "question": "Colour?", "answer": "blue"},
        {"id": "r3", "image": "images/green_small.jpg", "question": "Colour?", "answer": "green"},
        # the reference is wrong on purpose: exact match is 4/5, not 5/5
        {"id": "r4", "image": "images/yellow_big.jpg", "question": "Colour?", "answer": "purple"},
        {
            "id": "r5",
            "image": ["images/blue_big.png", "images/red_small.png", "images/yellow_big.jpg"],
            "question": "Colours, in order?",
            "answer": "blue red yellow",
        },
        {"id": "r6", "image": "images/truncated.png", "question": "Colour?", "answer": "red"},
    ]
    with (root / "vqa.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return rows


def records_of(run_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for path in (run_dir / "records").glob("*.jsonl") for line in path.read_text().splitlines()
    ]


def test_evalkit_run_answers_from_pixels_with_known_score(tmp_path: Path, make_server) -> None:
    rows = image_set(tmp_path)
    runspecs = write_runspec(tmp_path, "colours", "vqa.jsonl")
    server = make_server({"image_answer": "colour", "request_log": str(tmp_path / "server.jsonl")})
    config = config_for(tmp_path, runspecs, [model_entry("vlm", server.base_url)], [["colours", "exact_match"]])
    done = evalkit_cli(["run", str(config), "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    records = {r["sample_id"]: r for r in records_of(run_dir)}
    assert set(records) == {row["id"] for row in rows}
    assert {k: r["prediction"] for k, r in records.items() if k != "r6"} == {
        "r1": "red",
        "r2": "blue",
        "r3": "green",
        "r4": "yellow",
        "r5": "blue red yellow",
    }
    # the truncated file fails only its own sample, with its own reason, and is never sent
    assert records["r6"]["failure"] == "image"
    assert "truncated.png" in records["r6"]["error"]
    assert len(server.log_events("completed")) == 5
    results = json.loads((run_dir / "results.json").read_text())
    row = next(r for r in results["results"] if r["dataset"] == "colours")
    assert row["score"] == pytest.approx(4 / 5)
    assert row["n"] == 5 and row["n_failed"] == 1 and row["failure_reasons"] == {"image": 1}
    # records name each image (path, hash, format, size), never its bytes or base64
    assert [ref["format"] for ref in records["r5"]["images"]] == ["png", "png", "jpeg"]
    assert records["r2"]["images"][0]["width"] == 640 and records["r2"]["images"][0]["height"] == 480
    assert records["r1"]["images"][0]["path"].endswith("red_small.png")
    assert len(records["r1"]["images"][0]["sha256"]) == 64
    for path in (run_dir / "records").glob("*.jsonl"):
        text = path.read_text()
        assert "base64" not in text and "data:image" not in text and "iVBOR" not in text
    # images go before the question text by default; the multi-image row sends its three in order
    messages = [event["messages"][-1] for event in server.log_events("completed")]
    assert all(m["parts"][-1] == "text" and set(m["parts"][:-1]) == {"image_url"} for m in messages)
    multi = next(m for m in messages if len(m["images"]) == 3)
    assert [(i["width"], i["height"]) for i in multi["images"]] == [(640, 480), (64, 48), (800, 600)]


def test_resume_sends_nothing_again(tmp_path: Path, make_server) -> None:
    image_set(tmp_path)
    runspecs = write_runspec(tmp_path, "colours", "vqa.jsonl")
    server = make_server({"image_answer": "colour"})
    config = config_for(tmp_path, runspecs, [model_entry("vlm", server.base_url)], [["colours", "exact_match"]])
    first = run(config)
    assert first.requests_sent == 5
    again = run(config)
    assert again.requests_sent == 0 and again.store_hits == 5
    assert [r.score for r in again.rows] == [r.score for r in first.rows]


def test_big_image_arrives_downsized_and_limits_enter_the_key(tmp_path: Path, make_server) -> None:
    (tmp_path / "big.jpg").write_bytes(picture("blue", (4000, 3000), "JPEG"))
    (tmp_path / "big.png").write_bytes(picture("red", (3000, 4000), "PNG"))
    with (tmp_path / "sizes.jsonl").open("w") as handle:
        handle.write(json.dumps({"id": "j", "image": "big.jpg", "question": "Size?", "answer": "1024x768"}) + "\n")
        handle.write(json.dumps({"id": "p", "image": "big.png", "question": "Size?", "answer": "768x1024"}) + "\n")
    runspecs = write_runspec(tmp_path, "sizes", "sizes.jsonl")
    server = make_server({"image_answer": "size"})
    limited = model_entry("vlm", server.base_url, max_image_side=1024)
    config = config_for(tmp_path, runspecs, [limited], [["sizes", "exact_match"]])
    outcome = run(config)
    assert outcome.rows[0].score == 1.0, records_of(outcome.run_dir)
    records = {r["sample_id"]: r for r in records_of(outcome.run_dir)}
    assert records["j"]["images"][0]["width"] == 4000
    assert records["j"]["images"][0]["sent"] == {
        "format": "jpeg",
        "width": 1024,
        "height": 768,
        "bytes": records["j"]["images"][0]["sent"]["bytes"],
    }
    assert records["p"]["images"][0]["sent"]["format"] == "png"
    # another limit is another answer: nothing comes from the store
    pixels = model_entry("vlm", server.base_url, max_image_pixels=300_000)
    config = config_for(tmp_path, runspecs, [pixels], [["sizes", "exact_match"]])
    outcome = run(config)
    assert outcome.store_hits == 0 and outcome.requests_sent == 2
    assert {r["sample_id"]: r["response"] for r in records_of(outcome.run_dir)} == {"j": "632x474", "p": "474x632"}


def test_images_after_the_text_when_asked(tmp_path: Path, make_server) -> None:
    (tmp_path / "red.png").write_bytes(picture("red", (32, 32), "PNG"))
    (tmp_path / "one.jsonl").write_text(json.dumps({"id": "a", "image": "red.png", "question": "Q?", "answer": "red"}))
    server = make_server({"image_answer": "colour", "request_log": str(tmp_path / "server.jsonl")})
    for position in ("before", "after"):
        runspecs = write_runspec(tmp_path / position, "one", "../one.jsonl", image_position=position)
        entry = model_entry("vlm", server.base_url)
        outcome = run(config_for(tmp_path / position, runspecs, [entry], [["one", "exact_match"]]))
        assert outcome.rows[0].score == 1.0
    # a different order is a different request: the second run is sent, not taken from the store
    completed = server.log_events("completed")
    assert [event["messages"][-1]["parts"] for event in completed] == [["image_url", "text"], ["text", "image_url"]]
    seen = completed[0]["messages"][-1]["images"][0]
    assert (seen["format"], seen["width"], seen["height"]) == ("png", 32, 32)


def test_each_image_its_own_user_message_after_the_text_when_asked(tmp_path: Path, make_server) -> None:
    """KARMA's layout: the text alone, then one user message per image; a multi-image sample keeps their order."""
    (tmp_path / "red.png").write_bytes(picture("red", (32, 32), "PNG"))
    (tmp_path / "blue.png").write_bytes(picture("blue", (16, 16), "PNG"))
    row = {"id": "a", "image": ["red.png", "blue.png"], "question": "Q?", "answer": "red"}
    (tmp_path / "one.jsonl").write_text(json.dumps(row))
    server = make_server({"answers": [{"match": "", "answer": "red"}], "request_log": str(tmp_path / "server.jsonl")})
    runspecs = write_runspec(tmp_path / "k", "one", "../one.jsonl", image_position="messages_after")
    outcome = run(config_for(tmp_path / "k", runspecs, [model_entry("vlm", server.base_url)], [["one", "exact_match"]]))
    assert outcome.rows[0].score == 1.0
    [event] = server.log_events("completed")
    assert [(m["role"], m.get("parts"), m.get("text")) for m in event["messages"]] == [
        ("user", None, "Q?"),
        ("user", ["image_url"], ""),
        ("user", ["image_url"], ""),
    ]
    assert [m["images"][0]["width"] for m in event["messages"][1:]] == [32, 16]


def test_hf_image_dicts_and_raw_bytes_in_parquet(tmp_path: Path, make_server) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    red, green = picture("red", (40, 30), "PNG"), picture("green", (50, 50), "JPEG")
    rows = [
        {"id": "hf", "image": {"bytes": red, "path": "red.png"}, "raw": green, "question": "C?", "answer": "red"},
        {"id": "hf2", "image": {"bytes": green, "path": "g.jpg"}, "raw": red, "question": "C?", "answer": "green"},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "set.parquet")
    server = make_server({"image_answer": "colour"})
    for column, expected in (("image", {"hf": "red", "hf2": "green"}), ("raw", {"hf": "green", "hf2": "red"})):
        runspecs = write_runspec(tmp_path / column, "pq", "../set.parquet", image_column=column)
        config = config_for(tmp_path / column, runspecs, [model_entry("vlm", server.base_url)], [["pq", "exact_match"]])
        outcome = run(config)
        records = {r["sample_id"]: r for r in records_of(outcome.run_dir)}
        assert {k: r["prediction"] for k, r in records.items()} == expected
        if column == "image":
            assert records["hf"]["images"][0]["name"] == "red.png"
        assert "path" not in records["hf"]["images"][0]


def test_a_cell_that_is_no_image_fails_only_its_sample(tmp_path: Path, make_server) -> None:
    (tmp_path / "ok.png").write_bytes(picture("blue", (20, 20), "PNG"))
    (tmp_path / "text.png").write_text("not an image at all")
    rows = [
        {"id": "ok", "image": "ok.png", "question": "C?", "answer": "blue"},
        {"id": "text", "image": "text.png", "question": "C?", "answer": "blue"},
        {"id": "missing", "image": "nowhere.png", "question": "C?", "answer": "blue"},
        {"id": "number", "image": 7, "question": "C?", "answer": "blue"},
    ]
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runspecs = write_runspec(tmp_path, "bad", "bad.jsonl")
    server = make_server({"image_answer": "colour"})
    outcome = run(config_for(tmp_path, runspecs, [model_entry("vlm", server.base_url)], [["bad", "exact_match"]]))
    records = {r["sample_id"]: r for r in records_of(outcome.run_dir)}
    assert records["ok"]["score"] == 1.0
    assert {k: r["failure"] for k, r in records.items() if k != "ok"} == {
        "text": "image",
        "missing": "image",
        "number": "image",
    }
    assert "cannot decode" in records["text"]["error"] and "no such file" in records["missing"]["error"]
    assert outcome.requests_sent == 1


# ------------------------------------------------------------------ the pieces, one by one


def test_cells_become_images_without_decoding(tmp_path: Path) -> None:
    assert images_from_cell(None) == []
    assert images_from_cell("a.png", tmp_path) == [Image(path=str(tmp_path / "a.png"))]
    assert images_from_cell(b"\x89PNG") == [Image(data=b"\x89PNG")]
    assert images_from_cell({"bytes": None, "path": "/abs/x.jpg"}) == [Image(path="/abs/x.jpg")]
    assert len(images_from_cell(["a.png", None, {"bytes": b"x", "path": "b.png"}], tmp_path)) == 2
    with pytest.raises(ImageDecodeError, match="image 2 of 2"):
        images_from_cell(["a.png", 3.5])
    with pytest.raises(ImageDecodeError, match="URL"):
        images_from_cell("https://example.com/x.png")


def test_fit_size_keeps_aspect_ratio_within_both_limits() -> None:
    assert fit_size(4000, 3000, 1024, None) == (1024, 768)
    assert fit_size(3000, 4000, 1024, None) == (768, 1024)
    assert fit_size(800, 600, 1024, None) == (800, 600)
    w, h = fit_size(4000, 3000, None, 1_003_520)
    assert w * h <= 1_003_520 and abs(w / h - 4 / 3) < 0.01
    assert fit_size(4000, 3000, 1000, 100_000) == fit_size(4000, 3000, None, 100_000)


def test_truncated_jpeg_is_caught_without_decoding() -> None:
    whole = picture("green", (200, 100), "JPEG")
    assert probe(whole, "x").format == "JPEG"
    with pytest.raises(ImageDecodeError, match="truncated"):
        probe(whole[: len(whole) - 200], "x")


def test_a_small_image_goes_as_it_came_and_once_per_limit() -> None:
    data = picture("red", (100, 50), "PNG")
    prepared = prepare_images({0: [Image(data=data)]}, [(None, None), (1000, None), (50, None)])
    whole, same, small = (prepared.parts(0, limit)[0] for limit in [(None, None), (1000, None), (50, None)])
    assert whole is same and whole.identity == whole.ref["sha256"] and "sent" not in whole.ref
    assert small.ref["sent"]["width"] == 50 and small.ref["sent"]["height"] == 25
    assert small.identity != whole.identity and small.identity.startswith(whole.ref["sha256"])


def test_bmp_is_sent_as_png() -> None:
    out = io.BytesIO()
    PILImage.new("RGB", (10, 10), (0, 0, 255)).save(out, format="BMP")
    part = prepare_images({0: [Image(data=out.getvalue())]}, [(None, None)]).parts(0, (None, None))[0]
    assert part.url.startswith("data:image/png;base64,") and part.ref["sent"]["format"] == "png"


def test_dry_run_names_missing_image_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalkit.cli import main

    (tmp_path / "here.png").write_bytes(picture("red", (8, 8), "PNG"))
    rows = [
        {"id": "a", "image": ["here.png", "gone_1.png"], "question": "C?", "answer": "red"},
        {"id": "b", "image": "gone_2.jpg", "question": "C?", "answer": "red"},
    ]
    (tmp_path / "set.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runspecs = write_runspec(tmp_path, "dry", "set.jsonl")
    config = config_for(tmp_path, runspecs, [model_entry("vlm", "http://127.0.0.1:9/v1")], [["dry", "exact_match"]])
    assert main(["run", str(config), "--dry-run"]) == 2
    out = capsys.readouterr()
    text = " ".join((out.out + out.err).split())
    assert "2 local file(s) that do not exist" in text and "gone_1.png" in text and "gone_2.jpg" in text
    assert "2 samples with unreadable images" in text


def test_the_vqa_example_runs_offline_with_a_known_score(tmp_path: Path, make_server) -> None:
    server = make_server({"image_answer": "colour"})
    config = str(ROOT / "examples" / "vqa" / "config.yaml")
    done = evalkit_cli(
        ["run", config, "--quiet", "--output-dir", str(tmp_path / "runs")],
        tmp_path,
        env={**os.environ, "EVALKIT_VQA_URL": server.base_url},
    )
    assert done.returncode == 0, done.stderr
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    (row,) = json.loads((run_dir / "results.json").read_text())["results"]
    assert (row["score"], row["n"], row["n_failed"]) == (1.0, 6, 0)
    sent = {r["sample_id"]: [i.get("sent", i)["width"] for i in r["images"]] for r in records_of(run_dir)}
    assert sent["q2"] == [256] and sent["q6"] == [256, 96, 256]  # max_image_side: 256


def test_in_context_examples_and_later_turns_show_their_images(tmp_path: Path, make_server) -> None:
    (tmp_path / "red.png").write_bytes(picture("red", (30, 20), "PNG"))
    (tmp_path / "blue.jpg").write_bytes(picture("blue", (40, 40), "JPEG"))
    (tmp_path / "train.jsonl").write_text(
        json.dumps({"id": "t", "image": "red.png", "turns": [{"text": "C?"}], "answer": "red"}) + "\n"
    )
    turns = [{"text": "Colour?"}, {"text": "Say it again."}]
    (tmp_path / "test.jsonl").write_text(json.dumps({"id": "s", "image": "blue.jpg", "turns": turns, "answer": "x"}))
    runspecs = write_runspec(
        tmp_path,
        "icl",
        "test.jsonl",
        turns_column="turns",
        textual_input_column=None,
        in_context={"path": "../../train.jsonl", "k": 1},
    )
    server = make_server({"image_answer": "colour", "request_log": str(tmp_path / "server.jsonl")})
    outcome = run(config_for(tmp_path, runspecs, [model_entry("vlm", server.base_url)], [["icl", "exact_match"]]))
    assert outcome.requests_sent == 2
    first, second = (event["messages"] for event in server.log_events("completed"))
    # turn 1: the example's question with its image and answer, then the sample's image and question
    assert [(m["role"], m["text"], [i["format"] for i in m.get("images", [])]) for m in first] == [
        ("user", "C?", ["png"]),
        ("assistant", "red", []),
        ("user", "Colour?", ["jpeg"]),
    ]
    # turn 2 carries the conversation, images included, and the model's first answer (blue, read from the pixels)
    assert [(m["role"], m["text"], len(m.get("images", []))) for m in second] == [
        ("user", "C?", 1),
        ("assistant", "red", 0),
        ("user", "Colour?", 1),
        ("assistant", "blue", 0),
        ("user", "Say it again.", 0),
    ]


def test_store_key_tells_images_apart_and_leaves_text_keys_alone() -> None:
    import hashlib

    from evalkit.clients.request import ModelRequest
    from evalkit.config import RequestKind
    from evalkit.util.jsonutil import dumps_bytes

    limit = (None, None)
    red = prepare_images({0: [Image(data=picture("red", (20, 20), "PNG"))]}, [limit]).parts(0, limit)
    blue = prepare_images({0: [Image(data=picture("blue", (20, 20), "PNG"))]}, [limit]).parts(0, limit)
    content = [{"type": "image_url", "image_url": {"image_index": 0}}, {"type": "text", "text": "C?"}]
    messages = [{"role": "user", "content": content}]
    keys = {
        ModelRequest(kind=RequestKind.CHAT, model="m", messages=messages, images=images).key for images in (red, blue)
    }
    assert len(keys) == 2
    text = ModelRequest(kind=RequestKind.CHAT, model="m", messages=[{"role": "user", "content": "C?"}])
    view = {
        "kind": text.kind,
        "model": "m",
        "messages": text.messages,
        "audio": [],
        "params": {},
        "prompt": None,
        "language": None,
        "repeat": 0,
    }
    assert text.key == hashlib.sha256(dumps_bytes(view, sort_keys=True)).hexdigest()


def test_a_transcription_model_is_not_shown_images(tmp_path: Path, make_server) -> None:
    from helpers import tone_wav

    (tmp_path / "red.png").write_bytes(picture("red", (8, 8), "PNG"))
    (tmp_path / "tone.wav").write_bytes(tone_wav(440, 0.5))
    row = {"id": "a", "image": "red.png", "audio": "tone.wav", "question": "Q?", "answer": "red"}
    (tmp_path / "one.jsonl").write_text(json.dumps(row))
    runspecs = write_runspec(tmp_path, "one", "one.jsonl", audio_column="audio", modality="audio+image")
    server = make_server()
    entry = model_entry("asr", server.base_url, inference_type="transcription")
    outcome = run(config_for(tmp_path, runspecs, [entry], [["one", "exact_match"]]))
    (record,) = records_of(outcome.run_dir)
    assert record["failure"] == "unsupported" and "cannot be shown images" in record["error"]
    assert outcome.requests_sent == 0
