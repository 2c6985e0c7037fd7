"""`evalkit view` in a real browser: Debian's chromium, driven by selenium, on a run made by `evalkit run`.

The run has a text, an audio and an image dataset, answered by the project's
test server for two models; the viewer runs as `evalkit view` does (a child
process, its URL read from its first line). The browser filters a pair, opens
a sample, and checks what a user would see: the audio element's source
decodes (a duration, no media error), the image loads (a natural width), an
answer holding ``<script>`` runs nothing; then the static export does the same
from file://. Screenshots go to ``$EVALKIT_TEST_ARTIFACTS/view`` when that is
set, else to pytest's temporary folder (the path is printed); with
``EVALKIT_VIEW_DOCS_IMAGES=<folder>`` they are also written there, which is how
the docs' screenshots in docs/images were made.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, config_for, evalkit_cli, model_entry, text_set, tone_wav
from PIL import Image

from evalkit.testing import audio_fingerprint

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

selenium = pytest.importorskip("selenium", reason="selenium is not installed (pip install selenium)")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CLIPS = [
    ("t1", "hello world", 220.0, 1.0),
    ("t2", "good morning everyone", 330.0, 2.0),
    ("t3", "the cat sat", 440.0, 1.5),
]
COLOURS = {"red": (220, 30, 30), "blue": (30, 30, 220), "green": (30, 180, 30)}
EVIL = "<script>document.title='owned'</script>"


def _datasets(root: Path) -> tuple[Path, dict[str, str]]:
    """Text, speech and image datasets in one runspec folder; the audio fingerprints' answers."""
    runspecs = text_set(root, 6)
    with (root / "data" / "synth_qa.jsonl").open("a") as handle:  # an answer that holds a script (echoed back)
        handle.write(json.dumps({"qid": "evil", "question": EVIL, "answer": "no"}) + "\n")
    audio = root / "audio"
    audio.mkdir()
    answers: dict[str, str] = {}
    with (root / "tones.jsonl").open("w") as handle:
        for clip_id, text, freq, seconds in CLIPS:
            wav = tone_wav(freq, seconds)
            (audio / f"{clip_id}.wav").write_bytes(wav)
            answers[audio_fingerprint(wav)] = text if clip_id != "t2" else "good morning every one"
            handle.write(json.dumps({"id": clip_id, "audio": f"audio/{clip_id}.wav", "text": text}) + "\n")
    (runspecs / "speech").mkdir()
    speech = {
        "_task": {"description": "tones with transcripts", "metrics": ["word_error_rate"]},
        "tones": {
            "path": "../../tones.jsonl",
            "language": "en",
            "modality": "audio",
            "id_column": "id",
            "audio_column": "audio",
            "target_column": "text",
            "instruction": "Transcribe the audio.",
        },
    }
    (runspecs / "speech" / "tones.json").write_text(json.dumps(speech))
    images = root / "images"
    images.mkdir()
    with (root / "colours.jsonl").open("w") as handle:
        for i, (name, rgb) in enumerate(COLOURS.items()):
            Image.new("RGB", (64 + 32 * i, 48), rgb).save(images / f"{name}.png", format="PNG")
            answer = name if name != "green" else "purple"
            handle.write(
                json.dumps({"id": f"c-{name}", "image": f"images/{name}.png", "question": "Colour?", "answer": answer})
                + "\n"
            )
    (runspecs / "vision").mkdir()
    vision = {
        "_task": {"metrics": ["exact_match"]},
        "colours": {
            "path": "../../colours.jsonl",
            "language": "en",
            "modality": "image+text",
            "id_column": "id",
            "image_column": "image",
            "textual_input_column": "question",
            "target_column": "answer",
        },
    }
    (runspecs / "vision" / "colours.json").write_text(json.dumps(vision))
    return runspecs, answers


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A run of two models on text, speech and image datasets, made by `evalkit run` against the test server."""
    from evalkit.testing import start_test_server

    root = tmp_path_factory.mktemp("viewrun")
    runspecs, answers = _datasets(root)
    t1 = next(fp for fp, text in answers.items() if text == "hello world")
    rules = [
        {"model": "beta", "audio_fingerprint": t1, "answer": "hello word"},
        {"model": "beta", "match": "question 2", "answer": "something else"},
    ]
    rules += [{"audio_fingerprint": fp, "answer": text} for fp, text in answers.items()]
    server = start_test_server({"image_answer": "colour", "answers": rules})
    try:
        pairs = [["synth_qa", "exact_match"], ["tones", "word_error_rate"], ["colours", "exact_match"]]
        models = [model_entry("alpha", server.base_url), model_entry("beta", server.base_url)]
        config = config_for(root, runspecs, models, pairs)
        done = evalkit_cli(["run", str(config), "--quiet", "--allow-failures"], root)
        assert done.returncode == 0, done.stderr
    finally:
        server.stop()
    yield root / "runs"


class Viewer:
    """`evalkit view RUNS --no-browser --port 0` in a child process; its URL from its first line.

    The datasets' audio and images sit beside the runs folder, outside the run: their folder is given as
    ``--media-root``, as a user gives a local dataset's folder.
    """

    def __init__(self, runs: Path, cache: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALKIT_CACHE_DIR": str(cache)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "view", str(runs), "--no-browser", "--port", "0"]
            + ["--media-root", str(runs.parent)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.fullmatch(r"evalkit view: (http://127\.0\.0\.1:\d+/)\n", line)
        assert found, line
        self.url = found.group(1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900", "--mute-audio"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_script_timeout(30)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = os.environ.get("EVALKIT_TEST_ARTIFACTS")
    folder = Path(base) / "view" if base else tmp_path_factory.getbasetemp() / "view-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nevalkit view screenshots: {folder}")
    return folder


def snap(driver: Any, shots: Path, name: str) -> None:
    """A screenshot kept as a test artefact (and for the docs when EVALKIT_VIEW_DOCS_IMAGES names a folder)."""
    path = shots / f"{name}.png"
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 1000
    docs = os.environ.get("EVALKIT_VIEW_DOCS_IMAGES")
    if docs:  # for the docs: a 256-colour PNG, a third of the size, the same to the eye
        Path(docs).mkdir(parents=True, exist_ok=True)
        with Image.open(path) as shot:
            shot.convert("RGB").quantize(256).save(Path(docs) / f"view-{name}.png", optimize=True)


AUDIO_STATE = """
const audio = document.querySelector(arguments[0]);
const done = arguments[arguments.length - 1];
const report = () => done({duration: audio.duration, error: audio.error ? audio.error.code : null,
                           ready: audio.readyState});
