"""The section/figure API the benchmark modules report through, and the templates."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import registry, report
from benchmarks.registry import Figure, Section, Target, show_ratio


@pytest.mark.parametrize(
    ("target", "ratio", "met"),
    [
        (Target.at_most(3.5), 3.5, True),
        (Target.at_most(3.5), 3.51, False),
        (Target.at_least(0.3, unit="%"), 0.3, True),
        (Target.at_least(0.3, unit="%"), 0.29, False),
        (Target.at_least(1.0), math.nan, False),  # nothing measured never meets a target
    ],
)
def test_targets_judge_ratios(target: Target, ratio: float, met: bool) -> None:
    figure = Figure.judge("f", ratio, target, measured="m", baseline="b")
    assert figure.met is met
    assert figure.status == ("MET" if met else "MISSED")


def test_a_wrong_answer_never_meets_a_target() -> None:
    figure = Figure.judge(
        "q", 1.0, Target.at_most(3), measured="m", baseline="b", exact=False, bound="x"
    )
    assert figure.met is False
    assert figure.bound.startswith("WRONG ANSWERS") and figure.bound.endswith("x")


def test_figures_without_target_are_reported_not_judged() -> None:
    assert Figure.report("context", "1 s").status == "-"
    assert Figure.judge("f", 2.0, None, measured="m", baseline="b").met is None


def test_ratio_formats() -> None:
    assert show_ratio(3.14159) == "3.14x"
    assert show_ratio(0.474, "%") == "47%"
    assert show_ratio(0.000018, "%") == "0.0018%"
    assert show_ratio(0.0, "%") == "0%"
    assert show_ratio(117.4, " B") == "117 B"
    assert show_ratio(math.nan) == "n/a"
    assert str(Target.at_least(0.5, unit="%")) == ">= 50%"


def test_figure_rows_have_the_header_shape() -> None:
    figure = Figure.judge("f", 2.0, Target.at_most(3), measured="m", baseline="b")
    assert len(figure.as_row()) == len(registry.FIGURE_HEADER)
    assert figure.to_json()["status"] == "MET"


def test_a_section_cannot_be_registered_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_SECTIONS", {})
    first = Section("twice", "Twice", lambda _ctx: {}, order=2)
    registry.register(first)
    registry.register(first)  # the same object again (a module imported twice): fine
    with pytest.raises(ValueError, match="twice"):
        registry.register(Section("twice", "Other", lambda _ctx: {}))
    registry.register(Section("early", "Early", lambda _ctx: {}, order=1))
    registry.register(Section("q", "Quality", lambda _ctx: {}, suite="eval"))
    assert [s.name for s in registry.sections("bench")] == ["early", "twice"]
    assert [s.name for s in registry.sections("eval")] == ["q"]


def test_templates_fail_on_a_missing_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t.md").write_text("a $x and $y\n")
    monkeypatch.setattr(report, "TEMPLATES", tmp_path)
    assert report.fill("t.md", x=1, y="two") == "a 1 and two\n"
    with pytest.raises(KeyError, match="y"):
        report.fill("t.md", x=1)


def test_every_shipped_template_is_valid() -> None:
    """No stray `$` in the prose: each one is a placeholder with an identifier."""
    from string import Template

    templates = sorted(report.TEMPLATES.rglob("*.md"))
    assert templates
    for path in templates:
        assert Template(path.read_text(encoding="utf-8")).is_valid(), path


def test_snippets_are_chosen_by_key_and_joined_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "s.md").write_text(
        "<!-- a comment before the first block -->\n<!-- one -->\nfirst $x\nline\n\n"
        "<!-- two -->\nsecond $x $empty.\n"
    )
    monkeypatch.setattr(report, "TEMPLATES", tmp_path)
    assert report.snippet("s.md", "one", x=1) == "first 1 line"
    assert report.snippet("s.md", "two", x=2, empty="") == "second 2 ."
    with pytest.raises(KeyError, match="three"):
        report.snippet("s.md", "three")


def test_add_to_keeps_only_the_sections_this_run_did_not_run() -> None:
    from benchmarks import bench

    sections = [Section(n, n, lambda _ctx: {}) for n in ("a", "b", "c", "d")]
    first = {
        "meta": {"date": "D1", "mode": "quick", "load_start": [1], "load_end": [2]},
        "d": {"first": 4},
    }
    earlier = {
        "meta": {
            "date": "D2",
            "mode": "quick",
            "load_start": [1],
            "load_end": [2],
            "sections": ["a", "b"],
        },
        "a": {"old": 1},
        "b": {"old": 2},
    }
    bench.carry_over(earlier, first, sections)  # earlier itself carried d from D1
    now = {"meta": {"date": "D3", "sections": ["a", "c"]}, "a": {"new": 1}, "c": {"new": 3}}
    bench.carry_over(now, earlier, sections)
    assert now["a"] == {"new": 1} and now["b"] == {"old": 2} and now["c"] == {"new": 3}
    assert now["d"] == {"first": 4}
    assert set(now["meta"]["origin"]) == {"b", "d"}
    notes = bench.origin_notes(now)
    assert any("`b`" in n and "run of D2" in n for n in notes)
    assert any("`d`" in n and "run of D1" in n for n in notes)


def test_results_older_than_their_sections_code_are_left_out_with_a_note() -> None:
    from benchmarks.bench import _readable

    def figures(r: dict[str, object]) -> list[Figure]:
        return [Figure.report("new", str(r["new_key"]))]

    fresh = Section("fresh", "Fresh", lambda ctx: {}, figures, None)
    stale = Section("stale", "Stale", lambda ctx: {}, figures, None)
    results = {"fresh": {"new_key": 1}, "stale": {"old_key": 1}, "meta": {}}
    usable, notes = _readable(results, [fresh, stale])
    assert set(usable) == {"fresh", "meta"}
    assert notes == ["Section `stale` left out: its stored results lack 'new_key'; re-run it"]
