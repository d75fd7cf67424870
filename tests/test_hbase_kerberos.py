"""Gateways that require Kerberos, on a real kerberized HBase: the Kerberos opt-in of
scripts/hbase (a KDC of its own, HBase's RPC authenticated by Kerberos, Thrift1 and
Thrift2 gateways set to hbase.thrift.security.qop=auth beside plain ones), started
once for this module and stopped after it.

Over SASL an ingest, queries and check-and-add give the answers the plain gateways
of the same HBase give; a client without a ticket, naming a principal the KDC does
not know, or speaking SASL to a gateway that does not (and the other way round) is
refused with a message saying what to do, from the library and the CLI.

Ports (distinct from the other CI passes'): Thrift SHDB_TEST_KERBEROS_THRIFT_PORT
[9350] (plain Thrift1; plain Thrift2 on +1, the SASL gateways on +3 and +4), ZooKeeper
SHDB_TEST_KERBEROS_ZK_PORT [2451], the KDC a free port; HBase's files in
SHDB_TEST_KERBEROS_HOME [~/.cache/shdb-hbase-kerberos]; SHDB_TEST_KERBEROS=running
uses one already started there and leaves it running. It fails, never skips, where
HBase tests must run (CI, SHDB_REQUIRE_HBASE)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simhash_hbase import NotAuthenticated, SimhashIndex, StoreUnavailable
from simhash_hbase.cli.app import app
from simhash_hbase.errors import InvalidIndexUrl
from simhash_hbase.store.hbase.connect import sasl_modules

from .conftest import HBASE_ENV
from .serve_server import free_port

pytestmark = pytest.mark.hbase

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "hbase"
#: The first seconds of a new proxy user's HBase connection on a loaded machine.
TIMEOUT = "timeout=120000"


@dataclass(frozen=True)
class Kerberized:
    """The module's kerberized HBase: its plain and SASL gateways, and its KDC's files."""

    port: int  # plain Thrift1; plain Thrift2 on +1, SASL Thrift1 on +3, SASL Thrift2 on +4
    kdc: Path  # krb5.conf, shdb.keytab, hbase.keytab
    env: dict[str, str]  # scripts/hbase's, for this HBase

    def url(self, api: str, prefix: str, *, sasl: bool = True, extra: str = "") -> str:
        port = self.port + (3 if sasl else 0) + (api == "thrift2")
        wire = "&sasl=gssapi" if sasl else ""
        return f"hbase://localhost:{port}?prefix={prefix}&api={api}&{TIMEOUT}{wire}{extra}"

    def kinit(self) -> None:
        subprocess.run(["kinit", "-kt", str(self.kdc / "shdb.keytab"), "shdb"], check=True)

    @contextlib.contextmanager
    def spnego_gateway(self) -> Iterator[int]:
        """A Thrift2 gateway over HTTP that requires Kerberos (SPNEGO), on a free port."""
        port, name = free_port(), f"spnego-{uuid.uuid4().hex[:6]}"
        settings = [
            "hbase.regionserver.thrift.http=true",
            "hbase.thrift.security.qop=auth",
            "hbase.thrift.spnego.principal=HTTP/localhost@SHDB.TEST",
            f"hbase.thrift.spnego.keytab.file={self.kdc / 'hbase.keytab'}",
        ]
        gateway = [str(SCRIPT), "gateway"]
        subprocess.run(
            [*gateway, "start", name, str(port), "thrift2", *settings], env=self.env, check=True
        )
        try:
            yield port
        finally:
            subprocess.run([*gateway, "stop", name], env=self.env, check=True)


def _env(home: Path, port: int, zk: int) -> dict[str, str]:
    return {
        **os.environ,
        "SHDB_HBASE_HOME": str(home),
        "SHDB_HBASE_THRIFT_PORT": str(port),
        "SHDB_HBASE_ZK_PORT": str(zk),
        "SHDB_HBASE_KDC_PORT": str(free_port()),
        "SHDB_HBASE_MASTER_HEAP": os.environ.get("SHDB_HBASE_MASTER_HEAP", "768m"),
        "SHDB_HBASE_THRIFT_HEAP": os.environ.get("SHDB_HBASE_THRIFT_HEAP", "384m"),
    }


@pytest.fixture(scope="module")
def kerberos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerberized]:
    """KDC + kerberized HBase, started fresh here and stopped after the module; the
    test process holds a ticket of shdb@SHDB.TEST in a cache of its own."""
    required = bool(os.environ.get("CI") or os.environ.get("SHDB_REQUIRE_HBASE"))
    if not os.environ.get(HBASE_ENV) and not required:
        pytest.skip(f"{HBASE_ENV} not set; run scripts/test to run the HBase tests")
    try:
        sasl_modules()
    except InvalidIndexUrl as exc:
        (pytest.fail if required else pytest.skip)(str(exc))
    home = Path(
        os.environ.get("SHDB_TEST_KERBEROS_HOME", Path.home() / ".cache" / "shdb-hbase-kerberos")
    )
    port = int(os.environ.get("SHDB_TEST_KERBEROS_THRIFT_PORT", "9350"))
    zk = int(os.environ.get("SHDB_TEST_KERBEROS_ZK_PORT", "2451"))
    env = _env(home, port, zk)
    script = [str(SCRIPT)]
    # SHDB_TEST_KERBEROS=running: one already started (scripts/hbase start --kerberos),
    # left running (while developing: a start takes minutes)
    own = os.environ.get("SHDB_TEST_KERBEROS") != "running"
    started = subprocess.run(
        [*script, "start", *(["--fresh"] if own else []), "--kerberos"],
        env=env,
        capture_output=True,
        text=True,
    )
    if started.returncode != 0:
        subprocess.run([*script, "stop"], env=env, capture_output=True)
        pytest.fail(
            f"scripts/hbase start --kerberos failed (needs java, mvn and the krb5-kdc, "
            f"krb5-admin-server and krb5-user packages):\n{started.stderr[-6000:]}",
            pytrace=False,
        )
    saved = {name: os.environ.get(name) for name in ("KRB5_CONFIG", "KRB5CCNAME")}
    os.environ["KRB5_CONFIG"] = str(home / "kdc" / "krb5.conf")
    os.environ["KRB5CCNAME"] = str(tmp_path_factory.mktemp("krb") / "ccache")
    server = Kerberized(port, home / "kdc", env)
    try:
        server.kinit()
        yield server
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if own:  # its data goes with it: SIGKILL, no minute of clean shutdown
            subprocess.run([*script, "kill"], env=env, capture_output=True)


APIS = ("thrift1", "thrift2")
Answers = tuple[list[list[str]], list[list[str]], list[bool]]


def _prefix() -> str:
    return "k" + uuid.uuid4().hex[:10]


CORPUS = ROOT / "examples" / "corpus"
#: Stored first; then queried and checked with near-copies of two of them and a new text.
_BASES = [
    (name, (CORPUS / f"{name}.txt").read_text("utf-8")) for name in ("library", "tea", "rail")
]
_COPIES = [
    (name, (CORPUS / f"{name}.txt").read_text("utf-8")) for name in ("library-edited", "tea-repost")
]
_NEW = ("weather", (CORPUS / "weather.txt").read_text("utf-8"))


def _answers(url: str) -> Answers:
    """What an index at ``url`` answers to the same ingest, queries and check-and-add."""
    with SimhashIndex.open(url, create=True) as index:
        index.check_and_add_texts(_BASES)
        queries = [sorted(m.doc_id for m in index.query(text)) for _, text in _COPIES]
        checked = [
            sorted(m.doc_id for m in matches)
            for matches in index.check_and_add_texts([*_COPIES, _NEW], always=False)
        ]
        present = [index.get(name) is not None for name, _ in [*_COPIES, _NEW]]
    return queries, checked, present


@pytest.fixture(scope="module")
def plain(kerberos: Kerberized) -> dict[str, Answers]:
    """The unsecured answers: the plain gateways' of the same HBase, per protocol."""
    return {api: _answers(kerberos.url(api, _prefix(), sasl=False)) for api in APIS}


