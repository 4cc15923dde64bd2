"""Predicate evaluation on rows and on file metadata (kernel/evaluation.py).

The central property is soundness: when some row of a file satisfies a predicate, the file's
partition values and statistics (computed from those rows) must say the file may match;
otherwise a conflict or a scan would silently miss data.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltatx.kernel.actions import AddFile
from deltatx.kernel.evaluation import (
    file_may_match,
    file_must_match,
)
from deltatx.kernel.expressions import (
    FALSE,
    TRUE,
    And,
    Arithmetic,
    ArithmeticOp,
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
from deltatx.kernel.row_evaluation import evaluate_on_row
from deltatx.kernel.schema import PrimitiveType, StructField, StructType

from ..examples import examples

# --------------------------------------------------------------------------- helpers

DATA_TYPES = {
    "i": "long",
    "s": "string",
    "d": "date",
    "t": "timestamp",
    "f": "double",
    "b": "boolean",
    "m": "decimal(10,2)",
}


def make_schema(partition_type: str) -> StructType:
    fields = [StructField("p", PrimitiveType(partition_type))]
    fields += [StructField(n, PrimitiveType(t)) for n, t in DATA_TYPES.items()]
    return StructType(tuple(fields))


def _stat(value: Any) -> Any:
    if isinstance(value, datetime):
        # As Delta writers do: UTC, ISO-8601, truncated to milliseconds.
        ms = value.replace(microsecond=value.microsecond // 1000 * 1000)
        return ms.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms.microsecond // 1000:03d}Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def _partition_string(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def make_file(rows: list[dict[str, Any]], *, with_stats: bool = True) -> AddFile:
    stats: dict[str, Any] = {
        "numRecords": len(rows),
        "minValues": {},
        "maxValues": {},
        "nullCount": {},
    }
    for col in DATA_TYPES:
        values = [r[col] for r in rows if r[col] is not None]
        stats["nullCount"][col] = len(rows) - len(values)
        if values and col != "b":  # Delta writers keep no min/max for booleans
            stats["minValues"][col] = _stat(min(values))
            stats["maxValues"][col] = _stat(max(values))
    p = rows[0]["p"] if rows else None
    return AddFile(
        path="f.parquet",
        partition_values={"p": _partition_string(p)},
        size=1,
        modification_time=0,
        data_change=True,
        stats=json.dumps(stats) if with_stats else None,
    )


# --------------------------------------------------------------------------- strategies

INTS = st.integers(min_value=-5, max_value=5)
STRS = st.sampled_from(["", "a", "ab", "b", "zz", "10", "2", "-1"])
DATES = st.dates(min_value=date(2024, 1, 1), max_value=date(2024, 1, 6))
TIMES = st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2024, 1, 3)).map(
    lambda d: d.replace(second=0, microsecond=d.microsecond % 3 * 400)
)
FLOATS = st.sampled_from([-1.5, 0.0, 0.5, 2.25, 10.0])
DECS = st.sampled_from([Decimal("-1.25"), Decimal("0.00"), Decimal("3.50"), Decimal("7.10")])
VALUES = {
    "long": INTS,
    "string": STRS,
    "date": DATES,
    "timestamp": TIMES,
    "double": FLOATS,
    "boolean": st.booleans(),
    "decimal(10,2)": DECS,
}
PARTITION_VALUES = {
    "long": INTS,
    "string": STRS.filter(bool),  # '' is NULL in partition values
    "date": DATES,
}


def nullable(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), s, s)


@st.composite
def table_and_rows(draw: st.DrawFn) -> tuple[StructType, list[dict[str, Any]]]:
    ptype = draw(st.sampled_from(sorted(PARTITION_VALUES)))
    pval = draw(nullable(PARTITION_VALUES[ptype]))
    n = draw(st.integers(min_value=1, max_value=4))
    rows = []
    for _ in range(n):
        row = {"p": pval}
        for col, t in DATA_TYPES.items():
            row[col] = draw(nullable(VALUES[t]))
        rows.append(row)
    return make_schema(ptype), rows


def _literal_for(draw: st.DrawFn, type_name: str) -> Any:
    choice = draw(st.integers(min_value=0, max_value=9))
    if choice == 0:
        return None
    if choice == 1 and type_name == "date":
        return draw(DATES).isoformat()  # a string literal compared with a date
    if choice == 1 and type_name == "timestamp":
        return draw(TIMES).replace(tzinfo=UTC)  # an aware literal against naive rows
    if choice == 1 and type_name == "string":
        return draw(INTS)  # an integer literal against a string column
    if choice == 1 and type_name == "long":
        return draw(DECS)
    return draw(VALUES.get(type_name, INTS))


@st.composite
def predicates(draw: st.DrawFn, schema: StructType, depth: int = 3) -> Expression:
    cols = {f.name: f.type.name for f in schema.fields if isinstance(f.type, PrimitiveType)}
    kinds = ["cmp", "cmp", "cmp", "in", "isnull", "lit", "opaque"]
    if depth > 0:
        kinds += ["not", "not", "and", "or"]
    kind = draw(st.sampled_from(kinds))
    if kind == "cmp":
        col = draw(st.sampled_from(sorted(cols)))
        op = draw(st.sampled_from(list(ComparisonOp)))
        lit = Literal(_literal_for(draw, cols[col]))
        if draw(st.booleans()):
            return Comparison(op, lit, Column(col.upper()))  # flipped and upper-cased
        return Comparison(op, Column(col), lit)
    if kind == "in":
        col = draw(st.sampled_from(sorted(cols)))
        opts = draw(st.lists(st.just(0), min_size=1, max_size=3))
        return In(Column(col), tuple(Literal(_literal_for(draw, cols[col])) for _ in opts))
    if kind == "isnull":
        col = Column(draw(st.sampled_from(sorted(cols))))
        return IsNull(col) if draw(st.booleans()) else IsNotNull(col)
    if kind == "lit":
        return Literal(draw(st.sampled_from([True, False, None])))
    if kind == "opaque":
        return Opaque("rand() < 0.5", deterministic=False)
    if kind == "not":
        return Not(draw(predicates(schema, depth - 1)))
    kids = tuple(draw(st.lists(predicates(schema, depth - 1), min_size=2, max_size=3)))
    return And(kids) if kind == "and" else Or(kids)


@st.composite
def scenario(draw: st.DrawFn) -> tuple[StructType, list[dict[str, Any]], Expression]:
    schema, rows = draw(table_and_rows())
    return schema, rows, draw(predicates(schema))


# --------------------------------------------------------------------------- soundness


@settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_file_may_match_is_sound(case: tuple[StructType, list[dict[str, Any]], Expression]) -> None:
    """A file with a row where the predicate is TRUE may always match (NOT and NULL included)."""
    schema, rows, pred = case
    file = make_file(rows)
    if any(evaluate_on_row(pred, r, schema=schema) is True for r in rows):
        assert file_may_match(pred, file, schema=schema, partition_columns=["p"])


@settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_file_must_match_is_sound(
    case: tuple[StructType, list[dict[str, Any]], Expression],
) -> None:
    """A file said to match on every row has no row where the predicate is FALSE or NULL."""
    schema, rows, pred = case
    for file in (make_file(rows), make_file(rows, with_stats=False)):
        if file_must_match(pred, file, schema=schema, partition_columns=["p"]):
            assert all(evaluate_on_row(pred, r, schema=schema) is True for r in rows)


def _rows_of(ids: list[int | None], day: date | None = date(2024, 1, 2)) -> list[dict[str, Any]]:
    return [
        {"p": day, "i": i, "s": "a", "d": day, "t": None, "f": 0.5, "b": True, "m": None}
        for i in ids
    ]


@pytest.mark.parametrize(
    ("ids", "predicate", "proven"),
    [
        (
            [3, 5, 4],
            And(
                (
                    Comparison(ComparisonOp.GE, Column("i"), Literal(3)),
                    Comparison(ComparisonOp.LT, Column("i"), Literal(6)),
                )
            ),
            True,
        ),
        ([3, 5, 4], Comparison(ComparisonOp.LT, Column("i"), Literal(5)), False),
        ([3, None], Comparison(ComparisonOp.GE, Column("i"), Literal(0)), False),
        ([3, 4], IsNotNull(Column("i")), True),
        # Each part of an OR is judged alone: the NULL of one is not known to be the other's TRUE.
        (
            [3, None],
            Or((Comparison(ComparisonOp.GE, Column("i"), Literal(0)), IsNull(Column("i")))),
            False,
        ),
        ([4, 4], In(Column("i"), (Literal(1), Literal(4))), True),
        ([4, 4], Not(Comparison(ComparisonOp.EQ, Column("i"), Literal(5))), True),
        ([1, 2], Comparison(ComparisonOp.EQ, Column("p"), Literal("2024-01-02")), True),
        ([1, 2], Comparison(ComparisonOp.LE, Column("d"), Literal("2024-01-02")), True),
        # Bounds a writer may truncate or leave a NaN out of prove nothing.
        ([1, 2], Comparison(ComparisonOp.EQ, Column("s"), Literal("a")), False),
        ([1, 2], Comparison(ComparisonOp.LT, Column("f"), Literal(1.0)), False),
        ([1, 2], Opaque("i > 0", deterministic=True), False),
    ],
)
def test_file_must_match_proves_what_the_bounds_show(
    ids: list[int | None], predicate: Expression, proven: bool
) -> None:
    schema = make_schema("date")
    rows = _rows_of(ids)
    file = make_file(rows)
    assert file_must_match(predicate, file, schema=schema, partition_columns=["p"]) is proven
    # Without statistics only partition values prove anything.
    bare = make_file(rows, with_stats=False)
    on_partitions = columns_of(predicate) <= {"p"}
    assert file_must_match(predicate, bare, schema=schema, partition_columns=["p"]) is (
        proven and on_partitions
    )


@settings(max_examples=examples(800), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_short_circuit_agrees_with_the_full_mask(
    case: tuple[StructType, list[dict[str, Any]], Expression],
) -> None:
    """Stopping early under AND/OR gives exactly the answer of the full three-valued mask."""
    from deltatx.kernel.evaluation import _T, _FileView, _mask, _may_be_true

    schema, rows, pred = case
    for file in (make_file(rows), make_file(rows, with_stats=False)):
        view = _FileView(file, schema, ["p"])
        assert _may_be_true(pred, view) == bool(_mask(pred, view) & _T)


@settings(max_examples=300, deadline=None)
@given(scenario())
def test_files_without_stats_may_match_unless_partition_rules_out(
    case: tuple[StructType, list[dict[str, Any]], Expression],
) -> None:
    schema, rows, pred = case
    file = make_file(rows, with_stats=False)
    if any(evaluate_on_row(pred, r, schema=schema) is True for r in rows):
        assert file_may_match(pred, file, schema=schema, partition_columns=["p"])


# --------------------------------------------------------------------------- examples

SCHEMA = StructType(
    (
        StructField("date", PrimitiveType("date")),
        StructField("value", PrimitiveType("integer")),
        StructField("ts", PrimitiveType("timestamp")),
        StructField("name", PrimitiveType("string")),
    )
)


def file(pv: dict[str, str | None] | None = None, stats: dict[str, Any] | None = None) -> AddFile:
    return AddFile(
        path="x",
        partition_values=pv or {},
        size=1,
        modification_time=0,
        data_change=True,
        stats=None if stats is None else json.dumps(stats),
    )


def match(pred: Expression, f: AddFile, parts: tuple[str, ...] = ("date",)) -> bool:
    return file_may_match(pred, f, schema=SCHEMA, partition_columns=parts)


def cmp(op: str, col: str, value: Any) -> Comparison:
    return Comparison(ComparisonOp(op), Column(col), Literal(value))


STATS_1_10 = {
    "numRecords": 5,
    "minValues": {"value": 1},
    "maxValues": {"value": 10},
    "nullCount": {"value": 0},
}


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        (cmp("=", "value", 5), True),
        (cmp("=", "value", 11), False),
        (cmp(">", "value", 10), False),
        (cmp(">=", "value", 10), True),
        (cmp("<", "value", 1), False),
        (Not(cmp(">", "value", 5)), True),
        (Not(cmp("<=", "value", 10)), False),
        (cmp("=", "value", None), False),  # = NULL is never TRUE
        (cmp("<=>", "value", None), False),  # nullCount 0
        (IsNull(Column("value")), False),
        (IsNotNull(Column("value")), True),
        (Not(IsNotNull(Column("value"))), False),
        (In(Column("value"), (Literal(20), Literal(30))), False),
        (Not(In(Column("value"), (Literal(20), Literal(None)))), False),  # NOT IN with NULL
        (cmp("=", "VALUE", 3), True),  # column names are case-insensitive
        (cmp("=", "value", "7"), True),
        (cmp("=", "value", "abc"), True),  # uncoercible: may match
        (Comparison(ComparisonOp.LT, Literal(10), Column("value")), False),  # flipped
        (Opaque("udf(value)"), True),
        (Not(Opaque("udf(value)")), True),
        # Statistics do not bound arithmetic: value % 100 may be 0 in a file of 1..10 too.
        (
            Comparison(
                ComparisonOp.EQ,
                Arithmetic(ArithmeticOp.REMAINDER, Column("value"), Literal(100)),
                Literal(0),
            ),
            True,
        ),
        (
            Not(
                Comparison(
                    ComparisonOp.GT,
                    Arithmetic(ArithmeticOp.ADD, Column("value"), Literal(1)),
                    Literal(50),
                )
            ),
            True,
        ),
        (IsNull(Arithmetic(ArithmeticOp.MULTIPLY, Column("value"), Literal(2))), True),
        (And((cmp(">", "value", 3), cmp("<", "value", 2))), True),  # per-column bounds only
        (Or((cmp(">", "value", 30), FALSE)), False),
        (cmp("=", "name", "x"), True),  # no stats for name
    ],
)
def test_stats(pred: Expression, expected: bool) -> None:
    assert match(pred, file(stats=STATS_1_10)) is expected


def test_not_of_exact_value() -> None:
    exact = {"numRecords": 3, "minValues": {"value": 5}, "maxValues": {"value": 5}}
    assert not match(Not(cmp("=", "value", 5)), file(stats={**exact, "nullCount": {"value": 0}}))
    # Without a nullCount the column may be NULL, but NOT (NULL = 5) is NULL, never TRUE.
    assert not match(Not(cmp("=", "value", 5)), file(stats=exact))
    assert match(cmp("<=>", "value", None), file(stats=exact))
    assert match(Not(cmp("<=>", "value", 5)), file(stats=exact))


def test_all_null_column() -> None:
    f = file(stats={"numRecords": 2, "nullCount": {"value": 2}})
    assert not match(cmp(">", "value", 0), f)
    assert match(IsNull(Column("value")), f)
    assert not match(Not(IsNull(Column("value"))), f)


def test_empty_file_never_matches() -> None:
    assert not match(TRUE, file(stats={"numRecords": 0}))


def test_without_stats_everything_may_match() -> None:
    assert match(cmp(">", "value", 1000), file())
    assert match(Not(cmp(">", "value", 1000)), file())


def test_partition_values() -> None:
    f = file({"date": "2024-01-01"})
    assert match(cmp("=", "date", "2024-01-01"), f)
    assert match(cmp("=", "date", date(2024, 1, 1)), f)
    assert not match(cmp("=", "date", "2024-01-02"), f)
    assert not match(cmp(">", "date", date(2024, 1, 1)), f)
    assert match(Not(cmp(">", "date", date(2024, 1, 1))), f)
    assert match(cmp("=", "DATE", "2024-01-01"), file({"DATE": "2024-01-01"}))


@pytest.mark.parametrize("null", [None, ""])
def test_null_partition(null: str | None) -> None:
    f = file({"date": null})
    assert not match(cmp("=", "date", "2024-01-01"), f)
    assert not match(Not(cmp("=", "date", "2024-01-01")), f)
    assert match(IsNull(Column("date")), f)
    assert match(cmp("<=>", "date", None), f)


def test_missing_partition_key_is_null() -> None:
    assert not match(cmp("=", "date", "2024-01-01"), file({}))


def test_timestamp_stats_and_literals() -> None:
    f = file(
        stats={
            "numRecords": 2,
            "minValues": {"ts": "2024-01-01T10:00:00.000Z"},
            "maxValues": {"ts": "2024-01-02T10:00:00.000Z"},
            "nullCount": {"ts": 0},
        }
    )
    aware = datetime(2024, 1, 2, 10, 0, 0, 500, tzinfo=UTC)
    assert match(cmp(">=", "ts", aware), f)  # max is truncated to milliseconds
    assert not match(cmp(">=", "ts", aware + timedelta(milliseconds=2)), f)
    assert not match(cmp(">=", "ts", "2024-01-03T00:00:00Z"), f)
    # a naive literal is wall-clock time in some zone: within 14 hours it may match
    assert match(cmp(">=", "ts", "2024-01-03 00:00:00"), f)
    assert not match(cmp(">=", "ts", "2024-01-04 00:00:00"), f)


def test_timestamp_partition_formats() -> None:
    parts = ("ts",)
    f = file({"ts": "2024-01-01 10:00:00.123456"})
    assert match(cmp("=", "ts", datetime(2024, 1, 1, 10, 0, 0, 123456)), f, parts)
    assert not match(cmp(">", "ts", datetime(2024, 1, 1, 10, 0, 1)), f, parts)


def test_string_partition_against_integer_literal() -> None:
    schema = StructType((StructField("part", PrimitiveType("string")),))
    f = file({"part": "2"})
    assert not file_may_match(cmp(">", "part", 3), f, schema=schema, partition_columns=["part"])
    assert file_may_match(cmp("=", "part", 2), f, schema=schema, partition_columns=["part"])
    g = file({"part": "x"})
    assert file_may_match(cmp("=", "part", 2), g, schema=schema, partition_columns=["part"])


def test_column_mapping_physical_names() -> None:
    schema = StructType(
        (
            StructField(
                "value",
                PrimitiveType("integer"),
                metadata={"delta.columnMapping.physicalName": "col-123"},
            ),
        )
    )
    f = file(stats={"numRecords": 1, "minValues": {"col-123": 1}, "maxValues": {"col-123": 2}})
    assert not file_may_match(cmp(">", "value", 5), f, schema=schema, partition_columns=[])


def test_nan_max_is_no_bound() -> None:
    schema = StructType((StructField("f", PrimitiveType("double")),))
    stats = {"numRecords": 2, "minValues": {"f": 1.0}, "maxValues": {"f": "NaN"}}
    assert file_may_match(
        cmp(">", "f", 100.0), file(stats=stats), schema=schema, partition_columns=[]
    )


# --------------------------------------------------------------------------- rows


def test_evaluate_on_row_three_valued() -> None:
    row = {"Value": None, "name": "a"}
    assert evaluate_on_row(cmp("=", "value", 1), row) is None
    assert evaluate_on_row(Not(cmp("=", "value", 1)), row) is None
    assert evaluate_on_row(Or((cmp("=", "value", 1), cmp("=", "name", "a"))), row) is True
    assert evaluate_on_row(And((cmp("=", "value", 1), cmp("=", "name", "b"))), row) is False
    assert evaluate_on_row(cmp("<=>", "value", None), row) is True
    assert evaluate_on_row(In(Column("name"), (Literal("b"), Literal(None))), row) is None
    assert evaluate_on_row(Opaque("f(x)"), row) is None
    assert evaluate_on_row(IsNull(Column("missing")), row) is True


# --------------------------------------------------------------------------- structure


def test_bounds_of_a_widened_column_are_not_trusted() -> None:
    # Type widening (date -> timestamp_ntz): a file written before the change holds its bounds
    # in the older type; deltatx does not prune on them (the bounds would rule this file out),
    # only on the null count.
    change = [{"fromType": "date", "toType": "timestamp_ntz"}]
    widened = StructType(
        (StructField("d", PrimitiveType("timestamp_ntz"), metadata={"delta.typeChanges": change}),)
    )
    f = file(
        stats={
            "numRecords": 2,
            "minValues": {"d": "2024-01-01"},
            "maxValues": {"d": "2024-01-01"},
            "nullCount": {"d": 0},
        }
    )
    early = cmp("<", "d", datetime(2023, 12, 31, 0, 0))
    assert file_may_match(early, f, schema=widened, partition_columns=())
    assert not file_may_match(IsNull(Column("d")), f, schema=widened, partition_columns=())
