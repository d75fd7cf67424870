"""Every `shdb` option, defined once: typer ``Annotated`` aliases and option groups.

A command names the aliases it takes. Options that always travel together (the
fingerprint settings, where and how records are read) are *groups*: a function
whose parameters are the options and whose result is the value the library wants.
:func:`uses` puts a group's options into a command's signature in place of one
parameter, so the block is written here and nowhere else.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from simhash_hbase.errors import InvalidInput, InvalidSetting
from simhash_hbase.fingerprint.minhash import DEFAULT_THRESHOLD, check_similarity
from simhash_hbase.fingerprint.probes import DEFAULT_QUERY_PROBES
from simhash_hbase.fingerprint.simhash import DEFAULT_FOLD, DEFAULT_VERSION, load_idf_file
from simhash_hbase.index.manifest import check_retain
from simhash_hbase.layout.scheme import DEFAULT_SCHEME
from simhash_hbase.layout.window import Window, duration_ms
from simhash_hbase.records import MAX_LIMIT
from simhash_hbase.text.extract import check_format, to_text
from simhash_hbase.text.readers import (
    DEFAULT_MAX_BYTES,
    MAX_MAX_BYTES,
    MEMORY_PER_BYTE,
    SourceOptions,
    check_readable_file,
    read_text_file,
)

F = TypeVar("F", bound=Callable[..., Any])

AS_BUILT = "Default: what the index was built with (a new index: {})."
IndexOpt = Annotated[
    str | None,
    typer.Option(
        "--index",
        "-i",
        metavar="URL",
        help="Index: a folder (embedded; file://FOLDER too) or hbase://HOST:PORT?prefix=NAME. "
        "Default: $SHDB_INDEX, then ./shdb-index.",
        show_default=False,
    ),
]
WaitOpt = Annotated[
    float,
    typer.Option(
        "--wait",
        metavar="SECONDS",
        min=0,
        help="When another run is writing the index, wait up to SECONDS for it to finish "
        "(default 0: refuse at once, naming its pid and start time).",
    ),
]
CreateOpt = Annotated[
    bool,
    typer.Option(
        "--create",
        metavar="",
        help="Create the index when there is none (said on stderr); without it a missing "
        "index is an error, so a mistyped name never starts an empty one.",
    ),
]
KOpt = Annotated[
    int, typer.Option("-k", metavar="K", help="Largest Hamming distance that counts as a match.")
]


def _similarity(value: float | None) -> float | None:
    """--similarity checked by the library's rule, said as a usage error."""
    if value is None:
        return None
    try:
        return check_similarity(value, "--similarity")
    except InvalidSetting as exc:
        raise typer.BadParameter(str(exc)) from None


