"""docs/quality.md from an evaluation's results: tables, plots, verdicts, templates."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from simhash_hbase.fingerprint.simhash import DEFAULT_TOP_N

from .common import K
from .configs import DEFAULT, TOP_NS
from .edits import EDIT_LABELS, EDITS, SINGLE_EDITS, combined
from .metrics import (
    EXCLUDE_JACCARD,
    JACCARD_THRESHOLDS,
    K_MAX,
    TARGET_FPR,
    TARGET_RECALL,
    Results,
    distinct_counts,
    rate_at_or_above,
    recall_counts,
)
from .registry import Figure, Target
from .report import figures_table, fill, snippet, table
from .texts import CJK_MIN_SHARE, PARA_MAX, PARA_MIN, SET_LABELS, SETS, SIZE_LABELS, STRATA

PLOT_K = 10  # the plots go further, to show where the FPR starts to rise
TARGET_LEN = 500  # the targets are stated for texts over 500 chars


def pct(x: float, digits: int = 1) -> str:
    return "n/a" if x != x else f"{100 * x:.{digits}f}%"


def fpr_str(x: float) -> str:
    """Percent with two significant digits once below 0.001%: a short-text FPR is a
    handful of pairs in ten million, and "0.000%" would hide it."""
    if x != x:
        return "n/a"
    if x == 0:
        return "0"
    decimals = max(3, 1 - math.floor(math.log10(100 * x)))
    return f"{100 * x:.{decimals}f}%"


def best_under(
    res: Results, names: Iterable[str], set_name: str, max_fpr: float = TARGET_FPR
) -> str:
    """The config with the highest recall at k=3 whose FPR at k=3 is within ``max_fpr``
    (ties: the earlier, i.e. cheaper or default-like, one); lowest FPR if none is."""
    names = list(names)
    fine = [n for n in names if res.fpr(n, K, set_name) <= max_fpr]
    if fine:
        return max(fine, key=lambda n: (round(res.recall(n, K, set_name), 4), -names.index(n)))
    return min(names, key=lambda n: res.fpr(n, K, set_name))


def edit_table(res: Results, set_name: str, names: Sequence[str]) -> str:
    """Recall per edit type at k=3, then the Jaccard baseline's rows, then pair counts."""
    header = ["config", *(EDIT_LABELS[e] for e in EDITS), "all single edits", "FPR"]
    rows = [
        [
            f"`{n}`",
            *(pct(res.recall(n, K, set_name, [e])) for e in EDITS),
            f"**{pct(res.recall(n, K, set_name))}**",
            fpr_str(res.fpr(n, K, set_name)),
        ]
        for n in names
    ]
    counts = ["pairs", *(str(res.n_recall(set_name, [e])) for e in EDITS)]
    counts += [str(res.n_recall(set_name)), str(res.fp_count(DEFAULT, K, set_name)[1])]
    jaccard_rows = [jaccard_edit_row(res, set_name, t) for t in (0.3, 0.5)]
    return table(header, [*rows, *jaccard_rows, counts])


def per_k_table(res: Results, set_name: str, names: Sequence[str], what: str) -> str:
    ks = range(K_MAX + 1)
    if what == "recall":
        rows = [[f"`{n}`", *(pct(res.recall(n, k, set_name)) for k in ks)] for n in names]
    else:
        rows = [[f"`{n}`", *(fpr_str(res.fpr(n, k, set_name)) for k in ks)] for n in names]
    return table(["config", *(f"k={k}" for k in ks)], rows)


def band_table(res: Results, names: Sequence[str]) -> str:
    bands = ("<200", "200-1000", ">1000")
    header = ["config"]
    for b in bands:
        header += [f"{b} recall", f"{b} FPR"]
    rows = []
    for n in names:
        row = [f"`{n}`"]
        for b in bands:
            row += [pct(res.recall(n, K, b)), fpr_str(res.fpr(n, K, b))]
        rows.append(row)
    counts = ["pairs"]
    for b in bands:
        counts += [str(res.n_recall(b)), str(res.fp_count(DEFAULT, K, b)[1])]
    return table(header, [*rows, counts])


