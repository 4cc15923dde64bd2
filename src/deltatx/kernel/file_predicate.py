"""A file-skipping predicate compiled once, then asked of many files at once.

A conflict check asks one read predicate (the OR of the transaction's read predicates) of
every file a winning commit added. Here the files are read column by column: each file's
statistics JSON is parsed once per batch, and each column the predicate names is extracted
once into lists of bounds. The predicate is compiled once into a tree of closures, each of
which answers for every file of a batch in one pass over those lists; the answers of a node
are a byte mask held in one integer (byte ``i`` is 1 when file ``i`` may match), so that
ORs and ANDs of many read predicates cost one integer operation, not one per file.

The rules themselves (what a partition value or a statistic says about a column, what a
comparison may be) are :mod:`deltatx.kernel.evaluation`'s; expressions beyond comparisons of
a column with a literal are answered per file by it, and the answers are exactly
``file_may_match``'s.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from decimal import Decimal
from functools import partial
from typing import Any, NamedTuple

from deltatx.kernel.actions import AddFile
from deltatx.kernel.evaluation import (
    _FLIPPED,
    _T,
    _TYPE_CHANGES,
    _ColumnPlan,
    _FileView,
    _mask,
    column_plan,
    may_hold_value,
    needs_exact,
    num_records_of,
    parse_stats,
    partition_range,
    stats_range,
)
from deltatx.kernel.expressions import (
    And,
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    In,
    Literal,
    Or,
)
from deltatx.kernel.schema import StructField, StructType
from deltatx.kernel.values import (
    TIMESTAMP_KINDS,
    Kind,
    Uncoercible,
    coerce_literal,
    compare,
    kind_of_type,
)


class FilePredicate:
    """A predicate compiled once, then asked of batches of files as ``file_may_match`` would be.

    The compiled tree and the per-column lookups are shared by every batch, so a conflict
    checker builds one for its read set and asks it about each winning commit's files.
    """

    __slots__ = ("_exact", "_lookups", "_lowered_parts", "_parts", "_plans", "_schema", "_test")

    def __init__(
        self, predicate: Expression, *, schema: StructType, partition_columns: Sequence[str]
    ) -> None:
        """Compiles ``predicate`` for files of a table with this schema and partitioning."""
        self._schema = schema
        self._parts = tuple(partition_columns)
        self._exact = needs_exact(schema)
        self._plans: dict[str, _ColumnPlan] = {}
        self._lookups: dict[str, _Lookup] = {}
        self._lowered_parts = frozenset(c.lower() for c in partition_columns)
        self._test = _compile(predicate, schema, {c.lower() for c in partition_columns})

    def first_match(self, files: Sequence[AddFile]) -> int | None:
        """The index of the first file that may hold a matching row, or None if none may."""
        if not files:
            return None
        batch = _Columns(self, files)
        hits = self._test(batch).to_bytes(len(files), "little")
        i = hits.find(1)
        while i >= 0:
            if batch.num_records(i) != 0:
                return i
            i = hits.find(1, i + 1)
        return None

    def matches(self, files: Sequence[AddFile]) -> list[bool]:
        """For each file, exactly ``file_may_match(predicate, file, ...)``."""
        if not files:
            return []
        batch = _Columns(self, files)
        hits = self._test(batch).to_bytes(len(files), "little")
        return [hit == 1 and batch.num_records(i) != 0 for i, hit in enumerate(hits)]

    def may_match(self, file: AddFile) -> bool:
        """Exactly ``file_may_match(predicate, file, ...)``."""
        return self.first_match((file,)) is not None


class _Bounds(NamedTuple):
    """One column over a batch of files, one entry per file.

    A file about which nothing is known has no bounds and may hold values (so every
    comparison may be TRUE), and is marked ``unknown`` for the set lookups.
    """

    lo: list[Any]  # None: unbounded below
    hi: list[Any]  # None: unbounded above
    valued: list[bool]  # may hold a non-null value
    unknown: list[bool]
    all_valued: bool
    lo_bounded: bool  # no None in ``lo``
    hi_bounded: bool


_MISSING = object()


class _Columns:
    """A batch of files read column by column, each piece at most once."""

    __slots__ = ("_bounds", "_nums", "_owner", "_stats", "_views", "files", "n")

    def __init__(self, owner: FilePredicate, files: Sequence[AddFile]) -> None:
        self._owner = owner
        self.files = files
        self.n = len(files)
        self._stats: list[dict[str, Any] | None] | None = None
        self._nums: list[int | None] | None = None
        self._bounds: dict[str, _Bounds] = {}
        self._views: list[_FileView] | None = None

    def stats(self) -> list[dict[str, Any] | None]:
        """Each file's parsed statistics (None: absent or unreadable)."""
        if self._stats is None:
            self._stats = [self._parse(f.stats) for f in self.files]
        return self._stats

    def _parse(self, text: str | None) -> dict[str, Any] | None:
        parsed = parse_stats(text, exact=self._owner._exact) if text else None
        return parsed if isinstance(parsed, dict) else None

    def num_records(self, i: int) -> int | None:
        """File ``i``'s ``numRecords``; statistics are parsed for it alone if not yet read."""
        if self._nums is not None:
            return self._nums[i]
        stats = self._stats[i] if self._stats is not None else self._parse(self.files[i].stats)
        return None if stats is None else num_records_of(stats)

    def views(self) -> list[_FileView]:
        """The files as ``file_may_match`` sees them, for the expressions compiled per file."""
        if self._views is None:
            o = self._owner
            self._views = [
                _FileView(f, o._schema, o._parts, exact=o._exact, plans=o._plans)
                for f in self.files
            ]
        return self._views

    def column(self, name: str) -> _Bounds:
        """The column's bounds in every file of the batch."""
        try:
            return self._bounds[name]
        except KeyError:
            bounds = self._bounds[name] = self._column(name)
            return bounds

    def _column(self, name: str) -> _Bounds:
        o = self._owner
        plan = o._plans.get(name)
        if plan is None:
            plan = o._plans[name] = column_plan(o._schema, name)
        f, kind, names = plan
        find = o._lookups.get(name)
        if find is None:
            find = o._lookups[name] = _Lookup(names)
        lo: list[Any] = []
        hi: list[Any] = []
        valued: list[bool] = []
        unknown: list[bool] = []
        if name.lower() in o._lowered_parts:
            # A batch holds few distinct partition values: each is read once.
            seen: dict[str | None, tuple[Any, bool, bool]] = {}
            layouts = find.layouts
            for file in self.files:
                pv = file.partition_values
                # The lookup's cached key, inline: this runs once per file and column.
                key = layouts.get(tuple(pv), _MISSING) if type(pv) is dict else None
                raw = find(pv) if key is _MISSING else None if key is None else pv[key]
                entry = seen.get(raw)
                if entry is None:
                    rng = partition_range(raw, f, kind)
                    if rng is None or rng.kind is None:
                        entry = (None, True, True)
                    else:
                        entry = (_value(rng.lo), rng.may_have_value, False)
                    seen[raw] = entry
                lo.append(entry[0])
                valued.append(entry[1])
                unknown.append(entry[2])
            hi = lo
        elif f is None or kind is None:
            lo = hi = [None] * self.n
            valued = unknown = [True] * self.n
        else:
            self._stats_bounds(f, kind, find, lo, hi, valued, unknown)
        return _Bounds(
            lo,
            hi,
            valued,
            unknown,
            all(valued),
            None not in lo,
            None not in hi,
        )

    def _stats_bounds(
        self,
        f: StructField,
        kind: Kind,
        find: _Lookup,
        lo: list[Any],
        hi: list[Any],
        valued: list[bool],
        unknown: list[bool],
    ) -> None:
        # Bounds already of the column's final type are taken as they are; anything else
        # (floats read exactly, dates, timestamps, widened types) goes through the rule.
        fast = _FAST_TYPES.get(kind) if _TYPE_CHANGES not in f.metadata else None
        nums = self._nums
        if nums is None:
            nums = self._nums = [None if s is None else num_records_of(s) for s in self.stats()]
        layouts = find.layouts
        for i, stats in enumerate(self.stats()):
            if stats is None:
                lo.append(None)
                hi.append(None)
                valued.append(True)
                unknown.append(True)
                continue
            # The lookup's cached keys, inline: this runs once per file and column.
            mins: Any = stats.get("minValues")
            maxes: Any = stats.get("maxValues")
            counts: Any = stats.get("nullCount")
            k = layouts.get(tuple(mins), _MISSING) if type(mins) is dict else None
            raw_lo = find(mins) if k is _MISSING else None if k is None else mins[k]
            k = layouts.get(tuple(maxes), _MISSING) if type(maxes) is dict else None
            raw_hi = find(maxes) if k is _MISSING else None if k is None else maxes[k]
            k = layouts.get(tuple(counts), _MISSING) if type(counts) is dict else None
            nulls = find(counts) if k is _MISSING else None if k is None else counts[k]
            n = nums[i]
            if (
                fast is not None
                and (raw_lo is None or type(raw_lo) is fast)
                and (raw_hi is None or type(raw_hi) is fast)
            ):
                lo.append(raw_lo)
                hi.append(raw_hi)
                valued.append(may_hold_value(nulls, n))
            else:
                rng = stats_range(
                    f,
                    kind,
                    n,
                    nulls,
                    raw_lo,
                    raw_hi,
                    partial(_exact_bounds, self.files[i].stats, find),
                )
                lo.append(_value(rng.lo))
                hi.append(_value(rng.hi))
                valued.append(rng.may_have_value)
            unknown.append(False)


