"""A batch of files read column by column, for predicates that answer for all of them at once.

A conflict check asks one read predicate of every file a winning commit added. A
:class:`FileColumns` holds such a batch: each file's statistics JSON is parsed at most once,
and each column a predicate names is extracted at most once into lists of bounds, by the
rules of :mod:`deltatx.kernel.evaluation` (what a partition value or a statistic says about a
column). A :class:`ColumnReader` holds what every batch of one table shares: the column
plans, the case-insensitive key lookups, the partition values already read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from operator import itemgetter
from typing import Any

import msgspec

from deltatx.kernel.actions import FileStatistics
from deltatx.kernel.evaluation import (
    _TYPE_CHANGES,
    _ColumnPlan,
    _FileView,
    column_plan,
    may_hold_value,
    needs_exact,
    num_records_of,
    parse_stats,
    parse_stats_objects,
    partition_kind,
    partition_value_range,
    row_count,
    stats_key,
    stats_range,
)
from deltatx.kernel.schema import StructField, StructType
from deltatx.kernel.values import Kind

# A partition value as read: its value (None: NULL or unknown), may hold a value, unknown.
_Entry = tuple[Any, bool, bool]
# How a column is read: its field, kind, key lookup, whether it is a partition column.
_Spec = tuple["StructField | None", "Kind | None", "_Lookup", bool]


class ColumnReader:
    """What the batches of files of one table share, across the winners of its checks."""

    __slots__ = (
        "_columns",
        "_exact",
        "_lowered_parts",
        "_parts",
        "_plans",
        "_schema",
    )

    def __init__(self, schema: StructType, partition_columns: Sequence[str]) -> None:
        """Reads files of a table with this schema and partitioning."""
        self._schema = schema
        self._parts = tuple(partition_columns)
        self._exact = needs_exact(schema)
        self._plans: dict[str, _ColumnPlan] = {}
        self._columns: dict[str, _Spec] = {}
        self._lowered_parts = frozenset(c.lower() for c in partition_columns)

    def typed(self, f: StructField, fast: type) -> _TypedStats | None:
        """The reader of a column's statistics with bounds of type ``fast``; None if none can be."""
        key = stats_key(f)
        # Exact decimals need the standard parser; a non-ASCII key may change length when
        # lower-cased, which the check for other spellings of it cannot allow for.
        return None if self._exact or not key.isascii() else _typed_stats(key, fast)

    def spec(self, name: str) -> _Spec:
        """How a column is read: its field, kind, key lookup, whether it partitions the table."""
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = column_plan(self._schema, name)
        f, kind, names = plan
        return f, kind, _Lookup(names), name.lower() in self._lowered_parts

    def read(self, files: Sequence[FileStatistics]) -> FileColumns:
        """The batch of ``files``, read lazily column by column."""
        return FileColumns(self, files)


class Bounds:
    """One column over a batch of files, one entry per file.

    A file about which nothing is known has no bounds and may hold values (so every
    comparison may be TRUE), and is marked ``unknown`` for the set lookups. Whether a file may
    hold a non-null value is read from the statistics only when first asked: tests ask it
    only once a file's bounds let it through, which most files of a winner's batch are not.
    """

    __slots__ = ("_highest", "_lowest", "_valued", "_valued_of", "hi", "lo", "unknown")

    def __init__(
        self,
        lo: list[Any],
        hi: list[Any],
        unknown: list[bool],
        valued: list[bool] | Callable[[], list[bool]],
    ) -> None:
        """Bounds ``lo``/``hi`` (None: unbounded), and ``valued`` or how to read it."""
        self.lo = lo
        self.hi = hi
        self.unknown = unknown
        self._lowest: Any = _MISSING
        self._highest: Any = _MISSING
        if callable(valued):
            self._valued: list[bool] | None = None
            self._valued_of: Callable[[], list[bool]] | None = valued
        else:
            self._valued, self._valued_of = valued, None

    @property
    def valued(self) -> list[bool]:
        """Whether each file may hold a non-null value."""
        if self._valued is None:
            assert self._valued_of is not None
            self._valued = self._valued_of()
        return self._valued

    @property
    def all_valued(self) -> bool:
        """Whether every file may hold a non-null value."""
        return all(self.valued)

    @property
    def lowest(self) -> Any:
        """The least lower bound; only for a batch whose every file has one (``lo_bounded``)."""
        if self._lowest is _MISSING:
            self._lowest = min(self.lo)
        return self._lowest

    @property
    def highest(self) -> Any:
        """The greatest upper bound; only for a batch whose every file has one (``hi_bounded``)."""
        if self._highest is _MISSING:
            self._highest = max(self.hi)
        return self._highest

    @property
    def lo_bounded(self) -> bool:
        """No None in ``lo``."""
        return None not in self.lo

    @property
    def hi_bounded(self) -> bool:
        """No None in ``hi``."""
        return None not in self.hi


