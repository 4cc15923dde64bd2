"""Evaluate the predicate IR on a row, or on a file's partition values and statistics.

File evaluation answers "may this file hold a row for which the predicate is TRUE?". It runs
SQL's three-valued logic over *sets* of possible truth values: each leaf yields the subset of
{TRUE, FALSE, NULL} that rows of the file could produce, and AND/OR/NOT combine the sets. A
leaf that cannot be bounded (no statistics, an :class:`Opaque` expression, an uncoercible
literal) yields all three, so negation never turns "unknown" into "cannot match". The same
sets answer the dual question, "is the predicate TRUE on every row of this file?", where they
hold TRUE alone (:func:`file_must_match`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any, NamedTuple

import orjson

from deltatx.kernel.actions import FileStatistics
from deltatx.kernel.column_mapping import PHYSICAL_NAME_KEY
from deltatx.kernel.expressions import (
    And,
    Arithmetic,
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Not,
    Opaque,
    Or,
    columns_of,
)
from deltatx.kernel.row_evaluation import row_truth
from deltatx.kernel.schema import StructField, StructType
from deltatx.kernel.values import (
    STAT_TRUNCATION,
    TIMESTAMP_KINDS,
    ZONE_SLACK,
    Kind,
    Typed,
    Uncoercible,
    coerce_literal,
    compare,
    kind_of_type,
    parse_partition_value,
    parse_stat_value,
    string_as_integer,
)

# Truth-value sets as bit masks.
_T, _F, _N = 1, 2, 4
_ALL = _T | _F | _N

_FLIPPED = {
    ComparisonOp.EQ: ComparisonOp.EQ,
    ComparisonOp.NE: ComparisonOp.NE,
    ComparisonOp.LT: ComparisonOp.GT,
    ComparisonOp.LE: ComparisonOp.GE,
    ComparisonOp.GT: ComparisonOp.LT,
    ComparisonOp.GE: ComparisonOp.LE,
    ComparisonOp.NULL_SAFE_EQ: ComparisonOp.NULL_SAFE_EQ,
}
_TYPE_CHANGES = "delta.typeChanges"


# --------------------------------------------------------------------------- file evaluation


class _Range(NamedTuple):
    """What the non-null values of a column in one file can be.

    A named tuple rather than a frozen dataclass: a conflict check builds one per column of
    every file a winner added, and a tuple is several times cheaper to make.
    """

    kind: Kind | None
    lo: Typed | None  # None: unbounded below
    hi: Typed | None  # None: unbounded above
    may_be_null: bool
    may_have_value: bool
    exact: bool = False  # one known value (a partition value)


# A column's schema field, kind and the names its statistics may use (physical name first).
_ColumnPlan = tuple[StructField | None, Kind | None, list[str]]


def column_plan(schema: StructType, name: str) -> _ColumnPlan:
    """How a column is looked up: its field, kind, and the (lower-case) names it goes by."""
    f = schema.get(name)
    names = [name.lower()]
    if f is not None:
        key = stats_key(f)
        if key != f.name:
            names.insert(0, key.lower())
    return f, kind_of_type(f.type) if f is not None else None, names


def stats_key(f: StructField) -> str:
    """The key a data column's statistics are written under: its physical name, else its name."""
    physical = f.metadata.get(PHYSICAL_NAME_KEY)
    return physical if isinstance(physical, str) else f.name


def partition_range(raw: str | None, f: StructField | None, kind: Kind | None) -> _Range | None:
    """A partition column's one value in a file, from its partition value string."""
    return partition_value_range(raw, partition_kind(f, kind))


def partition_kind(f: StructField | None, kind: Kind | None) -> Kind | None:
    """The kind a partition column's values are read as.

    A partition column missing from the schema can only be compared as text.
    """
    return kind if f is not None else Kind.STRING


def partition_value_range(raw: str | None, pkind: Kind | None) -> _Range | None:
    """A partition value string read as a value of ``pkind`` (None: unreadable)."""
    try:
        value = parse_partition_value(raw, pkind)
    except Uncoercible:
        return None
    return _Range(pkind, value, value, value is None, value is not None, exact=True)