# Kinds whose statistics, as JSON decodes them, already are the values the rule would make.
_FAST_TYPES: dict[Kind, type] = {Kind.INTEGRAL: int, Kind.STRING: str}


def _exact_bounds(text: str | None, find: _Lookup) -> tuple[Any, Any]:
    parsed = parse_stats(text or "", exact=True)
    if not isinstance(parsed, dict):
        return None, None
    return find(parsed.get("minValues")), find(parsed.get("maxValues"))


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
        layout = tuple(obj)
        key = self.layouts.get(layout, _MISSING)
        if key is _MISSING:
            lowered = {str(k).lower(): k for k in layout}
            key = next((lowered[n] for n in self._names if n in lowered), None)
            if len(self.layouts) < _MAX_LAYOUTS:
                self.layouts[layout] = key
        return None if key is None else obj[key]


_MAX_LAYOUTS = 256


# -- the compiled predicate -------------------------------------------------------------------

# A node answers for a whole batch: byte ``i`` of the integer is 1 when file ``i`` may match.
_Test = Callable[[_Columns], int]
# Kinds whose equal values hash alike, so that an OR of equalities becomes one set lookup.
_HASHABLE_KINDS = frozenset({Kind.STRING, Kind.INTEGRAL, Kind.DATE, Kind.BOOLEAN})
# Kinds whose bounds and coerced literals always compare (ints with ints, floats or Decimals;
# strings with strings; dates with dates; never a NaN), so no comparison can be undecided.
_TOTALLY_ORDERED_KINDS = frozenset({Kind.INTEGRAL, Kind.STRING, Kind.DATE})