_MISSING = object()


class FileColumns:
    """A batch of files read column by column, each piece at most once."""

    __slots__ = (
        "_bounds",
        "_count_records",
        "_counted",
        "_nums",
        "_owner",
        "_stats",
        "_views",
        "files",
        "n",
        "ones",
    )

    def __init__(self, owner: ColumnReader, files: Sequence[FileStatistics]) -> None:
        """Reads nothing yet: each column is extracted when a test first asks for it."""
        self._owner = owner
        self.files = files
        self.n = len(files)
        # Every file may match, as a byte mask (see ``file_predicate``).
        self.ones = int.from_bytes(b"\x01" * self.n, "little")
        self._stats: list[dict[str, Any] | None] | None = None
        self._nums: list[int | None] | None = None
        # The statistics as the first typed read joined them, where the row counts are read.
        self._counted: tuple[_TypedStats, str] | None = None
        self._count_records: dict[_TypedStats, list[Any] | None] = {}
        self._bounds: dict[str, Bounds] = {}
        self._views: list[_FileView] | None = None

    def stats(self) -> list[dict[str, Any] | None]:
        """Each file's parsed statistics (None: absent or unreadable)."""
        if self._stats is None:
            self._stats = parse_stats_objects(
                [f.stats for f in self.files], exact=self._owner._exact
            )
        return self._stats

    def num_records(self, i: int) -> int | None:
        """File ``i``'s ``numRecords``; statistics are parsed for it alone if not yet read."""
        if self._nums is None:
            if self._counted is None and self._stats is None:
                stats = parse_stats_objects([self.files[i].stats], exact=self._owner._exact)[0]
                return None if stats is None else num_records_of(stats)
            self._all_num_records()
            assert self._nums is not None
        return self._nums[i]

    def _all_num_records(self) -> list[int | None]:
        if self._nums is None:
            records = None if self._counted is None else self._counts(*self._counted)
            if records is not None:
                self._nums = [row_count(r.num_records) for r in records]
            else:
                self._nums = [None if s is None else num_records_of(s) for s in self.stats()]
        return self._nums

    def _counts(self, typed: _TypedStats, joined: str) -> list[Any] | None:
        """The row and null counts of ``typed``'s column, as decoded from ``joined``."""
        try:
            return self._count_records[typed]
        except KeyError:
            records = self._count_records[typed] = typed.counts(joined, self.n)
            return records

    def views(self) -> list[_FileView]:
        """The files as ``file_may_match`` sees them, for the expressions compiled per file."""
        if self._views is None:
            o = self._owner
            self._views = [
                _FileView(f, o._schema, o._parts, exact=o._exact, plans=o._plans)
                for f in self.files
            ]
        return self._views

    def column(self, name: str) -> Bounds:
        """The column's bounds in every file of the batch."""
        try:
            return self._bounds[name]
        except KeyError:
            bounds = self._bounds[name] = self._column(name)
            return bounds

    def _column(self, name: str) -> Bounds:
        o = self._owner
        spec = o._columns.get(name)
        if spec is None:
            spec = o._columns[name] = o.spec(name)
        f, kind, find, is_partition = spec
        if is_partition:
            return self._partition_bounds(f, kind, find)
        if f is None or kind is None:
            unknown = [True] * self.n
            return Bounds([None] * self.n, [None] * self.n, unknown, unknown)
        return self._stats_bounds(f, kind, find)

    def _partition_bounds(
        self,
        f: StructField | None,
        kind: Kind | None,
        find: _Lookup,
    ) -> Bounds:
        raws = self._partition_values(find)
        pkind = partition_kind(f, kind)
        # A batch holds few distinct values: each is read by the rule once.
        entries = {raw: _partition_entry(raw, pkind) for raw in set(raws)}
        # Text values read as themselves: then the raw list is the bounds.
        same = all(e[0] is raw for raw, e in entries.items())
        lo = raws if same else [entries[raw][0] for raw in raws]
        if all(e[1] and not e[2] for e in entries.values()):
            return Bounds(lo, lo, [False] * self.n, [True] * self.n)
        valued = [entries[raw][1] for raw in raws]
        unknown = [entries[raw][2] for raw in raws]
        return Bounds(lo, lo, unknown, valued)

    def _partition_values(self, find: _Lookup) -> list[Any]:
        """Each file's raw value of the column (None: NULL or absent)."""
        pvs: list[Any] = [file.partition_values for file in self.files]
        if pvs and set(map(type, pvs)) == {dict}:
            layout = tuple(pvs[0])
            # Files with the first one's keys (the usual case: all of them) share its key,
            # where no two of those keys are equal but for case (then their order counts). A
            # file has those keys when it has as many and each of them.
            if layout and find.unambiguous(layout) and set(map(len, pvs)) == {len(layout)}:
                key = find.key_of(layout)
                try:
                    values = list(map(itemgetter(*layout), pvs))
                except KeyError:
                    return [find(pv) for pv in pvs]
                if key is None:
                    return [None] * len(pvs)
                if len(layout) == 1:
                    return values
                i = layout.index(key)
                return [v[i] for v in values]
        return [find(pv) for pv in pvs]

    def _stats_bounds(self, f: StructField, kind: Kind, find: _Lookup) -> Bounds:
        # Bounds already of the column's final type are taken as they are; anything else
        # (floats read exactly, dates, timestamps, widened types) goes through the rule.
        fast = _FAST_TYPES.get(kind) if _TYPE_CHANGES not in f.metadata else None
        if fast is not None and self._stats is None:
            # Statistics not parsed yet: this column's entries alone, typed, when every file
            # allows it (otherwise each file is parsed once, as an object, below).
            typed = self._owner.typed(f, fast)
            read = None if typed is None else typed.read(self.files)
            if read is not None:
                assert typed is not None
                joined = read[2]
                if self._counted is None:
                    # The row counts are read from it when asked: a file that may match is
                    # not parsed for one.
                    self._counted = (typed, joined)
                valued = partial(self._typed_valued, typed, joined, find)
                return Bounds(read[0], read[1], [False] * self.n, valued)
        all_stats = self.stats()
        cached = find.layouts.get
        lo: list[Any] = []
        hi: list[Any] = []
        add_lo, add_hi = lo.append, hi.append
        for i, stats in enumerate(all_stats):
            if stats is None:
                add_lo(None)
                add_hi(None)
                continue
            # The lookup's cached keys, inline: this runs once per file and column.
            mins: Any = stats.get("minValues")
            maxes: Any = stats.get("maxValues")
            k = cached(tuple(mins), _MISSING) if type(mins) is dict else None
            raw_lo = find(mins) if k is _MISSING else None if k is None else mins[k]
            k = cached(tuple(maxes), _MISSING) if type(maxes) is dict else None
            raw_hi = find(maxes) if k is _MISSING else None if k is None else maxes[k]
            if (
                fast is not None
                and (raw_lo is None or type(raw_lo) is fast)
                and (raw_hi is None or type(raw_hi) is fast)
            ):
                add_lo(raw_lo)
                add_hi(raw_hi)
            else:
                rng = stats_range(
                    f,
                    kind,
                    self.num_records(i),
                    find(stats.get("nullCount")),
                    raw_lo,
                    raw_hi,
                    partial(_exact_bounds, self.files[i].stats, find),
                )
                add_lo(_value(rng.lo))
                add_hi(_value(rng.hi))
        unknown = [s is None for s in all_stats]
        return Bounds(lo, hi, unknown, partial(self._stats_valued, find))

    def _typed_valued(self, typed: _TypedStats, joined: str, find: _Lookup) -> list[bool]:
        records = self._counts(typed, joined)
        if records is None:
            # A null count the typed record refuses: read by the rule.
            return self._stats_valued(find)
        return [
            may_hold_value(None if r.nulls is None else r.nulls.value, n)
            for r, n in zip(records, self._all_num_records(), strict=True)
        ]

    def _stats_valued(self, find: _Lookup) -> list[bool]:
        # A file without statistics may hold anything.
        return [
            True if s is None else may_hold_value(find(s.get("nullCount")), n)
            for s, n in zip(self.stats(), self._all_num_records(), strict=True)
        ]


