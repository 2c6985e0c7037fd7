"""ChEF's ``topk_img``: in-context examples chosen by image similarity.

Hand-made images (one-colour squares, mirrored gradients) whose nearest pool
image is known by hand; a run against the test server, which logs every
image it receives, shows the chosen example's image before the sample's.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, evalkit_cli, model_entry, run
from PIL import Image as PILImage

from evalkit.catalog import load_catalog
from evalkit.config import load_config
from evalkit.data.sample import Image, Sample
from evalkit.errors import RunspecError
from evalkit.plan import build_plan
from evalkit.prompts import examples as icl
from evalkit.prompts import image_similarity


def square(rgb: tuple[int, int, int], size: tuple[int, int] = (32, 32), fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, rgb).save(out, format=fmt)
    return out.getvalue()


def gradient(left_to_right: bool, size: tuple[int, int] = (64, 32), fmt: str = "PNG") -> bytes:
    """Black to white across the width (or white to black): same colours, mirrored layout."""
    width, height = size
    image = PILImage.new("L", size)
    for x in range(width):
        value = round(255 * x / (width - 1))
        for y in range(height):
            image.putpixel((x, y), value if left_to_right else 255 - value)
    out = io.BytesIO()
    image.convert("RGB").save(out, format=fmt)
    return out.getvalue()


def sample(sample_id: str, *pictures: bytes) -> Sample:
    return Sample(id=sample_id, images=[Image(data=p) for p in pictures])


def pool_of(samples: list[Sample], model: str | None = None) -> icl.ExamplePool:
    pool = icl.ExamplePool(samples)
    pool.embedder = image_similarity.make_embedder(model)
    pool.vectors = [image_similarity.embed_sample(pool.embedder, s) for s in pool]
    return pool


POOL = [
    sample("rtl", gradient(False)),
    sample("red", square((255, 0, 0))),
    sample("green", square((0, 255, 0))),
    sample("blue", square((0, 0, 255))),
    sample("ltr", gradient(True)),
]


def nearest(pool: icl.ExamplePool, query: Sample, k: int = 1) -> list[str]:
    vector = icl.query_vector(pool, query)
    ranked = image_similarity.rank(pool.vectors or [], vector)
    return [pool[i].id for i in ranked if pool[i].id != query.id][:k]


def test_the_nearest_image_is_the_one_known_by_hand() -> None:
    pool = pool_of(POOL)
    # a darker red, as a JPEG of another size: still the red square (cosine 1 with a one-colour red)
    assert nearest(pool, sample("q", square((200, 0, 0), (50, 40), "JPEG"))) == ["red"]
    # cyan-blue (0, 200, 255): cosine 0.79 with blue, 0.70 with either gradient, 0.62 with green
    assert nearest(pool, sample("q", square((0, 200, 255))), k=4) == ["blue", "rtl", "ltr", "green"]
    # a black-to-white gradient of another size: the same layout wins over its mirror, listed first in the pool
    assert nearest(pool, sample("q", gradient(True, (120, 40), "JPEG"))) == ["ltr"]
    assert nearest(pool, sample("q", gradient(False, (30, 30)))) == ["rtl"]


def test_a_sample_is_never_its_own_example_and_ties_keep_pool_order() -> None:
    twins = [sample("a", square((0, 0, 255))), sample("b", square((0, 0, 255))), sample("c", square((255, 0, 0)))]
    spec = load_spec_with({"choice": "topk_img", "k": 2})
    pool = pool_of(twins)
    assert [s.id for s in icl.choose(spec, pool, twins[0], seed=0)] == ["b", "c"]
    assert [s.id for s in icl.choose(spec, pool, twins[1], seed=0)] == ["a", "c"]
    # a query equally close to a and b (identical images): a comes first, on every call
    query = sample("q", square((0, 0, 200)))
    assert [[s.id for s in icl.choose(spec, pool, query, seed=s)] for s in (0, 1, 2)] == [["a", "b"]] * 3


def test_several_images_average_and_unreadable_ones_rank_last() -> None:
    pool = pool_of([sample("broken", b"not an image"), sample("red", square((255, 0, 0))), *POOL[2:4]])
    assert pool.vectors is not None and pool.vectors[0] is None
    # red + blue in one sample: red and blue are equally near (0.71), green is not (0)
    assert nearest(pool, sample("q", square((255, 0, 0)), square((0, 0, 255))), k=3) == ["red", "blue", "green"]
    # an unreadable query leaves the readable examples in pool order, the unreadable one last
    assert nearest(pool, sample("q", b"\x89PNG truncated"), k=4) == ["red", "green", "blue", "broken"]


def load_spec_with(in_context: dict[str, Any], tmp: Path | None = None, image_column: str | None = "image") -> Any:
    from evalkit.catalog import DatasetSpec

    return DatasetSpec(
        name="colours",
        task="vqa",
        category="vision",
        file="runspecs/vision/colours.json",
        path="test.jsonl",
        language="en",
        image_column=image_column,
        textual_input_column="question",
        in_context={"path": "train.jsonl", **in_context},
    )


def write_colour_set(root: Path, in_context: dict[str, Any], image_column: str | None = "image") -> Path:
    """A pool of three one-colour squares (each its own size) and two questions; the runspec under root."""
    (root / "img").mkdir(parents=True, exist_ok=True)
    pool = {"red": ((255, 0, 0), (30, 20)), "green": ((0, 160, 0), (40, 20)), "blue": ((0, 0, 255), (50, 20))}
    for name, (rgb, size) in pool.items():
        (root / "img" / f"{name}.png").write_bytes(square(rgb, size))
    (root / "img" / "q_red.jpg").write_bytes(square((210, 20, 10), (64, 64), "JPEG"))
    (root / "img" / "q_blue.png").write_bytes(square((20, 30, 230), (64, 48)))
    with (root / "train.jsonl").open("w") as handle:
        for name in pool:
            handle.write(json.dumps({"id": f"t_{name}", "image": f"img/{name}.png", "question": "C?", "answer": name}))
            handle.write("\n")
    with (root / "test.jsonl").open("w") as handle:
        for name, file in (("s_red", "q_red.jpg"), ("s_blue", "q_blue.png")):
            colour = name.removeprefix("s_")
            handle.write(json.dumps({"id": name, "image": f"img/{file}", "question": "Colour?", "answer": colour}))
            handle.write("\n")
    entry: dict[str, Any] = {
        "path": "../../test.jsonl",
        "language": "en",
        "modality": "image+text",
        "id_column": "id",
        "textual_input_column": "question",
        "target_column": "answer",
        "in_context": {"path": "../../train.jsonl", **in_context},
    }
    if image_column:
        entry["image_column"] = image_column
    specs = root / "runspecs" / "vision"
    specs.mkdir(parents=True, exist_ok=True)
    (specs / "colours.json").write_text(json.dumps({"_task": {"metrics": ["exact_match"]}, "colours": entry}))
    return root / "runspecs"


def _sent(server: Any) -> dict[str, list[tuple[str, str, list[tuple[str, int]]]]]:
    """Each request's messages (role, text, images as format and width), by the format of the sample's image."""
    out = {}
    for event in server.log_events("completed"):
        messages = event["messages"]
        shown = [(m["role"], m["text"], [(i["format"], i["width"]) for i in m.get("images", [])]) for m in messages]
        out[messages[-1]["images"][0]["format"]] = shown
    return out


def test_evalkit_run_shows_the_nearest_example_image_before_the_sample_image(tmp_path: Path, make_server) -> None:
    runspecs = write_colour_set(tmp_path, {"choice": "topk_img", "k": 1})
    server = make_server({"image_answer": "colour", "request_log": str(tmp_path / "server.jsonl")})
    config = config_for(tmp_path, runspecs, [model_entry("vlm", server.base_url)], [["colours", "exact_match"]])
    outcome = run(config)
    assert outcome.requests_sent == 2
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    records = {
        r["sample_id"]: r
        for path in (run_dir / "records").glob("*.jsonl")
        for r in map(json.loads, path.read_text().splitlines())
    }
    assert {k: r["prompt"]["examples"] for k, r in records.items()} == {"s_red": ["t_red"], "s_blue": ["t_blue"]}
    assert {r["prompt"]["example_choice"] for r in records.values()} == {"topk_img"}
    assert {r["prompt"]["example_embedding"] for r in records.values()} == {"thumbnail16"}
    # the server answers the colour of the last user message's image: the sample's, not the example's
    assert {k: r["prediction"] for k, r in records.items()} == {"s_red": "red", "s_blue": "blue"}
    # the example's image (each pool image has its own width: red 30, green 40, blue 50) and answer come first
    assert _sent(server) == {
        "jpeg": [("user", "C?", [("png", 30)]), ("assistant", "red", []), ("user", "Colour?", [("jpeg", 64)])],
        "png": [("user", "C?", [("png", 50)]), ("assistant", "blue", []), ("user", "Colour?", [("png", 64)])],
    }


def test_k_examples_come_nearest_first(tmp_path: Path, make_server) -> None:
    runspecs = write_colour_set(tmp_path, {"choice": "topk_img", "k": 2})
    server = make_server({"image_answer": "colour", "request_log": str(tmp_path / "server.jsonl")})
    run(config_for(tmp_path, runspecs, [model_entry("vlm", server.base_url)], [["colours", "exact_match"]]))
    sent = _sent(server)
    # (210, 20, 10): cosine 0.994 with red, 0.095 with green, 0.047 with blue; (20, 30, 230): blue, green, red
    assert [(text, [w for _, w in images]) for _, text, images in sent["jpeg"]] == [
        ("C?", [30]),
        ("red", []),
        ("C?", [40]),
        ("green", []),
        ("Colour?", [64]),
    ]
    assert [(text, [w for _, w in images]) for _, text, images in sent["png"]] == [
        ("C?", [50]),
        ("blue", []),
        ("C?", [40]),
        ("green", []),
        ("Colour?", [64]),
    ]


@pytest.mark.parametrize(
    ("in_context", "image_column", "message"),
    [
        (
            {"choice": "topk_img"},
            None,
            "colours.in_context.choice: 'topk_img' compares images, and this dataset has no",
        ),
        ({"choice": "topk_img", "embeding_model": "x"}, "image", "colours.in_context: unknown key(s) embeding_model"),
        ({"choice": "similar", "embedding_model": "x"}, "image", "embedding_model: only `choice: topk_img` uses"),
        ({"choice": "topk_img", "embedding_model": 3}, "image", "expected a local model path or a hub id, got 3"),
    ],
)
def test_bad_in_context_blocks_stop_before_the_run(
    tmp_path: Path, in_context: dict[str, Any], image_column: str | None, message: str
) -> None:
    runspecs = write_colour_set(tmp_path, in_context, image_column)
    config = config_for(tmp_path, runspecs, [model_entry("vlm", "http://127.0.0.1:9")], [["colours", "exact_match"]])
    with pytest.raises(RunspecError) as raised:
        build_plan(load_config(config), load_catalog([runspecs]), source=str(config))
    text = str(raised.value)
    assert message in text and str(runspecs / "vision" / "colours.json") in text


def test_evalkit_run_exits_2_naming_the_file_and_key(tmp_path: Path) -> None:
    runspecs = write_colour_set(tmp_path, {"choice": "topk_img"}, image_column=None)
    config = config_for(tmp_path, runspecs, [model_entry("vlm", "http://127.0.0.1:9")], [["colours", "exact_match"]])
    done = evalkit_cli(["run", str(config), "--quiet"], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    text = " ".join(done.stderr.split())
    assert "colours.json" in text and "colours.in_context.choice: 'topk_img' compares images" in text
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight CLIP (tiny vision tower) with its image processor, saved locally."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    config = transformers.CLIPConfig(
        text_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2},
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=8,
    )
    folder = tmp_path_factory.mktemp("tiny_clip")
    transformers.CLIPModel(config).save_pretrained(folder)
    size = {"shortest_edge": 32}
    transformers.CLIPImageProcessor(size=size, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def test_a_clip_model_embeds_for_topk_img(tiny_clip: Path) -> None:
    pool = pool_of(POOL, str(tiny_clip))
    assert pool.embedder is not None and pool.embedder.name == str(tiny_clip)
    vectors = pool.vectors or []
    assert all(v is not None and v.shape == (8,) for v in vectors)
    # an image identical to a pool image is nearest to it (cosine 1), whatever the random weights
    for example in POOL:
        assert nearest(pool, Sample(id="q", images=example.images)) == [example.id]
    # the same image gives the same vector on every call
    again = icl.query_vector(pool, POOL[1])
    assert again is not None and vectors[1] is not None and (again == vectors[1]).all()


def test_evalkit_run_with_a_clip_embedding_records_the_model(tmp_path: Path, make_server, tiny_clip: Path) -> None:
    runspecs = write_colour_set(tmp_path, {"choice": "topk_img", "embedding_model": str(tiny_clip)})
    server = make_server({"image_answer": "colour"})
    outcome = run(config_for(tmp_path, runspecs, [model_entry("vlm", server.base_url)], [["colours", "exact_match"]]))
    assert outcome.requests_sent == 2
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    records = [json.loads(line) for p in (run_dir / "records").glob("*.jsonl") for line in p.read_text().splitlines()]
    assert {r["prompt"]["example_embedding"] for r in records} == {str(tiny_clip)}
    assert all(len(r["prompt"]["examples"]) == 1 for r in records)