if (audio.readyState >= 1 || audio.error) { report(); return; }
audio.addEventListener("loadedmetadata", report);
audio.addEventListener("error", report);
audio.load();
"""

IMAGE_STATE = """
const image = document.querySelector(arguments[0]);
const done = arguments[arguments.length - 1];
const report = () => done({width: image.naturalWidth, complete: image.complete});
if (image.complete) { report(); return; }
image.addEventListener("load", report);
image.addEventListener("error", report);
"""


def _wait(driver: Any, css: str) -> Any:
    return WebDriverWait(driver, 30).until(lambda d: d.find_element(By.CSS_SELECTOR, css))


def check_media(driver: Any) -> None:
    audio = driver.execute_async_script(AUDIO_STATE, "audio")
    assert audio["error"] is None and audio["duration"] > 0, audio


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_filter_open_a_sample_hear_its_audio_and_see_its_image(
    real_run: Path, browser: Any, shots: Path, tmp_path: Path
) -> None:
    viewer = Viewer(real_run, tmp_path / "cache")
    try:
        browser.get(viewer.url)
        link = _wait(browser, "table.runs a")
        snap(browser, shots, "runs")
        link.click()
        _wait(browser, "table.results")
        snap(browser, shots, "run")
        # the score cell of beta on the speech pair leads to beta's samples of that pair
        cell = browser.find_element(By.CSS_SELECTOR, 'a[href*="/pair/tones/word_error_rate/?model=beta"]')
        cell.click()
        _wait(browser, "table.samples tbody tr")
        assert {td.text for td in browser.find_elements(By.CSS_SELECTOR, "table.samples td:nth-child(2)")} == {"beta"}
        # filter: every model, sorted worst first, with a text search over answers
        form = browser.find_element(By.ID, "filters")
        Select(form.find_element(By.NAME, "model")).select_by_value("")
        Select(form.find_element(By.NAME, "sort")).select_by_value("-score")
        form.find_element(By.NAME, "q").send_keys("hello")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(browser, 30).until(lambda d: "q=hello" in d.current_url)
        rows = browser.find_elements(By.CSS_SELECTOR, "table.samples tbody tr")
        assert len(rows) == 2 and all(r.text.startswith("t1 ") for r in rows)
        assert "beta" in rows[0].text and "hello word " in rows[0].text + " "  # the worse WER comes first
        snap(browser, shots, "pair")
        rows[0].find_element(By.CSS_SELECTOR, "a").click()
        _wait(browser, "audio")
        check_media(browser)
        page = browser.find_element(By.TAG_NAME, "main").text
        assert "Transcribe the audio." in page and "hello word\n" in page and "hello world" in page
        snap(browser, shots, "sample-audio")
        # the image of a VQA sample loads, next to both models' answers
        run_id = _run_id(real_run)
        browser.get(f"{viewer.url}run/{run_id}/sample/colours/exact_match/c-green")
        image = browser.execute_async_script(IMAGE_STATE, "figure.image img")
        assert image["complete"] and image["width"] == 128, image
        assert "green" in browser.find_element(By.TAG_NAME, "main").text
        snap(browser, shots, "sample-image")
        # an answer holding a script is shown as text and runs nothing
        browser.get(f"{viewer.url}run/{run_id}/sample/synth_qa/exact_match/evil")
        _wait(browser, "table.answers")
        assert browser.title.startswith("sample ") and "owned" not in browser.title
        assert EVIL in browser.find_element(By.CSS_SELECTOR, "table.answers").text
        # two models side by side: the samples whose score changed
        browser.get(f"{viewer.url}run/{run_id}/")
        browser.find_element(By.CSS_SELECTOR, 'a[href*="/compare/"][href*="synth_qa"]').click()
        _wait(browser, "table.changes tbody tr")
        assert "something else" in browser.find_element(By.CSS_SELECTOR, "table.changes").text
        snap(browser, shots, "compare")
    finally:
        viewer.stop()


def _run_id(runs: Path) -> str:
    return next(p.name for p in runs.iterdir() if p.is_dir() and (p / "run.json").is_file())


def test_the_export_works_from_file_urls(real_run: Path, browser: Any, shots: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "EVALKIT_CACHE_DIR": str(tmp_path / "cache")}
    done = evalkit_cli(
        ["view", str(real_run), "--export", str(site), "--media-root", str(real_run.parent)], tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    browser.get((site / "index.html").as_uri())
    _wait(browser, "table.runs a").click()
    _wait(browser, "table.results")
    browser.find_element(By.CSS_SELECTOR, 'a[href*="tones__word_error_rate"][href*="model=alpha"]').click()
    WebDriverWait(browser, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "table.samples tbody tr")) == 3)
    rows = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "table.samples tbody td:nth-child(3)")]
    assert sorted(rows) == ["1", "2", "3"], rows  # counted from 1, as the server's pages and evalkit's messages
    form = browser.find_element(By.ID, "filters")
    Select(form.find_element(By.NAME, "model")).select_by_value("")
    form.find_element(By.NAME, "q").send_keys("cat")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "table.samples tbody tr")) == 2)
    snap(browser, shots, "export-pair")
    shown_row = browser.find_element(By.CSS_SELECTOR, "table.samples tbody tr td:nth-child(3)").text
    browser.find_element(By.CSS_SELECTOR, "table.samples tbody tr a").click()
    _wait(browser, "audio")
    meta = browser.find_element(By.CSS_SELECTOR, "p.meta").text
    assert f"row {shown_row}" in meta, (shown_row, meta)  # the sample page counts as the table does, from 1
    check_media(browser)
    pics = next(site.rglob("colours__exact_match*/index.html"))
    browser.get(pics.as_uri())
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "table.samples tbody tr a"))
    browser.find_element(By.CSS_SELECTOR, "table.samples tbody tr a").click()
    image = browser.execute_async_script(IMAGE_STATE, "figure.image img")
    assert image["complete"] and image["width"] > 0, image
