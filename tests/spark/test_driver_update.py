"""UPDATE with deletion vectors rewrites few rows on the driver: the same table Spark's job gives.

Oracle: the same UPDATE on two copies of a NULL-heavy table, one through the driver path and
one forced through the Spark job, must leave the same rows and the same statistics in the
files it adds. Expressions the driver cannot evaluate exactly, tables whose writes need Spark
and changes past the caps go to the Spark job.
"""

from __future__ import annotations

import itertools
import os
import random
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.kernel.actions import AddFile
from deltatx.kernel.schema import parse_schema
from deltatx.spark.commands import driver_update, update
from deltatx.spark.commands.driver_update import translate_value
from deltatx.spark.datasource.reader import FileReader, file_task
from deltatx.spark.datasource.task_files import TaskFiles
from deltatx.spark.schema import to_spark_schema

from .driver_dml import (
    DML_CONDITIONS,
    DriverSpy,
    added_stats,
    commit_adds,
    copy_table,
    dml_data,
    run_both_ways,
)

FULL = os.environ.get("DELTATX_STRESS_FULL") == "1"

# Per column, SET values: most the driver evaluates, some it must leave to Spark (a cast,
# a function, an overflow of the column's type).
_SETS: Mapping[str, list[str]] = {
    "id": ["id + 1000", "n", "id * -3", "NULL", "sm", "id % 7"],
    "n": [
        "NULL",
        "0",
        "n + 1",
        "n * 2",
        "n - id",
        "id",
        "-7",
        "(n + 1) * 3",
        "n + 2147483647",
        "(n - id) % -4",
    ],
    "sm": ["sm + 1", "NULL", "7", "n", "sm * 1000", "40000", "sm % 5"],
    "s": ["'z'", "NULL", "t", "'é ü'", "upper(s)", "CAST(n AS STRING)"],
    "t": ["s", "'long string past the thirty two characters of stats'"],
    "b": ["true", "NULL", "false", "NOT b", "b"],
    "d": [
        "NULL",
        "d",
        "d + 1",
        "d * 0.1",
        "d - n",
        "1.5e3 - d",
        "0.1",
        "n + 0.5",
        "id * 3",
        "d % 2",
    ],
    "day": ["NULL", "day", "DATE '2024-01-01'"],
    "p": ["'x'", "'q'", "NULL"],
}


@pytest.fixture(scope="module")
def base(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("driver-update") / "base")
    deltatx.write(dml_data(spark, 0, 60).repartition(2), path, partition_by=["p"])
    dt = DeltaTable.for_path(spark, path)
    dt.delete("id % 11 = 0")  # rows already deleted must stay deleted
    deltatx.write(dml_data(spark, 60, 90).repartition(2), path, mode="append")
    return path


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[DriverSpy]:
    s = DriverSpy(driver_update.update_on_driver)
    monkeypatch.setattr(update, "update_on_driver", s)
    yield s


def _update_both(
    spark: SparkSession,
    base: str,
    root: Path,
    spy: DriverSpy,
    condition: str,
    sets: dict[str, str],
) -> bool:
    """Runs the UPDATE both ways; asserts the same outcome; True if the driver wrote it."""
    both = run_both_ways(spark, base, root, spy, lambda dt: dt.update(condition, set=sets))
    if both is None:
        return False
    stats_a, stats_b = added_stats(both.driver_table), added_stats(both.spark_table)
    assert stats_a == stats_b, (condition, sets, stats_a, stats_b)
    a, b = both.driver_metrics, both.spark_metrics
    assert a.num_updated_rows == b.num_updated_rows
    assert a.num_deletion_vectors_added == b.num_deletion_vectors_added
    return both.wrote


# Each example runs two UPDATEs through Spark (about a second): ``make test`` draws 12, and
# ``make stress`` (``DELTATX_STRESS_FULL=1``) 25 (Hypothesis draws new ones each run).
@settings(
    max_examples=25 if FULL else 12,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    condition=st.sampled_from(DML_CONDITIONS),
    sets=st.dictionaries(
        st.sampled_from(sorted(_SETS)), st.just(""), min_size=1, max_size=3
    ).flatmap(lambda keys: st.fixed_dictionaries({k: st.sampled_from(_SETS[k]) for k in keys})),
)
def test_driver_update_matches_the_spark_job(
    spark: SparkSession,
    base: str,
    tmp_path_factory: pytest.TempPathFactory,
    spy: DriverSpy,
    condition: str,
    sets: dict[str, str],
) -> None:
    _update_both(spark, base, tmp_path_factory.mktemp("u"), spy, condition, sets)


