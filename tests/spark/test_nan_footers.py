"""A NaN is found by a filter, whichever way its file was written.

Spark orders NaN above every number and pushes ``v > x`` into the Parquet reader, which skips
a row group whose footer maximum is below ``x``; pyarrow leaves NaN out of that maximum.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.log.delta_log import DeltaLog

pytestmark = pytest.mark.spark


def test_a_nan_is_found_above_every_number_in_files_deltatx_writes(
    spark: SparkSession, tmp_path: Path
) -> None:
    frame = spark.createDataFrame([(1, 1.5), (2, float("nan")), (3, 3.0)], "id long, v double")
    written = {
        "deltatx.write": lambda p: deltatx.write(frame.coalesce(1), p),
        "format('delta')": lambda p: frame.coalesce(1).write.format("delta").save(p),
    }
    for door, write in written.items():
        path = str(tmp_path / door.replace("'", "").replace("(", "").replace(")", ""))
        write(path)
        files = [f"{path}/{f.path}" for f in DeltaLog.for_table(path).snapshot().add_files()]
        found = spark.read.parquet(*files).filter("v > 1e300").collect()
        assert [r.id for r in found] == [2], door
        table = DeltaTable.for_path(spark, path).to_df()
        assert [r.id for r in table.filter("v > 1e300").collect()] == [2], door
        assert sorted(r.id for r in table.filter("v < 2").collect()) == [1], door