@pytest.mark.parametrize("api", APIS)
def test_sasl_answers_equal_the_plain_gateways(
    kerberos: Kerberized, plain: dict[str, Answers], api: str
) -> None:
    secured = _answers(kerberos.url(api, _prefix()))
    assert secured == plain[api]
    assert secured == ([["library"], ["tea"]], [["library"], ["tea"], []], [False, False, True])


def test_spnego_over_http_answers_as_the_plain_gateway(
    kerberos: Kerberized, plain: dict[str, Answers]
) -> None:
    """The HTTP gateway's Kerberos: a token in every request's Authorization header."""
    with kerberos.spnego_gateway() as port:
        url = f"hbase://localhost:{port}?prefix={_prefix()}&transport=http&{TIMEOUT}"
        assert _answers(f"{url}&sasl=gssapi") == plain["thrift2"]
        with pytest.raises(NotAuthenticated, match=r"HTTP 401.*add sasl=gssapi"):
            SimhashIndex.open(url)


def test_verify_and_stats_over_sasl(kerberos: Kerberized) -> None:
    url = kerberos.url("thrift2", _prefix())
    with SimhashIndex.open(url, create=True) as index:
        index.check_and_add_texts(_BASES)
    for command in ("verify", "stats"):
        result = CliRunner().invoke(app, [command, "-i", url])
        assert result.exit_code == 0, result.output


def test_no_ticket_is_refused_saying_kinit(kerberos: Kerberized, tmp_path: Path) -> None:
    url = kerberos.url("thrift2", _prefix())
    os.environ["KRB5CCNAME"], held = str(tmp_path / "empty"), os.environ["KRB5CCNAME"]
    try:
        with pytest.raises(NotAuthenticated, match="no Kerberos credentials") as info:
            SimhashIndex.open(url, create=True)
        assert "kinit" in str(info.value) and f"localhost:{kerberos.port + 4}" in str(info.value)
        result = CliRunner().invoke(app, ["stats", "-i", url])
        assert result.exit_code == 2 and "kinit" in result.stderr
        assert "Traceback" not in result.output
    finally:
        os.environ["KRB5CCNAME"] = held


def test_a_principal_the_kdc_does_not_know_names_service(kerberos: Kerberized) -> None:
    with pytest.raises(NotAuthenticated, match="knows no principal nobody/localhost") as info:
        SimhashIndex.open(kerberos.url("thrift1", _prefix(), extra="&service=nobody"))
    assert "service=NAME" in str(info.value)


@pytest.mark.parametrize(
    ("sasl", "port", "fix"),
    [
        (True, 1, "leave sasl= out"),  # a plain gateway: it waits for a frame that never comes
        (False, 4, "add sasl=gssapi"),  # a SASL gateway: the same, the other way round
    ],
)
def test_a_wire_mismatch_says_which_side_to_change(
    kerberos: Kerberized, sasl: bool, port: int, fix: str
) -> None:
    wire = "&sasl=gssapi" if sasl else ""
    url = f"hbase://localhost:{kerberos.port + port}?prefix=x&timeout=5000&retries=0{wire}"
    with pytest.raises(StoreUnavailable, match=fix) as info:
        SimhashIndex.open(url)
    assert "hbase.thrift.security.qop" in str(info.value)
