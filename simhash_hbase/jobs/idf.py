"""The IDF-table job: read a corpus, count document frequencies, write the table."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from simhash_hbase.fingerprint.simhash import Fingerprinter, build_idf, write_idf
from simhash_hbase.records import BadRecord, Record
from simhash_hbase.text.readers import SourceOptions, read_sources


def build_idf_file(
    paths: Sequence[str], opts: SourceOptions, output: str
) -> tuple[int, list[BadRecord]]:
    """Write the IDF table of the corpus at ``paths`` to ``output`` (never read as
    input); the number of terms, and the records skipped."""
    skipped: list[BadRecord] = []

    def texts() -> Iterator[str]:
        for r in read_sources(paths, opts, exclude=[Path(output)]):
            if isinstance(r, Record):
                yield r.text
            else:
                skipped.append(r)

    table = build_idf(texts(), Fingerprinter())
    write_idf(table, output)
    return len(table), skipped
