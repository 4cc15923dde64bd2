"""Reads stay inside the table, old versions say when VACUUM took their files, void columns."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidTableError, VersionNotReadableError
from deltatx.kernel.actions import AddFile, CommitInfo, Metadata
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.log_paths import commit_name


def _commit(dt: DeltaTable, *actions: object) -> None:
    version = dt.version() + 1
    data = serialize_commit([CommitInfo(timestamp=int(time.time() * 1000)), *actions])  # type: ignore[list-item]
    dt.log.store.write(f"{dt.log.log_path}/{commit_name(version)}", data)


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.parquet",
        "%2e%2e/outside/secret.parquet",
        "%2E%2E%2Foutside%2Fsecret.parquet",
        "sub/../../outside/secret.parquet",
    ],
)
def test_a_relative_path_out_of_the_root_is_never_read(
    spark: SparkSession, tmp_path: Path, path: str
) -> None:
    (tmp_path / "outside").mkdir()
    pq.write_table(
        pa.table({"id": pa.array([666], pa.int64())}), tmp_path / "outside/secret.parquet"
    )
    dt = DeltaTable.create(spark, str(tmp_path / "t"), schema="id BIGINT")
    _commit(
        dt, AddFile(path=path, partition_values={}, size=1, modification_time=1, data_change=True)
    )
    with pytest.raises(InvalidTableError, match="outside the table root"):
        dt.to_df().collect()


def test_an_absolute_path_outside_the_root_is_still_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "f.parquet"
    pq.write_table(pa.table({"id": pa.array([7], pa.int64())}), target)
    dt = DeltaTable.create(spark, str(tmp_path / "t"), schema="id BIGINT")
    _commit(
        dt,
        AddFile(
            path=f"file://{target}",
            partition_values={},
            size=1,
            modification_time=1,
            data_change=True,
        ),
    )
    assert [r.id for r in dt.to_df().collect()] == [7]


def test_time_travel_to_a_vacuumed_version_says_so(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltatx.write(spark.range(3), path)
    dt = DeltaTable.for_path(spark, path)
    first = dt.version()
    deltatx.write(spark.range(5), path, mode="overwrite")
    time.sleep(0.01)
    dt.vacuum(retention_hours=0, enforce_retention=False)
    with pytest.raises(VersionNotReadableError, match="VACUUM") as info:
        dt.to_df(version=first)
    assert info.value.oldest_readable_version == dt.version() - 1
    assert dt.to_df(version=dt.version()).count() == 5


def test_a_void_column_reads_as_null(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltatx.write(spark.range(2), path)
    dt = DeltaTable.for_path(spark, path)
    schema = json.loads(dt.snapshot().metadata.schema_string)
    schema["fields"].append({"name": "n", "type": "void", "nullable": True, "metadata": {}})
    md = dt.snapshot().metadata
    _commit(dt, Metadata(id=md.id, schema_string=json.dumps(schema), created_time=md.created_time))
    assert sorted(tuple(r) for r in dt.to_df().collect()) == [(0, None), (1, None)]
