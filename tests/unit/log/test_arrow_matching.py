"""The driver's pyarrow evaluation of a condition agrees with the kernel's row evaluation."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltatx.kernel.actions import AddFile
from deltatx.kernel.expressions import (
    FALSE,
    TRUE,
    And,
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


def _atoms(pick: random.Random) -> Expression:
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
    expected = [i for i, row in enumerate(rows) if evaluate_on_row(predicate, row, schema=SCHEMA)]
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