# Kinds whose statistics, as JSON decodes them, already are the values the rule would make.
_FAST_TYPES: dict[Kind, type] = {Kind.INTEGRAL: int, Kind.STRING: str}


def _exact_bounds(text: str | None, find: _Lookup) -> tuple[Any, Any]:
    parsed = parse_stats(text or "", exact=True)
    if not isinstance(parsed, dict):
        return None, None
    return find(parsed.get("minValues")), find(parsed.get("maxValues"))


@lru_cache(maxsize=4096)
def _partition_entry(raw: str | None, kind: Kind | None) -> _Entry:
    # A table holds few partition values, and its commits meet the same ones again: each is
    # read by the rule once per process (while it is among the recently read).
    rng = partition_value_range(raw, kind)
    if rng is None or rng.kind is None:
        return None, True, True
    return _value(rng.lo), rng.may_have_value, False


def _value(typed: Any) -> Any:
    return None if typed is None else typed.value


class _Lookup:
    """A column's entry in a JSON object, under its first name present, in any case.

    Names are matched as :mod:`deltatx.kernel.evaluation` matches them (keys lower-cased, the
    last of equal ones winning). Which key that is depends only on the object's keys, so it
    is worked out once per layout of keys: the files of one table share a few.
    """

    __slots__ = ("_names", "layouts")

    def __init__(self, names: Sequence[str]) -> None:
        self._names = tuple(names)
        self.layouts: dict[tuple[Any, ...], Any] = {}

    def __call__(self, obj: Any) -> Any:
        if type(obj) is not dict or not obj:
            return None
        key = self.key_of(tuple(obj))
        return None if key is None else obj[key]

    def key_of(self, layout: tuple[Any, ...]) -> Any:
        """The key read from an object with these keys, in this order (None: none)."""
        key = self.layouts.get(layout, _MISSING)
        if key is _MISSING:
            lowered = {str(k).lower(): k for k in layout}
            key = next((lowered[n] for n in self._names if n in lowered), None)
            if len(self.layouts) < _MAX_LAYOUTS:
                self.layouts[layout] = key
        return key

    @staticmethod
    def unambiguous(layout: tuple[Any, ...]) -> bool:
        """Whether no two keys are equal but for case, so that their order cannot count."""
        return len({str(k).lower() for k in layout}) == len(layout)


