"""Other tools' variants (``auharness:<name>``, ``karma:<id>``) resolve their names but are not catalogue entries.

Listings, counts and the hub check go over the entries: a user reading `evalkit list datasets` sees each dataset
once, not once more per tool that names it.
"""

from __future__ import annotations

from evalkit.catalog import load_catalog
from evalkit.cli.listing import Filters, dataset_rows


def test_variants_resolve_but_are_not_listed() -> None:
    catalog = load_catalog()
    variants = {name for name, spec in catalog.datasets.items() if spec.variant_of is not None}
    assert variants and all(":" in name for name in variants)
    assert catalog.resolve("auharness:librispeech_test_clean")[0].name in variants  # the tool's name reaches it
    entries = catalog.entries()
    assert not variants & set(entries) and set(entries) | variants == set(catalog.datasets)
    listed = {row["name"] for row in dataset_rows(Filters())}
    assert listed == set(entries)