def stats_range(
    f: StructField,
    kind: Kind | None,
    num_records: int | None,
    nulls: Any,
    raw_lo: Any,
    raw_hi: Any,
    exact_bounds: Callable[[], tuple[Any, Any]],
) -> _Range:
    """A data column's possible values in a file, from its statistics as JSON decoded them.

    Args:
        f: The column's field.
        kind: Its kind.
        num_records: The file's ``numRecords`` (None when unknown).
        nulls: Its ``nullCount`` entry, raw.
        raw_lo: Its ``minValues`` entry, raw.
        raw_hi: Its ``maxValues`` entry, raw.
        exact_bounds: The raw bounds read again with exact decimals.
    """
    if isinstance(nulls, bool) or not isinstance(nulls, int):
        nulls = None
    may_be_null = nulls is None or nulls > 0
    may_have_value = may_hold_value(nulls, num_records)
    if kind is not Kind.FRACTIONAL and (isinstance(raw_lo, float) or isinstance(raw_hi, float)):
        # A bound written with a fraction or exponent, read back exactly as its digits.
        raw_lo, raw_hi = exact_bounds()
    lo = parse_stat_value(raw_lo, kind)
    hi = parse_stat_value(raw_hi, kind)
    if _TYPE_CHANGES in f.metadata:
        # Type widening: files written before the change hold bounds in the older type,
        # which need not read the same in the new one (a date as a timestamp).
        lo = hi = None
    if kind in TIMESTAMP_KINDS and hi is not None:
        hi = Typed(hi.value + STAT_TRUNCATION, hi.aware)
    if kind is Kind.FRACTIONAL:
        # Spark orders NaN above every number, so a NaN bound says nothing about the rest.
        if hi is not None and hi.value != hi.value:
            hi = None
        if lo is not None and lo.value != lo.value:
            lo = hi = None
    return _Range(kind, lo, hi, may_be_null, may_have_value)


def may_hold_value(nulls: Any, num_records: int | None) -> bool:
    """Whether a file may hold a non-null value of a column, from its raw ``nullCount``."""
    if isinstance(nulls, bool) or not isinstance(nulls, int):
        return True
    return num_records is None or nulls < num_records


class _FileView:
    """One file read through the table's schema and partition columns."""

    def __init__(
        self,
        file: FileStatistics,
        schema: StructType,
        partition_columns: Sequence[str],
        *,
        exact: bool | None = None,
        plans: dict[str, _ColumnPlan] | None = None,
    ):
        self.schema = schema
        # How each column is looked up; a caller viewing many files shares one cache.
        self._plans: dict[str, _ColumnPlan] = {} if plans is None else plans
        self.partitions = {c.lower() for c in partition_columns}
        self.partition_values = {k.lower(): v for k, v in (file.partition_values or {}).items()}
        self.num_records: int | None = None
        self.min: dict[str, Any] = {}
        self.max: dict[str, Any] = {}
        self.nulls: dict[str, Any] = {}
        self.has_stats = False
        # A predicate names the same columns many times (the OR of a read set's predicates):
        # each column's range is worked out once per file.
        self._ranges: dict[str, _Range | None] = {}
        self._stats_text = file.stats
        self._exact: dict[str, Any] | None = None
        if file.stats:
            stats = parse_stats(file.stats, exact=needs_exact(schema) if exact is None else exact)
            if isinstance(stats, dict):
                self.has_stats = True
                self.num_records = num_records_of(stats)
                self.min = _lower_keys(stats.get("minValues"))
                self.max = _lower_keys(stats.get("maxValues"))
                self.nulls = _lower_keys(stats.get("nullCount"))

    def column(self, name: str) -> _Range | None:
        """The column's possible values in this file, or None when nothing is known."""
        try:
            return self._ranges[name]
        except KeyError:
            rng = self._ranges[name] = self._column(name)
            return rng

    def _column(self, name: str) -> _Range | None:
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = column_plan(self.schema, name)
        f, kind, names = plan
        if name.lower() in self.partitions:
            raw = next(
                (self.partition_values[n] for n in names if n in self.partition_values), None
            )
            return partition_range(raw, f, kind)
        if f is None or not self.has_stats:
            return None
        nulls = next((self.nulls[k] for k in names if k in self.nulls), None)
        raw_lo = next((self.min[k] for k in names if k in self.min), None)
        raw_hi = next((self.max[k] for k in names if k in self.max), None)
        return stats_range(
            f, kind, self.num_records, nulls, raw_lo, raw_hi, lambda: self._exact_bounds(names)
        )

    def _exact_bounds(self, names: Sequence[str]) -> tuple[Any, Any]:
        if self._exact is None:
            parsed = parse_stats(self._stats_text or "", exact=True)
            self._exact = parsed if isinstance(parsed, dict) else {}
        lo, hi = (
            _lower_keys(self._exact.get("minValues")),
            _lower_keys(self._exact.get("maxValues")),
        )
        return next((lo[k] for k in names if k in lo), None), next(
            (hi[k] for k in names if k in hi), None
        )