def jaccard_table(res: Results) -> str:
    header = ["Jaccard >= t"]
    sets = ("long>500", "long", "short")
    for s in sets:
        header += [f"{s} recall", f"{s} FPR"]
    rows = []
    for t in JACCARD_THRESHOLDS:
        row = [f"{t:.1f}"]
        for s in sets:
            r = rate_at_or_above(recall_counts(res.jac_recall, SINGLE_EDITS, SETS[s]), t)
            f = rate_at_or_above(distinct_counts(res.jac_distinct, SETS[s]), t)
            row += [pct(r), fpr_str(f) + (" (by construction)" if t > EXCLUDE_JACCARD else "")]
        rows.append(row)
    return table(header, rows)


def jaccard_edit_row(res: Results, set_name: str, t: float) -> list[str]:
    def r(edits: Iterable[str]) -> float:
        return rate_at_or_above(recall_counts(res.jac_recall, edits, SETS[set_name]), t)

    f = rate_at_or_above(distinct_counts(res.jac_distinct, SETS[set_name]), t)
    return [
        f"Jaccard-4 >= {t:.1f}",
        *(pct(r([e])) for e in EDITS),
        f"**{pct(r(SINGLE_EDITS))}**",
        fpr_str(f),
    ]


def plot(res: Results, names: Sequence[str], set_name: str, path: Path) -> None:
    """Recall (all single edits) and FPR against k, side by side; FPR on a log axis."""
    import matplotlib

    matplotlib.use("Agg")  # no display here
    import matplotlib.pyplot as plt

    ks = list(range(PLOT_K + 1))
    pairs = res.fp_count(DEFAULT, 0, set_name)[1]
    floor = 10 ** math.floor(math.log10(0.5 / max(pairs, 1)))  # below one pair: "none"
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for n in names:
        style = "-" if n.startswith(("words", "proto")) else "--"
        left.plot(ks, [res.recall(n, k, set_name) for k in ks], style, marker="o", label=n)
        fprs = [max(res.fpr(n, k, set_name), floor) for k in ks]
        right.plot(ks, fprs, style, marker="o", label=n)
    for ax in (left, right):
        ax.axvspan(K + 0.5, PLOT_K + 0.3, color="grey", alpha=0.08, lw=0)
        ax.set_xticks(ks)
    left.axhline(TARGET_RECALL, color="grey", lw=0.8, ls=":")
    right.axhline(TARGET_FPR, color="grey", lw=0.8, ls=":")
    left.text(K + 0.6, 0.04, "beyond the index's exact k<=3", fontsize=8, color="grey")
    left.set(
        title=f"recall, {SET_LABELS[set_name]}",
        xlabel="k (max Hamming distance)",
        ylabel="recall (single edits)",
        ylim=(0, 1.02),
    )
    right.set(
        title="false-positive rate (distinct pairs)",
        xlabel="k (max Hamming distance)",
        ylabel=f"FPR (log; {floor:.0e} = none of {pairs} pairs)",
        yscale="log",
    )
    left.grid(alpha=0.3)
    right.grid(alpha=0.3)
    right.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def versus(res: Results, a: str, b: str, set_name: str) -> str:
    d, half = res.paired_diff(a, b, set_name)
    return f"{100 * d:+.1f} ± {100 * half:.1f} points"


def losses(res: Results, a: str, b: str, set_name: str, n: int = 2) -> str:
    """The n edit types where config a recalls least compared with b, with the numbers."""
    deltas = sorted(
        (res.recall(a, K, set_name, [e]) - res.recall(b, K, set_name, [e]), e) for e in SINGLE_EDITS
    )
    return " and ".join(
        f"{EDIT_LABELS[e]} ({pct(res.recall(a, K, set_name, [e]))} vs "
        f"{pct(res.recall(b, K, set_name, [e]))})"
        for _, e in deltas[:n]
    )


