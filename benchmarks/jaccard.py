"""Exact character-shingle Jaccard similarity: the baseline, and the label of near-copies."""

from __future__ import annotations

import multiprocessing

import numpy as np
import scipy.sparse

from .texts import WORD_RUN, Item

SHINGLE = 4


def shingles(text: str) -> set[str]:
    """Character 4-shingles after PyPI simhash's normalisation (lower case, \\w only)."""
    chars = "".join(WORD_RUN.findall(text.lower()))
    return {chars[i : i + SHINGLE] for i in range(max(len(chars) - SHINGLE + 1, 1))}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _jaccard_task(task: tuple[str, list[str]]) -> list[float]:
    original = shingles(task[0])
    return [jaccard(original, shingles(t)) for t in task[1]]


def edit_jaccards(
    originals: list[str], variants: list[list[str]], workers: int
) -> list[list[float]]:
    tasks = list(zip(originals, variants))
    if workers <= 1:
        return [_jaccard_task(t) for t in tasks]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(_jaccard_task, tasks, chunksize=8)


def within_fold_jaccard(items: list[Item]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs (i < j) of items in the same fold, with their exact shingle Jaccard.

    A sparse doc x shingle matrix times its transpose gives every intersection at once;
    a million pairs of Python set intersections would take hours on big man pages.
    """
    all_i, all_j, all_jac = [], [], []
    for fold in (0, 1):
        members = np.array([k for k, x in enumerate(items) if x.fold == fold], dtype=np.int64)
        if len(members) < 2:
            continue
        vocab: dict[str, int] = {}
        indptr: list[int] = [0]
        indices: list[int] = []
        for k in members:
            indices.extend(vocab.setdefault(s, len(vocab)) for s in shingles(items[k].text))
            indptr.append(len(indices))
        x = scipy.sparse.csr_matrix(
            (np.ones(len(indices), dtype=np.int32), indices, indptr),
            shape=(len(members), len(vocab)),
        )
        inter = (x @ x.T).toarray()
        size = np.diff(x.indptr)
        a, b = np.triu_indices(len(members), 1)
        both = inter[a, b]
        all_jac.append(both / (size[a] + size[b] - both))
        all_i.append(members[a])
        all_j.append(members[b])
    return np.concatenate(all_i), np.concatenate(all_j), np.concatenate(all_jac)
