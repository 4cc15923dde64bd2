"""The compiled file predicate answers exactly as file_may_match does."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltatx.kernel.actions import AddFile
from deltatx.kernel.evaluation import file_may_match
from deltatx.kernel.expressions import (
    And,
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    Literal,
    Or,
)
from deltatx.kernel.file_predicate import FilePredicate
from deltatx.kernel.schema import PrimitiveType, StructField, StructType

from ..examples import examples
from .test_evaluation import (
    _literal_for,
    cmp,
    file,
    make_file,
    predicates,
    scenario,
    table_and_rows,
)


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(), st.lists(scenario(), max_size=3))
def test_compiled_predicate_agrees_with_file_may_match(
    case: tuple[StructType, list[dict[str, Any]], Expression],
    more: list[tuple[StructType, list[dict[str, Any]], Expression]],
) -> None:
    """A predicate compiled once (conflict checks) answers exactly as file_may_match, also
    for an OR of several predicates (a read set), whose partition equalities share a lookup."""
    schema, rows, pred = case
    preds = [pred, *(p for s, _, p in more if s == schema)]
    combined = Or(tuple(preds)) if len(preds) > 1 else pred
    compiled = FilePredicate(combined, schema=schema, partition_columns=["p"])
    for f in (make_file(rows), make_file(rows, with_stats=False)):
        expected = file_may_match(combined, f, schema=schema, partition_columns=["p"])
        assert compiled.may_match(f) == expected


def _variant(f: AddFile, how: int) -> AddFile:
    """The same file with statistics as other writers spell them."""
    if how == 0 or not f.stats:
        return f
    stats = json.loads(f.stats)
    if how == 1:  # upper-case names (matched in any case), integers written as floats
        for key in ("minValues", "maxValues", "nullCount"):
            stats[key] = {
                k.upper(): float(v) if isinstance(v, int) and not isinstance(v, bool) else v
                for k, v in stats[key].items()
            }
    elif how == 2:  # counts that say nothing, no numRecords
        stats["nullCount"] = {k: True for k in stats["nullCount"]}
        del stats["numRecords"]
    else:
        return replace(f, stats="{not json", partition_values={"P": "x"})
    return replace(f, stats=json.dumps(stats))


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), table_and_rows(), st.lists(table_and_rows(), max_size=6))
def test_batch_agrees_with_file_may_match_per_file(
    data: st.DataObject,
    first: tuple[StructType, list[dict[str, Any]]],
    others: list[tuple[StructType, list[dict[str, Any]]]],
) -> None:
    """Files asked all at once (a winning commit's adds, column by column) get exactly the
    answers file_may_match gives each alone, whatever their statistics look like."""
    schema = first[0]
    groups = [first[1], *(rows for s, rows in others if s == schema)]
    files = [
        _variant(
            make_file(rows, with_stats=data.draw(st.integers(0, 3)) > 0),
            data.draw(st.sampled_from([0, 0, 0, 1, 2, 3])),
        )
        for rows in groups
    ]
    if data.draw(st.booleans()):
        files.insert(len(files) // 2, make_file([]))  # no rows: never matches
    preds = data.draw(st.lists(predicates(schema), min_size=1, max_size=4))
    for pred in (*preds, Or(tuple(preds))):
        compiled = FilePredicate(pred, schema=schema, partition_columns=["p"])
        expected = [file_may_match(pred, f, schema=schema, partition_columns=["p"]) for f in files]
        assert compiled.matches(files) == expected
        first_hit = compiled.first_match(files)
        assert first_hit == (expected.index(True) if True in expected else None)


@pytest.mark.parametrize(
    ("values", "partition", "expected"),
    [
        (["a", "b"], "b", True),
        (["a", "b"], "c", False),
        (["a"], None, False),
        ([1, 2], "2", True),
        ([1, 2], "02", True),
        ([1, 2], "3", False),
        ([1.0, 7], "1", True),
    ],
)
def test_or_of_partition_equalities(
    values: list[Any], partition: str | None, expected: bool
) -> None:
    kind = "string" if isinstance(values[0], str) else "long"
    schema = StructType(
        (StructField("p", PrimitiveType(kind)), StructField("x", PrimitiveType("long")))
    )
    pred = Or(tuple(cmp("=", "p", v) for v in values))
    f = file({"p": partition}, {"numRecords": 3})
    compiled = FilePredicate(pred, schema=schema, partition_columns=["p"])
    assert compiled.may_match(f) is expected
    assert file_may_match(pred, f, schema=schema, partition_columns=["p"]) is expected


@pytest.mark.parametrize(
    ("stats", "literal", "expected"),
    [
        # Exact digits: a binary float would round 0.105 and wrongly rule the file out.
        (
            '{"numRecords":1,"minValues":{"m":0.105},"maxValues":{"m":0.105}}',
            Decimal("0.105"),
            True,
        ),
        ('{"numRecords":1,"minValues":{"i":1e3},"maxValues":{"i":2e3}}', 1500, True),
        ('{"numRecords":1,"minValues":{"i":1e3},"maxValues":{"i":2e3}}', 2500, False),
        # Tokens only the standard parser reads still give usable statistics.
        ('{"numRecords":1,"minValues":{"f":NaN,"i":5},"maxValues":{"i":5}}', 6, False),
    ],
)
def test_statistics_are_read_exactly(stats: str, literal: Any, expected: bool) -> None:
    schema = StructType(
        (
            StructField("i", PrimitiveType("long")),
            StructField("f", PrimitiveType("double")),
            StructField("m", PrimitiveType("decimal(10,3)")),
        )
    )
    column = "m" if isinstance(literal, Decimal) else "i"
    pred = Comparison(ComparisonOp.EQ, Column(column), Literal(literal))
    f = AddFile(
        path="f.parquet",
        partition_values={},
        size=1,
        modification_time=0,
        data_change=True,
        stats=stats,
    )
    assert FilePredicate(pred, schema=schema, partition_columns=[]).may_match(f) is expected
    assert file_may_match(pred, f, schema=schema, partition_columns=[]) is expected


@st.composite
def _range_read_set(draw: st.DrawFn, schema: StructType) -> Expression:
    """An OR of ranges on ordered columns (``c >= a AND c < b`` and the like), as read sets of
    id-range writers are, with some other predicates mixed in."""

    types = {f.name: f.type.name for f in schema.fields if isinstance(f.type, PrimitiveType)}
    children: list[Expression] = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        if draw(st.integers(min_value=0, max_value=4)) == 0:
            children.append(draw(predicates(schema, depth=1)))
            continue
        col = draw(st.sampled_from(["i", "s", "d", "p"]))
        low = cmp(draw(st.sampled_from([">=", ">"])), col, _literal_for(draw, types[col]))
        high = cmp(draw(st.sampled_from(["<", "<="])), col, _literal_for(draw, types[col]))
        pair = (low, high) if draw(st.booleans()) else (high, low)
        if draw(st.booleans()):
            pair = tuple(Comparison(c.op, c.right, c.left) for c in pair)  # type: ignore[assignment]
        children.append(And(pair))
    return Or(tuple(children)) if len(children) > 1 else children[0]


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), table_and_rows(), st.lists(table_and_rows(), max_size=6))
def test_ranges_searched_at_once_agree_with_file_may_match(
    data: st.DataObject,
    first: tuple[StructType, list[dict[str, Any]]],
    others: list[tuple[StructType, list[dict[str, Any]]]],
) -> None:
    """An OR of ranges on one column, answered by one search per file, is file_may_match."""
    schema = first[0]
    groups = [first[1], *(rows for s, rows in others if s == schema)]
    files = [make_file(rows, with_stats=data.draw(st.integers(0, 4)) > 0) for rows in groups]
    pred = data.draw(_range_read_set(schema))
    compiled = FilePredicate(pred, schema=schema, partition_columns=["p"])
    expected = [file_may_match(pred, f, schema=schema, partition_columns=["p"]) for f in files]
    assert compiled.matches(files) == expected


_IDS = StructType(
    (StructField("p", PrimitiveType("long")), StructField("id", PrimitiveType("long")))
)


def _ids_file(lo: int, hi: int) -> AddFile:
    stats = {"numRecords": 2, "minValues": {"id": lo}, "maxValues": {"id": hi}}
    return AddFile(
        path=f"f-{lo}-{hi}.parquet",
        partition_values={"p": "1"},
        size=1,
        modification_time=0,
        data_change=True,
        stats=json.dumps(stats),
    )


def _id_range(lo: int, hi: int) -> Expression:
    return And((cmp(">=", "id", lo), cmp("<", "id", hi)))


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        # The batch's least lower and greatest upper bound rule out every file at once.
        (Or((_id_range(-50, -40), _id_range(500, 600))), [False, False, False]),
        (cmp("<", "id", 0), [False, False, False]),
        (cmp(">", "id", 300), [False, False, False]),
        (cmp("=", "id", 400), [False, False, False]),
        # The extremes let the batch through, and the per-file test finds the one file: its
        # neighbours hold the extremes but not the rows.
        (Or((_id_range(-50, -40), _id_range(150, 160))), [False, True, False]),
        (cmp("=", "id", 150), [False, True, False]),
        (cmp("<", "id", 120), [True, False, False]),
        (cmp(">=", "id", 190), [False, True, True]),
        # Between the files: the extremes pass, no file does.
        (cmp("=", "id", 120), [False, False, False]),
    ],
)
def test_a_batch_is_ruled_out_by_its_extreme_bounds_only_where_every_file_is(
    pred: Expression, expected: list[bool]
) -> None:
    files = [_ids_file(0, 100), _ids_file(140, 190), _ids_file(200, 300)]
    compiled = FilePredicate(pred, schema=_IDS, partition_columns=["p"])
    per_file = [file_may_match(pred, f, schema=_IDS, partition_columns=["p"]) for f in files]
    assert compiled.matches(files) == per_file == expected


def test_predicates_of_one_table_share_its_column_reader() -> None:
    # Keyed by the schema object: snapshots of one table hold the same one.
    first = FilePredicate(cmp("=", "id", 1), schema=_IDS, partition_columns=["p"])
    second = FilePredicate(cmp("<", "id", 5), schema=_IDS, partition_columns=["p"])
    assert first._reader is second._reader
    equal_schema = StructType(tuple(_IDS.fields))
    other = FilePredicate(cmp("=", "id", 1), schema=equal_schema, partition_columns=["p"])
    assert other._reader is not first._reader
    unpartitioned = FilePredicate(cmp("=", "id", 1), schema=_IDS, partition_columns=[])
    assert unpartitioned._reader is not first._reader
    assert unpartitioned.may_match(_ids_file(0, 3)) and not first.may_match(_ids_file(2, 3))


def test_the_shared_readers_stay_few() -> None:
    from deltatx.kernel import file_predicate

    schemas = [StructType(tuple(_IDS.fields)) for _ in range(3 * file_predicate._MAX_TABLES)]
    for schema in schemas:
        FilePredicate(cmp("=", "id", 1), schema=schema, partition_columns=["p"])
    assert len(file_predicate._TABLES) <= file_predicate._MAX_TABLES
