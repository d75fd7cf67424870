"""The index manifest: the parameters that make fingerprints comparable.

Stored with the index (embedded: ``meta`` database, key ``manifest``; HBase: table
``<prefix>_meta``, row ``manifest``, column ``m:json``), as JSON.
"""

from __future__ import annotations

from typing import Any

from .errors import ManifestMismatch
from .fingerprint import FingerprintParams
from .scheme import Scheme, get_scheme
from .version import __version__

FORMAT_VERSION = 1
MANIFEST = "manifest"  # its name in the meta table


def build_manifest(scheme: Scheme, params: FingerprintParams) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "scheme": scheme.name,
        "fingerprint": params.manifest(),
        "created_by": f"simhash-hbase {__version__}",
    }


def _differences(stored: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    keys = sorted(set(stored) | set(wanted))
    return [
        f"{key}: index has {stored.get(key)!r}, you asked for {wanted.get(key)!r}"
        for key in keys
        if stored.get(key) != wanted.get(key)
    ]


def _mismatch(where: str, diffs: list[str], hint: str) -> ManifestMismatch:
    return ManifestMismatch(
        f"the index at {where} was built with other parameters:\n  "
        + "\n  ".join(diffs)
        + f"\n{hint}"
    )


def check_format(stored: dict[str, Any], where: str) -> None:
    if stored.get("format_version") != FORMAT_VERSION:
        raise _mismatch(
            where,
            _differences(
                {"format_version": stored.get("format_version")}, {"format_version": FORMAT_VERSION}
            ),
            "upgrade simhash-hbase, or rebuild the index with this version",
        )


def resolve_scheme(stored: dict[str, Any], wanted: str | None, where: str) -> Scheme:
    if wanted is not None and wanted != stored["scheme"]:
        raise _mismatch(
            where,
            _differences({"scheme": stored["scheme"]}, {"scheme": wanted}),
            "open it without --scheme, or use a new index for the other scheme",
        )
    return get_scheme(stored["scheme"])


def stored_params(stored: dict[str, Any], idf_path: str | None) -> FingerprintParams:
    """The params an index was built with (a custom IDF table must be supplied)."""
    fp = stored["fingerprint"]
    return FingerprintParams(top_n=fp["top_n"], seed=fp["seed"], idf_path=idf_path)


def check_params(stored: dict[str, Any], params: FingerprintParams, where: str) -> None:
    diffs = _differences(stored["fingerprint"], params.manifest())
    if diffs:
        raise _mismatch(
            where,
            diffs,
            "fingerprints made with other parameters are not comparable: open the index "
            "with the parameters above (e.g. the same --idf table and --top-n), or "
            "ingest into a new index",
        )
