"""A file-skipping predicate compiled once, then asked of many files.

A conflict check asks one read predicate (the OR of the transaction's read predicates) of
every file the winning commits added. :func:`deltatx.kernel.evaluation.file_may_match` walks
the predicate tree and coerces its literals for each file; here that work is done once: each
``column op literal`` leaf has its literal brought to the column's kind, a range on one column
(``lo <= c AND c < hi``) looks the column up once, and an OR of equalities on one partition
column becomes one set lookup. The answers are exactly ``file_may_match``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from deltatx.kernel.actions import AddFile
from deltatx.kernel.evaluation import (
    _FLIPPED,
    _T,
    _ColumnPlan,
    _FileView,
    _mask,
    _needs_exact,
    _Range,
)
from deltatx.kernel.expressions import (
    And,
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    Literal,
    Or,
)
from deltatx.kernel.schema import StructType
from deltatx.kernel.values import (
    TIMESTAMP_KINDS,
    Kind,
    Uncoercible,
    coerce_literal,
    compare,
    kind_of_type,
)


class FilePredicate:
    """A predicate compiled once, then asked of many files as :func:`file_may_match` would be.

    A conflict check asks one read predicate of every file the winning commits added: the
    tree is walked, and each ``column op literal`` leaf has its literal brought to the
    column's kind, once here rather than once per file.
    """

    __slots__ = ("_exact", "_parts", "_plans", "_schema", "_test")

    def __init__(
        self, predicate: Expression, *, schema: StructType, partition_columns: Sequence[str]
    ) -> None:
        """Compiles ``predicate`` for files of a table with this schema and partitioning."""
        self._schema = schema
        self._parts = tuple(partition_columns)
        self._exact = _needs_exact(schema)
        self._plans: dict[str, _ColumnPlan] = {}
        self._test = _compile(predicate, schema, {c.lower() for c in partition_columns})

    def may_match(self, file: AddFile) -> bool:
        """Exactly ``file_may_match(predicate, file, ...)``."""
        view = _FileView(file, self._schema, self._parts, exact=self._exact, plans=self._plans)
        if view.num_records == 0:
            return False
        return self._test(view)


_Test = Callable[[_FileView], bool]
_RangeTest = Callable[[_Range | None], bool]
# Kinds whose equal values hash alike, so that an OR of equalities becomes one set lookup.
_HASHABLE_KINDS = frozenset({Kind.STRING, Kind.INTEGRAL, Kind.DATE, Kind.BOOLEAN})


def _compile(expr: Expression, schema: StructType, parts: set[str]) -> _Test:
    """``_may_be_true`` for one expression, as a closure over its pre-processed tree."""
    if isinstance(expr, Or):
        return _compile_or(expr, schema, parts)
    if isinstance(expr, And):
        leaves = [_compile_comparison(c, schema, parts) for c in expr.children]
        names = {leaf[0].lower() for leaf in leaves if leaf is not None}
        if len(names) == 1 and all(leaf is not None for leaf in leaves):
            # A range on one column (lo <= c AND c < hi): its bounds are looked up once.
            name = next(leaf[0] for leaf in leaves if leaf is not None)
            checks = tuple(leaf[1] for leaf in leaves if leaf is not None)

            def in_range(view: _FileView) -> bool:
                rng = view.column(name)
                return all(check(rng) for check in checks)

            return in_range
        tests = tuple(_compile(c, schema, parts) for c in expr.children)

        def all_true(view: _FileView) -> bool:
            return all(t(view) for t in tests)

        return all_true
    if isinstance(expr, Comparison):
        leaf = _compile_comparison(expr, schema, parts)
        if leaf is not None:
            name, check = leaf

            def one(view: _FileView) -> bool:
                return check(view.column(name))

            return one

    def generic(view: _FileView) -> bool:
        return bool(_mask(expr, view) & _T)

    return generic


def _compile_or(expr: Or, schema: StructType, parts: set[str]) -> _Test:
    # Equalities on one partition column (the usual read set of partition-wise writers) become
    # one lookup of the file's partition value in a set of literals.
    values: dict[str, set[Any]] = {}
    # Conjunctions of comparisons on one column (id ranges), per column: its range is then
    # looked up once for all of them.
    ranges: dict[str, tuple[str, list[tuple[_RangeTest, ...]]]] = {}
    tests: list[_Test] = []
    for child in expr.children:
        equality = _partition_equality(child, schema, parts)
        if equality is not None:
            values.setdefault(equality[0], set()).add(equality[1])
            continue
        conjunction = _one_column_checks(child, schema, parts)
        if conjunction is not None:
            name, checks = conjunction
            ranges.setdefault(name.lower(), (name, []))[1].append(checks)
            continue
        tests.append(_compile(child, schema, parts))
    for name, alternatives in ranges.values():
        tests.insert(0, _any_range(name, tuple(alternatives)))
    for name, literals in values.items():
        tests.insert(0, _value_in(name, frozenset(literals)))
    compiled = tuple(tests)

    def any_true(view: _FileView) -> bool:
        return any(t(view) for t in compiled)

    return any_true


def _one_column_checks(
    expr: Expression, schema: StructType, parts: set[str]
) -> tuple[str, tuple[_RangeTest, ...]] | None:
    """A comparison, or an AND of comparisons, on one column: the column and its tests."""
    children = expr.children if isinstance(expr, And) else (expr,)
    leaves = [_compile_comparison(c, schema, parts) for c in children]
    if not leaves or any(leaf is None for leaf in leaves):
        return None
    compiled = [leaf for leaf in leaves if leaf is not None]
    if len({name.lower() for name, _ in compiled}) != 1:
        return None
    return compiled[0][0], tuple(check for _, check in compiled)


def _any_range(name: str, alternatives: tuple[tuple[_RangeTest, ...], ...]) -> _Test:
    def lookup(view: _FileView) -> bool:
        rng = view.column(name)
        for checks in alternatives:
            for check in checks:
                if not check(rng):
                    break
            else:
                return True
        return False

    return lookup


def _value_in(name: str, literals: frozenset[Any]) -> _Test:
    def lookup(view: _FileView) -> bool:
        rng = view.column(name)
        if rng is None or rng.kind is None:
            return True
        return rng.may_have_value and rng.lo is not None and rng.lo.value in literals

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


# Kinds whose bounds and coerced literals always compare (ints with ints, floats or Decimals;
# strings with strings; dates with dates; never a NaN), so no comparison can be undecided.
_TOTALLY_ORDERED_KINDS = frozenset({Kind.INTEGRAL, Kind.STRING, Kind.DATE})


def _ordered_check(op: ComparisonOp, c: Any) -> _RangeTest:
    """``_compare_range``'s TRUE bit for ``column op c`` on a totally ordered kind."""

    def check(rng: _Range | None) -> bool:
        if rng is None or rng.kind is None:
            return True
        if not rng.may_have_value:
            return False
        lo = None if rng.lo is None else rng.lo.value
        hi = None if rng.hi is None else rng.hi.value
        if op is ComparisonOp.LT:
            return lo is None or lo < c
        if op is ComparisonOp.LE:
            return lo is None or lo <= c
        if op is ComparisonOp.GT:
            return hi is None or hi > c
        if op is ComparisonOp.GE:
            return hi is None or hi >= c
        if op is ComparisonOp.NE:
            return not (lo is not None and hi is not None and lo == c and hi == c)
        return (lo is None or lo <= c) and (hi is None or hi >= c)

    return check


def _compile_comparison(
    expr: Expression, schema: StructType, parts: set[str]
) -> tuple[str, _RangeTest] | None:
    """``column op literal`` with the literal coerced once: the column and a test of its range.

    None where only the general path is right: timestamps (with their zone slack), NULL or
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
    if kind in _TOTALLY_ORDERED_KINDS and not (
        isinstance(literal, Decimal) and not literal.is_finite()
    ):
        return left.name, _ordered_check(op, literal)
    decide = _MAY_BE_TRUE[op]

    def check(rng: _Range | None) -> bool:
        if rng is None or rng.kind is None:
            return True
        if not rng.may_have_value:
            return False
        cmp_lo = cmp_hi = None
        if rng.lo is not None:
            cmp_lo = compare(rng.lo.value, literal)
            if cmp_lo is None:
                return True
        if rng.hi is not None:
            cmp_hi = compare(rng.hi.value, literal)
            if cmp_hi is None:
                return True
        return decide(cmp_lo, cmp_hi)

    return left.name, check
