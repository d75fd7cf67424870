"""Symbolic links are not followed out of an input folder unless asked (issue 22.6).

Folders with links of every kind (to files and folders, inside and outside the
input folder, loops back to it): without ``follow_symlinks`` nothing outside is
read and each link leading out is a skipped record naming it; with it, what
they lead to is read, and a loop ends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.readers import SourceOptions, read_sources

from .test_cli import shdb

LINKS = st.lists(
    st.tuples(st.sampled_from(["file", "dir"]), st.sampled_from(["inside", "outside", "loop"])),
    max_size=5,
)


def _tree(base: Path, links: list[tuple[str, str]]) -> tuple[Path, set[str], set[str], set[str]]:
    """The input folder; ids read without following, ids read when following
    (beyond those), and the links that lead out."""
    root, outside = base / "in", base / "out"
    (root / "sub").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    (root / "a.txt").write_text("甲 文本", "utf-8")
    (root / "sub" / "b.txt").write_text("乙 文本", "utf-8")
    (outside / "secret.txt").write_text("丙 机密", "utf-8")
    (outside / "deep" / "c.txt").write_text("丁 机密", "utf-8")
    plain, followed, out = {"a.txt", "sub/b.txt"}, set(), set()
    for i, (kind, where) in enumerate(links):
        link = root / f"l{i}"
        if kind == "file":
            target = root / "a.txt" if where != "outside" else outside / "secret.txt"
            link.symlink_to(target)
            (followed if where == "outside" else plain).add(f"l{i}")
        else:
            target = {"inside": root / "sub", "outside": outside, "loop": root}[where]
            link.symlink_to(target, target_is_directory=True)
            if where == "outside":
                followed.update({f"l{i}/secret.txt", f"l{i}/deep/c.txt"})
        if where == "outside":
            out.add(str(link))
    return root, plain, followed, out


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(links=LINKS)
def test_links_out_of_the_folder_are_named_not_followed(
    tmp_path_factory: pytest.TempPathFactory, links: list[tuple[str, str]]
) -> None:
    root, plain, _, out = _tree(tmp_path_factory.mktemp("t"), links)
    items = list(read_sources([str(root)], SourceOptions()))
    read = {r.doc_id for r in items if isinstance(r, Record)}
    skipped = [b for b in items if isinstance(b, BadRecord)]
    assert read == plain
    assert {b.where for b in skipped} == out
    assert all(b.problem is Problem.SYMLINK and "outside" in b.reason for b in skipped)
    assert not any("机密" in r.text for r in items if isinstance(r, Record))


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(links=LINKS)
def test_follow_symlinks_reads_them_and_a_loop_ends(
    tmp_path_factory: pytest.TempPathFactory, links: list[tuple[str, str]]
) -> None:
    root, plain, _, _ = _tree(tmp_path_factory.mktemp("t"), links)
    items = list(read_sources([str(root)], SourceOptions(follow_symlinks=True)))
    read = [r for r in items if isinstance(r, Record)]
    assert not [b for b in items if isinstance(b, BadRecord)]
    assert plain <= {r.doc_id for r in read}
    secrets = {r.text for r in read if "机密" in r.text}
    out = {k for k, w in links if w == "outside"}
    assert secrets == ({"丙 机密"} if out else set()) | ({"丁 机密"} if "dir" in out else set())
    assert len(read) <= 4 + 3 * len(links)  # each folder walked once: a loop ends


def test_store_text_copies_nothing_from_outside(tmp_path: Path) -> None:
    root, _, _, _ = _tree(tmp_path, [("file", "outside"), ("dir", "outside")])
    index = tmp_path / "ix"
    result = shdb("ingest", str(root), "-i", str(index), "--store-text")
    assert result.exit_code == 3, result.output
    for name in ("l0", "l1"):
        assert f"skipped {root / name}: a symbolic link to" in result.stderr
    from simhash_hbase import SimhashIndex

    with SimhashIndex.open(str(index), readonly=True) as ix:
        texts = [d.text or "" for d in ix.documents()]
    assert len(texts) == 2 and not any("机密" in t for t in texts)