def _retain(value: str) -> int:
    """--retain as whole seconds (a duration, as --within's), said as a usage error."""
    try:
        return check_retain(duration_ms(value, "--retain") // 1000)
    except InvalidInput as exc:
        raise typer.BadParameter(str(exc)) from None


RetainOpt = Annotated[
    int | None,
    typer.Option(
        "--retain",
        metavar="DURATION",
        parser=_retain,
        help="A new index keeps documents for DURATION (90d, 12h, 2w; units s m h d w) "
        "after their time: older ones never match, and expire (docs/lifecycle.md). Set "
        "when the index is created; given for an existing index, it must be the index's.",
        show_default=False,
    ),
]

SimilarityOpt = Annotated[
    float | None,
    typer.Option(
        "--similarity",
        metavar="S",
        callback=_similarity,
        help="Estimated share of character shingles (over 0, at most 1) at or above "
        "which two texts match; the floor for pigeonhole pairs follows it 0.1 below "
        "(docs/nets.md). "
        f"Default: the index's (a new index records S; else {DEFAULT_THRESHOLD}).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON instead of a table.")]
RepairOpt = Annotated[bool, typer.Option(metavar="", help="Fix what is found and report counts.")]
SchemeOpt = Annotated[
    str | None,
    typer.Option(
        metavar="5x10|4x4|6x20",
        help="Index scheme. " + AS_BUILT.format(DEFAULT_SCHEME),
        show_default=False,
    ),
]
#: The scheme of a batch job that builds no index.
BatchSchemeOpt = Annotated[str, typer.Option(metavar="5x10|4x4|6x20", help="Pigeonhole scheme.")]
TopNOpt = Annotated[
    int | None,
    typer.Option("--top-n", metavar="N", help="Terms per fingerprint. " + AS_BUILT.format(16)),
]
IdfOpt = Annotated[
    str | None,
    typer.Option(
        "--idf",
        metavar="FILE",
        help="IDF table ('term idf' lines) instead of jieba's; kept inside the index. "
        + AS_BUILT.format("jieba's"),
    ),
]
FeaturesOpt = Annotated[
    str | None,
    typer.Option(
        metavar="words|chars",
        help="words: jieba TF-IDF terms; chars: character n-grams by count, which "
        "recalled less than words on short texts too (docs/quality.md). "
        + AS_BUILT.format("words"),
        show_default=False,
    ),
]
NgramOpt = Annotated[
    int | None,
    typer.Option(metavar="N", help="n-gram length with --features chars. " + AS_BUILT.format(2)),
]
VersionOpt = Annotated[
    int | None,
    typer.Option(
        "--fingerprint-version",
        metavar="1|2|3|4",
        help="1: the original recipe; 2: NFKC text, no pure numbers, 1-letter ASCII or "
        "punctuation-only terms, weights count^1.75 x IDF capped at a fifth of the total, "
        "Traditional folded to Simplified (docs/quality.md); 3: 2 with words in every "
        "script, not letters (docs/segmenters.md); 4: 3 with no term above 0.08 of the "
        "capped total where one is of another script than Han and ASCII. "
        + AS_BUILT.format(DEFAULT_VERSION),
        show_default=False,
    ),
]
FoldOpt = Annotated[
    str | None,
    typer.Option(
        metavar="none|t2s|tw2sp",
        help="Fold Traditional to Simplified Chinese first (version 2+, OpenCC): tw2sp by "
        "phrase (Taiwan phrases too: 軟體 -> 软件; Simplified lines stay as they are), t2s "
        "by character. " + AS_BUILT.format(f"{DEFAULT_FOLD} with version 2+"),
        show_default=False,
    ),
]
HtmlOpt = Annotated[
    str | None,
    typer.Option(
        "--html",
        metavar="main|raw",
        help="How an HTML page becomes text: main (its article, without navigation, "
        "sidebars, link lists, footers or hidden blocks) or raw (all visible text; "
        "docs/html.md). " + AS_BUILT.format("main"),
        show_default=False,
    ),
]
ProbesOpt = Annotated[
    int,
    typer.Option(
        metavar="P",
        help="Multi-probe: also search the text's fingerprint with its weakest bits "
        "flipped, P flip sets (0..64; docs/quality.md). Needs text, not fingerprints.",
    ),
]
LimitOpt = Annotated[
    int,
    typer.Option(
        "--limit",
        metavar="N",
        help=f"Matches shown per document (1..{MAX_LIMIT:,}), nearest first; all are counted "
        "(exactly, or as a lower bound said as '>= N' when a hot index row was read "
        "only as far as the shown matches needed).",
    ),
]
QueryProbesOpt = Annotated[
    int | None,
    typer.Option(
        metavar="P",
        help=f"Multi-probe: also search the text's fingerprint with its weakest bits "
        f"flipped, P flip sets (0..64; default {DEFAULT_QUERY_PROBES} for text, the most "
        "recall within 4x the scans in docs/quality.md; hits then lie within k+3). "
        "0 is the exact k-search; --fingerprint cannot probe.",
    ),
]
PathsArg = Annotated[list[str], typer.Argument(metavar="PATH", hidden=True)]
IdsArg = Annotated[list[str], typer.Argument(metavar="ID", hidden=True)]
FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help="auto|text|jsonl|csv|html|warc (auto: by content and suffix: a JSON array of "
        "objects or JSON Lines whatever the suffix, a WARC archive by its first bytes, CSV "
        "by .csv/.tsv; gzip, zstd, bz2 and xz are read directly; a text, JSON or CSV text "
        "that is a whole HTML page is read as a page, see --html; docs/inputs.md).",
    ),
]
IdFieldOpt = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="JSON/CSV field holding the id [default: id]. Named, it requires records: an "
        "input read as one document is refused.",
        show_default=False,
    ),
]
TextFieldOpt = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="JSON/CSV field holding the text [default: text]; requires records, as --id-field.",
        show_default=False,
    ),
]
ColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--columns",
        metavar="A,B,...",
        help="The column names of a CSV/TSV without a header row (its first row is then a "
        "record); must include the id and text fields.",
        show_default=False,
    ),
]
MaxBytesOpt = Annotated[
    int,
    typer.Option(
        metavar="BYTES",
        help="Largest document (JSONL line, CSV record, file) accepted, in bytes "
        f"(1..{MAX_MAX_BYTES}, 256 MiB). Indexing a document takes ~{MEMORY_PER_BYTE}x its "
        f"size in memory: the default {DEFAULT_MAX_BYTES // 2**20} MiB ~0.5 GB, the most ~8 GB.",
    ),
]
WorkersOpt = Annotated[int, typer.Option(metavar="N", help="Fingerprinting processes.")]
ScanWorkersOpt = Annotated[
    int,
    typer.Option(
        "--workers", metavar="N", help="Regions read at once, each in its own process (HBase)."
    ),
]
SampleOpt = Annotated[
    float | None,
    typer.Option(
        metavar="F",
        help="Read a random fraction F of the regions and extrapolate, with a 95 % bound.",
    ),
]
StoreTextOpt = Annotated[bool, typer.Option(metavar="", help="Keep the text in the docs table.")]
FingerprintsOpt = Annotated[
    bool,
    typer.Option(metavar="", help="Input lines are HEX or ID<TAB>HEX fingerprints, not documents."),
]
TextArg = Annotated[str | None, typer.Argument(metavar="TEXT", hidden=True)]
FileOpt = Annotated[
    str | None,
    typer.Option("--file", "-f", metavar="FILE", help="Read the text from FILE (- = stdin)."),
]
ClustersOpt = Annotated[
    bool,
    typer.Option(
        "--clusters",
        metavar="",
        help="Print the clusters of near-copies, one JSON list of ids per cluster (its "
        "representative first: every member matches it; docs/nets.md), instead of each "
        "document's matches.",
    ),
]