def _mask_of(hits: list[bool]) -> int:
    return int.from_bytes(bytes(hits), "little")


def _ones(n: int) -> int:
    return int.from_bytes(b"\x01" * n, "little")


def _compile(expr: Expression, schema: StructType, parts: set[str]) -> _Test:
    """``_may_be_true`` of one expression for a batch, as a closure over its compiled tree."""
    if isinstance(expr, Or):
        return _compile_or(expr.children, schema, parts)
    if isinstance(expr, And):
        tests = tuple(_compile(c, schema, parts) for c in expr.children)

        def all_true(batch: _Columns) -> int:
            acc = _ones(batch.n)
            for t in tests:
                acc &= t(batch)
                if not acc:
                    break
            return acc

        return all_true
    if (
        isinstance(expr, In)
        and isinstance(expr.value, Column)
        and all(isinstance(o, Literal) for o in expr.options)
    ):
        # IN is TRUE exactly where one of its equalities is (``_mask`` ORs them).
        equalities = [Comparison(ComparisonOp.EQ, expr.value, o) for o in expr.options]
        return _compile_or(tuple(equalities), schema, parts)
    if isinstance(expr, Comparison):
        leaf = _compile_comparison(expr, schema, parts)
        if leaf is not None:
            return leaf

    def per_file(batch: _Columns) -> int:
        return _mask_of([bool(_mask(expr, view) & _T) for view in batch.views()])

    return per_file


def _compile_or(children: Sequence[Expression], schema: StructType, parts: set[str]) -> _Test:
    # Equalities on one partition column (the usual read set of partition-wise writers) become
    # one lookup of each file's partition value in a set of literals.
    values: dict[str, set[Any]] = {}
    # Ranges ``c >= a AND c < b`` on one ordered column (id ranges), by column and operators:
    # each group is answered per file by one search among its sorted lower ends.
    ranges: dict[tuple[str, ComparisonOp, ComparisonOp], tuple[str, list[tuple[Any, Any]]]] = {}
    tests: list[_Test] = []
    for child in children:
        equality = _partition_equality(child, schema, parts)
        if equality is not None:
            values.setdefault(equality[0], set()).add(equality[1])
            continue
        pair = _range_pair(child, schema, parts)
        if pair is not None:
            name, low_op, low, high_op, high = pair
            group = ranges.setdefault((name.lower(), low_op, high_op), (name, []))
            group[1].append((low, high))
            continue
        tests.append(_compile(child, schema, parts))
    sets = [_value_in(name, frozenset(literals)) for name, literals in values.items()]
    spans = [
        _any_range(name, low_op, high_op, bounds)
        for (_, low_op, high_op), (name, bounds) in ranges.items()
    ]
    compiled = tuple(sets + spans + tests)

    def any_true(batch: _Columns) -> int:
        ones = _ones(batch.n)
        acc = 0
        for t in compiled:
            acc |= t(batch)
            if acc == ones:
                break
        return acc

    return any_true


