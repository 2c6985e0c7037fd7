"""AU-Harness's remaining ASR names resolve to catalogue entries reading the data AU-Harness reads (issue 33).

Common Voice 15 (100 locales), Multilingual LibriSpeech, FLEURS umb_ao, GigaSpeech 2, SEAME dev_sge,
TED-LIUM 3 long-form, AMI, MNSC ASR and CallHome ASR. Common Voice 15 is gone from the hub (Mozilla now
hands its releases out through the Mozilla Data Collective only), so its entries are private: the user
points them at the release as Mozilla ships it, a language folder with ``test.tsv`` and ``clips/``, and that
layout is read here end to end against the test server.

``test_the_shipped_table_maps_every_name`` needs the mapping in ``runspecs/_names/auharness.json`` (each
name's ``evalkit``); the other tests patch a copy of the catalogue with the same mapping, so they hold
before and after it is written.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from helpers import ROOT, model_entry, run, write_config

from evalkit.catalog import Catalog, DatasetSpec, load_catalog
from evalkit.config import load_config
from evalkit.data.audio.decode import decode
from evalkit.data.counts import local_row_count
from evalkit.data.loading import iter_samples
from evalkit.errors import ConfigError
from evalkit.languages import normalize_language
from evalkit.plan import build_plan
from evalkit.testing import audio_fingerprint

_PREFIXES = ("common_voice_15_", "librispeech_multilingual_", "gigaspeech2_", "mnsc_asr_", "callhome_asr_", "ami_")
_SINGLES = ("fleurs_umb_ao", "seame_dev_sge", "tedlium3_long_form")


def _table_names() -> list[str]:
    catalog = load_catalog(cwd=ROOT)
    return [n for n in catalog.foreign["auharness"].datasets if n.startswith(_PREFIXES) or n in _SINGLES]


#: AU-Harness name -> catalogue entry: its own name, snake_case (``common_voice_15_zh-CN`` -> ``..._zh_cn``)
EXPECTED = {name: name.lower().replace("-", "_") for name in _table_names()}
#: where evalkit reads other coordinates than AU-Harness's config, because AU-Harness's cannot load
DELIBERATE = {
    # the hub has no subset "nl": its subsets are the languages' English names
    "librispeech_multilingual_dutch": "facebook/multilingual_librispeech:dutch/test",
    # AU-Harness's configs inherit the generic ASR defaults, so they name no dataset; the siblings' upload is meant
    "gigaspeech2_th_test": "AudioLLMs/gigaspeech2-test:th-test/test",
    "gigaspeech2_vi_test": "AudioLLMs/gigaspeech2-test:vi-test/test",
}
#: AU-Harness folders made of these names (and, for asr/fleurs, of names other entries already map)
GROUPS = ("common_voice_15", "librispeech_multilingual", "gigaspeech2", "mnsc", "ami", "callhome_asr", "fleurs", "asr")
CV_LOCALE_LANGUAGE = {"rm-sursilv": "rm", "rm-vallader": "rm"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(cwd=ROOT)


@pytest.fixture(scope="module")
def patched(catalog: Catalog) -> Catalog:
    """The catalogue with AU-Harness's table mapping these names, as the lead writes it into the shipped table."""
    names = catalog.foreign["auharness"]
    datasets = {
        name: entry.model_copy(update={"evalkit": EXPECTED[name]}) if name in EXPECTED else entry
        for name, entry in names.datasets.items()
    }
    copy = Catalog(
        datasets=catalog.datasets,
        tasks=catalog.tasks,
        categories=catalog.categories,
        roots=catalog.roots,
        aliases=catalog.aliases,
        foreign={**catalog.foreign, "auharness": names.model_copy(update={"datasets": datasets})},
    )
    return copy


def _reads(spec: DatasetSpec) -> str:
    where = f"{spec.hf_repo}:{spec.subset}" if spec.subset else str(spec.hf_repo)
    return f"{where}/{spec.split}"


def test_the_names_are_all_here() -> None:
    assert len(EXPECTED) == 126
    assert sum(name.startswith("common_voice_15_") for name in EXPECTED) == 100


