"""Language names and codes, normalised to ISO 639-1.

Datasets spell languages in every way there is ("en", "EN", "english",
"en_us", "eng", "cmn_hans_cn", "Mandarin Chinese"); tokenizers, normalizers
and per-language report rows need one spelling. Everything here maps to the
ISO 639-1 code, or to the ISO 639-3 code for the few languages without one
(``yue``, ``ast``, ``ceb``, ...).

A value with two subtags ("en-de", "pt_BR") is either a translation pair or
a locale. The rules, applied in order:

1. the second subtag is a script ("zh-Hans") or a region written in upper
   case after a lower-case language ("pt-BR", "es-419"): a locale -> "pt";
2. both halves are known languages ("en-de", "EN-DE", "english-german"):
   a pair -> "en-de", except a few locales whose region code is also a
   language code and whose pair reading is implausible (``pt-br``: Breton,
   ``zh-tw``: Twi, ``ms-my``: Burmese, ``ff-sn``: Shona for FLEURS' Fula of Senegal, ``kea-cv``:
   Chuvash for FLEURS' Kabuverdianu of Cape Verde);
3. the second subtag is a region code ("en_us", "de-at"): a locale -> "en";
4. anything else is an error.

Three or more subtags ("zh-Hans-CN", "cmn_hans_cn") are always a locale.
Write a region in upper case to force the locale reading.
"""

from __future__ import annotations

import re
from functools import lru_cache

from evalkit.errors import UserError, did_you_mean


class UnknownLanguageError(ValueError, UserError):
    """A language value that maps to no known language.

    It is a ValueError for library callers and a UserError so the CLI
    prints it as a user mistake (exit 2, no traceback).
    """