@pytest.mark.parametrize(
    ("condition", "sets"),
    [
        ("n = 3", {"n": "n + 1", "s": "'z'"}),
        ("s IS NULL", {"p": "'q'", "d": "NULL", "day": "day"}),
        ("b", {"sm": "sm + 1", "t": "s", "b": "false"}),
        ("id < 40", {"d": "d + 1.0"}),
        ("id % 3 = 1", {"n": "(n - id) % 4", "sm": "sm * 2"}),
    ],
)
def test_simple_updates_run_no_spark_job(
    spark: SparkSession,
    base: str,
    tmp_path: Path,
    spy: DriverSpy,
    condition: str,
    sets: dict[str, str],
) -> None:
    assert _update_both(spark, base, tmp_path, spy, condition, sets)
    path = copy_table(base, tmp_path)
    spy.force_spark = False
    sc = spark.sparkContext
    group = f"driver-update-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "driver update")
    try:
        DeltaTable.for_path(spark, path).update(condition, set=sets)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert sc.statusTracker().getJobIdsForGroup(group) == []


@pytest.mark.sample(every=2)
@pytest.mark.parametrize(
    "sets",
    [
        {"n": "n + 2147483647"},  # past INT for some rows: Spark wraps or fails
        {"s": "upper(s)"},
        {"d": "n + 0.5"},  # decimal arithmetic, then a cast
        {"sm": "40000"},
        {"d": "d % 2"},  # a double's remainder
    ],
)
def test_values_the_driver_cannot_evaluate_exactly_go_to_spark(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, sets: dict[str, str]
) -> None:
    assert not _update_both(spark, base, tmp_path, spy, "n IS NOT NULL", sets)


