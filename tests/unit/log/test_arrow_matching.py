"""The driver's pyarrow evaluation of a condition agrees with the kernel's row evaluation."""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltatx.kernel.actions import AddFile
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
)
from deltatx.kernel.row_evaluation import evaluate_on_row
from deltatx.kernel.schema import parse_schema
from deltatx.log.row_level.arrow_matching import driver_matches
from deltatx.storage.location import Location

SCHEMA = parse_schema(
    '{"type":"struct","fields":['
    '{"name":"n","type":"integer","nullable":true,"metadata":{}},'
    '{"name":"m","type":"long","nullable":true,"metadata":{}},'
    '{"name":"s","type":"string","nullable":true,"metadata":{}},'
    '{"name":"b","type":"boolean","nullable":true,"metadata":{}},'
    '{"name":"d","type":"double","nullable":true,"metadata":{}}]}'
)


def _java_remainder(a: int, b: int) -> int:
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _both(fn: Callable[[int, int], int], a: Any, b: Any) -> int | None:
    return None if a is None or b is None else fn(a, b)


# Integer arithmetic the driver computes, each with its value in Python (Java's remainder: the
# sign of the dividend, so (m - n) % -2 is -1 where m - n is odd and negative). The row oracle
# cannot evaluate arithmetic, so it reads each one's value from a column of its own.
_ARITHMETIC: dict[Arithmetic, tuple[str, Callable[[dict[str, Any]], int | None]]] = {
    Arithmetic(ArithmeticOp.REMAINDER, Column("n"), Literal(3)): (
        "n_rem_3",
        lambda r: _both(_java_remainder, r["n"], 3),
    ),
    Arithmetic(
        ArithmeticOp.REMAINDER,
        Arithmetic(ArithmeticOp.SUBTRACT, Column("m"), Column("n")),
        Literal(-2),
    ): (
        "m_minus_n_rem_minus_2",
        lambda r: _both(_java_remainder, _both(int.__sub__, r["m"], r["n"]), -2),
    ),
    Arithmetic(
        ArithmeticOp.ADD, Arithmetic(ArithmeticOp.MULTIPLY, Column("n"), Column("m")), Literal(-4)
    ): ("n_times_m_minus_4", lambda r: _both(int.__add__, _both(int.__mul__, r["n"], r["m"]), -4)),
}


def _oracle(expr: Expression) -> Expression:
    """``expr`` with each arithmetic operation read from its own column."""
    match expr:
        case Arithmetic():
            return Column(_ARITHMETIC[expr][0])
        case Comparison():
            return Comparison(expr.op, _oracle(expr.left), _oracle(expr.right))
        case In():
            return In(_oracle(expr.value), expr.options)
        case IsNull():
            return IsNull(_oracle(expr.child))
        case IsNotNull():
            return IsNotNull(_oracle(expr.child))
        case Not():
            return Not(_oracle(expr.child))
        case And():
            return And(tuple(_oracle(c) for c in expr.children))
        case Or():
            return Or(tuple(_oracle(c) for c in expr.children))
    return expr


def _with_arithmetic(row: dict[str, Any]) -> dict[str, Any]:
    return row | {name: value(row) for name, value in _ARITHMETIC.values()}


def _atoms(pick: random.Random) -> Expression:
    if pick.random() < 0.25:
        arithmetic = pick.choice(list(_ARITHMETIC))
        match pick.randrange(4):
            case 0:
                return IsNull(arithmetic)
            case 1:
                return In(arithmetic, (Literal(pick.randrange(-3, 3)), Literal(1)))
            case 2:
                return Comparison(pick.choice(list(ComparisonOp)), arithmetic, Column("m"))
        literal = Literal(pick.choice([-4, -1, 0, 1, 2, None]))
        return Comparison(pick.choice(list(ComparisonOp)), literal, arithmetic)
    column = pick.choice(["n", "m", "s", "b"])
    if column == "b":
        return pick.choice(
            [Column("b"), Comparison(ComparisonOp.NULL_SAFE_EQ, Column("b"), Literal(True))]
        )
    if column == "s":
        values: list[object] = ["a", "b", "c", None]
    else:
        values = [0, 1, 2, 3, None]
    op = pick.choice(list(ComparisonOp))
    match pick.randrange(5):
        case 0:
            return IsNull(Column(column))
        case 1:
            return IsNotNull(Column(column))
        case 2:
            options = tuple(Literal(v) for v in pick.sample(values, 2))
            return In(Column(column), options)
        case 3 if column in ("n", "m"):
            return Comparison(op, Column("n"), Column("m"))
    return Comparison(op, Column(column), Literal(pick.choice(values)))


def _expression(pick: random.Random, depth: int = 0) -> Expression:
    if depth > 2 or pick.random() < 0.3:
        return _atoms(pick)
    match pick.randrange(3):
        case 0:
            return And((_expression(pick, depth + 1), _expression(pick, depth + 1)))
        case 1:
            return Or((_expression(pick, depth + 1), _expression(pick, depth + 1)))
    return Not(_expression(pick, depth + 1))


