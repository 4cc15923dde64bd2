"""The change data feed across deltatx and delta-spark: each reads the feed the other writes.

``_commit_timestamp`` is left out of the comparison: delta-spark reports a commit file's
modification time, deltatx the commit's own timestamp (as its history and delta-rs do); they
differ by the milliseconds between the two.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

import deltatx
from deltatx import DeltaTable

from .engine import DeltaSpark

COLUMNS = ["id", "date", "v", "_change_type", "_commit_version"]
MODES = [pytest.param("false", id="copy-on-write"), pytest.param("true", id="dv")]


def _events(spark: SparkSession, start: int, n: int) -> DataFrame:
    # Nullable columns: deltatx does not yet list the invariants feature that delta-spark
    # requires of a table-features protocol with a NOT NULL column.
    rows = [(i, "d1" if i % 2 == 0 else "d2", i * 1.5) for i in range(start, start + n)]
    return spark.createDataFrame(rows, "id BIGINT, date STRING, v DOUBLE")


def _feed(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in rows)


def _ours(spark: SparkSession, path: str) -> list[tuple[Any, ...]]:
    df = DeltaTable.for_path(spark, path).changes(0)
    return _feed([r.asDict() for r in df.collect()])


def _theirs(delta_spark: DeltaSpark, path: str) -> list[tuple[Any, ...]]:
    rows: list[dict[str, Any]] = delta_spark.exec(
        "r = spark.read.format('delta').option('readChangeFeed', 'true')"
        ".option('startingVersion', 0).load(args['p'])\n"
        "result = [x.asDict() for x in r.collect()]",
        p=path,
    )
    return _feed(rows)


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("dv", MODES)
def test_deltatx_reads_the_feed_delta_spark_writes(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path, dv: str
) -> None:
    path = str(tmp_path / "t")
    t = f"delta.`{path}`"
    for statement in [
        f"CREATE TABLE {t} (id BIGINT, date STRING, v DOUBLE) USING DELTA PARTITIONED BY (date) "
        f"TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
        f"'delta.enableDeletionVectors' = '{dv}')",
        f"INSERT INTO {t} SELECT id, IF(id % 2 = 0, 'd1', 'd2'), id * 1.5 FROM range(0, 12, 1, 2)",
        f"UPDATE {t} SET v = -1 WHERE id < 3",
        f"DELETE FROM {t} WHERE id = 5",
        f"MERGE INTO {t} AS t USING (SELECT id, 'd1' AS date, 9.0 AS v FROM range(8, 14)) AS s "
        "ON t.id = s.id WHEN MATCHED AND t.id = 9 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
    ]:
        delta_spark.sql(statement)
    theirs = _theirs(delta_spark, path)
    assert {r[3] for r in theirs} == {"insert", "update_preimage", "update_postimage", "delete"}
    assert _ours(spark, path) == theirs


@pytest.mark.sample(every=2, offset=1)
@pytest.mark.parametrize("dv", MODES)
def test_delta_spark_reads_the_feed_deltatx_writes(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path, dv: str
) -> None:
    path = str(tmp_path / "t")
    properties = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": dv}
    deltatx.write(_events(spark, 0, 12), path, partition_by=["date"], properties=properties)
    dt = DeltaTable.for_path(spark, path)
    dt.update("id < 3", {"v": "-1.0"})
    dt.delete("id = 5")
    source = _events(spark, 8, 6)
    (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_delete("t.id = 9")
        .when_matched_update({"v": "s.v * 2"})
        .when_not_matched_insert_all()
        .execute()
    )
    ours = _ours(spark, path)
    assert {r[3] for r in ours} == {"insert", "update_preimage", "update_postimage", "delete"}
    assert _theirs(delta_spark, path) == ours
