"""The change data feed: what DML records, and the three ways of reading it back.

One table per write path (deletion vectors and copy-on-write) goes through an insert, an
UPDATE, a DELETE, a MERGE (update, delete and insert clauses) and a whole-partition DELETE.
A small Python model of the table applies the same statements and says which change rows each
version must yield; the feed read back through ``dt.changes``, ``readChangeFeed`` and
``table_changes`` must match it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    ChangeDataNotRecordedError,
    SqlError,
    UnsupportedFeatureError,
    VersionNotReadableError,
)
from deltatx.kernel.actions import AddCDCFile
from deltatx.kernel.features import writer_features
from deltatx.spark.datasource.change_feed import read_changes

SCHEMA = "id BIGINT, v STRING, part STRING"
CDF = {"delta.enableChangeDataFeed": "true"}
Change = tuple[int, str, str, str, int]  # id, v, part, _change_type, _commit_version


@dataclass
class Model:
    """The table as plain Python, and the change rows each statement must record."""

    rows: dict[int, tuple[str, str]] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)

    def insert(self, version: int, new: dict[int, tuple[str, str]]) -> None:
        self.rows.update(new)
        self.changes += [(i, v, p, "insert", version) for i, (v, p) in new.items()]

    def update(self, version: int, ids: list[int], v: str) -> None:
        for i in ids:
            old, part = self.rows[i]
            self.changes.append((i, old, part, "update_preimage", version))
            self.changes.append((i, v, part, "update_postimage", version))
            self.rows[i] = (v, part)

    def delete(self, version: int, ids: list[int]) -> None:
        for i in ids:
            v, part = self.rows.pop(i)
            self.changes.append((i, v, part, "delete", version))


def feed(df: DataFrame) -> list[Change]:
    columns = ["id", "v", "part", "_change_type", "_commit_version"]
    return sorted(tuple(r) for r in df.select(*columns).collect())  # type: ignore[misc]


@dataclass
class Written:
    table: DeltaTable
    model: Model


def _build(spark: SparkSession, path: Path, *, dv: bool) -> Written:
    model = Model()
    first = {i: (f"v{i}", "a" if i % 2 else "b") for i in range(10)}
    df = spark.createDataFrame([(i, v, p) for i, (v, p) in first.items()], SCHEMA)
    properties = {**CDF, "delta.enableDeletionVectors": str(dv).lower()}
    deltatx.write(df, str(path), partition_by=["part"], properties=properties)
    model.insert(0, first)
    dt = DeltaTable.for_path(spark, str(path))

    dt.update("id < 3", {"v": "'upd'"})
    model.update(1, [0, 1, 2], "upd")

    dt.delete("id = 5")
    model.delete(2, [5])

    source = spark.createDataFrame([(1, "m1", "a"), (7, "del", "a"), (100, "new", "b")], SCHEMA)
    (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_delete("s.v = 'del'")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    model.delete(3, [7])
    model.update(3, [1], "m1")
    model.insert(3, {100: ("new", "b")})

    dt.delete("part = 'b'")  # whole files: no change file, the removes are the changes
    model.delete(4, [i for i, (_, p) in model.rows.items() if p == "b"])
    return Written(dt, model)


@pytest.fixture(scope="module", params=[True, False], ids=["dv", "copy-on-write"])
def written(
    request: pytest.FixtureRequest, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Written]:
    yield _build(spark, tmp_path_factory.mktemp("cdf") / "t", dv=bool(request.param))


def test_the_feed_records_every_row_each_statement_changed(written: Written) -> None:
    dt, model = written.table, written.model
    assert feed(dt.changes(0)) == sorted(model.changes)
    table_rows = sorted((r.id, r.v, r.part) for r in dt.to_df().collect())
    assert table_rows == sorted((i, v, p) for i, (v, p) in model.rows.items())


def test_dml_writes_change_files_and_pure_removes_do_not(written: Written) -> None:
    log = written.table.log
    for version in (1, 2, 3):
        cdc = [a for a in log.read_commit(version) if isinstance(a, AddCDCFile)]
        assert cdc, f"version {version} has no cdc action"
        for a in cdc:
            assert a.path.startswith("_change_data/part=")
            assert a.data_change is False
            assert a.partition_values["part"] in ("a", "b")
    for version in (0, 4):
        assert not [a for a in log.read_commit(version) if isinstance(a, AddCDCFile)]
    assert "changeDataFeed" in writer_features(written.table.snapshot().protocol)


def test_change_files_do_not_leak_into_table_reads(written: Written) -> None:
    # The feed's extra columns stay out of the table's schema, and plain reads ignore them.
    assert written.table.to_df().columns == ["id", "v", "part"]


def test_read_change_feed_option_and_version_bounds(spark: SparkSession, written: Written) -> None:
    df = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", "1")
        .option("endingVersion", "2")
        .load(written.table.path)
    )
    assert df.columns[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    assert feed(df) == sorted(c for c in written.model.changes if c[4] in (1, 2))


def test_commit_timestamps_and_timestamp_bounds(written: Written) -> None:
    dt = written.table
    # The commit's timestamp as the table's history reports it.
    when = next(e.timestamp for e in dt.log.history() if e.version == 3)
    df = dt.changes(starting_timestamp=when, ending_timestamp=when)
    got = df.select("_commit_version", "_commit_timestamp").distinct().collect()
    assert [r[0] for r in got] == [3]
    assert int(got[0][1].timestamp() * 1000) == when


def test_per_commit_reads_for_streaming(written: Written) -> None:
    # What a streaming source calls per commit: Arrow batches, no Spark job.
    columns = ["id", "v", "part", "_change_type", "_commit_version"]
    for version in range(5):
        batches = list(read_changes(written.table.path, version, version))
        rows = sorted(tuple(r[c] for c in columns) for b in batches for r in b.to_pylist())
        assert rows == sorted(c for c in written.model.changes if c[4] == version)


def test_sql_table_changes(spark: SparkSession, written: Written) -> None:
    path = written.table.path
    df = deltatx.sql(
        f"SELECT * FROM table_changes_by_path('{path}', 3) AS c WHERE c._change_type <> 'insert'"
    )
    expected = sorted(c for c in written.model.changes if c[4] >= 3 and c[3] != "insert")
    assert feed(df) == expected
    with pytest.raises(SqlError, match="whole number"):
        deltatx.sql(f"SELECT * FROM table_changes_by_path('{path}', 1.5)")
    with pytest.raises(SqlError, match="starting version or timestamp"):
        deltatx.sql(f"SELECT * FROM table_changes_by_path('{path}')")


def _plain_table(spark: SparkSession, path: Path, **properties: Any) -> DeltaTable:
    df = spark.createDataFrame([(1, "x", "a"), (2, "y", "b")], SCHEMA)
    deltatx.write(df, str(path), partition_by=["part"], properties=properties or None)
    return DeltaTable.for_path(spark, str(path))


def test_a_range_written_with_the_feed_off_is_refused(spark: SparkSession, table_dir: Path) -> None:
    dt = _plain_table(spark, table_dir)
    enabled = dt.set_properties(CDF)
    with pytest.raises(ChangeDataNotRecordedError, match="version 0") as caught:
        dt.changes(0)
    assert caught.value.version == 0
    # From the commit that turned it on, the feed is readable (and empty so far).
    assert dt.changes(enabled).count() == 0
    with pytest.raises(Exception, match="ChangeDataNotRecordedError"):
        spark.read.format("delta").option("readChangeFeed", "true").option(
            "startingVersion", "0"
        ).load(dt.path).collect()


def test_a_commit_mixing_recorded_and_unrecorded_changes_is_refused(
    spark: SparkSession, table_dir: Path
) -> None:
    dt = _plain_table(spark, table_dir, **CDF, **{"delta.enableDeletionVectors": "false"})
    before = dt.version()
    more = spark.createDataFrame([(3, "z", "a")], SCHEMA)
    with (
        pytest.raises(UnsupportedFeatureError, match="separate transactions"),
        dt.begin() as txn,
    ):
        txn.write(more)
        txn.update("id = 1", {"v": "'u'"})
    assert dt.version() == before


def test_vacuum_ages_out_change_data_and_reading_it_then_says_so(
    spark: SparkSession, table_dir: Path
) -> None:
    dt = _plain_table(spark, table_dir, **CDF, **{"delta.enableDeletionVectors": "false"})
    dt.update("id = 1", {"v": "'u'"})
    updated = dt.version()
    assert list((table_dir / "_change_data").rglob("*.parquet"))
    deleted = dt.vacuum(retention_hours=0, enforce_retention=False)
    assert any("_change_data" in p for p in deleted.deleted_paths)
    assert not list((table_dir / "_change_data").rglob("*.parquet"))
    with pytest.raises(VersionNotReadableError, match=f"version {updated}.*VACUUM removed"):
        list(read_changes(dt.path, updated, updated))