def significant(res: Results, a: str, b: str, set_name: str) -> bool:
    """a beats b on the same pairs by more than the 95% interval."""
    d, half = res.paired_diff(a, b, set_name)
    return d - half > 0


def _rf(res: Results, n: str, s: str) -> str:
    return f"recall {pct(res.recall(n, K, s))}, FPR {fpr_str(res.fpr(n, K, s))}"


def picks_of(res: Results) -> dict[str, str]:
    """The best configuration of each family under the FPR budget, for the verdicts."""
    words = [f"words-t{n}" for n in TOP_NS]
    didf = [f"words-t{n}-didf" for n in TOP_NS]
    chars = [c.name for c in res.cfgs if c.family == "chars"]
    ours = [*words, *didf, *chars]
    return {
        "best_top_n": best_under(res, words, "long>500"),
        "best_domain_idf": best_under(res, didf, "long>500"),
        "best_long": best_under(res, ours, "long>500"),
        "best_short": best_under(res, ours, "short"),
        "best_chars_short": best_under(res, chars, "short"),
        "best_chars_long": best_under(res, chars, "long>500"),
    }


_VERDICTS = "eval/verdicts.md"


#: A verdict: the name of its sentence in templates/eval/verdicts.md and the numbers
#: it quotes; a value that is itself a verdict (or a list of them) is rendered in place.
Verdict = tuple[str, dict[str, Any]]
LONG = "long>500"


def recommendations(res: Results, picks: dict[str, str]) -> list[str]:
    """Tuned-defaults bullets, chosen and filled from the numbers so a rerun keeps them
    consistent: :func:`verdicts` decides, this only renders."""
    common = {"k": K, "default": DEFAULT, "default_top_n": DEFAULT_TOP_N}
    return [_render_verdict(v, common) for v in verdicts(res, picks)]


def _render_verdict(verdict: Verdict, common: dict[str, Any]) -> str:
    name, values = verdict
    filled = {
        key: "; ".join(_render_verdict(v, common) for v in value)
        if isinstance(value, list)
        else _render_verdict(value, common)
        if isinstance(value, tuple)
        else value
        for key, value in values.items()
    }
    return snippet(_VERDICTS, name, common, **filled)


def verdicts(res: Results, picks: dict[str, str]) -> list[Verdict]:
    """Which verdicts the numbers support, and the numbers each quotes.

    A change is recommended only when its paired recall gain over the default (same
    pairs, both configs) is larger than its 95% interval and its FPR is within budget.
    """
    found = [_top_n(res, picks["best_top_n"]), _domain_idf(res, picks)]
    best_long = picks["best_long"]
    if best_long != DEFAULT and significant(res, best_long, DEFAULT, LONG):
        found.append(_documents(res, best_long, picks["best_chars_long"]))
    return [*found, _short_texts(res, picks), _k_lever(res), _noise_tokens(res)]


def _top_n(res: Results, best_t: str) -> Verdict:
    if best_t != DEFAULT and significant(res, best_t, DEFAULT, LONG):
        return "top_n_change", {
            "top_n": best_t.split("-t")[1],
            "best_t": best_t,
            "rf_best": _rf(res, best_t, LONG),
            "rf_default": _rf(res, DEFAULT, LONG),
            "vs_long": versus(res, best_t, DEFAULT, LONG),
            "vs_short": versus(res, best_t, DEFAULT, "short"),
            "best_k6": pct(res.recall(best_t, 6, LONG)),
            "default_k6": pct(res.recall(DEFAULT, 6, LONG)),
        }
    others = [f"words-t{n}" for n in TOP_NS if f"words-t{n}" != DEFAULT]
    alt = max(others, key=lambda c: res.recall(c, K, LONG))
    return "top_n_keep", {
        "rf_default": _rf(res, DEFAULT, LONG),
        "alt": alt,
        "vs_alt": versus(res, alt, DEFAULT, LONG),
    }


