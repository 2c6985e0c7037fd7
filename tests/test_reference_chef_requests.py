"""What evalkit sends for ChEF's scenario names, per sample, against what ChEF's own code builds.

ChEF's side is tests/fixtures/references/chef_requests.json (made by make_chef_requests.py there: each name's
scenario class at the pinned commit on the tiny LAMM folder tests/fixtures/data/chef_lamm, ChEF's instruction handler
with the recipe's settings, and ChEF's GPT client turning the prompts into requests). evalkit's side is a real run
of the entry the name reaches, reading the same folder, against the test server, whose request log is compared
(scripts/peer_requests.py): the user text, the message shape (where the image stands), and the generation settings
(the recipe's max_new_tokens as max_tokens, no temperature).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import doc_section

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "references" / "chef_requests.json").read_text(encoding="utf-8"))
_SPEC = importlib.util.spec_from_file_location("peer_requests", ROOT / "scripts" / "peer_requests.py")
assert _SPEC and _SPEC.loader
peer_requests: Any = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(peer_requests)

#: names whose request still differs, each with its reason in docs/chef.md ("ChEF names whose request still differs")
DIFFER = {"CIFAR10_LAMM": ("text",)}
#: names whose entry's metrics all need WordNet at plan time (ChEF's detection, locating and hair metrics)
NEEDS_WORDNET = {"VOC2012", "Locating_VOC2012", "CelebA(Hair)"}
#: names whose recipe fails in ChEF's own code on rows of its layout (recorded with ChEF's message)
FAILS_IN_CHEF = {"VOC2012_LAMM"}
AGREE = sorted(set(FIXTURE["names"]) - set(DIFFER) - FAILS_IN_CHEF)
DATA = ROOT / "tests" / "fixtures" / "data" / "chef_lamm"


@pytest.fixture
def wordnet(with_nltk_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ChEF's detection metrics need WordNet at plan time; the request does not depend on the metric."""
    monkeypatch.setenv("NLTK_DATA", str(with_nltk_data))


def _compared(name: str) -> dict[str, Any]:
    record = FIXTURE["names"][name]
    ours = peer_requests.evalkit_requests(
        peer_requests.chef_entry(name), ROOT / record["rows"] if "rows" in record else DATA
    )
    result = dict(peer_requests.compare(record["requests"], ours))
    result["params"] = peer_requests.params_agree(record["requests"][0]["params"], result.get("evalkit_params", {}))
    return result


def test_the_fixture_records_where_it_came_from() -> None:
    reference = FIXTURE["reference"]
    assert reference["repository"] == "OpenGVLab/LAMM"
    assert re.fullmatch(r"[0-9a-f]{40}", reference["commit"])
    assert {"file", "shim", "command", "data"} <= set(reference)
    assert set(DIFFER) | FAILS_IN_CHEF <= set(FIXTURE["names"])
    assert {name for name, record in FIXTURE["names"].items() if "error" in record} == FAILS_IN_CHEF


@pytest.mark.parametrize("name", AGREE)
def test_evalkit_sends_what_chef_sends(name: str, request: pytest.FixtureRequest) -> None:
    if name in NEEDS_WORDNET:
        request.getfixturevalue("wordnet")
    result = _compared(name)
    assert result["peer_n"] == result["evalkit_n"] > 0
    assert (result["text"], result["system"], result["shape"]) == (True, True, True), result["first_difference"]
    assert result["params"], (result["peer_params"], result["evalkit_params"])
    assert "temperature" not in result["evalkit_params"]


@pytest.mark.parametrize("name", sorted(DIFFER))
def test_a_listed_difference_is_still_the_one_listed(name: str) -> None:
    result = _compared(name)
    differing = tuple(key for key in ("text", "system", "shape") if not result[key])
    assert differing == DIFFER[name], result["first_difference"]
    assert result["params"]


def test_the_docs_list_every_name_that_still_differs() -> None:
    section = doc_section("ChEF names whose request still differs")
    for name in [*DIFFER, *FAILS_IN_CHEF]:
        assert f"`{name}`" in section, name