# code: (English name, other codes and names that mean the same language).
# Other codes are ISO 639-2/B, 639-2/T and 639-3 (macro)language codes.
_LANGUAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ab": ("Abkhaz", ("abk", "abkhazian")),
    "af": ("Afrikaans", ("afr",)),
    "am": ("Amharic", ("amh",)),
    "ar": ("Arabic", ("ara", "arb", "modern standard arabic")),
    "as": ("Assamese", ("asm",)),
    "ast": ("Asturian", ()),
    "az": ("Azerbaijani", ("aze", "azj", "azeri")),
    "ba": ("Bashkir", ("bak",)),
    "bas": ("Basaa", ("basa",)),
    "be": ("Belarusian", ("bel", "belarusan")),
    "bg": ("Bulgarian", ("bul",)),
    "bn": ("Bengali", ("ben", "bangla")),
    "bo": ("Tibetan", ("bod", "tib")),
    "br": ("Breton", ("bre",)),
    "bs": ("Bosnian", ("bos",)),
    "ca": ("Catalan", ("cat", "valencian")),
    "ceb": ("Cebuano", ()),
    "cnh": ("Hakha Chin", ("hakha",)),
    "cs": ("Czech", ("ces", "cze")),
    "cv": ("Chuvash", ("chv",)),
    "cy": ("Welsh", ("cym", "wel")),
    "da": ("Danish", ("dan",)),
    "de": ("German", ("deu", "ger", "deutsch")),
    "dv": ("Dhivehi", ("div", "divehi", "maldivian")),
    "dyu": ("Dyula", ("jula", "dioula")),
    "el": ("Greek", ("ell", "gre", "modern greek")),
    "en": ("English", ("eng",)),
    "eo": ("Esperanto", ("epo",)),
    "es": ("Spanish", ("spa", "castilian", "espanol", "español")),
    "et": ("Estonian", ("est", "ekk")),
    "eu": ("Basque", ("eus", "baq")),
    "fa": ("Persian", ("fas", "per", "pes", "farsi")),
    "ff": ("Fula", ("ful", "fulah", "fulani", "pulaar")),
    "fi": ("Finnish", ("fin",)),
    "fr": ("French", ("fra", "fre", "francais", "français")),
    "fy": ("Western Frisian", ("fry", "frisian")),
    "ga": ("Irish", ("gle", "irish gaelic")),
    "gl": ("Galician", ("glg",)),
    "gu": ("Gujarati", ("guj",)),
    "ha": ("Hausa", ("hau",)),
    "he": ("Hebrew", ("heb",)),
    "hi": ("Hindi", ("hin",)),
    "hr": ("Croatian", ("hrv",)),
    "hsb": ("Upper Sorbian", ()),
    "hu": ("Hungarian", ("hun",)),
    "hy": ("Armenian", ("hye", "arm")),
    "ia": ("Interlingua", ("ina",)),
    "id": ("Indonesian", ("ind", "bahasa indonesia")),
    "ig": ("Igbo", ("ibo",)),
    "is": ("Icelandic", ("isl", "ice")),
    "it": ("Italian", ("ita", "italiano")),
    "ja": ("Japanese", ("jpn",)),
    "jv": ("Javanese", ("jav",)),
    "ka": ("Georgian", ("kat", "geo")),
    "kab": ("Kabyle", ("kabyle berber",)),
    "kam": ("Kamba", ("kikamba",)),
    "kea": ("Kabuverdianu", ("cape verdean creole",)),
    "kk": ("Kazakh", ("kaz",)),
    "km": ("Khmer", ("khm", "cambodian")),
    "kn": ("Kannada", ("kan",)),
    "ko": ("Korean", ("kor",)),
    "ku": ("Kurdish", ("kur", "ckb", "kmr", "sorani", "kurmanji")),
    "ky": ("Kyrgyz", ("kir", "kirghiz")),
    "la": ("Latin", ("lat",)),
    "lb": ("Luxembourgish", ("ltz", "letzeburgesch")),
    "lg": ("Ganda", ("lug", "luganda")),
    "ln": ("Lingala", ("lin",)),
    "lo": ("Lao", ("lao", "laotian")),
    "lt": ("Lithuanian", ("lit",)),
    "luo": ("Luo", ("dholuo",)),
    "lv": ("Latvian", ("lav", "lvs")),
    "mdf": ("Moksha", ()),
    "mg": ("Malagasy", ("mlg", "plt")),
    "mi": ("Maori", ("mri", "mao", "māori")),
    "mk": ("Macedonian", ("mkd", "mac")),
    "ml": ("Malayalam", ("mal",)),
    "mn": ("Mongolian", ("mon", "khk")),
    "mr": ("Marathi", ("mar",)),
    "ms": ("Malay", ("msa", "may", "zsm")),
    "mt": ("Maltese", ("mlt",)),
    "my": ("Burmese", ("mya", "bur", "myanmar")),
    "myv": ("Erzya", ()),
    "nb": ("Norwegian Bokmal", ("nob", "bokmal", "bokmål", "norwegian bokmål")),
    "ne": ("Nepali", ("nep", "npi", "nepalese")),
    "nl": ("Dutch", ("nld", "dut", "flemish")),
    "nn": ("Norwegian Nynorsk", ("nno", "nynorsk")),
    "no": ("Norwegian", ("nor",)),
    "nso": ("Northern Sotho", ("sepedi", "pedi", "sesotho sa leboa")),
    "ny": ("Nyanja", ("nya", "chichewa", "chewa")),
    "oc": ("Occitan", ("oci",)),
    "om": ("Oromo", ("orm", "gaz")),
    "or": ("Odia", ("ori", "ory", "oriya")),
    "pa": ("Punjabi", ("pan", "panjabi")),
    "pl": ("Polish", ("pol",)),
    "ps": ("Pashto", ("pus", "pbt", "pushto")),
    "pt": ("Portuguese", ("por", "portugues", "português")),
    "rm": ("Romansh", ("roh", "romansch", "rumantsch")),
    "ro": ("Romanian", ("ron", "rum", "moldavian", "moldovan")),
    "ru": ("Russian", ("rus",)),
    "rw": ("Kinyarwanda", ("kin",)),
    "sa": ("Sanskrit", ("san",)),
    "sah": ("Sakha", ("yakut",)),
    "sat": ("Santali", ()),
    "sc": ("Sardinian", ("srd",)),
    "sd": ("Sindhi", ("snd",)),
    "si": ("Sinhala", ("sin", "sinhalese")),
    "sk": ("Slovak", ("slk", "slo")),
    "sl": ("Slovenian", ("slv", "slovene")),
    "sn": ("Shona", ("sna",)),
    "so": ("Somali", ("som",)),
    "sq": ("Albanian", ("sqi", "alb", "als")),
    "sr": ("Serbian", ("srp",)),
    "sv": ("Swedish", ("swe",)),
    "sw": ("Swahili", ("swa", "swh", "kiswahili")),
    "ta": ("Tamil", ("tam",)),
    "te": ("Telugu", ("tel",)),
    "tg": ("Tajik", ("tgk", "tajiki")),
    "th": ("Thai", ("tha",)),
    "ti": ("Tigrinya", ("tir",)),
    "tl": ("Tagalog", ("tgl", "fil", "filipino")),
    "tok": ("Toki Pona", ()),
    "tr": ("Turkish", ("tur",)),
    "tt": ("Tatar", ("tat",)),
    "ug": ("Uyghur", ("uig", "uighur")),
    "uk": ("Ukrainian", ("ukr",)),
    "umb": ("Umbundu", ()),
    "ur": ("Urdu", ("urd",)),
    "uz": ("Uzbek", ("uzb", "uzn")),
    "vi": ("Vietnamese", ("vie",)),
    "vot": ("Votic", ("votian",)),
    "wo": ("Wolof", ("wol",)),
    "xh": ("Xhosa", ("xho", "isixhosa")),
    "yi": ("Yiddish", ("yid",)),
    "yo": ("Yoruba", ("yor",)),
    "yue": ("Cantonese", ("yue chinese", "zh-yue")),
    "zh": (
        "Chinese",
        ("zho", "chi", "cmn", "mandarin", "mandarin chinese", "putonghua", "simplified chinese", "traditional chinese"),
    ),
    "zu": ("Zulu", ("zul", "isizulu")),
}