def _domain_idf(res: Results, picks: dict[str, str]) -> Verdict:
    best_t, best_didf = picks["best_top_n"], picks["best_domain_idf"]
    same_n = f"{best_t}-didf"
    idf = res.meta["domain_idf_tables"][0]
    if significant(res, same_n, best_t, LONG):
        verdict = "helps"
    elif significant(res, best_t, same_n, LONG):
        verdict = "hurts"
    else:
        verdict = "makes no clear difference"
    return "domain_idf", {
        "verdict": verdict,
        "same_n": same_n,
        "best_t": best_t,
        "rf_same": _rf(res, same_n, LONG),
        "rf_best": _rf(res, best_t, LONG),
        "vs_long": versus(res, same_n, best_t, LONG),
        "vs_short": versus(res, same_n, best_t, "short"),
        "best_didf": best_didf,
        "rf_didf": _rf(res, best_didf, LONG),
        "losses": losses(res, same_n, best_t, LONG),
        "median": f"{idf['median']:.2f}",
        "max": f"{idf['max']:.2f}",
        "df_at_median": f"{idf['df_at_median']:.0f}",
        "docs": f"{idf['docs']:.0f}",
    }


def _documents(res: Results, best_long: str, best_chars: str) -> Verdict:
    fp_best = res.fp_count(best_long, K, LONG)[0]
    fp_default, pairs = res.fp_count(DEFAULT, K, LONG)
    twins = res.meta["twins"]["within_k3"]
    return "documents_better", {
        "best_long": best_long,
        "rf_best": _rf(res, best_long, LONG),
        "rf_default": _rf(res, DEFAULT, LONG),
        "vs_long": versus(res, best_long, DEFAULT, LONG),
        "best_chars_long": best_chars,
        "rf_chars": _rf(res, best_chars, LONG),
        "fp_best": fp_best,
        "fp_default": fp_default,
        "pairs": pairs,
        "fpr6_best": fpr_str(res.fpr(best_long, 6, LONG)),
        "fpr6_default": fpr_str(res.fpr(DEFAULT, 6, LONG)),
        "twins_best": pct(twins[best_long]),
        "twins_default": pct(twins[DEFAULT]),
        "cost": ("documents_costly" if fp_best > 2 * fp_default else "documents_cheap", {}),
    }


def _short_texts(res: Results, picks: dict[str, str]) -> Verdict:
    best_short, best_chars = picks["best_short"], picks["best_chars_short"]
    if best_short != DEFAULT and significant(res, best_short, DEFAULT, "short"):
        verdict = f"`{best_short}`"
    else:
        verdict = f"the default `{DEFAULT}` (nothing is clearly better)"
    return "short_texts", {
        "verdict": verdict,
        "best_short": best_short,
        "rf_best": _rf(res, best_short, "short"),
        "rf_line": _rf(res, best_short, "line"),
        "rf_para": _rf(res, best_short, "para"),
        "rf_default": _rf(res, DEFAULT, "short"),
        "best_chars": best_chars,
        "rf_chars": _rf(res, best_chars, "short"),
        "vs_chars": versus(res, best_chars, DEFAULT, "short"),
        "losses": losses(res, best_chars, DEFAULT, "short"),
    }


def _k_lever(res: Results) -> Verdict:
    chars = [c.name for c in res.cfgs if c.family == "chars"]
    ours = [f"words-t{n}" for n in TOP_NS] + [f"words-t{n}-didf" for n in TOP_NS] + chars
    worst_fpr = max(res.fpr(n, K, LONG) for n in ours)
    k_short, r_short, f_short = res.operating_point(DEFAULT, "short")
    k_long, r_long, f_long = res.operating_point(DEFAULT, LONG)
    return "k_lever", {
        "budget_share": pct(worst_fpr / TARGET_FPR, 0),
        "target_fpr": pct(TARGET_FPR, 1),
        "worst_fpr": fpr_str(worst_fpr),
        "k_long": k_long,
        "r_long": pct(r_long),
        "f_long": fpr_str(f_long),
        "k_short": k_short,
        "r_short": pct(r_short),
        "f_short": fpr_str(f_short),
        "fpr6": fpr_str(res.fpr(DEFAULT, 6, LONG)),
        "recall6": pct(res.recall(DEFAULT, 6, LONG)),
    }


