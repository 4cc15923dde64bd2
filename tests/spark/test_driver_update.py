"""UPDATE with deletion vectors rewrites few rows on the driver: the same table Spark's job gives.

Oracle: the same UPDATE on two copies of a NULL-heavy table, one through the driver path and
one forced through the Spark job, must leave the same rows and the same statistics in the
files it adds. Expressions the driver cannot evaluate exactly, tables whose writes need Spark
and changes past the caps go to the Spark job.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.kernel.metrics import UpdateMetrics
from deltatx.kernel.schema import parse_schema
from deltatx.spark.commands import driver_update, update
from deltatx.spark.commands.driver_update import translate_value

# Per column, SET values: most the driver evaluates, some it must leave to Spark (a cast,
# a function, an overflow of the column's type).
_SETS: Mapping[str, list[str]] = {
    "id": ["id + 1000", "n", "id * -3", "NULL", "sm"],
    "n": ["NULL", "0", "n + 1", "n * 2", "n - id", "id", "-7", "(n + 1) * 3", "n + 2147483647"],
    "sm": ["sm + 1", "NULL", "7", "n", "sm * 1000", "40000"],
    "s": ["'z'", "NULL", "t", "'é ü'", "upper(s)", "CAST(n AS STRING)"],
    "t": ["s", "'long string past the thirty two characters of stats'"],
    "b": ["true", "NULL", "false", "NOT b", "b"],
    "d": ["NULL", "d", "d + 1", "d * 0.1", "d - n", "1.5e3 - d", "0.1", "n + 0.5", "id * 3"],
    "day": ["NULL", "day", "DATE '2024-01-01'"],
    "p": ["'x'", "'q'", "NULL"],
}
_CONDITIONS = [
    "n = 3",
    "id < 30",
    "s IS NULL",
    "b",
    "n IN (1, NULL)",
    "p = 'x'",
    "NOT (n <=> 2) AND id % 2 = 0",
    "NOT (n <=> 2)",
    "sm > 2 OR t = 'b'",
    "id = 1000000",
]


def _data(spark: SparkSession, lo: int, hi: int) -> DataFrame:
    i = F.col("id")
    letters = F.array(*map(F.lit, "abc"))
    return spark.range(lo, hi).select(
        i,
        F.when(i % 4 == 0, None).otherwise((i % 5).cast("int")).alias("n"),
        F.when(i % 5 == 0, None).otherwise((i % 7).cast("short")).alias("sm"),
        F.when(i % 6 == 0, None)
        .otherwise(F.element_at(letters, (i % 3 + 1).cast("int")))
        .alias("s"),
        F.when(i % 3 == 0, None)
        .otherwise(F.element_at(letters, (i % 2 + 1).cast("int")))
        .alias("t"),
        F.when(i % 7 == 0, None).otherwise(i % 2 == 0).alias("b"),
        F.when(i % 9 == 0, F.lit(float("nan")))
        .when(i % 8 == 0, None)
        .otherwise(i * 0.5)
        .alias("d"),
        F.when(i % 2 == 0, None)
        .otherwise(F.date_add(F.lit("2020-01-01"), i.cast("int")))
        .alias("day"),
        F.when(i % 10 == 0, None)
        .otherwise(F.element_at(F.array(F.lit("x"), F.lit("y")), (i % 2 + 1).cast("int")))
        .alias("p"),
    )


@pytest.fixture(scope="module")
def base(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("driver-update") / "base")
    deltatx.write(_data(spark, 0, 60).repartition(2), path, partition_by=["p"])
    dt = DeltaTable.for_path(spark, path)
    dt.delete("id % 11 = 0")  # rows already deleted must stay deleted
    deltatx.write(_data(spark, 60, 90).repartition(2), path, mode="append")
    return path


class _Spy:
    """Records what the driver path returned; can force the Spark job instead."""

    def __init__(self, *, force_spark: bool) -> None:
        self.force_spark = force_spark
        self.results: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.force_spark:
            return None
        out = driver_update.update_on_driver(*args, **kwargs)
        self.results.append(out)
        return out


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Spy]:
    s = _Spy(force_spark=False)
    monkeypatch.setattr(update, "update_on_driver", s)
    yield s


def _copy(base: str, root: Path) -> str:
    target = root / uuid.uuid4().hex
    shutil.copytree(base, target)
    return str(target)


def _rows(df: DataFrame) -> list[str]:
    # As text: NaN equals itself only there.
    return sorted(repr(tuple(r)) for r in df.collect())


def _added_stats(dt: DeltaTable) -> dict[str, Any]:
    """The statistics of the files the last commit added, merged over files.

    A bound is known when every added file with a value in the column has it (how the rows
    are split into files may differ between the two paths).
    """
    snapshot = dt.log.snapshot()
    new = _commit_adds(dt, snapshot.version)
    files = [json.loads(f.stats or "{}") for f in snapshot.add_files() if f.path in new]
    merged: dict[str, Any] = {"numRecords": sum(f["numRecords"] for f in files)}
    nulls: dict[str, int] = {}
    for f in files:
        for col, n in f["nullCount"].items():
            nulls[col] = nulls.get(col, 0) + n
    merged["nullCount"] = nulls
    for which, pick in (("minValues", min), ("maxValues", max)):
        bounds: dict[str, Any] = {}
        for col in nulls:
            values = [f[which].get(col) for f in files if f["nullCount"][col] < f["numRecords"]]
            if values and all(v is not None for v in values):
                bounds[col] = pick(values)
        merged[which] = bounds
    return merged


def _commit_adds(dt: DeltaTable, version: int) -> set[str]:
    """The paths the commit at ``version`` added without a deletion vector (new rows)."""
    log_file = Path(dt.log.table_path) / "_delta_log" / f"{version:020d}.json"
    adds: set[str] = set()
    for line in log_file.read_text().splitlines():
        action = json.loads(line)
        if "add" in action and action["add"].get("deletionVector") is None:
            adds.add(action["add"]["path"])
    return adds


def _update(
    spark: SparkSession, path: str, condition: str, sets: dict[str, str]
) -> tuple[UpdateMetrics | None, Exception | None]:
    try:
        return DeltaTable.for_path(spark, path).update(condition, set=sets), None
    except Exception as exc:  # the two paths must refuse alike
        return None, exc


def _update_both(
    spark: SparkSession, base: str, root: Path, spy: _Spy, condition: str, sets: dict[str, str]
) -> bool:
    """Runs the UPDATE both ways; asserts the same outcome; True if the driver wrote it."""
    on_driver, on_spark = _copy(base, root), _copy(base, root)
    spy.results.clear()
    spy.force_spark = False
    driver_metrics, driver_error = _update(spark, on_driver, condition, sets)
    wrote = any(r is not None for r in spy.results)
    spy.force_spark = True
    spark_metrics, spark_error = _update(spark, on_spark, condition, sets)
    assert type(driver_error) is type(spark_error), (driver_error, spark_error)
    if driver_metrics is None or spark_metrics is None:
        assert not wrote
        return False
    a, b = DeltaTable.for_path(spark, on_driver), DeltaTable.for_path(spark, on_spark)
    assert _rows(a.to_df()) == _rows(b.to_df()), (condition, sets)
    stats_a, stats_b = _added_stats(a), _added_stats(b)
    assert stats_a == stats_b, (condition, sets, stats_a, stats_b)
    assert driver_metrics.num_updated_rows == spark_metrics.num_updated_rows
    assert driver_metrics.num_deletion_vectors_added == spark_metrics.num_deletion_vectors_added
    return wrote


@settings(
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    condition=st.sampled_from(_CONDITIONS),
    sets=st.dictionaries(
        st.sampled_from(sorted(_SETS)), st.just(""), min_size=1, max_size=3
    ).flatmap(lambda keys: st.fixed_dictionaries({k: st.sampled_from(_SETS[k]) for k in keys})),
)
def test_driver_update_matches_the_spark_job(
    spark: SparkSession,
    base: str,
    tmp_path_factory: pytest.TempPathFactory,
    spy: _Spy,
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
    ],
)
def test_simple_updates_run_no_spark_job(
    spark: SparkSession,
    base: str,
    tmp_path: Path,
    spy: _Spy,
    condition: str,
    sets: dict[str, str],
) -> None:
    assert _update_both(spark, base, tmp_path, spy, condition, sets)
    path = _copy(base, tmp_path)
    spy.force_spark = False
    sc = spark.sparkContext
    group = f"driver-update-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "driver update")
    try:
        DeltaTable.for_path(spark, path).update(condition, set=sets)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert sc.statusTracker().getJobIdsForGroup(group) == []


@pytest.mark.parametrize(
    "sets",
    [
        {"n": "n + 2147483647"},  # past INT for some rows: Spark wraps or fails
        {"s": "upper(s)"},
        {"d": "n + 0.5"},  # decimal arithmetic, then a cast
        {"sm": "40000"},
    ],
)
def test_values_the_driver_cannot_evaluate_exactly_go_to_spark(
    spark: SparkSession, base: str, tmp_path: Path, spy: _Spy, sets: dict[str, str]
) -> None:
    assert not _update_both(spark, base, tmp_path, spy, "n IS NOT NULL", sets)


def test_past_the_row_cap_the_spark_job_writes(
    spark: SparkSession, base: str, tmp_path: Path, spy: _Spy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_ROWS", 5)
    assert not _update_both(spark, base, tmp_path, spy, "id < 30", {"n": "0"})
    assert _update_both(spark, base, tmp_path, spy, "id < 4", {"n": "0"})


def test_past_the_byte_cap_the_spark_job_writes(
    spark: SparkSession, base: str, tmp_path: Path, spy: _Spy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_BYTES", 10)
    assert not _update_both(spark, base, tmp_path, spy, "id < 30", {"n": "0"})


def test_a_table_with_constraints_goes_to_spark(
    spark: SparkSession, tmp_path: Path, spy: _Spy
) -> None:
    path = str(tmp_path / "c")
    deltatx.write(_data(spark, 0, 20), path, properties={"delta.constraints.pos": "id >= 0"})
    assert not _update_both(spark, path, tmp_path, spy, "n = 3", {"n": "0"})


def test_null_into_a_not_null_column_goes_to_spark(
    spark: SparkSession, tmp_path: Path, spy: _Spy
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
    spark: SparkSession, tmp_path: Path, spy: _Spy
) -> None:
    path = str(tmp_path / "mapped")
    props = {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}
    deltatx.write(_data(spark, 0, 40), path, partition_by=["p"], properties=props)
    DeltaTable.for_path(spark, path).delete("id % 7 = 0")
    sets = {"n": "n * 2 + sm", "p": "'q'", "d": "d - 0.25"}
    assert _update_both(spark, path, tmp_path, spy, "s IS NULL OR n = 1", sets)