def needs_exact(schema: StructType) -> bool:
    """Whether statistics must be read with exact decimals (the table has a decimal column)."""
    return any(kind_of_type(f.type) is Kind.DECIMAL for f in schema.fields)


def parse_stats(text: str, *, exact: bool) -> Any:
    """A file's statistics JSON; None when unreadable (which only costs pruning).

    Binary floats are exact for double columns; ``exact`` reads every fraction as a Decimal.
    """
    if not exact:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # NaN tokens, huge integers, deep nesting: the standard parser decides
    try:
        return json.loads(text, parse_float=Decimal)
    except (ValueError, TypeError, RecursionError):
        return None


def parse_stats_objects(texts: Iterable[str | None], *, exact: bool) -> list[dict[str, Any] | None]:
    """Each text's statistics object, as :func:`parse_stats` reads it, in one pass.

    None where a text is absent, unreadable or not a JSON object. A batch of files skips the
    per-file call: a conflict check parses every file a winner added.
    """
    if exact:
        parsed = [parse_stats(t, exact=True) if t else None for t in texts]
        return [p if type(p) is dict else None for p in parsed]
    loads, failed = orjson.loads, orjson.JSONDecodeError
    out: list[dict[str, Any] | None] = []
    add = out.append
    for text in texts:
        if not text:
            add(None)
            continue
        try:
            p = loads(text)
        except failed:
            p = parse_stats(text, exact=False)
        add(p if type(p) is dict else None)
    return out


def num_records_of(stats: dict[str, Any]) -> int | None:
    """A parsed statistics object's ``numRecords``, when it is an integer."""
    return row_count(stats.get("numRecords"))


