"""The evaluation's edit generators do what their names say, on a whole corpus of
man-page-shaped documents and the short texts cut from them (the generated corpus),
deterministically, and within the budget of a short text."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

import pytest

from benchmarks import corpus
from benchmarks.edits import (
    BOILERPLATE,
    EDITS,
    EditContext,
    budget,
    edit,
    make_variants,
    numbers_changed,
    other_number,
    paragraph_moved,
)
from benchmarks.texts import (
    DIGIT_RUN,
    LONG_MIN,
    WORD_CHAR,
    Item,
    blocks,
    fold_of,
    long_stratum,
    rng_for,
    sentence_pool,
    short_items,
)


@cache
def _corpus() -> tuple[list[Item], list[tuple[str, str]]]:
    docs = corpus.generated(docs=24, seed=3)
    long_items = [Item(d, t, fold_of(d), long_stratum(t)) for d, t in docs]
    shorts = short_items(docs)
    assert {x.stratum for x in shorts} == {"line", "para"}
    return [x for x in long_items if x.stratum != "en"] + shorts, sentence_pool(docs)


def _edited(name: str) -> list[tuple[Item, str]]:
    items, pool = _corpus()
    lengths = [len(s) for _, s in pool]
    out = []
    for item in items:
        got = edit(item, name, EditContext(item.id, pool, lengths))
        if got is not None:
            out.append((item, got))
    assert out, f"{name} applied to no text of the corpus"
    return out


def _words(text: str) -> str:
    return "".join(WORD_CHAR.findall(text))


def _is_subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


@pytest.mark.parametrize("name", EDITS)
def test_every_edit_is_deterministic_and_changes_the_text(name: str) -> None:
    _, pool = _corpus()
    lengths = [len(s) for _, s in pool]
    for item, edited in _edited(name):
        assert edited != item.text
        assert WORD_CHAR.search(edited)
        again = edit(item, name, EditContext(item.id, pool, lengths))
        assert again == edited  # seeded by (seed, id, edit): a rerun gives the same pairs


@pytest.mark.parametrize("name", ["sentence_added", "sentence_removed", "boilerplate", "mirror"])
def test_short_texts_change_by_at_most_their_budget(name: str) -> None:
    for item, edited in _edited(name):
        if len(item.text) < LONG_MIN:
            assert abs(len(edited) - len(item.text)) <= budget(item.text), (item.id, edited)


def test_sentence_added_keeps_the_text_and_adds_another_documents_sentence() -> None:
    _, pool = _corpus()
    for item, edited in _edited("sentence_added"):
        assert _is_subsequence(item.text, edited)
        own = item.id.split("#", 1)[0]
        added = [s for d, s in pool if d != own and s in edited and s not in item.text]
        assert added, item.id


def test_sentence_removed_deletes_one_contiguous_piece() -> None:
    for item, edited in _edited("sentence_removed"):
        assert len(edited) < len(item.text)
        cut = next(i for i, (a, b) in enumerate(zip(item.text, edited + "\0")) if a != b)
        removed = len(item.text) - len(edited)
        # the edit removed text[cut' : cut' + removed] for some cut' <= cut
        assert any(item.text[:i] + item.text[i + removed :] == edited for i in range(cut + 1)), (
            item.id
        )
        assert len(WORD_CHAR.findall(item.text)) - len(WORD_CHAR.findall(edited)) >= 6


def test_boilerplate_only_adds_known_ads() -> None:
    for item, edited in _edited("boilerplate"):
        found = [b for b in BOILERPLATE if b in edited and b not in item.text]
        assert 1 <= len(found) <= 2
        assert _is_subsequence(item.text, edited)


def test_numbers_changed_keeps_everything_but_some_digits() -> None:
    for item, edited in _edited("numbers_changed"):
        assert len(edited) == len(item.text)
        assert DIGIT_RUN.sub("#", edited) == DIGIT_RUN.sub("#", item.text)
        before, after = DIGIT_RUN.findall(item.text), DIGIT_RUN.findall(edited)
        assert [len(x) for x in before] == [len(x) for x in after]
        assert 1 <= sum(a != b for a, b in zip(before, after)) <= 3


def test_numbers_changed_does_not_apply_without_digits() -> None:
    assert numbers_changed("没有数字的文本。", rng_for("t"), EditContext("x", [], [])) is None


@pytest.mark.parametrize("digits", ["0", "7", "42", "2024", "999", "00017"])
def test_other_number_differs_with_the_same_length(digits: str) -> None:
    for seed in range(20):
        new = other_number(digits, rng_for("n", seed))
        assert new != digits and len(new) == len(digits) and new.isdigit()


def test_punctuation_and_whitespace_keep_every_word_character() -> None:
    for item, edited in _edited("punct_whitespace"):
        assert _words(edited) == _words(item.text)
        # a line break between two Latin words becomes a space: words are never glued
        assert re.findall(r"[A-Za-z]+", edited) == re.findall(r"[A-Za-z]+", item.text)


def _moves(parts: list[str]) -> set[tuple[str, ...]]:
    """Every order of ``parts`` with one part moved elsewhere."""
    out = set()
    for i in range(len(parts)):
        rest = parts[:i] + parts[i + 1 :]
        for j in range(len(parts)):
            out.add((*rest[:j], parts[i], *rest[j:]))
    return out


def test_paragraph_moved_moves_exactly_one_paragraph() -> None:
    for item, edited in _edited("paragraph_moved"):
        assert Counter(edited) == Counter(item.text)
        if len(item.text) >= LONG_MIN:
            moves = {"\n".join(order) for order in _moves(blocks(item.text))}
            assert edited in moves, item.id


def test_paragraph_moved_needs_two_paragraphs() -> None:
    assert paragraph_moved("只有一段。", rng_for("p"), EditContext("x", [], [])) is None


def test_mirror_keeps_the_body_and_wraps_it() -> None:
    for item, edited in _edited("mirror"):
        if len(item.text) >= LONG_MIN:
            body = item.text.partition("\n")[2]
            assert body in edited and not edited.startswith(body)
            assert not edited.endswith(body)
        else:
            assert item.text in edited


def test_combined_declines_unless_two_edits_apply() -> None:
    """Three of the seven edits are drawn; on a one-clause text without digits only a
    few can apply, so some draws give nothing and the others give a changed text."""
    ctx = EditContext("x", [], [])
    text = "没有数字也没有标点的一句话"
    results = [edit(Item(f"id{n}", text, 0, "line"), "combined", ctx) for n in range(40)]
    assert None in results
    made = [r for r in results if r is not None]
    assert made and all(r != text for r in made)


def test_make_variants_lists_each_applicable_edit_once() -> None:
    items, pool = _corpus()
    variants = make_variants(items, pool)
    per_item = Counter((i, e) for i, e, _ in variants)
    assert max(per_item.values()) == 1
    assert {EDITS[e] for _, e, _ in variants} == set(EDITS)
