"""`shdb`: the command line over the library, assembled from one module per group.

Each command parses (options from :mod:`~simhash_hbase.cli.options`), calls one
library function and renders (:mod:`~simhash_hbase.cli.render`, which also owns
the hints and exit codes).
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from simhash_hbase.cli.render import Group
from simhash_hbase.version import __version__

#: Every command and command group, by name: where it lives (module, attribute).
#: A module is imported when its command runs or is listed in help, never before,
#: so a one-shot ``shdb query`` does not load what ingest, dedup, Spark or the
#: service need (tests/test_lazy_imports.py).
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("simhash_hbase.cli.ingest", "ingest_cmd"),
    "query": ("simhash_hbase.cli.query", "query_cmd"),
    "fingerprint": ("simhash_hbase.cli.query", "fingerprint_cmd"),
    "stats": ("simhash_hbase.cli.query", "stats_cmd"),
    "get": ("simhash_hbase.cli.query", "get_cmd"),
    "remove": ("simhash_hbase.cli.admin", "remove_cmd"),
    "expire": ("simhash_hbase.cli.admin", "expire_cmd"),
    "verify": ("simhash_hbase.cli.admin", "verify_cmd"),
    "migrate": ("simhash_hbase.cli.admin", "migrate_cmd"),
    "compact": ("simhash_hbase.cli.admin", "compact_cmd"),
    "dedup": ("simhash_hbase.cli.dedup", "dedup_cmd"),
    "idf": ("simhash_hbase.cli.admin", "idf_app"),
    "schema": ("simhash_hbase.cli.admin", "schema_cmd"),
    "plan": ("simhash_hbase.cli.plan", "plan_cmd"),
    "spark": ("simhash_hbase.cli.spark", "spark_app"),
    "serve": ("simhash_hbase.cli.serve", "serve_cmd"),
}


@cache
def load_command(name: str) -> Any:
    """The click command (or group) ``name``, built from its module on first use."""
    module, attribute = COMMANDS[name]
    target = getattr(import_module(module), attribute)
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    if isinstance(target, typer.Typer):  # a group (idf, spark), kept a group
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
        holder.callback()(_no_options)  # two levels, as in the root: a group holds it
    group = typer.main.get_command(holder)
    assert isinstance(group, TyperGroup), "a callback or a group makes it a group"
    return group.commands[name]


def _no_options() -> None:
    """The holder of one lazily built command."""


class LazyGroup(Group):
    """The root group: commands from :data:`COMMANDS`, each loaded when asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in COMMANDS:
            return load_command(cmd_name)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: no type noise, no boxes
    help="Near-duplicate text index: 64-bit SimHash, pigeonhole index on LMDB or HBase.",
)


def _version(value: bool) -> None:
    if value:
        from simhash_hbase import _native as native

        typer.echo(f"shdb (simhash-hbase) {__version__}")
        typer.echo(f"fingerprinting: {native.status()}")  # the C path or pure Python
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
