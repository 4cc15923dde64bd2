"""A file-skipping predicate compiled once, then asked of many files at once.

A conflict check asks one read predicate (the OR of the transaction's read predicates) of
every file a winning commit added. Here the files are read column by column
(:mod:`deltatx.kernel.file_columns`: each statistics JSON parsed once per batch, each column
the predicate names extracted once into lists of bounds), and the predicate is compiled once
into a tree of closures, each of which answers for every file of a batch in one pass over
those lists. A node's answer is a byte mask held in one integer (byte ``i`` is 1 when file
``i`` may match), so that ORs and ANDs of many read predicates cost one integer operation,
not one per file.

The rules themselves (what a partition value or a statistic says about a column, what a
comparison may be) are :mod:`deltatx.kernel.evaluation`'s; expressions beyond comparisons of
a column with a literal are answered per file by it, and the answers are exactly
``file_may_match``'s.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from functools import partial
from typing import Any

from deltatx.kernel.actions import FileStatistics
from deltatx.kernel.evaluation import (
    _FLIPPED,
    _T,
    _mask,
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
from deltatx.kernel.file_columns import Bounds, ColumnReader, FileColumns
from deltatx.kernel.schema import StructType
from deltatx.kernel.values import (
    TIMESTAMP_KINDS,
    Kind,
    Uncoercible,
    coerced_value,
    compare,
    kind_of_type,
)


class FilePredicate:
    """A predicate compiled once, then asked of batches of files as ``file_may_match`` would be.

    The compiled tree and the per-column lookups are shared by every batch, so a conflict
    checker builds one for its read set and asks it about each winning commit's files.
    """

    __slots__ = ("_reader", "_test")

    def __init__(
        self, predicate: Expression, *, schema: StructType, partition_columns: Sequence[str]
    ) -> None:
        """Compiles ``predicate`` for files of a table with this schema and partitioning."""
        self._reader, scope = _table(schema, tuple(partition_columns))
        self._test = _compile(predicate, scope)

    def first_match(self, files: Sequence[FileStatistics]) -> int | None:
        """The index of the first file that may hold a matching row, or None if none may."""
        if not files:
            return None
        batch = FileColumns(self._reader, files)
        mask = self._test(batch)
        if not mask:
            return None
        hits = mask.to_bytes(len(files), "little")
        i = hits.find(1)
        while i >= 0:
            if batch.num_records(i) != 0:
                return i
            i = hits.find(1, i + 1)
        return None

    def matches(self, files: Sequence[FileStatistics]) -> list[bool]:
        """For each file, exactly ``file_may_match(predicate, file, ...)``."""
        if not files:
            return []
        batch = self._reader.read(files)
        hits = self._test(batch).to_bytes(len(files), "little")
        return [hit == 1 and batch.num_records(i) != 0 for i, hit in enumerate(hits)]

    def may_match(self, file: FileStatistics) -> bool:
        """Exactly ``file_may_match(predicate, file, ...)``."""
        return self.first_match((file,)) is not None


# -- the compiled predicate -------------------------------------------------------------------


class _Scope:
    """The table a predicate is compiled for; each column's kind is looked up once."""

    __slots__ = ("_kinds", "parts", "schema")

    def __init__(self, schema: StructType, partition_columns: Sequence[str]) -> None:
        self.schema = schema
        self.parts = {c.lower() for c in partition_columns}
        self._kinds: dict[str, Kind | None] = {}

    def kind(self, lowered: str) -> Kind | None:
        """The kind of a column, by its lower-cased name.

        A partition column missing from the schema compares as text; a data column missing
        from it has none.
        """
        try:
            return self._kinds[lowered]
        except KeyError:
            f = self.schema.get(lowered)
            if f is not None:
                kind = kind_of_type(f.type)
            else:
                kind = Kind.STRING if lowered in self.parts else None
            self._kinds[lowered] = kind
            return kind


# What the predicates of one table share, by the identity of its schema: a snapshot, and the
# snapshots updated from it while the metadata is unchanged, hold one schema object (a snapshot
# loaded afresh brings its own, and a new entry). A conflict check compiles its read predicate
# anew, but the column plans, key layouts and column kinds were worked out by the previous
# checks of the writer's table.
_TABLES: dict[tuple[int, tuple[str, ...]], tuple[StructType, ColumnReader, _Scope]] = {}
_MAX_TABLES = 32
_TABLES_LOCK = threading.Lock()


