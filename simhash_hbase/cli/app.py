"""`shdb`: the command line over the library, assembled from one module per group.

Each command parses (options from :mod:`~simhash_hbase.cli.options`), calls one
library function and renders (:mod:`~simhash_hbase.cli.render`, which also owns
the hints and exit codes).
"""

from __future__ import annotations

from typing import Annotated

import typer

from simhash_hbase.cli import admin, dedup, ingest, query
from simhash_hbase.cli.render import Group
from simhash_hbase.cli.serve import serve_cmd
from simhash_hbase.cli.spark import spark_app
from simhash_hbase.version import __version__

app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: no type noise, no boxes
    help="Near-duplicate text index: 64-bit SimHash, pigeonhole index on LMDB or HBase.",
)
for name, command in (
    ("ingest", ingest.ingest_cmd),
    ("query", query.query_cmd),
    ("fingerprint", query.fingerprint_cmd),
    ("stats", query.stats_cmd),
    ("get", query.get_cmd),
    ("remove", admin.remove_cmd),
    ("verify", admin.verify_cmd),
    ("migrate", admin.migrate_cmd),
    ("dedup", dedup.dedup_cmd),
):
    app.command(name)(command)
app.add_typer(admin.idf_app, name="idf")
app.command("schema")(admin.schema_cmd)
app.add_typer(spark_app, name="spark")
app.command("serve")(serve_cmd)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"shdb (simhash-hbase) {__version__}")
        raise typer.Exit()


VersionFlag = Annotated[
    bool,
    typer.Option(
        "--version", metavar="", callback=_version, is_eager=True, help="Print the version."
    ),
]


@app.callback()
def _root(version: VersionFlag = False) -> None:
    """Near-duplicate text index (see `shdb COMMAND --help`)."""


def main() -> None:
    app()