_LOWER_OPS = frozenset({ComparisonOp.GE, ComparisonOp.GT})
_UPPER_OPS = frozenset({ComparisonOp.LT, ComparisonOp.LE})


def _range_pair(
    expr: Expression, schema: StructType, parts: set[str]
) -> tuple[str, ComparisonOp, Any, ComparisonOp, Any] | None:
    """``c >= a AND c < b`` (any strictness, either order) on one ordered column, or None."""
    if not isinstance(expr, And) or len(expr.children) != 2:
        return None
    leaves = [_leaf(c, schema, parts) for c in expr.children]
    if any(leaf is None or not leaf[3] for leaf in leaves):
        return None
    first, second = (leaf for leaf in leaves if leaf is not None)
    if first[0].lower() != second[0].lower():
        return None
    if first[1] in _UPPER_OPS:
        first, second = second, first
    if first[1] not in _LOWER_OPS or second[1] not in _UPPER_OPS:
        return None
    return first[0], first[1], first[2], second[1], second[2]


def _any_range(
    name: str, low_op: ComparisonOp, high_op: ComparisonOp, bounds: list[tuple[Any, Any]]
) -> _Test:
    """An OR of ``c low_op a AND c high_op b``: ``_ordered``'s answers, ANDed then ORed.

    An alternative may be TRUE for a file when its upper bound passes ``low_op a`` and its
    lower bound passes ``high_op b``. With the alternatives sorted by ``a``, those whose ``a``
    the upper bound passes are a prefix, and one of them has a ``b`` the lower bound passes
    exactly when the prefix's largest ``b`` does.
    """
    ordered = sorted(bounds, key=lambda ab: ab[0])
    lows = [a for a, _ in ordered]
    most: list[Any] = []
    for _, b in ordered:
        most.append(b if not most or b > most[-1] else most[-1])
    count = len(ordered)
    # How many lower ends a value passes: ``hi >= a`` for all a <= hi, ``hi > a`` for a < hi.
    passed = bisect_right if low_op is ComparisonOp.GE else bisect_left
    strict = high_op is ComparisonOp.LT

    def test(batch: _Columns) -> int:
        col = batch.column(name)
        hits: list[bool] = []
        for lo, hi, valued in zip(col.lo, col.hi, col.valued, strict=True):
            k = count if hi is None else passed(lows, hi)
            if not valued or k == 0:
                hits.append(False)
            elif lo is None:
                hits.append(True)
            else:
                hits.append(lo < most[k - 1] if strict else lo <= most[k - 1])
        return _mask_of(hits)

    return test


def _value_in(name: str, literals: frozenset[Any]) -> _Test:
    def lookup(batch: _Columns) -> int:
        col = batch.column(name)
        # A NULL partition value has no bound and is in no set; an unreadable one may match.
        if any(col.unknown):
            return _mask_of([v in literals or u for v, u in zip(col.lo, col.unknown, strict=True)])
        return _mask_of([v in literals for v in col.lo])

    return lookup


def _partition_equality(
    expr: Expression, schema: StructType, parts: set[str]
) -> tuple[str, Any] | None:
    """(column, coerced literal) of ``partition_column = literal`` where a set can decide it."""
    if not isinstance(expr, Comparison) or expr.op is not ComparisonOp.EQ:
        return None
    left, right = expr.left, expr.right
    if isinstance(left, Literal) and isinstance(right, Column):
        left, right = right, left
    if not (isinstance(left, Column) and isinstance(right, Literal)) or right.value is None:
        return None
    if left.name.lower() not in parts:
        return None
    f = schema.get(left.name)
    kind = kind_of_type(f.type) if f is not None else Kind.STRING
    if kind not in _HASHABLE_KINDS:
        return None
    if kind is not Kind.BOOLEAN and isinstance(right.value, bool):
        return None
    try:
        return left.name.lower(), coerce_literal(right.value, kind).value
    except Uncoercible:
        return None


def _compile_comparison(expr: Comparison, schema: StructType, parts: set[str]) -> _Test | None:
    """``column op literal`` with the literal coerced once, as a test of the column's bounds."""
    leaf = _leaf(expr, schema, parts)
    if leaf is None:
        return None
    name, op, literal, ordered = leaf
    return (_ordered if ordered else _unordered)(name, op, literal)


