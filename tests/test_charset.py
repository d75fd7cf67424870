"""Text decoded by evidence (issue 39.6): bytes in any common charset, declared right,
wrong or not at all, are read as the text they hold or skipped with a reason; never
indexed as mojibake."""

from __future__ import annotations

import csv
import html
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_hbase import InvalidInput
from simhash_hbase.records import BadRecord, Problem, Record
from simhash_hbase.text.charset import likely, odd_share
from simhash_hbase.text.extract import to_text
from simhash_hbase.text.readers import SourceOptions, read_sources

from .test_cli import shdb

DATA = Path(__file__).parent / "data" / "multilingual.json"
#: Lines of real translated text, a list per language (tests/data/multilingual.json),
#: with Traditional Chinese (Big5's) and English beside them.
LINES = {
    lang: [line for doc in docs for line in doc.split("\n") if len(line.strip()) >= 12]
    for lang, docs in json.loads(DATA.read_text("utf-8")).items()
}
LINES["zh_TW"] = [
    "繁體中文網頁的內容，我們今天討論天氣和公園裡的花朵。",
    "這個檔案已經損毀，請重新下載後再試一次。",
    "無法開啟設定檔，請確認您有讀取權限。",
    "伺服器回應逾時，連線已經中斷，請稍後再試。",
]
LINES["en"] = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Cannot open the configuration file: permission denied.",
]
ENCODINGS = (
    "utf-8", "gbk", "gb18030", "big5", "shift_jis", "euc-kr", "cp1251", "koi8-r",
    "iso-8859-1", "cp1252", "utf-16",
)  # fmt: skip
FORMATS = ("html", "txt", "jsonl", "csv")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _page(text: str, charset: str | None) -> str:
    meta = f'<meta charset="{charset}">' if charset else ""
    return f"<!DOCTYPE html><html><head>{meta}</head><body><p>{html.escape(text)}</p></body></html>"


def _body(text: str, fmt: str, charset: str | None) -> str:
    """The file's content as text: a page (``.html``, or a ``.txt`` that declares a
    charset: a whole page saved as text), a plain text, a JSON line or a CSV row."""
    if fmt == "html" or (fmt == "txt" and charset):
        return _page(text, charset)
    if fmt == "jsonl":
        return json.dumps({"id": "a", "text": text}, ensure_ascii=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        csv.writer(out).writerows([("id", "text"), ("a", text)])
        return out.getvalue()
    return text


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, str | None, str]:
    lang = draw(st.sampled_from(sorted(LINES)))
    text = " ".join(draw(st.lists(st.sampled_from(LINES[lang]), min_size=1, max_size=4)))
    encodable = [e for e in ENCODINGS if _encodes(text, e)]
    encoding = draw(st.sampled_from(encodable))
    declared = draw(st.sampled_from(("correct", "wrong", "absent")))
    charset = {
        "correct": encoding,
        "wrong": draw(st.sampled_from([e for e in ENCODINGS if e != encoding])),
        "absent": None,
    }[declared]
    return text, encoding, charset, draw(st.sampled_from(FORMATS))


def _encodes(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_bytes_in_any_charset_are_their_text_or_skipped_never_mojibake(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, str, str | None, str]
) -> None:
    text, encoding, charset, fmt = case
    path = tmp_path_factory.mktemp("c") / f"doc.{fmt}"
    path.write_bytes(_body(text, fmt, charset).encode(encoding))
    records = list(read_sources([str(path)], SourceOptions(html="raw")))
    assert len(records) == 1
    (got,) = records
    if isinstance(got, Record):
        assert _flat(got.text) == _flat(text), (encoding, charset, got.text[:80])
    else:
        assert got.problem is Problem.NOT_UTF8 and got.where.startswith(str(path))
        assert got.reason.startswith("invalid UTF-8"), got.reason
        assert encoding not in ("utf-8", "utf-16"), got.reason


def test_a_page_that_declares_utf8_over_gbk_bytes_is_read_as_gbk(tmp_path: Path) -> None:
    """Issue 39.6's example: indexed as replacement characters before."""
    text = " ".join(LINES["zh_CN"][:6])
    (tmp_path / "page.html").write_bytes(_page(text, "utf-8").encode("gbk"))
    (got,) = read_sources([str(tmp_path)], SourceOptions(html="raw"))
    assert isinstance(got, Record) and _flat(got.text) == _flat(text)
    assert _flat(to_text(_page(text, "utf-8").encode("gbk"), html="raw")) == _flat(text)


def test_a_txt_holding_a_page_is_decoded_by_its_meta_and_read_as_a_page(tmp_path: Path) -> None:
    text = " ".join(LINES["ru"][:5])
    (tmp_path / "saved.txt").write_bytes(_page(text, "windows-1251").encode("cp1251"))
    (got,) = read_sources([str(tmp_path)], SourceOptions(html="raw"))
    assert isinstance(got, Record) and _flat(got.text) == _flat(text)


def test_a_declaration_that_reads_as_mojibake_is_overruled(tmp_path: Path) -> None:
    """Big5 bytes declared GBK decode as GBK, into other characters (indexed so
    before): that reading is unlikely text, and the detector's one likely reading wins."""
    text = " ".join(LINES["zh_TW"])
    (tmp_path / "big5.html").write_bytes(_page(text, "gbk").encode("big5"))
    (got,) = read_sources([str(tmp_path)], SourceOptions(html="raw"))
    assert isinstance(got, Record) and _flat(got.text) == _flat(text)