def test_every_name_has_an_entry_reading_what_auharness_reads(catalog: Catalog) -> None:
    table = catalog.foreign["auharness"].datasets
    wrong = []
    for name, entry_name in EXPECTED.items():
        spec = catalog.datasets.get(entry_name)
        if spec is None:
            wrong.append(f"{name}: no entry {entry_name}")
            continue
        hub = table[name].hub
        if name.startswith("common_voice_15_"):
            locale = name.removeprefix("common_voice_15_")
            assert hub == f"mozilla-foundation/common_voice_15_0:{locale}/test"
            ok = (
                spec.private
                and (spec.data_files, spec.media_dir, spec.audio_column, spec.target_column)
                == ("test.tsv", "clips", "path", "sentence")
                and spec.language == (CV_LOCALE_LANGUAGE.get(locale) or normalize_language(locale))
                and f"({locale})" in str(spec.description)
                and "Mozilla Data Collective" in str(spec.description)
            )
        elif name.startswith("callhome_asr_"):
            assert hub is not None and hub.startswith("private_datasets/CallHome_")
            ok = spec.private and spec.target_column == "transcript" and "TalkBank" in str(spec.description)
        else:
            ok = _reads(spec) == DELIBERATE.get(name, hub)
        if not ok:
            wrong.append(f"{name}: entry {entry_name} reads {_reads(spec)}, AU-Harness {hub}")
    assert not wrong, "\n".join(wrong)


def test_languages_are_auharness_languages(catalog: Catalog) -> None:
    languages = {name: catalog.datasets[entry].language for name, entry in EXPECTED.items()}
    mls = {"dutch": "nl", "french": "fr", "german": "de", "italian": "it", "polish": "pl", "portuguese": "pt"}
    for config, code in {**mls, "spanish": "es"}.items():
        assert languages[f"librispeech_multilingual_{config}"] == code
    assert [languages[f"gigaspeech2_{c}_test"] for c in ("id", "th", "vi")] == ["id", "th", "vi"]
    assert [languages[f"callhome_asr_{c}"] for c in ("deu", "eng", "jpn", "spa", "zho")] == [
        "de",
        "en",
        "ja",
        "es",
        "zh",
    ]
    assert languages["fleurs_umb_ao"] == "umb" and languages["common_voice_15_zh-HK"] == "zh"
    assert {languages[n] for n in EXPECTED if n.startswith(("mnsc_asr_", "ami_"))} == {"en"}


def test_the_language_table_knows_every_common_voice_locale() -> None:
    """Locales new to evalkit's table resolve, and a region that is now also a language stays a region."""
    for code in ("ab", "bas", "cnh", "cv", "dv", "dyu", "hsb", "ia", "kab", "mdf", "mg", "myv", "rm", "sah", "sat"):
        assert normalize_language(code) == code
    for code in ("sc", "tok", "vot", "umb"):
        assert normalize_language(code) == code
    assert normalize_language("Upper Sorbian") == "hsb" and normalize_language("chv") == "cv"
    assert normalize_language("kea_cv") == "kea"  # FLEURS' Kabuverdianu of Cape Verde, not a Kabuverdianu-Chuvash pair
    assert normalize_language("umb_ao") == "umb"


def test_names_resolve_with_and_without_prefix(patched: Catalog) -> None:
    for name, entry in EXPECTED.items():
        # AU-Harness's variant of the entry: its data, AU-Harness's request
        want = [(f"auharness:{name}", entry)]
        assert [s.variant_of or s.name for s in patched.resolve(name)] == [entry], name  # evalkit's own name wins
        assert [(s.name, s.variant_of) for s in patched.resolve(f"auharness:{name}")] == want, name
        assert patched.entry_name(f"auharness:{name}") == entry


def test_groups_resolve_whole(patched: Catalog) -> None:
    groups = patched.foreign["auharness"].groups
    for group in GROUPS:
        found = {spec.variant_of or spec.name for spec in patched.resolve(f"auharness:{group}")}
        members = groups[group]
        assert len(found) == len(members), group  # every member, and no two onto one entry
        assert {EXPECTED[m] for m in members if m in EXPECTED} <= found, group
    assert len(patched.resolve("auharness:common_voice_15")) == 100


def test_the_shipped_table_maps_every_name(catalog: Catalog) -> None:
    """Needs the mapping written into runspecs/_names/auharness.json."""
    table = catalog.foreign["auharness"].datasets
    unmapped = sorted(name for name, entry in EXPECTED.items() if table[name].evalkit != entry)
    assert not unmapped, f"runspecs/_names/auharness.json does not map {len(unmapped)} names, e.g. {unmapped[:5]}"
    assert [s.variant_of for s in catalog.resolve("auharness:common_voice_15_zh-CN")] == ["common_voice_15_zh_cn"]
    assert {(s.variant_of or s.name) for s in catalog.resolve("auharness:mnsc")} == {
        f"mnsc_asr_part{i}_test" for i in range(1, 7)
    }


def _config(tmp_path: Path, pairs: list[list[Any]], **extra: Any) -> Path:
    data = {"dataset_metric": pairs, "models": [model_entry("m", "http://127.0.0.1:9/v1")], **extra}
    return write_config(tmp_path / "config.yaml", data)


