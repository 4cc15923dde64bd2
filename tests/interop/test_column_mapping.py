"""delta-rs and deltatx on column-mapped tables (name and id modes), both directions.

delta-rs 1.x reads column-mapped tables through its DataFusion engine (its plain pyarrow
reader refuses the feature) and appends to them under physical names.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder, write_deltalake
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable

SCHEMA = "id BIGINT, v STRING, s STRUCT<a: INT, b: STRING>, day STRING"
ROWS = [(1, "a", (1, "x"), "d1"), (2, "b", (2, "y"), "d2"), (3, "c", None, "d1")]


def _delta_rs_rows(path: str) -> list[tuple[object, ...]]:
    reader = QueryBuilder().register("t", RsTable(path)).execute("SELECT * FROM t")
    table = pa.table(reader.read_all())
    return sorted(tuple(r.values()) for r in table.to_pylist())


def _our_rows(spark: SparkSession, path: str) -> list[tuple[object, ...]]:
    df = DeltaTable.for_path(spark, path).to_df()
    return sorted(tuple(r.asDict(recursive=True).values()) for r in df.collect())


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_tables_round_trip_between_deltatx_and_delta_rs(
    spark: SparkSession, table_dir: Path, mode: str
) -> None:
    path = str(table_dir)
    deltatx.write(
        spark.createDataFrame(ROWS, SCHEMA),
        path,
        partition_by=["day"],
        properties={"delta.columnMapping.mode": mode, "delta.enableDeletionVectors": "false"},
    )
    dt = DeltaTable.for_path(spark, path)
    dt.rename_column("v", "label")
    dt.drop_columns("s")
    dt.delete("id = 2")
    # delta-rs sees the renamed column, not the dropped one, and the same rows.
    assert _delta_rs_rows(path) == _our_rows(spark, path) == [(1, "a", "d1"), (3, "c", "d1")]
    assert [f.name for f in RsTable(path).schema().fields] == ["id", "label", "day"]

    # delta-rs appends under the physical names; deltatx reads the rows under logical ones.
    write_deltalake(path, pa.table({"id": [9], "label": ["z"], "day": ["d3"]}), mode="append")
    assert _our_rows(spark, path) == [(1, "a", "d1"), (3, "c", "d1"), (9, "z", "d3")]
    dt.rename_column("label", "tag")
    assert {r.tag for r in dt.to_df().filter("day = 'd3'").collect()} == {"z"}
    assert _delta_rs_rows(path) == _our_rows(spark, path)
