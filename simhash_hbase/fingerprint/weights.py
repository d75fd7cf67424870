"""The weights' shaping after TF-IDF: version 2's count power and cap, version 4's
fixed-point cap.

Both paths to the top-N (the pure-Python one and the C kernels) hand it to
:func:`cap_weights`, so their fingerprints agree bit for bit whatever is decided here.
"""

from __future__ import annotations

import math
from itertools import accumulate

from simhash_hbase.fingerprint import scripts

#: v2: no term weighs more than this share of the kept terms' total weight.
V2_WEIGHT_CAP = 0.2
#: v4, in texts whose top terms hold another script than Han and ASCII: no term weighs
#: more than this share of the capped total (:func:`fixed_cap`). Measured on the gettext
#: catalogs of 22 languages (docs/segmenters.md): 0.2, 0.15 and 0.1 left unrelated
#: documents within 3 bits in the development catalogs, 0.08 none (nor held out).
V4_WEIGHT_CAP = 0.08

Terms = list[tuple[str, float]]


def v2_count(n: int) -> float:
    """v2's count factor, ``n ** 1.75``: superlinear, so a text's recurring terms
    outweigh what an edit adds once or twice (a mirror's header and footer, an
    inserted sentence) and fewer bits flip. Square roots only: IEEE-754 rounds them
    exactly, where ``pow`` may differ in the last bit between C libraries."""
    return n * math.sqrt(n * math.sqrt(n))


def v2_cap(terms: Terms) -> Terms:
    """v2's cap: each weight at most :data:`V2_WEIGHT_CAP` of the kept terms' total,
    order kept. Without it one dominant term (a man page's command name) decides most
    bits alone, and distinct pages sharing it collide."""
    limit = V2_WEIGHT_CAP * math.fsum(w for _, w in terms)
    return [(term, min(w, limit)) for term, w in terms]


def fixed_cap(terms: Terms, share: float) -> Terms:
    """Each weight at most ``share`` of the *capped* total, order kept.

    :func:`v2_cap` measures the limit against a total that holds the heavy term's own
    uncapped weight, so a term of twice the rest's weight keeps more than half of the
    capped total and still sets most of the 64 bits alone: unrelated texts sharing it
    (a Hebrew 'הרפובליקה', a Korean '수') collided. Here the limit L solves
    ``L = share * (k * L + rest)`` for the k heaviest terms capped at L and the rest
    below it (water-filling). A text of too few terms for that (no more than
    ``1 / share``) weighs them all equally, the nearest it can come.
    """
    weights = sorted((w for _, w in terms), reverse=True)
    if not weights:
        return terms
    if share * len(weights) <= 1.0:  # too few terms: all weigh the lightest's weight
        return [(term, weights[-1]) for term, _ in terms]
    rests = list(accumulate(reversed(weights)))[::-1]  # rests[k]: sum of weights[k:]
    if weights[0] <= share * rests[0]:
        return terms  # no term above the share: nothing to cap
    # The k heaviest capped at level = share * rests[k] / (1 - share * k); the first k
    # whose next weight is no heavier than that level is the fixed point (it exists: at
    # k = n - 1 the level exceeds the lightest weight since share * n > 1; should
    # rounding say otherwise, all weigh the lightest's weight).
    levels = (
        (k, share * rests[k] / (1.0 - share * k)) for k in range(1, len(weights)) if share * k < 1.0
    )
    limit = next((level for k, level in levels if weights[k] <= level), weights[-1])
    return [(term, min(w, limit)) for term, w in terms]


def cap_weights(version: int, terms: Terms) -> Terms:
    """The version's cap (v2 on): v4 caps to a fixed point where a top term holds a
    character outside ASCII and Han (a text of Han and ASCII alone keeps v2's cap, and
    its fingerprint)."""
    if version >= 4 and scripts.other_script("".join([term for term, _ in terms])):
        return fixed_cap(terms, V4_WEIGHT_CAP)
    return v2_cap(terms)
