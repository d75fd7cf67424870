"""The sizes that decide when a batch's new cells commit in parts, when the fresh
tier is merged and when a lead is hot. Read through this module at call time
(``tuning.HOT``): tests set them small to reach each path with few documents.
"""

from __future__ import annotations

from simhash_hbase.store.lmdb.cells import CELL_BYTES

PART_BYTES = 8 << 20  # an index this big or more takes a batch's new cells in parts
MAX_PARTS = 16  # file overhead ~2/MAX_PARTS of the index; each part costs a commit
PART_MIN_CELLS = 1 << 16  # fewer new cells than this go in the batch's one commit
# The fresh tier is merged into the index once it holds this many cells and at
# least 1/FRESH_RATIO of the index's: a batch then rewrites the buckets of a
# small tier, and the big buckets are rewritten once per ~FRESH_RATIO-th growth.
FRESH_MIN_CELLS = 1 << 23
FRESH_RATIO = 8
#: A bucket's cells of one lead (two bytes of the field) past this many move to keys
#: of their own in ``hot`` (a hot row: mass copies of one fingerprint), so that no
#: batch or query reads or rewrites them whole (docs/SPEC.md, "Hot rows").
HOT = 2048
#: A bucket is checked for hot leads each time it grows past a multiple of this
#: many bytes (amortised: one check per CHECK_BYTES / 6 cells appended to it).
CHECK_BYTES = HOT * CELL_BYTES // 2
