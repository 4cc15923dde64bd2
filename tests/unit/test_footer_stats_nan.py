"""Data files pyarrow writes: no footer bounds for floating point leaves, exact log statistics.

pyarrow's footer bounds skip NaN, while Spark orders NaN above every number; a bound that
ignores a NaN would let a scan skip a row group holding rows ``d > 100`` matches. The log's
statistics of those leaves come from the data as it was written.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import assume, given
from hypothesis import strategies as st

from deltatx.kernel.schema import PrimitiveType, StructField, StructType
from deltatx.spark.data_file_writer import (
    DataFileWriter,
    dictionary_columns,
    footer_statistics_columns,
)
from deltatx.spark.stats import FLOAT_STATS_KEY, file_stats_json

NAN = math.nan


def _double(name: str) -> StructField:
    return StructField(name, PrimitiveType("double"))


def _write(path: Path, *tables: pa.Table) -> pq.FileMetaData:
    writer = DataFileWriter(str(path), tables[0].schema, first=tables[0])
    for table in tables:
        writer.write_table(table)
    writer.close()
    return pq.read_metadata(path)


def _footer_stats(metadata: pq.FileMetaData) -> dict[str, Any]:
    group = metadata.row_group(0)
    return {
        group.column(c).path_in_schema: group.column(c).statistics for c in range(group.num_columns)
    }


def test_a_nan_leaves_a_column_without_bounds(tmp_path: Path) -> None:
    table = pa.table({"d": [1.5, NAN, 3.0], "e": [1.0, 2.0, None]})
    schema = StructType((_double("d"), _double("e")))
    stats = file_stats_json(_write(tmp_path / "f.parquet", table), schema)
    assert stats == (
        '{"numRecords":3,"minValues":{"e":1.0},"maxValues":{"e":2.0},"nullCount":{"d":0,"e":1}}'
    )


def test_floating_point_and_container_leaves_get_no_footer_statistics(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("i", pa.int64()),
            ("d", pa.float64()),
            ("f", pa.float32()),
            ("s", pa.struct([("x", pa.string()), ("y", pa.float64())])),
            ("l", pa.list_(pa.int32())),
        ]
    )
    assert footer_statistics_columns(schema) == ["i", "s.x"]
    table = pa.table(
        {
            "i": [1, 2, 3],
            "d": [1.5, NAN, 3.0],
            "f": [NAN, 0.5, 1.0],
            "s": [{"x": "a", "y": 1.0}, {"x": "b", "y": NAN}, None],
            "l": [[1], [], None],
        },
        schema=schema,
    )
    metadata = _write(tmp_path / "f.parquet", table)
    footer = _footer_stats(metadata)
    assert (footer["i"].min, footer["i"].max) == (1, 3)
    assert (footer["s.x"].min, footer["s.x"].max) == ("a", "b")
    for leaf in ("d", "f", "s.y", "l.list.element"):
        assert footer[leaf] is None or not footer[leaf].has_min_max, leaf
    assert metadata.row_group(0).column(0).compression == "SNAPPY"
    assert pq.read_table(tmp_path / "f.parquet").column("i").to_pylist() == [1, 2, 3]
    delta = StructType(
        (
            StructField("i", PrimitiveType("long")),
            _double("d"),
            StructField("f", PrimitiveType("float")),
            StructField("s", StructType((StructField("x", PrimitiveType("string")), _double("y")))),
        )
    )
    stats = json.loads(file_stats_json(metadata, delta))
    assert stats["minValues"] == {"i": 1, "s": {"x": "a"}}
    # A NULL struct makes its fields NULL, as a Parquet leaf counts them.
    assert stats["nullCount"] == {"i": 0, "d": 0, "f": 0, "s": {"x": 1, "y": 1}}


def test_a_dotted_name_shared_with_a_float_field_gets_no_footer_statistics() -> None:
    schema = pa.schema([("a.b", pa.int64()), ("a", pa.struct([("b", pa.float64())]))])
    assert footer_statistics_columns(schema) == []


def test_statistics_merge_across_tables_and_keep_zero_signs(tmp_path: Path) -> None:
    first = pa.table(
        {"d": pa.array([None, 0.0, 2.0]), "f": pa.array([1.0, 2.0, None], pa.float32())}
    )
    second = pa.table({"d": pa.array([-0.0, None]), "f": pa.array([math.inf, 0.25], pa.float32())})
    schema = StructType((_double("d"), StructField("f", PrimitiveType("float"))))
    stats = json.loads(file_stats_json(_write(tmp_path / "f.parquet", first, second), schema))
    # An infinity leaves no bounds; a zero minimum is -0.0, as a footer gives it.
    assert stats["minValues"] == {"d": -0.0} and math.copysign(1, stats["minValues"]["d"]) < 0
    assert stats["maxValues"] == {"d": 2.0}
    assert stats["nullCount"] == {"d": 2, "f": 1}


def test_a_nan_in_a_later_table_still_removes_the_bounds(tmp_path: Path) -> None:
    tables = [pa.table({"d": [1.0, 2.0]}), pa.table({"d": [NAN]}), pa.table({"d": [None, 5.0]})]
    stats = json.loads(
        file_stats_json(_write(tmp_path / "f.parquet", *tables), StructType((_double("d"),)))
    )
    assert (stats["minValues"], stats["maxValues"], stats["nullCount"]) == ({}, {}, {"d": 1})


def test_an_all_null_column_counts_its_nulls(tmp_path: Path) -> None:
    table = pa.table({"d": pa.array([None, None], pa.float64())})
    schema = StructType((_double("d"),))
    stats = json.loads(file_stats_json(_write(tmp_path / "f.parquet", table), schema))
    assert (stats["minValues"], stats["nullCount"]) == ({}, {"d": 2})


def test_an_unreadable_entry_leaves_the_float_columns_without_statistics(tmp_path: Path) -> None:
    path = str(tmp_path / "f.parquet")
    writer = pq.ParquetWriter(path, pa.schema([("d", pa.float64())]), write_statistics=False)
    writer.write_table(pa.table({"d": [1.0]}))
    writer.add_key_value_metadata({FLOAT_STATS_KEY: "not json"})
    writer.close()
    stats = json.loads(file_stats_json(pq.read_metadata(path), StructType((_double("d"),))))
    assert stats == {"numRecords": 1, "minValues": {}, "maxValues": {}, "nullCount": {}}


_FLOATS = st.one_of(
    st.none(),
    st.floats(allow_nan=False, width=32),
    st.sampled_from([0.0, -0.0]),
)


@given(
    batches=st.lists(st.lists(_FLOATS, max_size=8), min_size=1, max_size=4),
    row_group_rows=st.integers(min_value=1, max_value=5),
)
def test_statistics_from_the_data_equal_footer_statistics_on_nan_free_data(
    tmp_path_factory: Any, batches: list[list[float | None]], row_group_rows: int
) -> None:
    folder = tmp_path_factory.mktemp("roundtrip")
    schema = StructType(
        (_double("d"), StructField("s", StructType((StructField("f", PrimitiveType("float")),))))
    )

    def table(values: list[float | None]) -> pa.Table:
        floats = pa.array(values, pa.float32())
        parents = pa.array([v is None and i % 2 == 0 for i, v in enumerate(values)], pa.bool_())
        nested = pa.StructArray.from_arrays([floats], names=["f"], mask=parents)
        return pa.table({"d": pa.array(values, pa.float64()), "s": nested})

    assume(any(batches))
    tables = [table(values) for values in batches]
    ours = file_stats_json(_write(folder / "ours.parquet", *tables), schema)
    # pyarrow's own footer statistics are right when no NaN is in the data.
    plain = folder / "plain.parquet"
    pq.write_table(pa.concat_tables(tables), plain, row_group_size=row_group_rows)
    assert ours == file_stats_json(pq.read_metadata(plain), schema)


def test_columns_of_mostly_distinct_values_are_not_dictionary_encoded(tmp_path: Path) -> None:
    n = 10_000
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": pa.array([f"k{i % 10}" for i in range(n)]),
            "s": pa.array([f"s{i}" for i in range(n)]),
            "v": pa.array([i % 3 * 0.5 for i in range(n)]),
        }
    )
    assert dictionary_columns(table) == ["k", "v"]
    assert dictionary_columns(table.slice(0, 0)) is True
    assert dictionary_columns(pa.table({"a": [[1]], "b": [1]})) is True
    meta = _write(tmp_path / "f.parquet", table)
    group = meta.row_group(0)
    dictionary = {
        group.column(i).path_in_schema: group.column(i).has_dictionary_page
        for i in range(meta.num_columns)
    }
    assert dictionary == {"id": False, "k": True, "s": False, "v": True}


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(-50, 50))),
        min_size=1,
        max_size=300,
    ),
    st.integers(1, 299),
)
def test_a_file_holds_exactly_its_rows_whichever_columns_get_a_dictionary(
    rows: list[tuple[int, int | None]], split: int
) -> None:
    # The choice is made on the first table; later tables may have any other spread.
    import tempfile

    table = pa.table(
        {
            "few": pa.array([r[0] for r in rows], pa.int32()),
            "many": pa.array([r[1] for r in rows], pa.int64()),
            "text": pa.array([None if r[1] is None else str(r[1]) for r in rows]),
        }
    )
    parts = [table.slice(0, split), table.slice(split)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "f.parquet"
        _write(path, *[p for p in parts if p.num_rows])
        assert pq.read_table(path).equals(table)