#: languages written without spaces between words: word-level metrics make no
#: sense for them, so WER becomes CER and BLEU uses a character tokenizer.
SPACELESS: frozenset[str] = frozenset({"zh", "ja", "th", "lo", "km", "my", "yue", "bo"})

# ISO 3166-1 alpha-2 regions seen in locale tags of the languages above.
_REGIONS: frozenset[str] = frozenset(
    [
        "ad",
        "ae",
        "af",
        "al",
        "am",
        "ao",
        "ar",
        "at",
        "au",
        "az",
        "ba",
        "bd",
        "be",
        "bf",
        "bg",
        "bh",
        "bi",
        "bj",
        "bn",
        "bo",
        "br",
        "bw",
        "by",
        "bz",
        "ca",
        "cd",
        "cf",
        "cg",
        "ch",
        "ci",
        "cl",
        "cm",
        "cn",
        "co",
        "cr",
        "cu",
        "cv",
        "cy",
        "cz",
        "de",
        "dj",
        "dk",
        "do",
        "dz",
        "ec",
        "ee",
        "eg",
        "er",
        "es",
        "et",
        "fi",
        "fj",
        "fr",
        "ga",
        "gb",
        "ge",
        "gh",
        "gm",
        "gn",
        "gq",
        "gr",
        "gt",
        "gw",
        "hk",
        "hn",
        "hr",
        "ht",
        "hu",
        "id",
        "ie",
        "il",
        "in",
        "iq",
        "ir",
        "is",
        "it",
        "jm",
        "jo",
        "jp",
        "ke",
        "kg",
        "kh",
        "km",
        "kp",
        "kr",
        "kw",
        "kz",
        "la",
        "lb",
        "li",
        "lk",
        "lr",
        "ls",
        "lt",
        "lu",
        "lv",
        "ly",
        "ma",
        "mc",
        "md",
        "me",
        "mg",
        "mk",
        "ml",
        "mm",
        "mn",
        "mo",
        "mr",
        "mt",
        "mu",
        "mv",
        "mw",
        "mx",
        "my",
        "mz",
        "na",
        "ne",
        "ng",
        "ni",
        "nl",
        "no",
        "np",
        "nz",
        "om",
        "pa",
        "pe",
        "pg",
        "ph",
        "pk",
        "pl",
        "pr",
        "ps",
        "pt",
        "py",
        "qa",
        "ro",
        "rs",
        "ru",
        "rw",
        "sa",
        "sc",
        "sd",
        "se",
        "sg",
        "si",
        "sk",
        "sl",
        "sn",
        "so",
        "sr",
        "ss",
        "st",
        "sv",
        "sy",
        "sz",
        "td",
        "tg",
        "th",
        "tj",
        "tl",
        "tm",
        "tn",
        "to",
        "tr",
        "tt",
        "tw",
        "tz",
        "ua",
        "ug",
        "uk",
        "us",
        "uy",
        "uz",
        "va",
        "ve",
        "vn",
        "vu",
        "ws",
        "ye",
        "za",
        "zm",
        "zw",
    ]
)

