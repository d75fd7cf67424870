"""Edits the way reposts edit a text: each a seeded function of (text, rng, context)."""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .texts import (
    CJK_CHAR,
    CLAUSE_END,
    DIGIT_RUN,
    LONG_MIN,
    SENTENCE_END,
    WORD_CHAR,
    Item,
    blocks,
    rng_for,
)

BOILERPLATE = (
    "本文转载自网络，如有侵权请联系删除。",
    "关注公众号获取更多资讯。",
    "声明：本文仅代表作者个人观点，与本站立场无关。",
    "更多精彩内容，请扫描下方二维码关注我们！",
    "点击下方“阅读原文”查看更多。",
    "版权声明：本文为博主原创文章，转载请附上原文出处链接和本声明。",
    "广告：限时优惠，新用户注册即送 100 元代金券！",
    # tags small enough for one-line texts (an edit never exceeds a quarter of a short text)
    "【转载】",
    "（来源：网络）",
    "[广告]",
    "#技术分享#",
    "——转自论坛",
    "（点击查看原文）",
)


SITES = ("Linux 中文社区", "开源技术网", "极客文档站", "运维知识库", "程序员之家", "IT 手册网")


AUTHORS = ("admin", "小编", "张伟", "linuxer", "编辑部")


HEADERS = (
    "首页 > 技术文档 > {cat}\n发布时间：{date} {time}  来源：{site}  阅读：{n} 次",
    "{site} | 在线手册\n更新于 {date}  作者：{author}",
    "当前位置：{site} > {cat} > 正文\n{date} {time} 编辑：{author}",
)


FOOTERS = (
    "上一篇：{cat}入门教程\n下一篇：{cat}常见问题\n版权所有 © 2006-{year} {site} 京ICP备{icp}号",
    "本站文章均来自网络，版权归原作者所有。\n{site} 联系邮箱：admin@example.com 沪ICP备{icp}号-1",
    "相关文章\n· {cat}使用技巧\n· {cat}配置详解\nCopyright © {year} {site}. All rights reserved.",
)


CATEGORIES = ("Linux 命令", "系统管理", "图像处理", "编程开发", "网络工具")


SHORT_PREFIXES = ("【转】", "转：", "[转载]", "")


SHORT_SUFFIXES = (" - 知乎", "_博客园", "｜IT 手册网", " - CSDN", "")


# full-width -> half-width always; half-width -> full-width only next to a CJK character
FULL_TO_HALF = dict(zip("，。：；！？（）“”、", ',.:;!?()"",'))


HALF_TO_FULL = dict(zip(",:;!?()", "，：；！？（）"))


@dataclass(frozen=True)
class EditContext:
    """What an edit may draw on besides the text: sentences from other documents."""

    doc_id: str
    pool: Sequence[tuple[str, str]]
    pool_lengths: Sequence[int]