def test_past_the_row_cap_the_spark_job_writes(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_ROWS", 5)
    assert not _update_both(spark, base, tmp_path, spy, "id < 30", {"n": "0"})
    assert _update_both(spark, base, tmp_path, spy, "id < 4", {"n": "0"})


def test_rows_gathered_past_the_write_size_are_written_in_parts(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A few rows from each of several files, handed to the writer whenever 5 have gathered:
    # the same table as the Spark job's, each row once.
    monkeypatch.setattr(driver_update, "_WRITE_ROWS", 5)
    assert _update_both(spark, base, tmp_path, spy, "id % 3 = 0", {"n": "n + 1"})
    # Each part is a file of its own (written by a driver thread while the next are read).
    spy.force_spark = False
    in_parts = _files_added(spark, copy_table(base, tmp_path), "id % 3 = 0")
    monkeypatch.setattr(driver_update, "_WRITE_ROWS", 1 << 17)
    assert in_parts > _files_added(spark, copy_table(base, tmp_path), "id % 3 = 0")


def _files_added(spark: SparkSession, path: str, condition: str) -> int:
    dt = DeltaTable.for_path(spark, path)
    dt.update(condition, set={"n": "n + 1"})
    return len(commit_adds(dt, dt.log.snapshot().version))


def test_a_part_that_fails_to_write_leaves_no_file_behind(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second of several parts fails while others are written by driver threads: the
    # statement fails, nothing is committed, and every file any part wrote is deleted.
    monkeypatch.setattr(driver_update, "_WRITE_ROWS", 5)
    path = copy_table(base, tmp_path)
    dt = DeltaTable.for_path(spark, path)
    version = dt.log.snapshot().version
    before = {p.relative_to(path) for p in Path(path).rglob("*.parquet")}
    write, calls = TaskFiles.write, itertools.count()

    def failing(self: TaskFiles, rows: pa.Table) -> list[AddFile]:
        added = write(self, rows)
        if next(calls) == 1:
            raise OSError("the disk is full")
        return added

    monkeypatch.setattr(TaskFiles, "write", failing)
    # The error is raised only once a second part has been written, after the first.
    with pytest.raises(OSError, match="the disk is full"):
        dt.update("id % 3 = 0", set={"n": "n + 1"})
    assert {p.relative_to(path) for p in Path(path).rglob("*.parquet")} == before
    assert DeltaTable.for_path(spark, path).log.snapshot().version == version


def test_past_the_byte_cap_the_spark_job_writes(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_BYTES", 10)
    assert not _update_both(spark, base, tmp_path, spy, "id < 30", {"n": "0"})


def test_a_table_with_constraints_goes_to_spark(
    spark: SparkSession, tmp_path: Path, spy: DriverSpy
) -> None:
    path = str(tmp_path / "c")
    deltatx.write(dml_data(spark, 0, 20), path, properties={"delta.constraints.pos": "id >= 0"})
    assert not _update_both(spark, path, tmp_path, spy, "n = 3", {"n": "0"})


def test_null_into_a_not_null_column_goes_to_spark(
    spark: SparkSession, tmp_path: Path, spy: DriverSpy
) -> None:
    path = str(tmp_path / "nn")
    schema = "id BIGINT NOT NULL, n INT"
    deltatx.write(spark.createDataFrame([(1, 1), (2, 3)], schema), path)
    dt = DeltaTable.for_path(spark, path)
    with pytest.raises(Exception):  # noqa: B017 (Spark's own error, whatever it is)
        dt.update("n = 3", set={"id": "NULL"})
    assert spy.results == [None]


def test_translation_of_set_text() -> None:
    schema = parse_schema(
        '{"type":"struct","fields":['
        '{"name":"n","type":"integer","nullable":true,"metadata":{}},'
        '{"name":"s","type":"string","nullable":true,"metadata":{}}]}'
    )
    assert translate_value("(n + 1) * -2", schema) is not None
    for text in [
        "n / 2",
        "'a\\\\b'",
        '"x"',
        "'it''s'",
        "5L",
        "0.1234567890123456",
        "s || 'a'",
        "abs(n)",
    ]:
        assert translate_value(text, schema) is None, text


def test_a_table_mapping_columns_by_name_updates_on_the_driver(
    spark: SparkSession, tmp_path: Path, spy: DriverSpy
) -> None:
    path = str(tmp_path / "mapped")
    props = {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}
    deltatx.write(dml_data(spark, 0, 40), path, partition_by=["p"], properties=props)
    DeltaTable.for_path(spark, path).delete("id % 7 = 0")
    sets = {"n": "n * 2 + sm", "p": "'q'", "d": "d - 0.25"}
    assert _update_both(spark, path, tmp_path, spy, "s IS NULL OR n = 1", sets)


@pytest.mark.parametrize(
    ("condition", "read_once"),
    [
        ("id % 3 = 0 AND s IS NOT NULL", {"id", "s"}),
        ("p = 'x' AND sm > 2", {"sm"}),  # the partition column is not in the files
    ],
)
def test_the_conditions_columns_are_read_once(
    spark: SparkSession,
    base: str,
    tmp_path: Path,
    spy: DriverSpy,
    monkeypatch: pytest.MonkeyPatch,
    condition: str,
    read_once: set[str],
) -> None:
    # Finding the rows reads the condition's columns; writing their new versions reads the
    # other columns of the rows' row groups, and takes the condition's from the first read.
    groups: list[list[str]] = []
    real = pq.ParquetFile.read_row_group

    def recorded(self: pq.ParquetFile, i: int, columns: list[str] | None = None, **kw: Any) -> Any:
        groups.append(list(columns or []))
        return real(self, i, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", recorded)
    assert _update_both(spark, base, tmp_path, spy, condition, {"n": "n + 1", "t": "s"})
    assert groups and all(not read_once & set(g) for g in groups), groups
    assert any("d" in g for g in groups)


def test_past_the_kept_rows_budget_files_are_read_whole(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only some files keep their condition columns: the others read them with the rest.
    monkeypatch.setattr(update, "DRIVER_UPDATE_ROWS", 4)
    assert _update_both(spark, base, tmp_path, spy, "id % 3 = 0", {"n": "n + 1"})


@pytest.mark.parametrize("seed", range(6))
def test_rows_read_with_known_columns_are_the_rows_read_whole(tmp_path: Path, seed: int) -> None:
    # A file of several row groups; the rows picked span some of them. Columns already read
    # at those rows (any subset, all of them included) come back in place, the rest are read.
    pick = random.Random(seed)
    n = 50
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "s": pa.array([pick.choice([None, "a", "bb"]) for _ in range(n)]),
            "d": pa.array([pick.random() for _ in range(n)]),
        }
    )
    pq.write_table(table, tmp_path / "part-0.parquet", row_group_size=7)
    schema = parse_schema(
        '{"type":"struct","fields":['
        '{"name":"id","type":"long","nullable":true,"metadata":{}},'
        '{"name":"s","type":"string","nullable":true,"metadata":{}},'
        '{"name":"d","type":"double","nullable":true,"metadata":{}}]}'
    )
    reader = FileReader(
        table_path=str(tmp_path),
        schema=to_spark_schema(schema),
        table_schema_json=schema.to_json(),
        partition_columns=[],
        column_mapping="none",
    )
    size = (tmp_path / "part-0.parquet").stat().st_size
    task = file_task(AddFile("part-0.parquet", {}, size, 0, True))
    rows = np.array(sorted(pick.sample(range(n), pick.randrange(1, n))), dtype=np.int64)
    whole = pa.Table.from_batches(list(reader.read_rows(task, rows)))
    assert whole.column("id").to_pylist() == rows.tolist()
    names = pick.sample(["id", "s", "d"], pick.randrange(1, 4))
    known = table.select(names).take(pa.array(rows))
    again = pa.Table.from_batches(list(reader.read_rows(task, rows, known=known)))
    assert again.equals(whole)