def _noise_tokens(res: Results) -> Verdict:
    jb = res.meta["jieba_idf"]
    pairs = [_noise_pair(res, proto, base) for proto, base in NOISE_PAIRS]
    return "noise_tokens", {
        "ascii_entries": jb["ascii_entries"],
        "entries": jb["entries"],
        "median": f"{jb['median']:.2f}",
        "wenjian": f"{jb['文件']:.2f}",
        "yonghu": f"{jb['用户']:.2f}",
        "ascii_share": pct(res.meta["ascii_top_share"], 0),
        "protos": pairs,
    }


NOISE_PAIRS = (("proto-t64", "words-t64"), ("proto-t128", "words-t128"))


def _noise_pair(res: Results, proto: str, base: str) -> Verdict:
    numbers = ["numbers_changed"]
    gain = res.recall(proto, K, LONG, numbers) - res.recall(base, K, LONG, numbers)
    return "noise_token_pair", {
        "proto": proto,
        "base": base,
        "rf_proto": _rf(res, proto, LONG),
        "rf_base": _rf(res, base, LONG),
        "vs_long": versus(res, proto, base, LONG),
        "numbers": f"{100 * gain:+.1f}",
        "fp_proto": res.fp_count(proto, K, LONG)[0],
        "fp_base": res.fp_count(base, K, LONG)[0],
        "vs_short": versus(res, proto, base, "short"),
    }


def operating_table(res: Results, names: Sequence[str]) -> str:
    header = ["config"]
    for s in ("long>500", "short"):
        header += [f"{s}: largest k", "recall", "FPR"]
    rows = []
    for n in names:
        row = [f"`{n}`"]
        for s in ("long>500", "short"):
            k, r, f = res.operating_point(n, s)
            row += [str(k), pct(r), fpr_str(f)]
        rows.append(row)
    return table(header, rows)


def twin_table(res: Results, names: Sequence[str]) -> str:
    tw = res.meta["twins"]
    return table(
        [
            "config",
            f"twins within k={K}",
            f"false positives at k={K}, documents >= 200 chars",
            "of which twins",
        ],
        [
            [
                f"`{n}`",
                pct(tw["within_k3"][n]),
                str(tw["false_positives_k3"][n]),
                str(tw["false_positives_k3_twins"][n]),
            ]
            for n in names
        ],
    )


def _meets(res: Results, n: str, k: int) -> bool:
    return res.recall(n, k, "long>500") >= TARGET_RECALL and res.fpr(n, k, "long>500") <= TARGET_FPR


def _ci(interval: tuple[float, float], fmt: Any = pct) -> str:
    return f"{fmt(interval[0])}-{fmt(interval[1])}"


def result_paragraph(res: Results) -> str:
    """The answer to the issue, in words: targets met or missed, and where they would be."""
    meeting = [c.name for c in res.cfgs if _meets(res, c.name, K)]
    common = {"k": K, "default": DEFAULT}
    kd = res.target_k(DEFAULT, "long>500")
    default_from = ""
    if kd is not None and kd > K:
        default_from = snippet(
            _VERDICTS,
            "result_default_from",
            kd=kd,
            recall=pct(res.recall(DEFAULT, kd, "long>500")),
            fpr=fpr_str(res.fpr(DEFAULT, kd, "long>500")),
        )
    tw = res.meta["twins"]
    return snippet(
        _VERDICTS,
        "result",
        common,
        target_len=TARGET_LEN,
        target_recall=pct(TARGET_RECALL, 0),
        target_fpr=pct(TARGET_FPR, 1),
        default_top_n=DEFAULT_TOP_N,
        meets="meets" if _meets(res, DEFAULT, K) else "misses",
        recall=pct(res.recall(DEFAULT, K, "long>500")),
        recall_ci=_ci(res.recall_interval(DEFAULT, K, "long>500")),
        fpr=fpr_str(res.fpr(DEFAULT, K, "long>500")),
        fpr_hi=fpr_str(res.fpr_interval(DEFAULT, K, "long>500")[1]),
        meeting=snippet(
            _VERDICTS, "result_meeting", k=K, names=", ".join(f"`{n}`" for n in meeting)
        )
        if meeting
        else snippet(_VERDICTS, "result_none", k=K),
        default_from=default_from,
        twins=snippet(
            _VERDICTS,
            "result_twins",
            k=K,
            fp=tw["false_positives_k3"][DEFAULT],
            fp_twins=tw["false_positives_k3_twins"][DEFAULT],
        ),
        short_recall=pct(res.recall(DEFAULT, K, "short")),
        short_fpr=fpr_str(res.fpr(DEFAULT, K, "short")),
    )