_MAX_LAYOUTS = 256


@lru_cache(maxsize=256)
def _typed_stats(key: str, fast: type) -> _TypedStats:
    # Building the record types costs more than checking a small commit: once per key.
    return _TypedStats(key, fast)


class _TypedStats:
    """One data column's entries in statistics JSON, decoded into a typed record per file.

    Parsing a whole statistics object builds a dictionary per part and a value per column;
    a conflict check asks about one or two columns of each file a winner added. So a column's
    bounds are decoded alone (``msgspec`` skips every other key), and a file is read this way
    where that gives exactly what the object rule (``_Lookup``, ``stats_range``) gives, that
    is when every file of the batch has:

    - statistics without an escape, so that each key is spelled as it is written;
    - the column's key in no other spelling (the rule matches keys in any case, the last of
      equal ones winning);
    - both bounds, already of the column's final type.

    A batch with any other file (no statistics, unreadable, NaN tokens, a missing bound,
    another type: the decoder refuses a record without both bounds of the column's type) is
    read by the rule, each file's statistics parsed once, as before.

    The row and null counts are decoded in a second pass, only when asked for: most files
    of a winner's batch are ruled out by their bounds alone. A null count the second
    decoder refuses (not an object) is read by the rule.
    """

    __slots__ = ("_decode_bounds", "_decode_counts", "_key", "_lowered", "_swapped")

    def __init__(self, key: str, fast: type) -> None:
        # Both bounds are required and of type ``fast`` (the decoder checks both); records
        # hold scalars only, so the collector need not track them.
        bound = msgspec.defstruct("Bound", [("value", fast)], rename={"value": key}, gc=False)
        bounds = msgspec.defstruct(
            "FileBounds",
            [("lo", bound), ("hi", bound)],
            rename={"lo": "minValues", "hi": "maxValues"},
            gc=False,
        )
        count = msgspec.defstruct(
            "NullCount", [("value", Any, None)], rename={"value": key}, gc=False
        )
        counts = msgspec.defstruct(
            "FileCounts",
            [("num_records", Any, None), ("nulls", count | None, None)],
            rename={"num_records": "numRecords", "nulls": "nullCount"},
            gc=False,
        )
        self._decode_bounds: Callable[[str], list[Any]] = msgspec.json.Decoder(bounds).decode_lines
        self._decode_counts: Callable[[str], list[Any]] = msgspec.json.Decoder(counts).decode_lines
        self._key = f'"{key}"'
        self._lowered = self._key.lower()
        self._swapped = frozenset(c.swapcase() for c in key if c.swapcase() != c)

    def read(self, files: Sequence[FileStatistics]) -> tuple[list[Any], list[Any], str] | None:
        """Lower and upper bounds, and the text to read counts from; None if a file needs the rule.

        The counts are read from that text by :meth:`counts`, when they are asked for.
        """
        texts = [f.stats for f in files]
        if not all(texts):  # a file without statistics
            return None
        # One line per file, decoded in one call; a text with its own line break would
        # shift the lines, so it is read by the rule.
        whole = "".join(texts)  # type: ignore[arg-type]
        if "\\" in whole or "\n" in whole:
            return None
        joined = "\n".join(texts)  # type: ignore[arg-type]
        # Another spelling of the key holds a letter of the key in the other case: where
        # none occurs at all, no count is needed.
        # (Beyond ASCII, lower-casing may make a letter of the key out of another one.)
        if (not joined.isascii() or any(c in joined for c in self._swapped)) and joined.count(
            self._key
        ) != (joined.lower().count(self._lowered)):
            return None
        try:
            records = self._decode_bounds(joined)
        except msgspec.DecodeError:
            return None
        if len(records) != len(texts):
            return None
        return [r.lo.value for r in records], [r.hi.value for r in records], joined

    def counts(self, joined: str, n: int) -> list[Any] | None:
        """Each file's row count and the column's null count, from ``read``'s text.

        None where a null count is not an object or null (the rule reads those).
        """
        try:
            records = self._decode_counts(joined)
        except msgspec.DecodeError:
            return None
        return records if len(records) == n else None
