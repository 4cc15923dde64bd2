"""DELETE and UPDATE find their rows on the driver: the same rows Spark's filter finds.

The driver evaluates translatable conditions with pyarrow; these tests compare it with Spark
on data full of NULLs (three-valued logic), on files that already have deletion vectors, on
partition columns and on columns missing from older files, and check that conditions it
cannot evaluate exactly are left to Spark.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidConditionError
from deltatx.log.row_level import arrow_matching
from deltatx.log.row_level.arrow_matching import driver_matches
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.common import condition_to_predicate
from deltatx.spark.commands.rewrite import read_addressed
from deltatx.spark.deletion_vectors import collect_addresses

_ATOMS = [
    "id < 10",
    "n = 3",
    "n <> 3",
    "3 < n",
    "n = NULL",
    "n <=> 3",
    "n <=> NULL",
    "n = id",
    "n IN (1, 2, NULL)",
    "n IN (1, 2)",
    "s = 'a'",
    "s >= 'b'",
    "s IN ('a', NULL)",
    "s IS NULL",
    "b",
    "b IS TRUE",
    "b = false",
    "p = 'x'",
    "e = 1",
    "e IS NULL",
    "id BETWEEN 5 AND 20",
    # Integer arithmetic: Java's remainder keeps the dividend's sign, NULL operands give NULL.
    "n % 2 = 0",
    "(id - 50) % 7 = -3",
    "id % -4 IN (1, 3)",
    "n * 2 + 1 > id % 9",
    "n + e = 3",
    "(n - id) % 3 IS NULL",
]
_NOT_TRANSLATED = [
    "true",
    "NULL",
    "d > 1.5",
    "length(s) = 1",
    "n = 1.5",
    "s = 1",
    "s = 'a\\\\b'",
    "n % 0 = 0",
    "id * 9223372036854775807 > 0",
    "s % 2 = 0",
    "n % 2.5 = 0",
    "id / 2 = 1",
]


def _conditions() -> list[str]:
    pick = random.Random(16)
    out = list(_ATOMS) + [f"NOT ({a})" for a in _ATOMS]
    for _ in range(30):
        a, b, c = pick.sample(_ATOMS, 3)
        op1, op2 = pick.choice(["AND", "OR"]), pick.choice(["AND", "OR"])
        neg = pick.choice(["", "NOT "])
        out.append(f"{neg}(({a}) {op1} ({b})) {op2} ({c})")
    return out


def _data(spark: SparkSession, lo: int, hi: int, *, with_e: bool) -> DataFrame:
    i = F.col("id")
    cols = [
        i,
        F.when(i % 4 == 0, None).otherwise((i % 5).cast("int")).alias("n"),
        F.when(i % 6 == 0, None)
        .otherwise(F.element_at(F.array(*map(F.lit, "abc")), (i % 3 + 1).cast("int")))
        .alias("s"),
        F.when(i % 7 == 0, None).otherwise(i % 2 == 0).alias("b"),
        F.when(i % 9 == 0, F.lit(float("nan"))).otherwise(i * 0.5).alias("d"),
        F.when(i % 10 == 0, None)
        .otherwise(F.element_at(F.array(F.lit("x"), F.lit("y")), (i % 2 + 1).cast("int")))
        .alias("p"),
    ]
    if with_e:
        cols.append(F.when(i % 3 == 0, None).otherwise(i % 2).cast("bigint").alias("e"))
    return spark.range(lo, hi).select(*cols)


@pytest.fixture(scope="module")
def table(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DeltaTable:
    path = str(tmp_path_factory.mktemp("driver-match") / "t")
    deltatx.write(_data(spark, 0, 60, with_e=False).repartition(2), path, partition_by=["p"])
    dt = DeltaTable.for_path(spark, path)
    dt.delete("id % 11 = 0")  # existing deletion vectors: their rows must not match again
    more = _data(spark, 60, 120, with_e=True).repartition(2)
    deltatx.write(more, path, mode="append", merge_schema=True)
    return DeltaTable.for_path(spark, path)


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("condition", _conditions())
def test_driver_finds_the_rows_spark_finds(
    spark: SparkSession, table: DeltaTable, condition: str
) -> None:
    txn = OptimisticTransaction(table.log, table.log.snapshot())
    snapshot = txn.snapshot
    assert snapshot is not None
    files = snapshot.add_files()
    predicate = condition_to_predicate(condition, schema=snapshot.schema)
    assert predicate is not None
    found = driver_matches(
        table.log.location,
        files,
        predicate,
        snapshot.schema,
        column_mapping="none",
        partition_columns=["p"],
    )
    assert found is not None, condition
    driver = {i: r.matched.tolist() for i, r in found.items() if len(r.matched)}
    hit = F.coalesce(F.expr(condition), F.lit(False))
    spark_found = collect_addresses(read_addressed(spark, txn, files).filter(hit))
    assert driver == {i: sorted(r) for i, r in spark_found.items()}


@pytest.mark.parametrize("condition", _NOT_TRANSLATED)
def test_conditions_the_driver_cannot_evaluate_exactly_go_to_spark(
    table: DeltaTable, condition: str
) -> None:
    snapshot = table.log.snapshot()
    predicate = condition_to_predicate(condition, schema=snapshot.schema)
    assert predicate is not None
    files = snapshot.add_files()
    found = driver_matches(
        table.log.location, files, predicate, snapshot.schema, column_mapping="none"
    )
    assert found is None


def _rows(df: DataFrame) -> list[str]:
    # As text: NaN (in column d) equals itself only there.
    return sorted(repr(tuple(r)) for r in df.collect())


@pytest.mark.parametrize(
    "dv", [pytest.param(True, id="dv"), pytest.param(False, id="copy-on-write")]
)
def test_delete_and_update_with_null_conditions_match_oracles(
    spark: SparkSession, tmp_path: Path, dv: bool
) -> None:
    path = str(tmp_path / "t")
    props = {"delta.enableDeletionVectors": str(dv).lower()}
    deltatx.write(_data(spark, 0, 80, with_e=True).repartition(3), path, properties=props)
    dt = DeltaTable.for_path(spark, path)
    before = dt.to_df()
    condition = "NOT (n IN (1, 2, NULL)) OR (s = 'a' AND b)"
    hit = F.coalesce(F.expr(condition), F.lit(False))
    expected = _rows(before.filter(~hit))
    metrics = dt.delete(condition)
    assert _rows(dt.to_df()) == expected
    assert metrics.num_deleted_rows == 80 - len(expected)
    # Again, over rows already deleted: only the newly matched rows count.
    before = dt.to_df()
    condition = "n <=> NULL OR s IN ('b', NULL)"
    hit = F.coalesce(F.expr(condition), F.lit(False))
    expected = _rows(before.filter(~hit))
    count = before.count()
    metrics = dt.delete(condition)
    assert _rows(dt.to_df()) == expected
    assert metrics.num_deleted_rows == count - len(expected)
    before = dt.to_df()
    condition = "NOT (e = 1) AND n <> 3"
    hit = F.coalesce(F.expr(condition), F.lit(False))
    updated = _rows(before.withColumn("n", F.when(hit, F.col("n") + 10).otherwise(F.col("n"))))
    count = before.filter(hit).count()
    update_metrics = dt.update(condition, set={"n": "n + 10"})
    assert _rows(dt.to_df()) == updated
    assert update_metrics.num_updated_rows == count


# sqlglot reads these as translatable conditions; Spark's parser refuses them.
_SPARK_REFUSES = ["n = 3;", "n IN (1,)", "n IN ()", "n IN 1", "n IN (,1)", "n IN (1,,2)"]


@pytest.mark.parametrize("condition", _SPARK_REFUSES)
def test_text_spark_refuses_is_refused_on_a_table_with_deletion_vectors(
    spark: SparkSession, tmp_path: Path, condition: str
) -> None:
    # The driver path skips Spark's analysis of conditions it translated, so it must never
    # take text Spark would refuse.
    path = str(tmp_path / "t")
    props = {"delta.enableDeletionVectors": "true"}
    deltatx.write(_data(spark, 0, 20, with_e=False).coalesce(1), path, properties=props)
    dt = DeltaTable.for_path(spark, path)
    version = dt.version()
    with pytest.raises(InvalidConditionError):
        dt.delete(condition)
    with pytest.raises(InvalidConditionError):
        dt.update(condition, set={"n": "n + 1"})
    assert dt.version() == version
    # No data file was written: the write is the one file of the table.
    assert len(list((tmp_path / "t").rglob("*.parquet"))) == 1


@pytest.mark.parametrize(
    ("statement", "deletion_vectors"),
    [("delete", True), ("update", False), ("update", True)],
    ids=["delete-dv", "update-copy-on-write", "update-dv"],
)
def test_files_whose_statistics_prove_every_row_matches_are_not_read(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    statement: str,
    deletion_vectors: bool,
) -> None:
    # Ten files of ten ids each (0-9, 10-19, ...); the condition covers 25-74: files 3 to 6
    # match on every row by their bounds and are not read, files 2 and 7 are read.
    path = str(tmp_path / "ranges")
    props = {"delta.enableDeletionVectors": str(deletion_vectors).lower()}
    frame = spark.range(0, 100, numPartitions=10).select("id", (F.col("id") % 3).alias("n"))
    deltatx.write(frame, path, properties=props)
    dt = DeltaTable.for_path(spark, path)
    dt.delete("id = 41")  # a deletion vector on a file that every row matches
    read: list[str] = []
    real = arrow_matching._read_columns

    def recording(location: Any, f: Any, *args: Any) -> Any:
        read.append(f.path)
        return real(location, f, *args)

    monkeypatch.setattr(arrow_matching, "_read_columns", recording)
    condition = "id >= 25 AND id < 75"
    if statement == "delete":
        dt.delete(condition)
        expected = [(i, i % 3) for i in range(100) if not 25 <= i < 75 and i != 41]
    else:
        dt.update(condition, set={"n": "n + 10"})
        expected = [(i, i % 3 + (10 if 25 <= i < 75 else 0)) for i in range(100) if i != 41]
    assert sorted(tuple(r) for r in DeltaTable.for_path(spark, path).to_df().collect()) == expected
    assert len(read) == 2, read