def figures(res: Results) -> list[Figure]:
    """The evaluation's own targets (Chinese documents > 500 chars, k=3, default)."""
    recall = res.recall(DEFAULT, K, "long>500")
    fp, pairs = res.fp_count(DEFAULT, K, "long>500")
    worst = min(SINGLE_EDITS, key=lambda e: res.recall(DEFAULT, K, "long>500", [e]))
    return [
        Figure.judge(
            f"recall of `{DEFAULT}` at k={K}, single edits, documents > 500 chars",
            recall,
            Target.at_least(TARGET_RECALL, unit="%"),
            measured=f"{pct(recall)} (95%: {_ci(res.recall_interval(DEFAULT, K, 'long>500'))})",
            baseline=f"PyPI simhash {pct(res.recall('pypi-simhash', K, 'long>500'))}",
            bound=f"weakest edit: {EDIT_LABELS[worst]} "
            f"{pct(res.recall(DEFAULT, K, 'long>500', [worst]))}",
        ),
        Figure.judge(
            f"FPR of `{DEFAULT}` at k={K}, distinct documents > 500 chars",
            res.fpr(DEFAULT, K, "long>500"),
            Target("<=", TARGET_FPR, unit="%"),
            measured=f"{fpr_str(res.fpr(DEFAULT, K, 'long>500'))} ({fp} of {pairs} pairs; "
            f"95% upper bound {fpr_str(res.fpr_interval(DEFAULT, K, 'long>500')[1])})",
            baseline=f"PyPI simhash {fpr_str(res.fpr('pypi-simhash', K, 'long>500'))}",
        ),
    ]


def headline(res: Results, names: Sequence[str]) -> str:
    rows = []
    for n in names:
        r = res.recall(n, K, "long>500")
        per_edit = [res.recall(n, K, "long>500", [e]) for e in SINGLE_EDITS]
        worst = min(range(len(per_edit)), key=per_edit.__getitem__)
        f = res.fpr(n, K, "long>500")
        fp, total = res.fp_count(n, K, "long>500")
        met = "met" if r >= TARGET_RECALL and f <= TARGET_FPR else "missed"
        k_met = res.target_k(n, "long>500")
        rows.append(
            [
                f"`{n}`",
                pct(r),
                f"{pct(per_edit[worst])} ({EDIT_LABELS[list(SINGLE_EDITS)[worst]]})",
                pct(res.recall(n, K, "long>500", ["combined"])),
                f"{fpr_str(f)} ({fp}/{total})",
                met,
                "none"
                if k_met is None
                else f"k={k_met}: {pct(res.recall(n, k_met, 'long>500'))}, "
                f"{fpr_str(res.fpr(n, k_met, 'long>500'))}",
            ]
        )
    header = [
        "config",
        "recall, single edits",
        "worst edit type",
        "recall, 3 combined",
        "FPR (pairs)",
        f"target at k={K}",
        "smallest k meeting both targets",
    ]
    return table(header, rows)


