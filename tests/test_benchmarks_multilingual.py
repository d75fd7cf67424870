"""The multilingual evaluation's held-out set (benchmarks/multilingual.py): split by
catalog, so that no program's wording is in both sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import multilingual as ml


def test_a_catalog_is_in_one_set_by_its_file_name_in_every_language() -> None:
    names = [f"prog{i}.mo" for i in range(200)]
    parts = {name: ml.part_of(Path("/x/ru/LC_MESSAGES") / name) for name in names}
    assert set(parts.values()) == set(ml.PARTS)  # both sets get catalogs
    for name in names:
        assert ml.part_of(Path("/y/he/LC_MESSAGES") / name) == parts[name]


@pytest.mark.skipif(not (ml.LOCALES / "ru").is_dir(), reason="no Russian gettext catalogs")
def test_the_two_sets_share_no_message() -> None:
    development, held = (set(ml.messages("ru", part)) for part in ml.PARTS)
    assert development and held
    assert not development & held
    docs = ml.documents("ru", "held-out", 5)
    assert len(docs) == 5 and all(set(doc.split("\n")) <= held for doc in docs)


def test_variants_of_one_message_are_left_out() -> None:
    help_text = "Removes entries from the directory stack. " + "With no arguments... " * 5
    texts = [help_text, "Remove directories from the stack. " + help_text, "Other text " * 9]
    kept = ml._distinct(sorted(texts))
    assert len(kept) == 2 and texts[2] in kept  # one variant of the help, and the other
