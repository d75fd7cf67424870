"""A hand-edited or foreign manifest (and store record) is refused, field by field,
with a StoreCorrupt naming the field and what to do, and nothing written; a data
file replaced by a folder, and an address-space limit, are said plainly."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simhash_hbase.cli.app import app
from simhash_hbase.errors import ShdbError, StoreCorrupt
from simhash_hbase.index.client import SimhashIndex
from simhash_hbase.store.lmdb.store import EmbeddedStore

TEXT = "今天天气很好，我们一起去公园散步吧，顺便看看路边新开的花。"
OTHER = "另一个文件的内容完全不一样，讲的是计算机网络和数据库的设计。"
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
MISSING = object()  # the field removed
runner = CliRunner()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("template") / "index"
    with SimhashIndex.open(str(path)) as ix:
        ix.add("a", TEXT)
        manifest = dict(ix.manifest)
    return path, manifest


def _fields(manifest: dict[str, Any]) -> list[tuple[str, ...]]:
    nested = [(top, key) for top in ("fingerprint", "lsh") for key in manifest[top]]
    return [(key,) for key in manifest] + nested + [("fingerprint", "idf_name")]


def _edited(manifest: dict[str, Any], field: tuple[str, ...], value: object) -> dict[str, Any]:
    edited = json.loads(json.dumps(manifest))
    holder = edited if len(field) == 1 else edited[field[0]]
    if value is MISSING:
        holder.pop(field[-1], None)
    else:
        holder[field[-1]] = value
    return edited


def _copy(template: Path, to: Path, manifest: dict[str, Any]) -> bytes:
    """A copy of the template index holding ``manifest``; its data file's bytes."""
    if to.exists():
        shutil.rmtree(to)
    shutil.copytree(template, to)
    store = EmbeddedStore(to)
    store.put_meta("manifest", manifest)
    store.close()
    return (to / "data.mdb").read_bytes()


def _edited_copy(
    template: tuple[Path, dict[str, Any]], tmp_path: Path, data: st.DataObject
) -> tuple[Path, tuple[str, ...], bytes]:
    """A copy of the template index with one drawn field set to one drawn value:
    its folder, the field, and its data.mdb before anything opens it."""
    path, manifest = template
    field = data.draw(st.sampled_from(_fields(manifest)), label="field")
    value = data.draw(st.just(MISSING) | JSON, label="value")
    target = tmp_path / "index"
    return target, field, _copy(path, target, _edited(manifest, field, value))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_value_in_any_field_opens_or_is_refused_untouched(
    template: tuple[Path, dict[str, Any]], tmp_path: Path, data: st.DataObject
) -> None:
    target, field, before = _edited_copy(template, tmp_path, data)
    try:
        ix = SimhashIndex.open(str(target))
    except StoreCorrupt as exc:
        message = str(exc)
        assert str(target) in message and (field[-1] in message or field[0] in message)
        assert (target / "data.mdb").read_bytes() == before  # nothing written
        return
    with ix:  # opened: it works, or says why as an ShdbError
        try:
            ix.query(TEXT)
            ix.add("b", OTHER)
        except ShdbError:
            pass


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_cli_stats_never_tracebacks(
    template: tuple[Path, dict[str, Any]], tmp_path: Path, data: st.DataObject
) -> None:
    target, _, _ = _edited_copy(template, tmp_path, data)
    result = runner.invoke(app, ["stats", "-i", str(target)])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, StoreCorrupt.exit_code), result.output


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        (("fingerprint",), MISSING, "fingerprint = None: missing"),
        (("fingerprint",), "words", "fingerprint = 'words': missing or not a JSON object"),
        (("nets",), "simhash+magic", "nets = 'simhash+magic': unknown"),
        (
            ("format_version",),
            7,
            "written by a newer shdb (format_version 7; this shdb reads up to 2); "
            "nothing was written: upgrade shdb",
        ),
        (("fingerprint", "top_n"), "16", "fingerprint.top_n = '16'"),
    ],
)
def test_known_edits_say_field_and_fix(
    template: tuple[Path, dict[str, Any]],
    tmp_path: Path,
    field: tuple[str, ...],
    value: object,
    says: str,
) -> None:
    path, manifest = template
    target = tmp_path / "index"
    before = _copy(path, target, _edited(manifest, field, value))
    with pytest.raises(StoreCorrupt, match="manifest this shdb cannot use") as caught:
        SimhashIndex.open(str(target))
    assert says in str(caught.value) and str(target) in str(caught.value)
    assert (target / "data.mdb").read_bytes() == before


@pytest.mark.parametrize(("format", "says"), [(99, "upgrade shdb"), ("4", "no known store format")])
def test_store_format_unknown_is_refused_untouched(
    template: tuple[Path, dict[str, Any]], tmp_path: Path, format: object, says: str
) -> None:
    path, manifest = template
    target = tmp_path / "index"
    _copy(path, target, manifest)
    store = EmbeddedStore(target)
    store.put_meta("store/embedded", {**(store.get_meta("store/embedded") or {}), "format": format})
    store.close()
    before = (target / "data.mdb").read_bytes()
    for readonly in (False, True):
        with pytest.raises(StoreCorrupt, match=says):
            SimhashIndex.open(str(target), readonly=readonly)
    assert (target / "data.mdb").read_bytes() == before


def test_data_file_replaced_by_folder(
    template: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    target = tmp_path / "index"
    shutil.copytree(template[0], target)
    (target / "data.mdb").unlink()
    (target / "data.mdb").mkdir()
    for readonly in (False, True):
        with pytest.raises(StoreCorrupt, match=r"data\.mdb is a folder, not an LMDB file"):
            SimhashIndex.open(str(target), readonly=readonly)
    result = runner.invoke(app, ["stats", "-i", str(target)])
    assert "is a folder, not an LMDB file" in result.output and "Traceback" not in result.output


_LIMITED = """
import sys
from simhash_hbase.index.client import SimhashIndex
path, text, other = sys.argv[1:4]
with SimhashIndex.open(path) as ix:
    assert ix.query(text).total == 1
    ix.add("b", other)
with SimhashIndex.open(path, readonly=True) as ix:
    assert [m.doc_id for m in ix.query(other)] == ["b"]
with SimhashIndex.open(path + "-new") as ix:
    ix.add("c", text)
print("ok")
"""


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


def test_index_opens_under_an_address_space_limit(
    template: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """``ulimit -v 8G``: a 1 TiB map cannot be reserved; a smaller one is."""
    target = tmp_path / "index"
    shutil.copytree(template[0], target)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    result = subprocess.run(
        [sys.executable, "-c", _LIMITED, str(target), TEXT, OTHER],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=_limit_address_space,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


@pytest.mark.parametrize("manifest", [[], "manifest", 1, None])
def test_manifest_not_an_object(
    template: tuple[Path, dict[str, Any]], tmp_path: Path, manifest: Any
) -> None:
    target = tmp_path / "index"
    before = _copy(template[0], target, manifest)
    with pytest.raises(StoreCorrupt, match=r"manifest of the index at .* cannot be read"):
        SimhashIndex.open(str(target))
    assert (target / "data.mdb").read_bytes() == before