# -- option groups --------------------------------------------------------------
def fingerprint_settings(
    top_n: TopNOpt = None,
    idf: IdfOpt = None,
    features: FeaturesOpt = None,
    ngram: NgramOpt = None,
    fingerprint_version: VersionOpt = None,
    fold: FoldOpt = None,
    html: HtmlOpt = None,
) -> dict[str, Any]:
    """The fingerprint settings given on the command line, and only those (the
    index's manifest supplies the rest, or the defaults for a new index)."""
    wanted: dict[str, Any] = {
        "top_n": top_n,
        "features": features,
        "ngram": ngram,
        "version": fingerprint_version,
        "fold": fold,
        "html": html,
    }
    if idf is not None:
        wanted["idf"] = load_idf_file(idf).digest
    return {k: v for k, v in wanted.items() if v is not None}


FollowSymlinksOpt = Annotated[
    bool,
    typer.Option(
        "--follow-symlinks",
        metavar="",
        help="Read what symbolic links in a folder lead to outside it (default: skip "
        "each, naming it).",
    ),
]


TimeFieldOpt = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="JSON/CSV field holding when a record arrived (RFC 3339, e.g. "
        "2026-11-29T12:00:00Z, or seconds since the epoch) [default: the time it is "
        "stored]. A record without it, or with another value, is a bad record.",
        show_default=False,
    ),
]


WithinOpt = Annotated[
    str | None,
    typer.Option(
        metavar="DURATION",
        help="Match only documents that arrived in the last DURATION (a whole number and "
        "s, m, h, d or w, e.g. 30d); a document without a time is outside.",
        show_default=False,
    ),
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        metavar="TIME",
        help="Match only documents that arrived at or after TIME (RFC 3339, e.g. "
        "2026-11-29T12:00:00Z, or seconds since the epoch).",
        show_default=False,
    ),
]
UntilOpt = Annotated[
    str | None,
    typer.Option(
        metavar="TIME",
        help="Match only documents that arrived before TIME (as --since).",
        show_default=False,
    ),
]