def _mode_flag(mode: str) -> str:
    return "" if mode == "full" else f" --{mode}"


def _plotted(picks: dict[str, str]) -> tuple[list[str], list[str]]:
    long = [
        DEFAULT,
        picks["best_top_n"],
        f"{picks['best_top_n']}-didf",
        "proto-t64",
        picks["best_chars_long"],
        "pypi-simhash",
    ]
    short = [
        DEFAULT,
        picks["best_top_n"],
        picks["best_short"],
        picks["best_chars_short"],
        "chars-n2-t64",
        "pypi-simhash",
    ]
    return list(dict.fromkeys(long)), list(dict.fromkeys(short))


def render(
    res: Results,
    doc: Path,
    extra_figures: Sequence[Figure] = (),
    sections: Sequence[str] = (),
) -> str:
    """docs/quality.md from templates/quality.md; plots next to it.

    ``extra_figures`` and ``sections`` come from the registered eval sections.
    """
    picks = picks_of(res)
    plotted, plotted_short = _plotted(picks)
    plot(res, plotted, "long>500", doc.parent / "quality-long.png")
    plot(res, plotted_short, "short", doc.parent / "quality-short.png")
    page = fill(
        "quality.md",
        **_run_values(res),
        **_method_values(res),
        **_result_values(res, picks, extra_figures),
        sections="\n\n".join(sections),
        recommendations="\n".join(recommendations(res, picks)),
    )
    return re.sub(r"\n{3,}", "\n\n", page)


def _run_values(res: Results) -> dict[str, Any]:
    """How the run was made."""
    m = res.meta
    smoke = m["mode"] == "smoke"
    return {
        "command": f"python -m benchmarks.eval{_mode_flag(m['mode'])}",
        "runtime": f"{m['runtime_s']:.0f}",
        "cpu": f"{m['cpu_s']:.0f}",
        "workers": m["workers"],
        "corpus_docs": m["corpus_docs"],
        "corpus_source": "generated (a smoke run: the numbers mean nothing)"
        if smoke
        else "from Debian `manpages-zh` and `gimp-help-zh-cn`",
        "json": m["json"],
    }


def _method_values(res: Results) -> dict[str, Any]:
    """The method section: corpus strata, edits, configurations, exclusions."""
    m = res.meta
    ex = m["excluded"]
    strata_rows = [[s, SET_LABELS.get(s, s), str(m["originals"].get(s, 0))] for s in STRATA]
    edit_rows = [
        [EDIT_LABELS[e], " ".join((SINGLE_EDITS.get(e, combined).__doc__ or "").split())]
        for e in EDITS
    ]
    cfg_rows = [[f"`{c.name}`", c.describe()] for c in res.cfgs]
    cfg_rows.append(
        [
            "Jaccard-4",
            "exact Jaccard of character 4-shingle sets (same "
            "normalisation as PyPI simhash); duplicate when >= threshold",
        ]
    )
    return {
        "english_docs": m["english_docs"],
        "cjk_min": pct(CJK_MIN_SHARE, 0),
        "para_min": PARA_MIN,
        "para_max": PARA_MAX,
        "sizes": ", ".join(
            f"{'all' if v is None else v} {SIZE_LABELS[k]}" for k, v in m["sizes"].items()
        ),
        "strata_table": table(["stratum", "what", "originals"], strata_rows),
        "idf_terms_0": m["idf_terms"][0],
        "idf_terms_1": m["idf_terms"][1],
        "edits_table": table(["edit", "what it does"], edit_rows),
        "exclude_jaccard": EXCLUDE_JACCARD,
        "ex_long": ex["long"],
        "ex_short": ex["short"],
        "ex_long_total": ex["long_total"],
        "ex_short_total": ex["short_total"],
        "default": DEFAULT,
        "ex_default_k3": pct(ex["long_default_k3"]),
        "long_pairs": res.fp_count(DEFAULT, K, "long>500")[1],
        "short_pairs": res.fp_count(DEFAULT, K, "short")[1],
        "dropped": m["dropped_texts"],
        "configs_table": table(["name", "fingerprint"], cfg_rows),
        "k": K,
    }