@pytest.fixture(scope="module")
def files(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Location, list[AddFile], list[dict[str, object]]]:
    root = tmp_path_factory.mktemp("arrow-matching")
    pick = random.Random(5)
    rows = [
        {
            "n": pick.choice([0, 1, 2, 3, None]),
            "m": pick.choice([0, 1, 2, 3, None]),
            "s": pick.choice(["a", "b", "c", None]),
            "b": pick.choice([True, False, None]),
            "d": 1.0,
        }
        for _ in range(200)
    ]
    types = pa.schema(
        [
            ("n", pa.int32()),
            ("m", pa.int64()),
            ("s", pa.string()),
            ("b", pa.bool_()),
            ("d", pa.float64()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=types), Path(root) / "part-0.parquet")
    add = AddFile("part-0.parquet", {}, (Path(root) / "part-0.parquet").stat().st_size, 0, True)
    return Location.of(str(root)), [add], rows


@pytest.mark.parametrize("case", range(150))
def test_pyarrow_evaluation_matches_row_evaluation(
    files: tuple[Location, list[AddFile], list[dict[str, object]]], case: int
) -> None:
    location, adds, rows = files
    predicate = _expression(random.Random(case))
    found = driver_matches(location, adds, predicate, SCHEMA, column_mapping="none")
    assert found is not None, predicate
    oracle = _oracle(predicate)
    expected = [
        i
        for i, row in enumerate(rows)
        if evaluate_on_row(oracle, _with_arithmetic(row), schema=SCHEMA)
    ]
    assert found[0].matched.tolist() == expected, predicate
    assert found[0].live == len(rows)


@pytest.mark.parametrize(
    "predicate",
    [
        Comparison(ComparisonOp.GT, Column("d"), Literal(1.5)),
        Comparison(ComparisonOp.EQ, Column("s"), Literal(1)),
        Comparison(ComparisonOp.EQ, Column("n"), Literal("1")),
        Comparison(ComparisonOp.EQ, Column("n"), Literal(2**70)),
        Comparison(ComparisonOp.EQ, Column("s"), Literal("a\\\\b")),
        Opaque("length(s) = 1"),
        # A zero divisor (NULL or an error, by ANSI mode), a step past BIGINT, a remainder
        # of a string or by a decimal: Spark's to decide.
        Comparison(
            ComparisonOp.EQ, Arithmetic(ArithmeticOp.REMAINDER, Column("n"), Literal(0)), Literal(0)
        ),
        Comparison(
            ComparisonOp.GT,
            Arithmetic(ArithmeticOp.MULTIPLY, Column("m"), Literal(2**62)),
            Literal(0),
        ),
        Comparison(
            ComparisonOp.EQ, Arithmetic(ArithmeticOp.REMAINDER, Column("s"), Literal(2)), Literal(0)
        ),
        Comparison(
            ComparisonOp.EQ,
            Arithmetic(ArithmeticOp.REMAINDER, Column("n"), Literal(Decimal("1.5"))),
            Literal(0),
        ),
        Comparison(
            ComparisonOp.EQ, Column("n"), Arithmetic(ArithmeticOp.REMAINDER, Literal(5), Literal(2))
        ),
        And((Comparison(ComparisonOp.EQ, Column("n"), Literal(1)), Opaque("rand() < 0.5"))),
        TRUE,
        FALSE,
    ],
)
def test_what_pyarrow_cannot_evaluate_exactly_is_left_to_spark(
    files: tuple[Location, list[AddFile], list[dict[str, object]]], predicate: Expression
) -> None:
    location, adds, _ = files
    assert driver_matches(location, adds, predicate, SCHEMA, column_mapping="none") is None


def test_kept_values_are_the_files_columns_at_the_matched_rows(
    tmp_path: Path,
) -> None:
    # Three files of 10 rows; the condition reads n (INT, stored as int32) and s.
    adds = []
    for k in range(3):
        rows = [
            {"n": (i * 7 + k) % 5, "m": i, "s": f"s{i % 3}", "b": None, "d": 1.0} for i in range(10)
        ]
        path = tmp_path / f"part-{k}.parquet"
        table = pa.Table.from_pylist(rows).cast(
            pa.schema(
                [
                    ("n", pa.int32()),
                    ("m", pa.int64()),
                    ("s", pa.string()),
                    ("b", pa.bool_()),
                    ("d", pa.float64()),
                ]
            )
        )
        pq.write_table(table, path)
        adds.append(AddFile(path.name, {}, path.stat().st_size, 0, True))
    location = Location.of(str(tmp_path))
    predicate = And(
        (
            Comparison(ComparisonOp.LT, Column("n"), Literal(2)),
            Comparison(ComparisonOp.NE, Column("s"), Literal("s1")),
        )
    )
    plain = driver_matches(location, adds, predicate, SCHEMA, column_mapping="none")
    assert plain is not None and all(r.values is None for r in plain.values())

    found = driver_matches(
        location, adds, predicate, SCHEMA, column_mapping="none", keep_values=100
    )
    assert found is not None
    for i, rows in found.items():
        assert rows.matched.tolist() == plain[i].matched.tolist()
        stored = pq.read_table(tmp_path / adds[i].path, columns=["n", "s"])
        assert rows.values is not None
        assert sorted(rows.values.column_names) == ["n", "s"]
        expected = stored.select(rows.values.column_names).take(pa.array(rows.matched))
        assert rows.values.equals(expected)
        assert rows.values.schema.field("n").type == pa.int32()

    # A budget smaller than all the matched rows: files keep theirs whole or not at all.
    counts = sorted(len(r.matched) for r in found.values())
    assert counts[0] > 0
    budget = counts[0] + counts[1]
    some = driver_matches(
        location, adds, predicate, SCHEMA, column_mapping="none", keep_values=budget
    )
    assert some is not None
    kept = [len(r.matched) for r in some.values() if r.values is not None]
    assert sum(kept) <= budget and len(kept) < len(adds)
    for r in some.values():
        assert r.values is None or r.values.num_rows == len(r.matched)
