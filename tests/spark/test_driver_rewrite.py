"""Copy-on-write DELETE and UPDATE rewrite small changes on the driver: the table Spark's job gives.

Oracle: the same statement on two copies of a NULL-heavy table that holds rows deleted by an
earlier deletion vector (written before the table turned vectors off), one through the driver
path and one forced through the Spark job, must leave the same rows, the same statistics in
the files it adds and the same metrics. What the driver cannot run exactly, tables whose
writes need Spark and changes past the caps go to the Spark job; a rewrite that stops part
way leaves no file behind.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.spark.commands import delete, driver_rewrite, driver_update, update

from .driver_dml import (
    DML_CONDITIONS,
    DriverSpy,
    added_stats,
    commit_adds,
    copy_table,
    dml_data,
    run_both_ways,
)

# SET values the driver evaluates (the driver UPDATE suite covers the ones it refuses).
_SETS: Mapping[str, list[str]] = {
    "n": ["NULL", "n + 1", "n - id", "-7"],
    "s": ["'z'", "NULL", "t"],
    "b": ["NOT b", "true"],
    "d": ["d + 1", "d * 0.1", "NULL"],
    "p": ["'q'", "NULL"],
}


@pytest.fixture(scope="module")
def base(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("driver-rewrite") / "base")
    deltatx.write(
        dml_data(spark, 0, 60).repartition(2),
        path,
        partition_by=["p"],
        properties={"delta.enableDeletionVectors": "true"},
    )
    dt = DeltaTable.for_path(spark, path)
    dt.delete("id % 11 = 0")  # rows already deleted by a vector must stay deleted
    dt.set_properties({"delta.enableDeletionVectors": "false"})
    deltatx.write(dml_data(spark, 60, 90).repartition(2), path, mode="append")
    return path


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[DriverSpy]:
    s = DriverSpy(driver_rewrite.rewrite_on_driver)
    monkeypatch.setattr(delete, "rewrite_on_driver", s)
    monkeypatch.setattr(update, "rewrite_on_driver", s)
    yield s


def _run(dt: DeltaTable, condition: str, sets: dict[str, str] | None) -> Any:
    return dt.delete(condition) if sets is None else dt.update(condition, set=sets)


def _both(
    spark: SparkSession,
    base: str,
    root: Path,
    spy: DriverSpy,
    condition: str,
    sets: dict[str, str] | None,
) -> bool:
    """Runs the statement both ways; asserts the same outcome; True if the driver wrote it."""
    both = run_both_ways(spark, base, root, spy, lambda dt: _run(dt, condition, sets))
    if both is None:
        return False
    a, b = both.driver_table, both.spark_table
    if commit_adds(a, a.version()) or commit_adds(b, b.version()):
        assert added_stats(a) == added_stats(b), (condition, sets)
    changed = "num_deleted_rows" if sets is None else "num_updated_rows"
    for name in (changed, "num_copied_rows", "num_removed_files"):
        assert getattr(both.driver_metrics, name) == getattr(both.spark_metrics, name), name
    return both.wrote


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    condition=st.sampled_from(DML_CONDITIONS),
    sets=st.none()
    | st.dictionaries(st.sampled_from(sorted(_SETS)), st.just(""), min_size=1, max_size=3).flatmap(
        lambda keys: st.fixed_dictionaries({k: st.sampled_from(_SETS[k]) for k in keys})
    ),
)
def test_the_driver_rewrite_matches_the_spark_job(
    spark: SparkSession,
    base: str,
    tmp_path_factory: pytest.TempPathFactory,
    spy: DriverSpy,
    condition: str,
    sets: dict[str, str] | None,
) -> None:
    _both(spark, base, tmp_path_factory.mktemp("r"), spy, condition, sets)


@pytest.mark.parametrize(
    "sets",
    [None, {"n": "n + 1", "s": "'z'"}, {"p": "'q'", "d": "NULL"}],
    ids=["delete", "u1", "u2"],
)
def test_small_changes_run_no_spark_job(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, sets: dict[str, str] | None
) -> None:
    assert _both(spark, base, tmp_path, spy, "n = 3", sets)
    path = copy_table(base, tmp_path)
    spy.force_spark = False
    sc = spark.sparkContext
    group = f"driver-rewrite-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "driver rewrite")
    try:
        _run(DeltaTable.for_path(spark, path), "n = 3", sets)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert sc.statusTracker().getJobIdsForGroup(group) == []


def test_an_update_keeps_each_files_row_order(
    spark: SparkSession, tmp_path: Path, spy: DriverSpy
) -> None:
    path = str(tmp_path / "ordered")
    rows = dml_data(spark, 0, 500).orderBy((F.lit(500) - F.col("id")) % 97)
    deltatx.write(rows.coalesce(1), path, properties={"delta.enableDeletionVectors": "false"})
    (before,) = Path(path).glob("*.parquet")
    order = pq.read_table(before, columns=["id"]).column("id").to_pylist()
    DeltaTable.for_path(spark, path).update("n = 3", set={"n": "n + 10"})
    assert spy.results and spy.results[-1] is not None
    (after,) = [p for p in Path(path).glob("*.parquet") if p != before]
    table = pq.read_table(after, columns=["id", "n"])
    assert table.column("id").to_pylist() == order
    values = dict(zip(table.column("id").to_pylist(), table.column("n").to_pylist(), strict=True))
    expected = {r["id"]: r["n"] for r in dml_data(spark, 0, 500).collect()}
    assert values == {k: (v + 10 if v == 3 else v) for k, v in expected.items()}


def test_past_the_caps_the_spark_job_writes(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every row of a touched file counts against the cap, not only the matched ones.
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_ROWS", 2)
    assert not _both(spark, base, tmp_path, spy, "id = 61", None)
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_ROWS", 1_000_000)
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_BYTES", 10)
    assert not _both(spark, base, tmp_path, spy, "id = 61", {"n": "0"})


def test_a_delete_of_every_live_row_of_a_file_reads_nothing_more(
    spark: SparkSession, base: str, tmp_path: Path, spy: DriverSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The files holding ids 60..89 go whole: nothing is rewritten, so no cap applies.
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_ROWS", 0)
    assert _both(spark, base, tmp_path, spy, "id >= 60", None)
    staged = spy.results[0]
    assert staged.added == [] and staged.removed


def test_a_table_with_constraints_goes_to_spark(
    spark: SparkSession, tmp_path: Path, spy: DriverSpy
) -> None:
    path = str(tmp_path / "c")
    properties = {"delta.constraints.pos": "id >= 0", "delta.enableDeletionVectors": "false"}
    deltatx.write(dml_data(spark, 0, 20), path, properties=properties)
    assert not _both(spark, path, tmp_path, spy, "n = 3", {"n": "0"})
    assert not _both(spark, path, tmp_path, spy, "n = 3", None)


def test_a_table_mapping_columns_by_name_rewrites_on_the_driver(
    spark: SparkSession, tmp_path: Path, spy: DriverSpy
) -> None:
    path = str(tmp_path / "mapped")
    props = {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "false"}
    deltatx.write(dml_data(spark, 0, 40), path, partition_by=["p"], properties=props)
    assert _both(spark, path, tmp_path, spy, "s IS NULL OR n = 1", {"n": "n * 2", "p": "'q'"})
    assert _both(spark, path, tmp_path, spy, "s IS NULL OR n = 1", None)


def _data_files(path: str) -> set[Path]:
    return set(Path(path).rglob("*.parquet"))


@pytest.mark.parametrize("stop", ["gives-up", "raises"])
def test_a_rewrite_stopped_part_way_leaves_no_file_behind(
    spark: SparkSession,
    base: str,
    tmp_path: Path,
    spy: DriverSpy,
    monkeypatch: pytest.MonkeyPatch,
    stop: str,
) -> None:
    path = copy_table(base, tmp_path)
    files = _data_files(path)
    version = DeltaTable.for_path(spark, path).version()
    real = driver_rewrite.apply_assignments
    calls: list[int] = []

    def second_stops(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            if stop == "raises":
                raise OSError("disk full")
            return None
        return real(*args, **kwargs)

    monkeypatch.setattr(driver_rewrite, "apply_assignments", second_stops)
    monkeypatch.setattr(driver_rewrite, "driver_pool", _inline_pool)
    dt = DeltaTable.for_path(spark, path)
    if stop == "raises":
        with pytest.raises(OSError, match="disk full"):
            dt.update("n = 3", set={"n": "0"})
        assert _data_files(path) == files
        assert DeltaTable.for_path(spark, path).version() == version
        return
    dt.update("n = 3", set={"n": "0"})
    assert len(calls) >= 2 and spy.results == [None]
    # The Spark job wrote the statement; none of the driver's files is among the table's.
    assert DeltaTable.for_path(spark, path).version() == version + 1
    live = {Path(path) / f.path for f in dt.log.snapshot().add_files()}
    assert not (_data_files(path) - files - live)


class _InlinePool:
    """Runs submitted work at once, in order, so which file stops is known."""

    def submit(self, fn: Any, *args: Any) -> Any:
        from concurrent.futures import Future

        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def _inline_pool() -> _InlinePool:
    return _InlinePool()


def _merge(spark: SparkSession, dt: DeltaTable) -> Any:
    source = dml_data(spark, 85, 95).alias("s")
    return (
        dt.alias("t")
        .merge(source, "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


@pytest.mark.parametrize(
    ("vectors", "statement"),
    [
        (False, lambda spark, dt: dt.delete("n = 3")),
        (False, lambda spark, dt: dt.update("n = 3", set={"n": "n + 1"})),
        (True, lambda spark, dt: dt.update("n = 3", set={"n": "n + 1"})),
        (False, _merge),
        (True, _merge),
    ],
    ids=["delete", "update", "update-with-vectors", "merge", "merge-with-vectors"],
)
def test_a_session_writing_another_codec_gets_the_files_spark_writes(
    spark: SparkSession,
    base: str,
    tmp_path: Path,
    vectors: bool,
    statement: Callable[[SparkSession, DeltaTable], Any],
) -> None:
    # The driver's writer only writes snappy; the statement's new files must follow the
    # session's codec all the same, so the statement goes to Spark.
    path = copy_table(base, tmp_path)
    dt = DeltaTable.for_path(spark, path)
    dt.set_properties({"delta.enableDeletionVectors": str(vectors).lower()})
    spark.conf.set(driver_update.CODEC_SETTING, "zstd")
    try:
        statement(spark, dt)
    finally:
        spark.conf.unset(driver_update.CODEC_SETTING)
    new = commit_adds(dt, dt.version())
    assert new
    for relative in new:
        meta = pq.ParquetFile(Path(path) / relative).metadata
        codecs = {meta.row_group(0).column(i).compression for i in range(meta.num_columns)}
        assert codecs == {"ZSTD"}, (relative, codecs)