def _table(schema: StructType, partition_columns: tuple[str, ...]) -> tuple[ColumnReader, _Scope]:
    key = (id(schema), partition_columns)
    # The entry holds the schema, so its id is not reused by another object while cached.
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1], hit[2]
    reader, scope = ColumnReader(schema, partition_columns), _Scope(schema, partition_columns)
    with _TABLES_LOCK:
        if len(_TABLES) >= _MAX_TABLES:
            _TABLES.pop(next(iter(_TABLES)), None)
        _TABLES[key] = (schema, reader, scope)
    return reader, scope


# A node answers for a whole batch: byte ``i`` of the integer is 1 when file ``i`` may match.
_Test = Callable[[FileColumns], int]
# Kinds whose equal values hash alike, so that an OR of equalities becomes one set lookup.
_HASHABLE_KINDS = frozenset({Kind.STRING, Kind.INTEGRAL, Kind.DATE, Kind.BOOLEAN})
# Kinds whose bounds and coerced literals always compare (ints with ints, floats or Decimals;
# strings with strings; dates with dates; never a NaN), so no comparison can be undecided.
_TOTALLY_ORDERED_KINDS = frozenset({Kind.INTEGRAL, Kind.STRING, Kind.DATE})


def _mask_of(hits: Iterable[bool]) -> int:
    return int.from_bytes(bytes(hits), "little")


def _compile(expr: Expression, scope: _Scope) -> _Test:
    """``_may_be_true`` of one expression for a batch, as a closure over its compiled tree."""
    if isinstance(expr, Or):
        return _compile_or(expr.children, scope)
    if isinstance(expr, And):
        tests = tuple(_compile(c, scope) for c in expr.children)

        def all_true(batch: FileColumns) -> int:
            acc = batch.ones
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
        return _compile_or(tuple(equalities), scope)
    if isinstance(expr, Comparison):
        leaf = _compile_comparison(expr, scope)
        if leaf is not None:
            return leaf

    def per_file(batch: FileColumns) -> int:
        return _mask_of([bool(_mask(expr, view) & _T) for view in batch.views()])

    return per_file


def _compile_or(children: Sequence[Expression], scope: _Scope) -> _Test:
    # Equalities on one partition column (the usual read set of partition-wise writers) become
    # one lookup of each file's partition value in a set of literals.
    values: dict[str, set[Any]] = {}
    # Ranges ``c >= a AND c < b`` on one ordered column (id ranges), by column and operators:
    # each group is answered per file by one search among its sorted lower ends.
    ranges: dict[tuple[str, ComparisonOp, ComparisonOp], tuple[str, list[tuple[Any, Any]]]] = {}
    tests: list[_Test] = []
    for child in children:
        equality = _partition_equality(child, scope)
        if equality is not None:
            values.setdefault(equality[0], set()).add(equality[1])
            continue
        pair = _range_pair(child, scope)
        if pair is not None:
            name, low_op, low, high_op, high = pair
            group = ranges.setdefault((name.lower(), low_op, high_op), (name, []))
            group[1].append((low, high))
            continue
        tests.append(_compile(child, scope))
    sets = [_value_in(name, frozenset(literals)) for name, literals in values.items()]
    spans = [
        _any_range(name, low_op, high_op, bounds)
        for (_, low_op, high_op), (name, bounds) in ranges.items()
    ]
    compiled = tuple(sets + spans + tests)

    def any_true(batch: FileColumns) -> int:
        ones = batch.ones
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
    expr: Expression, scope: _Scope
) -> tuple[str, ComparisonOp, Any, ComparisonOp, Any] | None:
    """``c >= a AND c < b`` (any strictness, either order) on one ordered column, or None."""
    if not isinstance(expr, And) or len(expr.children) != 2:
        return None
    first = _leaf(expr.children[0], scope)
    if first is None or not first[3]:
        return None
    second = _leaf(expr.children[1], scope)
    if second is None or not second[3]:
        return None
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

    def test(batch: FileColumns) -> int:
        col = batch.column(name)
        hits: list[bool]
        if col.lo_bounded and col.hi_bounded:
            # Every file bounded (the usual batch). The answer only grows as a file's lower
            # bound falls or its upper bound rises, so a batch whose least lower and greatest
            # upper bound make it false makes it false for every file.
            widest = passed(lows, col.highest)
            if widest == 0:
                return 0
            if not (col.lowest < most[widest - 1] if strict else col.lowest <= most[widest - 1]):
                return 0
            # Otherwise one search per file, then one comparison.
            reach = map(partial(passed, lows), col.hi)
            if strict:
                hits = [k != 0 and lo < most[k - 1] for lo, k in zip(col.lo, reach, strict=True)]
            else:
                hits = [k != 0 and lo <= most[k - 1] for lo, k in zip(col.lo, reach, strict=True)]
            return _only_valued(hits, col)
        hits = []
        add = hits.append
        for lo, hi in zip(col.lo, col.hi, strict=True):
            k = count if hi is None else passed(lows, hi)
            if k == 0:
                add(False)
            elif lo is None:
                add(True)
            else:
                add(lo < most[k - 1] if strict else lo <= most[k - 1])
        return _only_valued(hits, col)

    return test


