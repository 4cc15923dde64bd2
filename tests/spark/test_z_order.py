"""OPTIMIZE ZORDER BY: quantile buckets, clustering of the output and its actions."""

from __future__ import annotations

import bisect
import json
import math
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.spark.commands.optimize import _with_buckets

_ROWS = 4000


_SPECIAL = [-math.inf, -1e300, -2.5e-8, -0.0, 5e-324, 0.1, 1 / 3, 1e20, math.inf]


@pytest.mark.parametrize("count", [0, 1, 2, 7, 100, 255, -1])
def test_bucket_counts_the_bounds_below_each_key(spark: SparkSession, count: int) -> None:
    rng = random.Random(count)
    # count -1: bounds that a decimal text must carry exactly (tiny, huge, infinite, -0.0).
    bounds = _SPECIAL if count < 0 else sorted({rng.uniform(-100.0, 100.0) for _ in range(count)})
    keys: list[float | None] = [rng.uniform(-120.0, 120.0) for _ in range(300)]
    keys += [*bounds, *_SPECIAL, 0.0, math.nextafter(0.1, 1.0), math.nan, None]
    frame = spark.createDataFrame([(i, k) for i, k in enumerate(keys)], "i INT, k DOUBLE")
    got = dict(_with_buckets(frame, ["k"], [bounds], ["b"]).select("i", "b").collect())

    def expected(key: float | None) -> int:
        if key is None:
            return 0
        if math.isnan(key):  # Spark orders NaN above every number
            return len(bounds)
        return bisect.bisect_left(bounds, key)

    assert got == {i: expected(k) for i, k in enumerate(keys)}


def _spread(files: list[pq.Table], column: str) -> float:
    """Mean width of the files' value ranges in ``column``, as a share of the whole range."""
    lows = [min(t.column(column).to_pylist()) for t in files]
    highs = [max(t.column(column).to_pylist()) for t in files]
    return (
        sum(h - lo for lo, h in zip(lows, highs, strict=True))
        / len(files)
        / (max(highs) - min(lows))
    )


def test_z_order_clusters_both_columns_and_keeps_rows(spark: SparkSession, table_dir: Path) -> None:
    # v is a permutation of id: the two columns are unrelated, so sorting by one alone would
    # leave every file spanning nearly the whole range of the other.
    data = spark.range(_ROWS).select(
        "id", ((F.col("id") * 7919) % _ROWS).cast("double").alias("v"), F.lit("x").alias("s")
    )
    deltatx.write(data.orderBy(F.rand(7)).repartition(8), str(table_dir))
    dt = DeltaTable.for_path(spark, str(table_dir))
    before = sorted(tuple(r) for r in dt.to_df().collect())
    old = dt.snapshot().add_files()
    size = sum(f.size for f in old)
    random_files = [pq.read_table(table_dir / f.path) for f in old]
    assert _spread(random_files, "id") > 0.9 and _spread(random_files, "v") > 0.9

    metrics = dt.optimize().execute_z_order_by("id", "v", target_size=size // 16)

    assert sorted(tuple(r) for r in dt.to_df().collect()) == before
    added = dt.snapshot().add_files()
    assert metrics.num_added_files == len(added) >= 8
    assert metrics.num_removed_files == len(old)
    tables = [pq.read_table(table_dir / f.path) for f in added]
    # 16 files over a 2-D Z-curve: each spans about a quarter of each column's range.
    assert _spread(tables, "id") < 0.5 and _spread(tables, "v") < 0.5
    for add, table in zip(added, tables, strict=True):
        assert add.data_change is False
        stats = json.loads(add.stats or "{}")
        assert stats["numRecords"] == table.num_rows
        for column in ("id", "v"):
            values = table.column(column).to_pylist()
            assert stats["minValues"][column] == min(values)
            assert stats["maxValues"][column] == max(values)
            assert stats["nullCount"][column] == 0
    commit = dt.log.read_commit(dt.version())
    assert all(getattr(a, "data_change", False) is False for a in commit)
