"""The IDF-table job: read a corpus, count document frequencies, write the table."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from itertools import chain
from pathlib import Path

from simhash_hbase.fingerprint.simhash import Fingerprinter, build_idf, write_idf
from simhash_hbase.layout.prepare import screen
from simhash_hbase.records import BadRecord, Record
from simhash_hbase.text.readers import SourceOptions, read_sources


def build_idf_file(
    paths: Sequence[str], opts: SourceOptions, output: str
) -> tuple[int | None, list[BadRecord]]:
    """Write the IDF table of the corpus at ``paths`` to ``output`` (never read as
    input); the number of terms (None: no document was read, and nothing written),
    and the records skipped, for the reasons an ingest skips them. A record needs
    no id: a table counts texts."""
    skipped: list[BadRecord] = []
    textual = dataclasses.replace(opts, needs_id=False)

    def texts() -> Iterator[str]:
        for item in read_sources(paths, textual, exclude=[Path(output)]):
            record = screen(item)
            if isinstance(record, Record):
                yield record.text
            else:
                skipped.append(record)

    stream = texts()
    first = next(stream, None)
    if first is None:
        return None, skipped
    table = build_idf(chain([first], stream), Fingerprinter())
    write_idf(table, output)
    return len(table), skipped
