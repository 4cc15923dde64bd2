"""DELETE, UPDATE, MERGE, OPTIMIZE, VACUUM and RESTORE against brute-force oracles.

Each oracle computes the same change with plain DataFrame operations on the old snapshot. The
oracle tests run with deletion vectors on (the default for new tables) and off (copy-on-write
rewrites), so both write paths stay covered.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidArgumentError, InvalidConditionError, VersionNotReadableError
from deltatx.kernel.actions import AddFile

SCHEMA = "id BIGINT, date STRING, country STRING, v DOUBLE"


def rows(df: DataFrame) -> list[tuple[object, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def make_table(
    spark: SparkSession, path: Path, *, partitioned: bool, dv: bool = True
) -> DeltaTable:
    data = spark.range(0, 60).select(
        F.col("id"),
        F.concat(F.lit("2024-01-0"), (F.col("id") % 3 + 1).cast("string")).alias("date"),
        F.when(F.col("id") % 5 == 0, F.lit(None))
        .otherwise(
            F.element_at(F.array(F.lit("US"), F.lit("FR")), (F.col("id") % 2 + 1).cast("int"))
        )
        .alias("country"),
        F.when(F.col("id") % 7 == 0, F.lit(None)).otherwise(F.col("id") * 1.5).alias("v"),
    )
    # several files per partition, so that pruning and partial rewrites are exercised
    for part in range(3):
        deltatx.write(
            data.filter(F.col("id") % 3 == part).repartition(2),
            str(path),
            partition_by=["date"] if partitioned else None,
            properties={"delta.enableDeletionVectors": str(dv).lower()},
        )
    return DeltaTable.for_path(spark, str(path))


def has_vectors(dt: DeltaTable) -> bool:
    return any(f.deletion_vector is not None for f in dt.snapshot().add_files())


PARTITIONING = [pytest.param(True, id="partitioned"), pytest.param(False, id="unpartitioned")]
DV = [pytest.param(True, id="dv"), pytest.param(False, id="copy-on-write")]


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("partitioned", PARTITIONING)
@pytest.mark.parametrize(
    "condition",
    [
        "date = '2024-01-02'",
        "id < 10",
        "country IS NULL",
        "v > 50 AND date <> '2024-01-01'",
        "id = -1",
        None,
    ],
)
@pytest.mark.parametrize("dv", DV)
def test_delete_matches_oracle(
    spark: SparkSession, table_dir: Path, partitioned: bool, condition: str | None, dv: bool
) -> None:
    dt = make_table(spark, table_dir, partitioned=partitioned, dv=dv)
    before = dt.to_df()
    expected = rows(before.filter(f"NOT coalesce({condition}, false)")) if condition else []
    metrics = dt.delete(condition)
    assert rows(dt.to_df()) == expected
    assert metrics.num_deleted_rows == before.count() - len(expected)
    if condition == "id = -1":
        assert metrics.num_removed_files == 0 and metrics.num_added_files == 0
    if not dv or condition == "id < 10":
        assert has_vectors(dt) == dv  # a partial delete marks rows only with vectors on
    hist = dt.history(1).collect()[0]
    assert hist["operation"] == "DELETE"
    assert int(hist["operationMetrics"]["numDeletedRows"]) == metrics.num_deleted_rows


def test_delete_of_whole_partition_rewrites_nothing(spark: SparkSession, table_dir: Path) -> None:
    dt = make_table(spark, table_dir, partitioned=True)
    files_before = {f.path for f in dt.snapshot().add_files()}
    metrics = dt.delete("date = '2024-01-01'")
    assert metrics.num_added_files == 0
    assert metrics.num_removed_files > 0
    assert {f.path for f in dt.snapshot().add_files()} < files_before


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("partitioned", PARTITIONING)
@pytest.mark.parametrize(
    ("condition", "assignments"),
    [
        ("id % 4 = 0", {"v": "v + 1", "country": "'XX'"}),
        ("country IS NULL", {"country": "'??'"}),
        (None, {"v": "coalesce(v, 0) * 2"}),
        ("date = '2024-01-03'", {"date": "'2024-02-01'"}),
    ],
)
@pytest.mark.parametrize("dv", DV)
def test_update_matches_oracle(
    spark: SparkSession,
    table_dir: Path,
    partitioned: bool,
    condition: str | None,
    assignments: dict[str, str],
    dv: bool,
) -> None:
    dt = make_table(spark, table_dir, partitioned=partitioned, dv=dv)
    before = dt.to_df()
    cond = F.expr(condition) if condition else F.lit(True)
    expected_df = before.select(
        *[
            F.when(
                F.coalesce(cond, F.lit(False)),
                F.expr(assignments[c]).cast(before.schema[c].dataType),
            )
            .otherwise(F.col(c))
            .alias(c)
            if c in assignments
            else F.col(c)
            for c in before.columns
        ]
    )
    expected = rows(expected_df)
    metrics = dt.update(condition, set=assignments)
    assert rows(dt.to_df()) == expected
    assert metrics.num_updated_rows == before.filter(F.coalesce(cond, F.lit(False))).count()
    if not dv or condition == "id % 4 = 0":
        assert has_vectors(dt) == dv


def test_update_and_delete_refuse_bad_input_before_writing(
    spark: SparkSession, table_dir: Path
) -> None:
    dt = make_table(spark, table_dir, partitioned=True)
    version = dt.version()
    files = set(p.name for p in table_dir.rglob("*.parquet"))
    with pytest.raises(InvalidConditionError, match="nope"):
        dt.delete("nope = 1")
    with pytest.raises(InvalidArgumentError, match="missing"):
        dt.update("id = 1", set={"missing": "1"})
    with pytest.raises(InvalidConditionError):
        dt.update("id = 1", set={"v": "no_such_column + 1"})
    assert dt.version() == version
    assert set(p.name for p in table_dir.rglob("*.parquet")) == files


def _merge_oracle(target: DataFrame, source: DataFrame) -> list[tuple[object, ...]]:
    """Upsert by id: matched rows take the source v (deleted when NULL); the rest inserted."""
    t = target.alias("t")
    s = source.alias("s")
    matched = (
        t.join(s, "id", "inner")
        .filter("s.v IS NOT NULL")
        .select("id", F.col("t.date"), F.col("t.country"), F.col("s.v").alias("v"))
    )
    untouched = t.join(s, "id", "left_anti")
    inserted = s.join(t, "id", "left_anti").select("id", "date", "country", "v")
    return rows(matched.unionByName(untouched).unionByName(inserted))


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("partitioned", PARTITIONING)
@pytest.mark.parametrize("dv", DV)
def test_merge_matches_oracle(
    spark: SparkSession, table_dir: Path, partitioned: bool, dv: bool
) -> None:
    dt = make_table(spark, table_dir, partitioned=partitioned, dv=dv)
    source = spark.createDataFrame(
        [
            (1, "2024-01-02", "US", 100.0),
            (2, "2024-01-03", "FR", None),
            (1000, "2024-01-01", None, 7.0),
            (1001, "2024-01-09", "JP", 8.0),
        ],
        SCHEMA,
    )
    expected = _merge_oracle(dt.to_df(), source)
    metrics = (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_delete(condition="s.v IS NULL")
        .when_matched_update(set={"v": "s.v"})
        .when_not_matched_insert_all()
        .execute()
    )
    assert rows(dt.to_df()) == expected
    assert (
        metrics.num_target_rows_updated,
        metrics.num_target_rows_deleted,
        metrics.num_target_rows_inserted,
    ) == (1, 1, 2)
    assert has_vectors(dt) == dv


@pytest.mark.parametrize("dv", DV)
def test_merge_by_source_clauses_and_clause_order(
    spark: SparkSession, table_dir: Path, dv: bool
) -> None:
    dt = make_table(spark, table_dir, partitioned=False, dv=dv)
    source = spark.createDataFrame([(i, "x", "x", 0.0) for i in range(0, 60, 2)], SCHEMA)
    before = dt.to_df()
    (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_update(condition="t.id < 10", set={"country": "'low'"})
        .when_matched_update(set={"country": "'even'"})
        .when_not_matched_by_source_delete(condition="t.id > 50")
        .when_not_matched_by_source_update(set={"country": "'odd'"})
        .execute()
    )
    got = {r["id"]: r["country"] for r in dt.to_df().collect()}
    expected = {}
    for r in before.collect():
        i = r["id"]
        if i % 2 == 0:
            expected[i] = "low" if i < 10 else "even"
        elif i <= 50:
            expected[i] = "odd"
    assert got == expected


def test_merge_empty_source_and_insert_only(spark: SparkSession, table_dir: Path) -> None:
    dt = make_table(spark, table_dir, partitioned=True)
    version = dt.version()
    empty = spark.createDataFrame([], SCHEMA)
    m = dt.alias("t").merge(empty.alias("s"), "t.id = s.id").when_matched_delete().execute()
    assert (m.num_removed_files, m.num_added_files) == (0, 0)
    files_before = {f.path for f in dt.snapshot().add_files()}
    source = spark.createDataFrame(
        [(5, "2024-01-03", "US", 1.0), (500, "2024-01-03", "US", 1.0)], SCHEMA
    )
    m = (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_not_matched_insert_all()
        .execute()
    )
    assert m.num_target_rows_inserted == 1
    assert files_before <= {f.path for f in dt.snapshot().add_files()}, (
        "insert-only touches no file"
    )
    assert dt.version() == version + 2


def test_merge_ambiguous_source_writes_nothing(spark: SparkSession, table_dir: Path) -> None:
    dt = make_table(spark, table_dir, partitioned=True)
    version = dt.version()
    dup = spark.createDataFrame([(3, "a", "b", 1.0), (3, "a", "b", 2.0)], SCHEMA)
    with pytest.raises(InvalidArgumentError, match="several source rows"):
        dt.alias("t").merge(dup.alias("s"), "t.id = s.id").when_matched_update_all().execute()
    assert dt.version() == version


@pytest.mark.parametrize("dv", [True, False])
def test_merge_lone_unconditional_delete_allows_duplicate_matches(
    spark: SparkSession, table_dir: Path, dv: bool
) -> None:
    """Deleting a matched row does not depend on which source row matched it, so delta-spark
    allows duplicate matches for a lone unconditional WHEN MATCHED DELETE; so does deltatx,
    deleting and counting each target row once. Any other matched clause stays ambiguous."""
    dt = make_table(spark, table_dir, partitioned=True, dv=dv)
    before = {r.id for r in dt.to_df().collect()}
    dup = spark.createDataFrame(
        [(3, "a", "b", 1.0), (3, "a", "b", 2.0), (4, "a", "b", 1.0), (999, "a", "b", 1.0)],
        SCHEMA,
    )
    m = (
        dt.alias("t")
        .merge(dup.alias("s"), "t.id = s.id")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .execute()
    )
    assert m.num_target_rows_deleted == 2
    assert m.num_target_rows_inserted == 1
    assert sorted(r.id for r in dt.to_df().collect()) == sorted((before - {3, 4}) | {999})
    again = spark.createDataFrame([(6, "a", "b", 1.0), (6, "a", "b", 2.0)], SCHEMA)
    version = dt.version()
    with pytest.raises(InvalidArgumentError, match="several source rows"):
        dt.alias("t").merge(again.alias("s"), "t.id = s.id").when_matched_delete(
            "s.v > 0"
        ).execute()
    assert dt.version() == version


def test_merge_target_predicate_prunes_and_is_recorded(
    spark: SparkSession, table_dir: Path
) -> None:
    """Seed 000's MERGE example: with t.date in the condition only that partition is read."""
    dt = make_table(spark, table_dir, partitioned=True)
    source = spark.createDataFrame([(4, "2024-01-02", "US", 9.0)], SCHEMA)
    with dt.begin() as txn:
        (
            txn.alias("t")
            .merge(source.alias("s"), "s.id = t.id AND s.date = t.date AND t.date = '2024-01-02'")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        read = txn.core.tracker.freeze()
        assert read.read_paths and all("2024-01-02" in p for p in read.read_paths)
    assert dt.to_df().filter("id = 4").collect()[0]["v"] == 9.0


def test_merge_schema_evolution(spark: SparkSession, table_dir: Path) -> None:
    dt = make_table(spark, table_dir, partitioned=False)
    source = spark.createDataFrame([(1, "d", "c", 1.0, "new")], SCHEMA + ", extra STRING")
    with pytest.raises(InvalidArgumentError, match="extra"):
        dt.alias("t").merge(source.alias("s"), "t.id = s.id").when_matched_update_all().execute()
    (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .with_schema_evolution()
        .when_matched_update_all()
        .execute()
    )
    df = dt.to_df()
    assert df.filter("id = 1").collect()[0]["extra"] == "new"
    assert df.filter("extra IS NULL").count() == df.count() - 1


@pytest.mark.parametrize("partitioned", PARTITIONING)
@pytest.mark.parametrize("dv", DV)
def test_optimize_compaction_keeps_rows(
    spark: SparkSession, table_dir: Path, partitioned: bool, dv: bool
) -> None:
    dt = make_table(spark, table_dir, partitioned=partitioned, dv=dv)
    dt.delete("id % 11 = 0")  # with vectors on, compaction must skip the deleted rows
    before = rows(dt.to_df())
    n_before = dt.snapshot().num_files
    m = dt.optimize().execute_compaction()
    assert rows(dt.to_df()) == before
    assert dt.snapshot().num_files < n_before
    assert m.num_removed_files == n_before - (dt.snapshot().num_files - m.num_added_files)
    actions = dt.log.read_commit(dt.version())
    assert all(getattr(a, "data_change", False) is False for a in actions[1:])
    info = dt.history(1).collect()[0]
    assert info["operation"] == "OPTIMIZE" and info["isolationLevel"] == "SnapshotIsolation"


def test_optimize_where_only_partition_columns(spark: SparkSession, table_dir: Path) -> None:
    dt = make_table(spark, table_dir, partitioned=True)
    with pytest.raises(InvalidArgumentError, match="partition columns"):
        dt.optimize().where("id > 3").execute_compaction()
    m = dt.optimize().where("date = '2024-01-01'").execute_compaction()
    assert m.num_partitions_optimized == 1


@pytest.mark.parametrize("dv", DV)
def test_z_order_keeps_rows_and_clusters(spark: SparkSession, table_dir: Path, dv: bool) -> None:
    dt = make_table(spark, table_dir, partitioned=False, dv=dv)
    dt.delete("id % 11 = 0")
    before = rows(dt.to_df())
    m = dt.optimize().execute_z_order_by("id", "v")
    assert rows(dt.to_df()) == before
    assert m.num_added_files >= 1
    params = json.loads(dt.history(1).collect()[0]["operationParameters"]["zOrderBy"])
    assert params == ["id", "v"]


def test_restore_and_vacuum(spark: SparkSession, table_dir: Path) -> None:
    dt = make_table(spark, table_dir, partitioned=True)
    v = dt.version()
    at_v = rows(dt.to_df())
    dt.delete("id > 10")
    dt.restore_to_version(v)
    assert rows(dt.to_df()) == at_v
    assert dt.history(1).collect()[0]["operation"] == "RESTORE"
    dt.delete("date = '2024-01-01'")
    live = {f.path for f in dt.snapshot().add_files()}
    with pytest.raises(InvalidArgumentError, match="retention"):
        dt.vacuum(retention_hours=0)
    dry = dt.vacuum(retention_hours=0, dry_run=True, enforce_retention=False)
    assert dry.num_files_to_delete > 0 and dry.num_deleted_files == 0
    time.sleep(0.01)
    done = dt.vacuum(retention_hours=0, enforce_retention=False)
    assert done.num_deleted_files == dry.num_files_to_delete
    for p in live:
        assert (table_dir / p).exists()
    assert rows(dt.to_df()) == rows(dt.to_df(version=dt.version()))
    with pytest.raises(VersionNotReadableError, match="VACUUM"):
        dt.restore_to_version(1)


def test_statements_in_one_transaction_commit_together(
    spark: SparkSession, table_dir: Path
) -> None:
    dt = make_table(spark, table_dir, partitioned=True)
    before = dt.to_df()
    v = dt.version()
    with dt.begin() as txn:
        txn.delete("id < 5")
        txn.update("id < 10", set={"v": "-1"})
        txn.write(spark.createDataFrame([(999, "2024-01-01", "US", 0.0)], SCHEMA))
        assert txn.to_df().filter("id < 5").count() == 0
    assert dt.version() == v + 1
    expected = before.filter("id >= 5").withColumn(
        "v", F.when(F.col("id") < 10, F.lit(-1.0)).otherwise(F.col("v"))
    )
    assert rows(dt.to_df()) == rows(
        expected.unionByName(spark.createDataFrame([(999, "2024-01-01", "US", 0.0)], SCHEMA))
    )


def test_merge_reports_the_deletion_vectors_its_commit_adds(
    spark: SparkSession, table_dir: Path
) -> None:
    """Bug fixed: MERGE reported numDeletionVectorsAdded = 0 while its commit added vectors."""
    dt = make_table(spark, table_dir, partitioned=False, dv=True)
    source = spark.createDataFrame([(1, 99.0), (2, 98.0)], "id BIGINT, v DOUBLE")
    metrics = (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_update({"v": "s.v"})
        .execute()
    )
    log = dt.log
    added = [
        a
        for a in log.read_commit(log.latest_version())
        if isinstance(a, AddFile) and a.deletion_vector is not None
    ]
    assert added, "the merge should have marked the old rows with deletion vectors"
    assert metrics.num_deletion_vectors_added == len(added)
    hist = dt.history(1).collect()[0]
    assert int(hist["operationMetrics"]["numDeletionVectorsAdded"]) == len(added)


@pytest.mark.parametrize("partitioned", [True, False])
def test_replace_where_reports_the_rows_it_replaced(
    spark: SparkSession, table_dir: Path, partitioned: bool
) -> None:
    """Bug fixed: an overwrite with replace_where reported numDeletedRows = 0."""
    dt = make_table(spark, table_dir, partitioned=partitioned, dv=False)
    condition = "date = '2024-01-01'"
    replaced = dt.to_df().filter(condition).count()
    assert replaced > 0
    new = dt.to_df().filter(condition).limit(3)
    deltatx.write(new, str(table_dir), mode="overwrite", replace_where=condition)
    hist = dt.history(1).collect()[0]
    assert int(hist["operationMetrics"]["numDeletedRows"]) == replaced
    assert int(hist["operationMetrics"]["numOutputRows"]) == 3


@pytest.mark.parametrize("dv", DV)
def test_merge_reads_only_files_in_the_source_key_range(
    spark: SparkSession, table_dir: Path, dv: bool
) -> None:
    """Only a target row whose key equals a source key can match, so files whose statistics
    lie outside the source keys' range need not be read; the read recorded for conflict
    checks stays the ON condition's (join keys alone: the whole table), as documented."""
    data = spark.range(0, 100).select("id", (F.col("id") * 1.0).alias("v"))
    deltatx.write(
        data.repartitionByRange(4, "id"),
        str(table_dir),
        properties={"delta.enableDeletionVectors": str(dv).lower()},
    )
    dt = DeltaTable.for_path(spark, str(table_dir))
    source = spark.createDataFrame([(10, -1.0), (12, -2.0), (20, -3.0)], "id BIGINT, v DOUBLE")
    with dt.begin() as txn:
        metrics = (
            txn.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        read = txn.core.tracker.freeze()
        assert len(read.read_paths) == 4
    assert (metrics.num_target_rows_updated, metrics.num_target_rows_inserted) == (3, 0)
    assert metrics.num_source_rows == 3
    got = {r.id: r.v for r in dt.to_df().collect()}
    assert got == {i: {10: -1.0, 12: -2.0, 20: -3.0}.get(i, i * 1.0) for i in range(100)}
    # A key of another type is compared as Spark casts it, so it prunes nothing.
    text_source = spark.createDataFrame([("5", 7.0), ("500", 8.0)], "id STRING, v DOUBLE")
    metrics = (
        dt.alias("t")
        .merge(text_source.alias("s"), "t.id = s.id")
        .when_matched_update(set={"v": "s.v"})
        .when_not_matched_insert(values={"id": "CAST(s.id AS BIGINT)", "v": "s.v"})
        .execute()
    )
    assert (metrics.num_target_rows_updated, metrics.num_target_rows_inserted) == (1, 1)
    got = {r.id: r.v for r in dt.to_df().collect()}
    assert (got[5], got[500], len(got)) == (7.0, 8.0, 101)
