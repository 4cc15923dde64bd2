"""The change data feed across engines: delta-rs's ``load_cdf`` and deltatx agree, both ways."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.kernel.actions import AddCDCFile

COLUMNS = ["id", "v", "part", "_change_type", "_commit_version", "_commit_timestamp"]
SCHEMA = "id BIGINT, v STRING, part STRING"


def _rs_feed(path: str) -> list[tuple[object, ...]]:
    table = pa.table(RsTable(path).load_cdf(0).read_all())
    rows = zip(*(table.column(c).to_pylist() for c in COLUMNS[:-1]), strict=True)
    millis = [int(t.timestamp() * 1000) for t in table.column("_commit_timestamp").to_pylist()]
    return sorted((*r, ms) for r, ms in zip(rows, millis, strict=True))


def _deltatx_feed(dt: DeltaTable) -> list[tuple[object, ...]]:
    rows = dt.changes(0).select(*COLUMNS).collect()
    return sorted((*tuple(r)[:-1], int(r[-1].timestamp() * 1000)) for r in rows)


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["copy-on-write", "dv"])
def test_delta_rs_reads_the_feed_deltatx_writes(
    spark: SparkSession, table_dir: Path, deletion_vectors: bool
) -> None:
    path = str(table_dir)
    df = spark.createDataFrame([(i, f"v{i}", "a" if i % 2 else "b") for i in range(6)], SCHEMA)
    properties = {
        "delta.enableChangeDataFeed": "true",
        "delta.enableDeletionVectors": str(deletion_vectors).lower(),
    }
    deltatx.write(df, path, partition_by=["part"], properties=properties)
    dt = DeltaTable.for_path(spark, path)
    dt.update("id < 2", {"v": "'u'"})
    dt.delete("id = 3")
    ours = _deltatx_feed(dt)
    assert {r[3] for r in ours} == {"insert", "update_preimage", "update_postimage", "delete"}
    assert _rs_feed(path) == ours


def test_deltatx_reads_the_feed_delta_rs_writes(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "v": [f"v{i}" for i in range(6)],
            "part": ["a" if i % 2 else "b" for i in range(6)],
        }
    )
    write_deltalake(
        path, data, partition_by=["part"], configuration={"delta.enableChangeDataFeed": "true"}
    )
    RsTable(path).update(predicate="id < 2", updates={"v": "'u'"})
    RsTable(path).delete("id = 3")
    source = pa.table({"id": pa.array([1, 10], pa.int64()), "v": ["m", "n"], "part": ["a", "b"]})
    (
        RsTable(path)
        .merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    dt = DeltaTable.for_path(spark, path)
    # delta-rs recorded its DML in change data files: deltatx reads those, not the data files.
    assert any(isinstance(a, AddCDCFile) for a in dt.log.read_commit(1))
    assert _deltatx_feed(dt) == _rs_feed(path)
