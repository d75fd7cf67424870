"""The `shdb spark` commands under spark-submit, on a cluster.

    python -m simhash_hbase.spark.launcher --zip shdb.zip      # the package, for --py-files
    spark-submit --master yarn --py-files shdb.zip \\
        "$(python -c 'import simhash_hbase.spark.launcher as m; print(m.__file__)')" \\
        dedup hdfs:///crawl/2026-11.parquet --output hdfs:///dedup/2026-11 --clusters

Arguments after the launcher are those of ``shdb spark``. The master and every
other setting come from spark-submit. The executors import ``simhash_hbase``
from the zip; its dependencies (jieba, mmh3, numpy, happybase) must be
installed on every node, or shipped as a packed environment (``--archives``).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path


def write_zip(target: str) -> int:
    """Zip this ``simhash_hbase`` package (code and data files); the file count."""
    package = Path(__file__).resolve().parent.parent
    count = 0
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, path.relative_to(package.parent).as_posix())
                count += 1
    return count


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--zip"] and len(args) == 2:
        count = write_zip(args[1])
        print(f"wrote {count} files to {args[1]}; pass it to spark-submit --py-files")
        return
    from simhash_hbase.cli.app import app

    app(args=["spark", *args], prog_name="shdb spark")


if __name__ == "__main__":
    main()