def window_options(
    within: WithinOpt = None, since: SinceOpt = None, until: UntilOpt = None
) -> Window | None:
    """The time window a command's lookups answer in (None: every document), said
    before any index is opened (docs/lifecycle.md, "A window")."""
    return Window.parse(within, since, until)


def source_options(
    fmt: FormatOpt = "auto",
    id_field: IdFieldOpt = None,
    text_field: TextFieldOpt = None,
    time_field: TimeFieldOpt = None,
    columns: ColumnsOpt = None,
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    follow_symlinks: FollowSymlinksOpt = False,
) -> SourceOptions:
    """How records are read from files, folders and stdin. Naming a field or the
    columns asks for records: an input that holds none is then refused."""
    return SourceOptions(
        fmt,
        id_field or "id",
        text_field or "text",
        max_bytes,
        follow_symlinks=follow_symlinks,
        columns=tuple(c.strip() for c in columns.split(",")) if columns is not None else None,
        fields_given=(id_field, text_field, columns, time_field) != (None,) * 4,
        time_field=time_field,
    )


TextFormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        metavar="auto|text|html",
        help="auto: an HTML page (a .html/.htm file, or a document that is one whole "
        "html element) is read as ingest reads it (see --html), anything else as text.",
    ),
]


@dataclass(frozen=True)
class TextInput:
    """One text given as an argument or read from a file (or stdin)."""

    text: str | None
    file: str | None
    max_bytes: int
    fmt: str = "auto"

    @property
    def given(self) -> bool:
        return (self.text, self.file) != (None, None)

    def read(self, html: str) -> str:
        """The text as ingest reads it (:func:`~simhash_hbase.text.extract.to_text`), a
        page as the index's ``html`` mode says."""
        if self.file is not None and self.text is None:
            return read_text_file(self.file, self.max_bytes, fmt=self.fmt, html=html)
        if self.text is not None and self.file is None:
            return to_text(self.text, self.fmt, html=html)
        raise InvalidInput("give exactly one of TEXT or --file (- reads stdin)")


def text_input(
    text: TextArg = None,
    file: FileOpt = None,
    max_bytes: MaxBytesOpt = DEFAULT_MAX_BYTES,
    fmt: TextFormatOpt = "auto",
) -> TextInput:
    """The text a command works on: TEXT, or --file (- = stdin), in --format;
    a bad limit or an unreadable file is said before any index is opened."""
    check_format(fmt)
    SourceOptions(max_bytes=max_bytes)  # --max-bytes in range
    if file is not None:
        check_readable_file(file)
    return TextInput(text, file, max_bytes, fmt)


def uses(**groups: Callable[..., Any]) -> Callable[[F], F]:
    """Replace each parameter named in ``groups`` by that group's options.

    The command then receives the group's result under the parameter's name. All
    parameters become keyword-only (click passes them by name), so the order of
    defaults does not matter and ``--help`` lists the options where the group stands.
    """

    def decorate(command: F) -> F:
        members = {name: _parameters(build) for name, build in groups.items()}
        params: list[inspect.Parameter] = []
        for param in _parameters(command, skip=members):
            params += members.get(param.name, [param])
        names = [p.name for p in params]
        assert len(names) == len(set(names)), f"option names collide in {command.__name__}"

        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            for name, build in groups.items():
                taken = {p.name: kwargs.pop(p.name) for p in members[name]}
                kwargs[name] = build(**taken)
            return command(**kwargs)

        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
        run.__signature__ = inspect.Signature(keyword)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        del run.__wrapped__  # typer must read the new signature, not the command's
        return run  # type: ignore[return-value]

    return decorate


def _parameters(function: Callable[..., Any], skip: Container[str] = ()) -> list[inspect.Parameter]:
    """The parameters of ``function`` with their annotations evaluated, but for those
    in ``skip`` (a group's result type may be imported for type checking only)."""
    params = []
    for param in inspect.signature(function).parameters.values():
        if isinstance(param.annotation, str) and param.name not in skip:
            param = param.replace(annotation=eval(param.annotation, function.__globals__))
        params.append(param)
    return params