def test_two_likely_readings_are_skipped_naming_both(tmp_path: Path) -> None:
    """A declared charset that reads as likely text, but not the detector's best
    reading: which is meant is unknown, and the page is skipped saying what was tried."""
    text = " ".join(LINES["ko"][:3])
    (tmp_path / "ko.html").write_bytes(_page(text, "gbk").encode("euc-kr"))
    (got,) = read_sources([str(tmp_path)], SourceOptions(html="raw"))
    assert isinstance(got, BadRecord) and got.problem is Problem.NOT_UTF8
    assert "its declared charset gb18030 reads it as" in got.reason, got.reason


def test_the_hint_never_names_a_conversion_that_could_be_mojibake(tmp_path: Path) -> None:
    """A short Big5 text reads alike in several charsets: skipped, and the hint names
    none of them (``iconv -f GB18030`` 'succeeded' into mojibake)."""
    (tmp_path / "short.txt").write_bytes("資料庫".encode("big5"))
    (tmp_path / "gbk.txt").write_bytes("中文文本".encode("gbk"))
    result = shdb("ingest", str(tmp_path), "-i", str(tmp_path / "ix"))
    assert "short.txt:1: invalid UTF-8 at byte 0" in result.output
    assert "more than one charset reads it as likely text" in result.output
    assert "-f GB18030" not in result.output and "THAT-CHARSET" in result.output


def test_library_bytes_are_decoded_by_evidence_too() -> None:
    with pytest.raises(InvalidInput, match="more than one charset"):
        to_text("資料庫".encode("big5"))


@pytest.mark.parametrize(
    "mojibake",
    [
        "ﾑﾚﾙﾋ ﾎﾅ ﾓﾕﾝﾅﾓﾔﾗﾕﾅﾔ",  # KOI8-R read as Shift_JIS
        "рЕТЕЛМАЮЕОЙЕ НЕЦДХ УЙУФЕНОЩНЙ",  # CP1251 read as KOI8-R
        "attachement de l'en-t皻e de version",  # Latin-1 read as Big5
        "匡숭 綠쒔愆쁑 뵨페儉훙杰畇",  # GBK read as EUC-KR
    ],
)
def test_mojibake_is_unlikely_text(mojibake: str) -> None:
    assert not likely(mojibake)


def test_real_text_of_every_script_is_likely() -> None:
    for lang, lines in LINES.items():
        for line in lines:
            assert odd_share(line) == 0.0 or likely(line), (lang, line)


LINES["bg"] = [
    "Българският език е официалният език на Република България.",
    "Днес времето е хубаво и децата играят в парка до реката.",
    "Файлът не може да бъде отворен, защото няма права за четене.",
    "Моля, опитайте отново след няколко минути или се свържете с нас.",
    "Сървърът не отговаря и връзката беше прекъсната.",
    "Новата версия на програмата поддържа повече формати на документи.",
]
#: Legacy one-byte code pages of non-Latin (and Turkish) text, each beside the
#: Mac, ISO-8859 and KOI8 pages that read the same bytes as other letters.
CODE_PAGES = {
    "ru": ("cp1251", "koi8_r", "iso8859_5", "mac_cyrillic"),
    "uk": ("cp1251", "koi8_u", "mac_cyrillic"),
    "bg": ("cp1251", "iso8859_5"),
    "el": ("cp1253", "iso8859_7"),
    "ar": ("cp1256", "iso8859_6"),
    "he": ("cp1255", "iso8859_8"),
    "tr": ("cp1254", "iso8859_9"),
}
#: Short texts that several one-byte pages read as likely text, the same letters
#: but a few, as much like a language: skipped, saying so (Turkish's ``ş`` is
#: CP1252's ``þ``, Ukrainian's ``є`` KZ-1048's ``ғ``).
AMBIGUOUS = {("tr", "cp1254", 200), ("tr", "iso8859_9", 200), ("uk", "cp1251", 200)}


def _lines_in(lang: str, encoding: str, size: int) -> str:
    """Lines of ``lang`` that ``encoding`` holds, about ``size`` bytes of them."""
    out: list[str] = []
    for line in (line for line in LINES[lang] if _encodes(line, encoding)):
        if out and len(" ".join([*out, line]).encode(encoding)) > size:
            break
        out.append(line)
    return " ".join(out)


@pytest.mark.parametrize("size", [200, 1500])
@pytest.mark.parametrize(
    ("lang", "encoding"), [(lang, enc) for lang, encs in CODE_PAGES.items() for enc in encs]
)
def test_legacy_one_byte_code_pages_are_read_in_their_charset(
    tmp_path: Path, lang: str, encoding: str, size: int
) -> None:
    """The trial's Windows-1251 file was skipped as 'cp1251, mac_cyrillic': the Mac
    reading (``управлени€``, ``ѕереключение``) is mojibake, and Hebrew read as
    CP1251 is no language's letters."""
    text = _lines_in(lang, encoding, size)
    (tmp_path / "doc.txt").write_bytes(text.encode(encoding))
    (got,) = read_sources([str(tmp_path)], SourceOptions())
    if (lang, encoding, size) in AMBIGUOUS:
        assert isinstance(got, BadRecord), got
        assert "more than one charset reads it as likely text" in got.reason
    else:
        assert isinstance(got, Record), got.reason
        assert got.text.split() == text.split()
    assert to_text(text.encode("utf-8"), html="raw").split() == text.split()  # UTF-8 unchanged


@pytest.mark.parametrize(
    "mojibake",
    [
        "переключение между элементами управлени€",  # CP1251's я read as Mac Cyrillic
        "ƒом ”кажите —имволические",  # its capitals read as Mac Cyrillic
        "¶θήνα",  # ISO-8859-7's Ά read as CP1253
    ],
)
def test_legacy_cyrillic_and_greek_mojibake_is_odd(mojibake: str) -> None:
    assert odd_share(mojibake) > 0