def _result_values(
    res: Results, picks: dict[str, str], extra_figures: Sequence[Figure]
) -> dict[str, Any]:
    """The result tables, every configuration side by side."""
    words = [f"words-t{n}" for n in TOP_NS]
    didf = [f"words-t{n}-didf" for n in TOP_NS]
    chars = [c.name for c in res.cfgs if c.family == "chars"]
    protos = [c.name for c in res.cfgs if c.family == "proto"]
    allc = [c.name for c in res.cfgs]
    tw = res.meta["twins"]
    line_para = [
        [f"`{n}`", *(x for b in ("line", "para") for x in _rates(res, n, b))] for n in allc
    ]
    english = [DEFAULT, picks["best_top_n"], "proto-t64", picks["best_chars_short"]]
    english_rows = [
        [f"`{n}`", pct(res.recall(n, K, "en")), fpr_str(res.fpr(n, K, "en"))]
        for n in [*dict.fromkeys(english), "pypi-simhash"]
    ]
    return {
        "result": result_paragraph(res),
        "headline": headline(res, [*words, *didf, *protos, *chars, "pypi-simhash"]),
        "targets": figures_table([*figures(res), *extra_figures]),
        "long_edit_table": edit_table(res, "long>500", allc),
        "long_recall_k": per_k_table(res, "long>500", allc, "recall"),
        "long_fpr_k": per_k_table(res, "long>500", allc, "fpr"),
        "band_table": band_table(res, allc),
        "short_edit_table": edit_table(res, "short", allc),
        "short_recall_k": per_k_table(res, "short", allc, "recall"),
        "short_fpr_k": per_k_table(res, "short", allc, "fpr"),
        "line_para_table": table(
            ["config", "lines recall", "lines FPR", "paragraphs recall", "paragraphs FPR"],
            line_para,
        ),
        "target_fpr": pct(TARGET_FPR, 1),
        "operating_table": operating_table(res, allc),
        "twin_pairs": tw["pairs"],
        "twin_excluded": tw["excluded"],
        "twin_table": twin_table(res, allc),
        "jaccard_table": jaccard_table(res),
        "english_table": table(["config", "recall", "FPR"], english_rows),
    }


def _rates(res: Results, name: str, band: str) -> tuple[str, str]:
    """Recall and FPR of a configuration at k=3 in a set, as the tables print them."""
    return pct(res.recall(name, K, band)), fpr_str(res.fpr(name, K, band))


def print_summary(res: Results) -> None:
    """The headline on stdout (quick mode has no report file by default)."""
    rows = []
    for c in res.cfgs:
        n = c.name
        rows.append(
            f"{n:18s} long>500 R={pct(res.recall(n, K, 'long>500')):>6s} "
            f"F={fpr_str(res.fpr(n, K, 'long>500')):>7s}  "
            f"short R={pct(res.recall(n, K, 'short')):>6s} F={fpr_str(res.fpr(n, K, 'short')):>7s}"
        )
    print(f"k={K}; recall over single edits, FPR over distinct pairs")
    print("\n".join(rows))


def no_nan(obj: Any) -> Any:
    """NaN (a rate over zero pairs) is not JSON; write null."""
    if isinstance(obj, float):
        return None if obj != obj else obj
    if isinstance(obj, dict):
        return {k: no_nan(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [no_nan(v) for v in obj]
    return obj


def dump_json(obj: Any) -> str:
    """Indented, but each list of numbers on one line: readable, diffable, not 50k lines."""
    text = json.dumps(no_nan(obj), indent=1, ensure_ascii=False, allow_nan=False)
    flat = re.sub(
        r"\[\n\s*([-0-9.eE+,\snul]*?)\n\s*\]",
        lambda m: "[" + re.sub(r",\s+", ", ", m.group(1).strip()) + "]",
        text,
    )
    return flat + "\n"
