"""The size limits and the no-sniffing rule of CONTRIBUTING.md, checked on the source.

- no module of ``simhash_hbase`` over 800 lines, and the client façade
  (:class:`SimhashIndex`) at most 400: what it does lives in ``index/lookup.py``
  and ``index/write.py``;
- what a store can do is declared by the ``Store`` protocol (``store/base.py``),
  never found out by ``getattr``/``hasattr``: a store, or an object in the
  index and store layers, is not asked whether it has an attribute.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "simhash_hbase"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 800
MAX_FACADE_LINES = 400
#: Layers whose objects declare what they can do (protocols), never sniffed.
DECLARED = ("index", "store")
#: getattr with a default on these is not a capability question: a thread-local's
#: unset slot (index/remote.py's per-thread connection), the message field of a
#: Thrift exception (store/hbase/transport.py; other exceptions have none).
NOT_SNIFFS = {"self._local", "exc"}


def test_no_module_over_800_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in MODULES
        if (n := len(path.read_text("utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_the_client_facade_is_at_most_400_lines() -> None:
    tree = ast.parse((PACKAGE / "index" / "client.py").read_text("utf-8"))
    (facade,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SimhashIndex"]
    assert facade.end_lineno is not None
    assert facade.end_lineno - facade.lineno + 1 <= MAX_FACADE_LINES


def sniffs(source: str, layer: str) -> list[str]:
    """The capability sniffs in ``source`` (a module of ``layer``): any ``hasattr``;
    a ``getattr`` of anything named like a store, or of the C extension (whole or
    None: no function of it is missing); in the index and store layers, a
    ``getattr`` with a default (asking whether an attribute is there)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in ("getattr", "hasattr") or not node.args:
            continue
        target = ast.unparse(node.args[0])
        on_store = "store" in target.lower() or "_held" in target
        # the C extension is whole or None (_native.module(): a stale build is not used)
        on_native = "native.module()" in target or (target == "compiled" and layer != "_native")
        defaulted = node.func.id == "getattr" and len(node.args) == 3
        if (
            node.func.id == "hasattr"
            or on_store
            or on_native
            or (layer in DECLARED and defaulted and target not in NOT_SNIFFS)
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_capability_sniffing() -> None:
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in MODULES
        if (hits := sniffs(path.read_text("utf-8"), path.relative_to(PACKAGE).parts[0]))
    }
    assert not found, f"declare it in the Store protocol (store/base.py) instead: {found}"


@pytest.mark.parametrize(
    ("source", "layer"),
    [
        ('load = getattr(self._store, "load", None)', "index"),  # the client's old sniffs
        ('warm = getattr(self._store, "warm", None)', "jobs"),
        ('transport = getattr(self, "transport", None)', "store"),  # HBaseStore.close's
        ('ok = hasattr(index, "merge_fresh")', "cli"),
        ('f = getattr(native.module(), "unwiden", _unwiden_py)', "fingerprint"),  # the old ones
        ('self._sign_rows_c = getattr(compiled, "sign_rows", None)', "fingerprint"),
    ],
)
def test_the_sniffs_it_refuses(source: str, layer: str) -> None:
    assert sniffs(source, layer)


def test_what_it_lets_be() -> None:
    assert not sniffs('conn = getattr(self._local, "conn", None)', "index")
    assert not sniffs('peek = getattr(f, "peek", None)', "text")  # a file object, not a store
    assert not sniffs('getattr(self, "_" + op)(arg)', "store")  # dispatch: no default
    assert not sniffs('built = getattr(compiled, "SOURCE_SHA256", "")', "_native")  # an old build