def test_a_private_common_voice_entry_says_where_its_data_is_had(tmp_path: Path, patched: Catalog) -> None:
    config = _config(tmp_path, [["auharness:common_voice_15_zh-CN", "word_error_rate"]])
    with pytest.raises(ConfigError) as info:
        build_plan(load_config(config), catalog=patched, source=str(config))
    message = str(info.value)
    assert "'common_voice_15_zh_cn' is a private dataset" in message
    assert "Mozilla Data Collective" in message and "mozilla-foundation/common_voice_15_0" in message
    assert "dataset_paths: {common_voice_15_zh_cn:" in message
    # the whole folder: nothing can be read without paths, and the error says so for each locale
    config = _config(tmp_path, [["auharness:common_voice_15", "word_error_rate"]])
    with pytest.raises(ConfigError, match=r"no dataset of 'auharness:common_voice_15' can be read: common_voice_15_ab"):
        build_plan(load_config(config), catalog=patched, source=str(config))


def test_a_private_callhome_asr_entry_asks_for_its_table(tmp_path: Path) -> None:
    config = _config(tmp_path, [["callhome_asr_eng", "word_error_rate"]])
    with pytest.raises(ConfigError, match=r"'callhome_asr_eng' is a private dataset \(CallHome English \(TalkBank"):
        build_plan(load_config(config), source=str(config))


# A Common Voice release, as Mozilla ships it: <locale>/test.tsv (tab-separated, no quoting) naming clips/<file>.mp3.
HEADER = [
    "client_id",
    "path",
    "sentence",
    "up_votes",
    "down_votes",
    "age",
    "gender",
    "accents",
    "variant",
    "locale",
    "segment",
]
# the first sentence starts with a quotation mark, the second opens one it never closes: csv quoting would rewrite
# the first and swallow the rest of the file into the second
SENTENCES = ['"Hello," she said.', '"Wait for me, he cried']
ANSWERS = ["Hello, she said.", "wait for me he tried"]


def _mp3(index: int) -> bytes:
    t = np.arange(8000) / 16_000
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * (330 + 220 * index) * t)).astype(np.float32), 16_000, format="MP3")
    return buffer.getvalue()


def _release(root: Path) -> Path:
    folder = root / "cv-corpus-15.0-2023-09-08" / "en"
    (folder / "clips").mkdir(parents=True)
    lines = ["\t".join(HEADER)]
    for index, sentence in enumerate(SENTENCES):
        clip = f"common_voice_en_{39586336 + index}.mp3"
        (folder / "clips" / clip).write_bytes(_mp3(index))
        lines.append("\t".join([f"speaker{index}", clip, sentence, "2", "0", "", "female_feminine", "", "", "en", ""]))
    (folder / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "train.tsv").write_text("\t".join(HEADER) + "\n", encoding="utf-8")  # the other splits lie beside it
    return folder


def test_a_common_voice_release_folder_is_read_as_shipped(tmp_path: Path) -> None:
    folder = _release(tmp_path)
    config = _config(
        tmp_path, [["common_voice_15_en", "word_error_rate"]], dataset_paths={"common_voice_15_en": str(folder)}
    )
    (engine,) = build_plan(load_config(config), source=str(config)).engines
    spec = engine.dataset
    samples = list(iter_samples(spec))
    assert [s.reference for s in samples] == SENTENCES
    assert [s.id for s in samples] == ["common_voice_en_39586336.mp3", "common_voice_en_39586337.mp3"]
    assert [s.meta["speaker"] for s in samples] == ["speaker0", "speaker1"]
    for sample in samples:
        assert sample.audio is not None and Path(str(sample.audio.path)).parent == folder / "clips"
        array, rate = decode(sample.audio)
        assert rate == 16_000 and abs(len(array) - 8000) < 2000  # the mp3 decoder adds a frame of padding at most
    assert local_row_count(spec) == 2  # the counts read the tsv as the loader does


def test_a_common_voice_release_runs_end_to_end(tmp_path: Path, make_server: Any) -> None:
    folder = _release(tmp_path)
    clips = sorted((folder / "clips").iterdir())
    answers = [{"audio_fingerprint": audio_fingerprint(c.read_bytes()), "answer": a} for c, a in zip(clips, ANSWERS)]
    server = make_server({"answers": answers, "default_answer": "no rule matched this audio"})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["common_voice_15_en", "word_error_rate"]],
            "models": [model_entry("m", server.base_url)],
            "dataset_paths": {"common_voice_15_en": str(folder.relative_to(tmp_path))},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    outcome = run(config)
    (row,) = outcome.rows
    # "hello she said" matches; "wait for me he cried" has one substitution: 1 error over 8 reference words
    assert (row.dataset, row.n, row.n_failed) == ("common_voice_15_en", 2, 0)
    assert row.score == pytest.approx(1 / 8)