def row_count(value: Any) -> int | None:
    """A ``numRecords`` value as JSON decoded it, when it is an integer (else unknown)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _lower_keys(obj: Any) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in obj.items()} if isinstance(obj, dict) else {}


def file_may_match(
    predicate: Expression,
    file: FileStatistics,
    *,
    schema: StructType,
    partition_columns: Sequence[str],
) -> bool:
    """Whether ``file`` may hold a row for which ``predicate`` is TRUE.

    Args:
        predicate: The predicate, on logical column names (any case).
        file: The file; its ``partitionValues`` and ``stats`` are used.
        schema: The table schema that types partition values and statistics.
        partition_columns: The table's partition columns.

    Returns:
        False only when no row of the file can satisfy the predicate. A file without
        statistics for a column, and any Opaque part, may match.
    """
    view = _FileView(file, schema, partition_columns)
    if view.num_records == 0:
        return False
    return _may_be_true(predicate, view)


# Kinds whose statistics bound every value of a column: not strings (writers truncate their
# bounds), timestamps (truncated to milliseconds) nor floating point (a NaN may be left out).
_COMPLETE_BOUNDS = frozenset({Kind.INTEGRAL, Kind.DATE, Kind.BOOLEAN})


def file_must_match(
    predicate: Expression,
    file: FileStatistics,
    *,
    schema: StructType,
    partition_columns: Sequence[str],
) -> bool:
    """Whether ``predicate`` is TRUE on every row of ``file``, as its metadata proves.

    True only when partition values and statistics leave no row where it is FALSE or NULL:
    each column it reads is a partition column, or an integral, date or boolean column whose
    bounds and null count the statistics give. A caller may then take every row of the file
    as matched without reading it (the dual of :func:`file_may_match`).
    """
    parts = {c.lower() for c in partition_columns}
    for name in columns_of(predicate):
        f = schema.get(name)
        if name.lower() not in parts and (
            f is None or kind_of_type(f.type) not in _COMPLETE_BOUNDS
        ):
            return False
    return _mask(predicate, _FileView(file, schema, partition_columns)) == _T


def _may_be_true(expr: Expression, view: _FileView) -> bool:
    """``bool(_mask(expr, view) & _T)``, stopping early where AND and OR allow.

    An AND may be TRUE only if every child may be, an OR if any child may be, so the FALSE and
    NULL bits (needed only under a NOT) are never worked out for them. A conflict check asks
    this of the OR of a read set's predicates for every file a winner added.
    """
    match expr:
        case Or():
            return any(_may_be_true(c, view) for c in expr.children)
        case And():
            return all(_may_be_true(c, view) for c in expr.children)
        case _:
            return bool(_mask(expr, view) & _T)


def _mask(expr: Expression, view: _FileView) -> int:
    match expr:
        case Literal():
            if expr.value is None:
                return _N
            if isinstance(expr.value, bool):
                return _T if expr.value else _F
            return _ALL
        case Column():
            rng = view.column(expr.name)
            if rng is None or rng.kind is not Kind.BOOLEAN:
                return _ALL
            return _compare_range(ComparisonOp.EQ, rng, True)
        case Comparison():
            return _comparison_mask(expr, view)
        case In():
            return _or_masks(
                [
                    _comparison_mask(Comparison(ComparisonOp.EQ, expr.value, o), view)
                    for o in expr.options
                ]
            )
        case IsNull():
            return _null_mask(expr.child, view)
        case IsNotNull():
            return _not_mask(_null_mask(expr.child, view))
        case Not():
            return _not_mask(_mask(expr.child, view))
        case And():
            return _and_masks([_mask(c, view) for c in expr.children])
        case Or():
            return _or_masks([_mask(c, view) for c in expr.children])
        case Opaque() | Arithmetic():
            return _ALL


def _not_mask(m: int) -> int:
    return (m & _N) | (_F if m & _T else 0) | (_T if m & _F else 0)


def _and_masks(masks: Sequence[int]) -> int:
    out = 0
    if all(m & _T for m in masks):
        out |= _T
    if any(m & _F for m in masks):
        out |= _F
    if all(m & (_T | _N) for m in masks) and any(m & _N for m in masks):
        out |= _N
    return out


def _or_masks(masks: Sequence[int]) -> int:
    out = 0
    if any(m & _T for m in masks):
        out |= _T
    if all(m & _F for m in masks):
        out |= _F
    if all(m & (_F | _N) for m in masks) and any(m & _N for m in masks):
        out |= _N
    return out


def _null_mask(child: Expression, view: _FileView) -> int:
    """Possible values of ``child IS NULL`` (never NULL itself)."""
    match child:
        case Literal():
            return _T if child.value is None else _F
        case Column():
            rng = view.column(child.name)
            if rng is None:
                return _T | _F
            return (_T if rng.may_be_null else 0) | (_F if rng.may_have_value else 0)
        case Opaque():
            return _T | _F
        case _:
            m = _mask(child, view)
            return (_T if m & _N else 0) | (_F if m & (_T | _F) else 0)


def _comparison_mask(expr: Comparison, view: _FileView) -> int:
    left, right, op = expr.left, expr.right, expr.op
    if isinstance(left, Literal) and isinstance(right, Column):
        left, right, op = right, left, _FLIPPED[op]
    if isinstance(left, Column) and isinstance(right, Literal):
        rng = view.column(left.name)
        return _ALL if rng is None else _compare_range(op, rng, right.value)
    if isinstance(left, Literal) and isinstance(right, Literal):
        v = row_truth(expr, {}, None)
        return _N if v is None else (_T if v else _F)
    if (
        isinstance(left, Column)
        and isinstance(right, Column)
        and left.name.lower() in view.partitions
        and right.name.lower() in view.partitions
    ):
        # Two partition columns hold one known value each: evaluate exactly.
        a, b = view.column(left.name), view.column(right.name)
        if a is not None and b is not None and a.kind == b.kind:
            row = {
                "l": None if a.lo is None else a.lo.value,
                "r": None if b.lo is None else b.lo.value,
            }
            v = row_truth(Comparison(op, Column("l"), Column("r")), row, None)
            return _N if v is None else (_T if v else _F)
    return _ALL


@functools.lru_cache(maxsize=1024)
def _coerce_cached(type_id: int, value: Any, kind: Kind) -> Typed:
    # The id of the literal's type keeps 1, 1.0 and True apart (they hash alike); Typed is
    # immutable, so sharing a cached one is safe.
    return coerce_literal(value, kind)


def _coerce(literal: Any, kind: Kind) -> Typed:
    """``coerce_literal``, memoised: a read set compares the same literals with every file."""
    try:
        return _coerce_cached(id(type(literal)), literal, kind)
    except TypeError:  # an unhashable literal
        return coerce_literal(literal, kind)


def _compare_range(op: ComparisonOp, rng: _Range, literal: Any) -> int:
    """Possible values of ``column op literal`` over the rows the range describes."""
    if literal is None:
        if op is ComparisonOp.NULL_SAFE_EQ:
            return (_T if rng.may_be_null else 0) | (_F if rng.may_have_value else 0)
        return _N if (rng.may_be_null or rng.may_have_value) else 0
    if rng.kind is None:
        return _ALL
    lo, hi = rng.lo, rng.hi
    try:
        c = _coerce(literal, rng.kind)
    except Uncoercible:
        # A string partition value against an integer literal: Spark casts the string.
        as_int = None
        if rng.kind is Kind.STRING and rng.exact and lo is not None:
            as_int = string_as_integer(lo.value, literal)
        if as_int is None:
            return _ALL
        lo = hi = as_int
        c = Typed(literal)
    lo_v = None if lo is None else lo.value
    hi_v = None if hi is None else hi.value
    if rng.kind in TIMESTAMP_KINDS:
        if lo is not None and lo.aware != c.aware:
            lo_v = lo.value - ZONE_SLACK
        if hi is not None and hi.aware != c.aware:
            hi_v = hi.value + ZONE_SLACK
    t = f = False
    if rng.may_have_value:
        cmp_lo = None if lo_v is None else compare(lo_v, c.value)
        cmp_hi = None if hi_v is None else compare(hi_v, c.value)
        if (lo_v is not None and cmp_lo is None) or (hi_v is not None and cmp_hi is None):
            return _ALL
        can_lt = cmp_lo is None or cmp_lo < 0  # some value below the literal
        can_le = cmp_lo is None or cmp_lo <= 0
        can_gt = cmp_hi is None or cmp_hi > 0
        can_ge = cmp_hi is None or cmp_hi >= 0
        only_equal = cmp_lo == 0 and cmp_hi == 0
        match op:
            case ComparisonOp.EQ | ComparisonOp.NULL_SAFE_EQ:
                t, f = can_le and can_ge, not only_equal
            case ComparisonOp.NE:
                t, f = not only_equal, can_le and can_ge
            case ComparisonOp.LT:
                t, f = can_lt, can_ge
            case ComparisonOp.LE:
                t, f = can_le, can_gt
            case ComparisonOp.GT:
                t, f = can_gt, can_le
            case ComparisonOp.GE:
                t, f = can_ge, can_lt
    out = (_T if t else 0) | (_F if f else 0)
    if rng.may_be_null:
        out |= _F if op is ComparisonOp.NULL_SAFE_EQ else _N
    return out
