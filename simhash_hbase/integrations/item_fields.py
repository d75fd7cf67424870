"""What the Scrapy pipeline says when items lack the fields it reads.

A spider whose items name their fields otherwise (``link`` and ``body`` for
``SHDB_ID_FIELD = "url"``) would have every item pass unchecked, the only sign a
counter in the stats dump; in tag mode an ``Item`` class without the tag field
would fail every item with a traceback. Both are said here once, in words: the
first item that lacks the id or the text gets one warning naming the fields it
has, a crawl none of whose first items has them is stopped, and an item class
that cannot carry the tag is refused at its first item. Kept apart from the
pipeline (no Scrapy here): it only decides what to say and when.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The field tag mode writes on every item.
TAG_FIELD = "near_duplicates"
#: Field names listed in a message, at most (an item may have hundreds).
_NAMES_SHOWN = 12


@dataclass
class Said:
    """What to log about an item: a warning, and why to stop the crawl (each or none)."""

    warning: str | None = None
    stop: str | None = None


@dataclass
class FieldWatch:
    """Watches the items for the fields the pipeline reads (``SHDB_ID_FIELD``, and
    ``SHDB_TEXT_FIELD`` or ``SHDB_HTML_FIELD``): one warning at the first item that
    lacks them, and a reason to stop when none of the first ``within`` items has
    them (0: never stop, for a spider most of whose items are of another kind)."""

    id_field: str
    text_field: str
    html_field: str
    within: int
    _fitted: bool = False  # an item had the fields
    _stopped: bool = False
    _warned: bool = False
    _misfits: int = 0  # items without them, before the first that had them
    _names: Counter[str] = field(default_factory=Counter)  # the fields those items had

    def observe(self, fields: Mapping[str, Any]) -> Said | None:
        """What to say about an item (its fields as the pipeline reads them), if anything.
        Cheap once settled: one lookup of each field an item is read for anyway."""
        lacking = self._lacking(fields)
        if not lacking:
            self._fitted = True
            return None
        said = Said()
        if not self._warned:
            self._warned = True
            counter = "skipped_no_id" if lacking[0].startswith("no id") else "skipped_no_text"
            said.warning = (
                f"shdb: an item has {' and '.join(lacking)}; its fields: {_names(fields)}. "
                f"Items like it pass unchecked (counted in shdb/{counter}, not logged "
                f"again): name your items' fields in {self._settings()}"
            )
        if not self._fitted and not self._stopped:
            self._misfits += 1
            self._names.update(fields.keys())
            if self.within and self._misfits >= self.within:
                self._stopped = True
                said.stop = (
                    f"none of the first {self.within} items has the fields the pipeline "
                    f"reads (an id in {self.id_field!r}, a text in {self.text_field!r} or "
                    f"HTML in {self.html_field!r}); the items' fields: "
                    f"{_counted(self._names)}. Name your items' fields in "
                    f"{self._settings()}, or set SHDB_FIELD_CHECK_ITEMS = 0 if most items "
                    "are of another kind"
                )
        return said if said.warning or said.stop else None

    def _lacking(self, fields: Mapping[str, Any]) -> list[str]:
        lacking = []
        if fields.get(self.id_field) in (None, ""):
            lacking.append(f"no id in {self.id_field!r}")
        if fields.get(self.text_field) is None and fields.get(self.html_field) is None:
            lacking.append(f"no text in {self.text_field!r} nor HTML in {self.html_field!r}")
        return lacking

    def _settings(self) -> str:
        return (
            f"SHDB_ID_FIELD (now {self.id_field!r}) and SHDB_TEXT_FIELD (now "
            f"{self.text_field!r}) or SHDB_HTML_FIELD (now {self.html_field!r})"
        )


def untaggable(item_class: type) -> str | None:
    """Why items of ``item_class`` cannot carry the tag, or None: a class that declares
    its fields (``scrapy.Item``, dataclass, attrs, pydantic) must declare it; a dict
    takes any key."""
    if issubclass(item_class, dict):
        return None
    from itemadapter import ItemAdapter

    declared = ItemAdapter.get_field_names_from_class(item_class)
    if declared is None or TAG_FIELD in declared:
        return None
    name = item_class.__name__
    return (
        f"SHDB_ACTION is 'tag', but {name} declares no {TAG_FIELD!r} field for the tag "
        f"(its fields: {_names(dict.fromkeys(declared))}): declare it "
        f"(`{TAG_FIELD} = scrapy.Field()` on a scrapy.Item, a field defaulting to None on a "
        f"dataclass or attrs class), or yield dicts, or use SHDB_ACTION = 'drop'"
    )


def _names(fields: Mapping[str, Any]) -> str:
    names = [repr(name) for name in list(fields)[:_NAMES_SHOWN]]
    more = len(fields) - len(names)
    return (", ".join(names) or "none") + (f" and {more} more" if more > 0 else "")


def _counted(names: Counter[str]) -> str:
    shown = [f"{name!r} ({n})" for name, n in names.most_common(_NAMES_SHOWN)]
    more = len(names) - len(shown)
    return (", ".join(shown) or "none") + (f" and {more} more" if more > 0 else "")
