"""Language normalisation: codes, names, locales, pairs, errors."""

from __future__ import annotations

import pytest

from evalkit.errors import UserError
from evalkit.languages import (
    UnknownLanguageError,
    is_spaceless,
    known_languages,
    language_name,
    normalize_language,
    split_pair,
    target_language,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("english", "en"),
        ("English", "en"),
        ("  english ", "en"),
        ("en-US", "en"),
        ("en_us", "en"),
        ("eng", "en"),
        ("eng_Latn", "en"),
        ("mandarin", "zh"),
        ("Mandarin Chinese", "zh"),
        ("chinese", "zh"),
        ("zh-CN", "zh"),
        ("zh-Hant-TW", "zh"),
        ("cmn_hans_cn", "zh"),
        ("zh-tw", "zh"),
        ("cantonese", "yue"),
        ("yue", "yue"),
        ("pt-BR", "pt"),
        ("pt-br", "pt"),
        ("ff_sn", "ff"),
        ("fulah", "ff"),
        ("kam_ke", "kam"),
        ("kea_cv", "kea"),
        ("luo_ke", "luo"),
        ("nso_za", "nso"),
        ("sepedi", "nso"),
        ("es-419", "es"),
        ("de-at", "de"),
        ("deu", "de"),
        ("ger", "de"),
        ("fil", "tl"),
        ("farsi", "fa"),
        ("sr-Latn", "sr"),
        ("en-de", "en-de"),
        ("EN-DE", "en-de"),
        ("en_de", "en-de"),
        ("english-german", "en-de"),
        ("ca-es", "ca-es"),
        ("fr-CA", "fr"),
    ],
)
def test_normalize_language(value: str, expected: str) -> None:
    assert normalize_language(value) == expected


def test_split_pair() -> None:
    assert split_pair("en-de") == ("en", "de")
    assert split_pair("German") == ("de", None)
    assert split_pair("en-US") == ("en", None)
    assert target_language("en-ja") == "ja"
    assert target_language("fr") == "fr"
    assert target_language(None) is None


@pytest.mark.parametrize("value", ["englsh", "xx", "klingon", "", "en-xx-yy-zz1"])
def test_unknown_language_raises(value: str) -> None:
    with pytest.raises(ValueError):
        normalize_language(value)


def test_unknown_language_error_is_a_user_error_with_hint() -> None:
    with pytest.raises(UnknownLanguageError) as info:
        normalize_language("englsh")
    assert isinstance(info.value, UserError)
    assert 'did you mean "english"' in str(info.value)


def test_spaceless() -> None:
    for code in ["zh", "ja", "th", "lo", "km", "my", "yue", "bo", "zh-CN", "Thai", "en-zh"]:
        assert is_spaceless(code), code
    for code in ["en", "de", "ko", "vi", "ar", "hi", "zh-en", None]:
        assert not is_spaceless(code), code


def test_names_and_coverage() -> None:
    assert language_name("de") == "German"
    assert language_name("en-de") == "English-German"
    assert language_name("mandarin") == "Chinese"
    table = known_languages()
    assert len(table) >= 60
    for code, name in table.items():
        assert normalize_language(code) == code
        assert normalize_language(name) == code
        assert normalize_language(name.upper()) == code