# "xx-yy" read as a locale although both halves are language codes.
_LOCALE_NOT_PAIR: frozenset[tuple[str, str]] = frozenset(
    {("pt", "br"), ("zh", "tw"), ("ms", "my"), ("ff", "sn"), ("kea", "cv")}
)

_SCRIPT_RE = re.compile(r"^[A-Za-z]{4}$")
_REGION_RE = re.compile(r"^(?:[A-Za-z]{2}|\d{3})$")
_SEPARATORS = re.compile(r"[-_]")


@lru_cache(maxsize=1)
def _lookup() -> dict[str, str]:
    """Every accepted spelling (lower case) -> canonical code."""
    table: dict[str, str] = {}
    for code, (name, others) in _LANGUAGES.items():
        table[code] = code
        table[name.lower()] = code
        for other in others:
            table[other.lower()] = code
    return table


def _one(token: str) -> str | None:
    """A single language spelling -> code, or None."""
    return _lookup().get(" ".join(token.strip().lower().split()))


def _parse(value: str) -> tuple[str, str | None]:
    text = str(value).strip()
    if not text:
        raise UnknownLanguageError("empty language value")
    whole = _one(text)
    if whole is not None:
        return whole, None
    parts = [p for p in _SEPARATORS.split(text) if p]
    if len(parts) >= 2:
        first = _one(parts[0])
        rest = parts[1:]
        if len(parts) == 2:
            second_raw = rest[0]
            is_script = bool(_SCRIPT_RE.match(second_raw)) and second_raw.lower() not in _lookup()
            upper_region = (
                bool(_REGION_RE.match(second_raw))
                and (second_raw.isupper() or second_raw.isdigit())
                and not parts[0].isupper()
            )
            second = _one(second_raw)
            if first is not None and (is_script or upper_region):
                return first, None
            if first is not None and second is not None and (first, second_raw.lower()) not in _LOCALE_NOT_PAIR:
                return first, second
            if first is not None and second_raw.lower() in _REGIONS:
                return first, None
        elif first is not None and all(_SCRIPT_RE.match(p) or _REGION_RE.match(p) for p in rest):
            return first, None
    hint = did_you_mean(text.lower(), _lookup().keys())
    raise UnknownLanguageError(
        f"unknown language {value!r}{hint}; use an ISO 639 code (e.g. 'en'), an English name "
        "(e.g. 'english') or a translation pair (e.g. 'en-de')"
    )


def split_pair(value: str) -> tuple[str, str | None]:
    """``"en-de" -> ("en", "de")``; ``"en_US" -> ("en", None)``; unknown -> UnknownLanguageError."""
    return _parse(value)


def normalize_language(value: str) -> str:
    """The canonical code of a language ("en") or a translation pair ("en-de")."""
    source, target = _parse(value)
    return source if target is None else f"{source}-{target}"


def target_language(value: str | None) -> str | None:
    """The language a model's output is written in: the pair's target, else the language itself."""
    if value is None:
        return None
    source, target = _parse(value)
    return target or source


def is_spaceless(code: str | None) -> bool:
    """True for languages written without spaces between words (for a pair, the target decides)."""
    lang = target_language(code)
    return lang in SPACELESS


def language_name(code: str) -> str:
    """English name of a language ("German") or a pair ("English-German")."""
    source, target = _parse(code)
    name = _LANGUAGES[source][0]
    return name if target is None else f"{name}-{_LANGUAGES[target][0]}"


def known_languages() -> dict[str, str]:
    """Canonical code -> English name, for `evalkit list` and documentation."""
    return {code: name for code, (name, _) in _LANGUAGES.items()}