def _leaf(
    expr: Expression, schema: StructType, parts: set[str]
) -> tuple[str, ComparisonOp, Any, bool] | None:
    """``column op literal`` as (column, op, coerced literal, whether the kind is ordered).

    None where only the per-file rule is right: timestamps (with their zone slack), NULL or
    uncoercible literals.
    """
    if not isinstance(expr, Comparison):
        return None
    left, right, op = expr.left, expr.right, expr.op
    if isinstance(left, Literal) and isinstance(right, Column):
        left, right, op = right, left, _FLIPPED[op]
    if not (isinstance(left, Column) and isinstance(right, Literal)) or right.value is None:
        return None
    f = schema.get(left.name)
    if left.name.lower() in parts:
        kind = kind_of_type(f.type) if f is not None else Kind.STRING
    elif f is None:
        return None
    else:
        kind = kind_of_type(f.type)
    if kind is None or kind in TIMESTAMP_KINDS:
        return None
    try:
        literal = coerce_literal(right.value, kind).value
    except Uncoercible:
        return None
    ordered = kind in _TOTALLY_ORDERED_KINDS and not (
        isinstance(literal, Decimal) and not literal.is_finite()
    )
    return left.name, op, literal, ordered


def _ordered(name: str, op: ComparisonOp, c: Any) -> _Test:
    """``_compare_range``'s TRUE bit for ``column op c`` on a totally ordered kind."""

    def test(batch: _Columns) -> int:
        col = batch.column(name)
        lo, hi = col.lo, col.hi
        hits: list[bool]
        if op is ComparisonOp.LT:
            hits = [x < c for x in lo] if col.lo_bounded else [x is None or x < c for x in lo]
        elif op is ComparisonOp.LE:
            hits = [x <= c for x in lo] if col.lo_bounded else [x is None or x <= c for x in lo]
        elif op is ComparisonOp.GT:
            hits = [x > c for x in hi] if col.hi_bounded else [x is None or x > c for x in hi]
        elif op is ComparisonOp.GE:
            hits = [x >= c for x in hi] if col.hi_bounded else [x is None or x >= c for x in hi]
        elif op is ComparisonOp.NE:
            hits = [
                not (a is not None and b is not None and a == c and b == c)
                for a, b in zip(lo, hi, strict=True)
            ]
        elif col.lo_bounded and col.hi_bounded:
            hits = [a <= c <= b for a, b in zip(lo, hi, strict=True)]
        else:
            hits = [
                (a is None or a <= c) and (b is None or b >= c) for a, b in zip(lo, hi, strict=True)
            ]
        if not col.all_valued:
            # A file whose values are all NULL makes no comparison TRUE.
            hits = [h and v for h, v in zip(hits, col.valued, strict=True)]
        return _mask_of(hits)

    return test


# Whether ``column op literal`` may be TRUE, from the comparisons of the column's lower and
# upper bound with the literal (None: unbounded), as ``_compare_range`` decides it.
_MAY_BE_TRUE: dict[ComparisonOp, Callable[[int | None, int | None], bool]] = {
    ComparisonOp.EQ: lambda lo, hi: (lo is None or lo <= 0) and (hi is None or hi >= 0),
    ComparisonOp.NULL_SAFE_EQ: lambda lo, hi: (lo is None or lo <= 0) and (hi is None or hi >= 0),
    ComparisonOp.NE: lambda lo, hi: not (lo == 0 and hi == 0),
    ComparisonOp.LT: lambda lo, hi: lo is None or lo < 0,
    ComparisonOp.LE: lambda lo, hi: lo is None or lo <= 0,
    ComparisonOp.GT: lambda lo, hi: hi is None or hi > 0,
    ComparisonOp.GE: lambda lo, hi: hi is None or hi >= 0,
}


def _unordered(name: str, op: ComparisonOp, c: Any) -> _Test:
    """``_compare_range``'s TRUE bit where a bound may not compare with the literal (NaN)."""
    decide = _MAY_BE_TRUE[op]

    def one(lo: Any, hi: Any, valued: bool) -> bool:
        if not valued:
            return False
        cmp_lo = cmp_hi = None
        if lo is not None:
            cmp_lo = compare(lo, c)
            if cmp_lo is None:
                return True
        if hi is not None:
            cmp_hi = compare(hi, c)
            if cmp_hi is None:
                return True
        return decide(cmp_lo, cmp_hi)

    def test(batch: _Columns) -> int:
        col = batch.column(name)
        return _mask_of(list(map(one, col.lo, col.hi, col.valued)))

    return test
