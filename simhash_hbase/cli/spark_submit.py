"""The `shdb spark` commands under spark-submit, on a cluster.

    python -m simhash_hbase.cli.spark_submit --zip shdb.zip      # the package, for --py-files
    spark-submit --master yarn --py-files shdb.zip \\
        "$(python -c 'import simhash_hbase.cli.spark_submit as m; print(m.__file__)')" \\
        dedup hdfs:///crawl/2026-11.parquet --output hdfs:///dedup/2026-11 --clusters

    spark-submit ... --jars "$(python -m simhash_hbase.cli.spark_submit --bulkload-jars)" ...

Arguments after this module are those of ``shdb spark``. The master and every
other setting come from spark-submit. The executors import ``simhash_hbase``
from the zip; its dependencies (jieba, mmh3, numpy, happybase) must be
installed on every node, or shipped as a packed environment (``--archives``).
"""

from __future__ import annotations

import sys
import zipfile
from importlib import resources
from pathlib import Path

from simhash_hbase.cli.app import app


def write_zip(target: str) -> int:
    """Zip this ``simhash_hbase`` package (code and data files) with its schema
    (the top-level ``schema/`` folder, as ``simhash_hbase/schema``); the file count."""
    package = Path(__file__).resolve().parent.parent
    schema = Path(str(resources.files("simhash_hbase.schema")))
    roots = [(package, "simhash_hbase")]
    if not schema.is_relative_to(package):  # a source tree; an installed wheel holds it
        roots.append((schema, "simhash_hbase/schema"))
    count = 0
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for root, inside in roots:
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    zf.write(path, f"{inside}/{path.relative_to(root).as_posix()}")
                    count += 1
    return count


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--zip"] and len(args) == 2:
        count = write_zip(args[1])
        print(f"wrote {count} files to {args[1]}; pass it to spark-submit --py-files")
        return
    if args == ["--bulkload-jars"]:  # for spark-submit --jars (ingest --bulk-load)
        from simhash_hbase.spark.hfiles import bulkload_jars

        print(",".join(bulkload_jars()))
        return
    app(args=["spark", *args], prog_name="shdb")


if __name__ == "__main__":
    main()