def budget(text: str) -> int:
    """Characters an edit may add or remove: a quarter of a short text, no cap otherwise.

    Adding a 30-character sentence to a 20-character title is a new text, not a repost.
    """
    return max(8, len(text) // 4) if len(text) < LONG_MIN else 10**9


def segments(text: str, short: bool) -> list[str]:
    """Sentences (clauses, for a short text); they concatenate back to ``text``."""
    pattern = CLAUSE_END if short else SENTENCE_END
    return [s for s in pattern.split(text) if s]


def pick_sentence(rng: random.Random, ctx: EditContext, cap: int) -> str | None:
    """A sentence of at most ``cap`` chars from another document in the same script."""
    end = bisect.bisect_right(ctx.pool_lengths, cap)
    if end == 0:
        return None
    own = ctx.doc_id.split("#", 1)[0]
    for _ in range(40):
        doc_id, sentence = ctx.pool[rng.randrange(end)]
        if doc_id != own and locale(doc_id) == locale(own):
            return sentence
    return None


def locale(doc_id: str) -> str:
    """Traditional or simplified: an editor adds a sentence in the page's own script."""
    return "zh_TW" if "/zh_TW/" in doc_id else "zh_CN"


def sentence_added(text: str, rng: random.Random, ctx: EditContext) -> str | None:
    """One sentence from another document, inserted at a sentence boundary."""
    segs = segments(text, len(text) < LONG_MIN)
    sentence = pick_sentence(rng, ctx, min(80, budget(text)))
    if sentence is None:
        return None
    pos = rng.randint(0, len(segs))
    return "".join([*segs[:pos], sentence, *segs[pos:]])


def sentence_removed(text: str, rng: random.Random, ctx: EditContext) -> str | None:
    """One sentence (a clause, in a short text) of six or more word characters deleted."""
    segs = segments(text, len(text) < LONG_MIN)
    cap = min(200, budget(text))
    candidates = [i for i, s in enumerate(segs) if len(WORD_CHAR.findall(s)) >= 6 and len(s) <= cap]
    if len(segs) < 2 or not candidates:
        return None
    i = rng.choice(candidates)
    return "".join(segs[:i] + segs[i + 1 :])


def boilerplate_inserted(text: str, rng: random.Random, ctx: EditContext) -> str | None:
    """One or two ad or copyright lines at the start, the end or between sentences."""
    short = len(text) < LONG_MIN
    pool = [b for b in BOILERPLATE if len(b) <= budget(text)]
    for _ in range(1 if short else rng.randint(1, 2)):
        ad = rng.choice(pool)
        where = rng.choice(("start", "end", "middle"))
        sep = "" if short else "\n"
        if where == "start":
            text = ad + sep + text
        elif where == "end":
            text = text + sep + ad
        else:
            segs = segments(text, short)
            pos = rng.randint(0, len(segs))
            text = "".join([*segs[:pos], ad, *segs[pos:]])
    return text


def other_number(digits: str, rng: random.Random) -> str:
    """A different number with the same count of digits (a changed date, price, version)."""
    low = 10 ** (len(digits) - 1) if len(digits) > 1 else 0
    for _ in range(10):
        new = str(rng.randint(low, 10 ** len(digits) - 1))
        if new != digits:
            return new
    return str((int(digits) + 1) % 10 ** len(digits)).zfill(len(digits))


def numbers_changed(text: str, rng: random.Random, ctx: EditContext) -> str | None:
    """One to three runs of digits (a date, a count, a version) changed, same length."""
    runs = list(DIGIT_RUN.finditer(text))
    if not runs:
        return None
    chosen = sorted(rng.sample(runs, min(len(runs), rng.randint(1, 3))), key=lambda m: m.start())
    out, last = [], 0
    for m in chosen:
        out += [text[last : m.start()], other_number(m.group(), rng)]
        last = m.end()
    return "".join([*out, text[last:]])


def punct_whitespace(text: str, rng: random.Random, ctx: EditContext) -> str | None:
    """What re-typesetting does: half of the punctuation switched between full and half
    width; half of the line breaks and spaces next to a CJK character or full-width mark
    dropped (a line break between two Latin words becomes a space: words are never
    glued); a space put between CJK and Latin text here and there ("pangu spacing")."""
    out: list[str] = []
    for i, ch in enumerate(text):
        before = text[i - 1] if i else ""
        after = text[i + 1] if i + 1 < len(text) else ""
        if ch in FULL_TO_HALF and rng.random() < 0.5:
            out.append(FULL_TO_HALF[ch])
        elif ch in HALF_TO_FULL and CJK_CHAR.match(before) and rng.random() < 0.5:
            out.append(HALF_TO_FULL[ch])
        elif ch in " \n" and rng.random() < 0.5:
            soft = any(CJK_CHAR.match(c) or c in FULL_TO_HALF for c in (before, after) if c)
            out.append("" if soft else " ")
        else:
            out.append(ch)
        if (
            after
            and rng.random() < 0.3
            and (
                (CJK_CHAR.match(ch) and after.isascii() and after.isalnum())
                or (ch.isascii() and ch.isalnum() and CJK_CHAR.match(after))
            )
        ):
            out.append(" ")
    return "".join(out)


def paragraph_moved(text: str, rng: random.Random, ctx: EditContext) -> str | None:
    """One paragraph (a clause, in a short text) moved elsewhere."""
    short = len(text) < LONG_MIN
    parts = segments(text, True) if short else blocks(text)
    if len(parts) < 2:
        return None
    movable = [i for i, p in enumerate(parts) if len(p) >= 30] or list(range(len(parts)))
    i = rng.choice(movable)
    moved = parts.pop(i)
    j = rng.choice([x for x in range(len(parts) + 1) if x != i])
    parts.insert(j, moved)
    return ("" if short else "\n").join(parts)


def mirror(text: str, rng: random.Random, ctx: EditContext) -> str | None:
    """The page as a mirror site serves it: its own header (replacing the first line)
    and footer; a short text gets a site prefix and suffix instead."""
    fields = {
        "site": rng.choice(SITES),
        "author": rng.choice(AUTHORS),
        "cat": rng.choice(CATEGORIES),
        "date": f"20{rng.randint(10, 24)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "time": f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",
        "year": str(rng.randint(2015, 2024)),
        "n": str(rng.randint(10, 99999)),
        "icp": str(rng.randint(10**7, 10**8 - 1)),
    }
    if len(text) < LONG_MIN:
        pairs = [
            (p, s)
            for p in SHORT_PREFIXES
            for s in SHORT_SUFFIXES
            if (p or s) and len(p) + len(s) <= budget(text)
        ]
        prefix, suffix = rng.choice(pairs)
        return prefix + text + suffix
    header = rng.choice(HEADERS).format(**fields)
    footer = rng.choice(FOOTERS).format(**fields)
    first, _, rest = text.partition("\n")
    return f"{header}\n{rest or first}\n{footer}"


SINGLE_EDITS: dict[str, Callable[[str, random.Random, EditContext], str | None]] = {
    "sentence_added": sentence_added,
    "sentence_removed": sentence_removed,
    "boilerplate": boilerplate_inserted,
    "numbers_changed": numbers_changed,
    "punct_whitespace": punct_whitespace,
    "paragraph_moved": paragraph_moved,
    "mirror": mirror,
}


EDIT_LABELS = {
    "sentence_added": "sentence added",
    "sentence_removed": "sentence removed",
    "boilerplate": "ad/boilerplate inserted",
    "numbers_changed": "numbers/dates changed",
    "punct_whitespace": "punctuation/whitespace",
    "paragraph_moved": "paragraph moved",
    "mirror": "mirror header/footer",
    "combined": "3 edits combined",
}


EDITS = (*SINGLE_EDITS, "combined")


def combined(text: str, rng: random.Random, ctx: EditContext) -> str | None:
    """Three different single edits in a row (at least two of them applicable)."""
    applied = 0
    for name in rng.sample(sorted(SINGLE_EDITS), 3):
        edited = SINGLE_EDITS[name](text, rng, ctx)
        if edited is not None and edited != text:
            text, applied = edited, applied + 1
    return text if applied >= 2 else None


def edit(item: Item, name: str, ctx: EditContext) -> str | None:
    """The edited text, or None when the edit does not apply (or changes nothing)."""
    fn = combined if name == "combined" else SINGLE_EDITS[name]
    out = fn(item.text, rng_for("edit", item.id, name), ctx)
    return out if out is not None and out != item.text and WORD_CHAR.search(out) else None


def make_variants(items: list[Item], ctx_pool: list[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """(original index, edit index, edited text) for every applicable edit."""
    lengths = [len(s) for _, s in ctx_pool]
    out = []
    for i, item in enumerate(items):
        ctx = EditContext(item.id, ctx_pool, lengths)
        for e, name in enumerate(EDITS):
            edited = edit(item, name, ctx)
            if edited is not None:
                out.append((i, e, edited))
    return out