def _only_valued(hits: list[bool], col: Bounds) -> int:
    """The mask of ``hits`` without the files whose values are all NULL.

    Such a file makes no comparison TRUE; whether a file is one is read only when some
    file's bounds let it through.
    """
    if True not in hits or col.all_valued:
        return _mask_of(hits)
    return _mask_of([h and v for h, v in zip(hits, col.valued, strict=True)])


def _value_in(name: str, literals: frozenset[Any]) -> _Test:
    def lookup(batch: FileColumns) -> int:
        col = batch.column(name)
        # A NULL partition value has no bound and is in no set; an unreadable one may match.
        if True in col.unknown:
            return _mask_of([v in literals or u for v, u in zip(col.lo, col.unknown, strict=True)])
        return _mask_of(map(literals.__contains__, col.lo))

    return lookup


def _partition_equality(expr: Expression, scope: _Scope) -> tuple[str, Any] | None:
    """(column, coerced literal) of ``partition_column = literal`` where a set can decide it."""
    if not isinstance(expr, Comparison) or expr.op is not ComparisonOp.EQ:
        return None
    left, right = expr.left, expr.right
    if isinstance(left, Literal) and isinstance(right, Column):
        left, right = right, left
    if not (isinstance(left, Column) and isinstance(right, Literal)) or right.value is None:
        return None
    name = left.name.lower()
    if name not in scope.parts:
        return None
    kind = scope.kind(name)
    if kind not in _HASHABLE_KINDS:
        return None
    if kind is not Kind.BOOLEAN and isinstance(right.value, bool):
        return None
    try:
        return name, coerced_value(right.value, kind)
    except Uncoercible:
        return None


def _compile_comparison(expr: Comparison, scope: _Scope) -> _Test | None:
    """``column op literal`` with the literal coerced once, as a test of the column's bounds."""
    leaf = _leaf(expr, scope)
    if leaf is None:
        return None
    name, op, literal, ordered = leaf
    return (_ordered if ordered else _unordered)(name, op, literal)


def _leaf(expr: Expression, scope: _Scope) -> tuple[str, ComparisonOp, Any, bool] | None:
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
    kind = scope.kind(left.name.lower())
    if kind is None or kind in TIMESTAMP_KINDS:
        return None
    try:
        literal = coerced_value(right.value, kind)
    except Uncoercible:
        return None
    ordered = kind in _TOTALLY_ORDERED_KINDS and not (
        isinstance(literal, Decimal) and not literal.is_finite()
    )
    return left.name, op, literal, ordered


def _ordered(name: str, op: ComparisonOp, c: Any) -> _Test:
    """``_compare_range``'s TRUE bit for ``column op c`` on a totally ordered kind."""

    def test(batch: FileColumns) -> int:
        col = batch.column(name)
        if not _hull_may_match(col, op, c):
            return 0
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
        return _only_valued(hits, col)

    return test


def _hull_may_match(col: Bounds, op: ComparisonOp, c: Any) -> bool:
    """Whether ``column op c`` may be TRUE for some file, judged on the batch's extreme bounds.

    Each of these answers only grows as a file's lower bound falls or its upper bound rises,
    so where the least lower and greatest upper bound of the batch make it false, every file
    does. Unbounded files and ``!=`` are left to the per-file test.
    """
    if op is ComparisonOp.LT:
        return not col.lo_bounded or bool(col.lowest < c)
    if op is ComparisonOp.LE:
        return not col.lo_bounded or bool(col.lowest <= c)
    if op is ComparisonOp.GT:
        return not col.hi_bounded or bool(col.highest > c)
    if op is ComparisonOp.GE:
        return not col.hi_bounded or bool(col.highest >= c)
    if op is ComparisonOp.EQ and col.lo_bounded and col.hi_bounded:
        return bool(col.lowest <= c <= col.highest)
    return True


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

    def one(lo: Any, hi: Any) -> bool:
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

    def test(batch: FileColumns) -> int:
        col = batch.column(name)
        return _only_valued(list(map(one, col.lo, col.hi)), col)

    return test
