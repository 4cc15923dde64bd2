"""UPDATE with deletion vectors rewrites few rows on the driver: the same table Spark's job gives.

Oracle: the same UPDATE on two copies of a NULL-heavy table, one through the driver path and
one forced through the Spark job, must leave the same rows and the same statistics in the
files it adds. Expressions the driver cannot evaluate exactly, tables whose writes need Spark
and changes past the caps go to the Spark job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.kernel.metrics import UpdateMetrics
from deltatx.kernel.schema import parse_schema
from deltatx.spark.commands import driver_update, update
from deltatx.spark.commands.driver_update import translate_value

from .driver_dml import added_stats, copy_table, dml_data, rows_text

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


@pytest.fixture(scope="module")
def base(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("driver-update") / "base")
    deltatx.write(dml_data(spark, 0, 60).repartition(2), path, partition_by=["p"])
    dt = DeltaTable.for_path(spark, path)
    dt.delete("id % 11 = 0")  # rows already deleted must stay deleted
    deltatx.write(dml_data(spark, 60, 90).repartition(2), path, mode="append")
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
    on_driver, on_spark = copy_table(base, root), copy_table(base, root)
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
    assert rows_text(a.to_df()) == rows_text(b.to_df()), (condition, sets)
    stats_a, stats_b = added_stats(a), added_stats(b)
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
    deltatx.write(dml_data(spark, 0, 20), path, properties={"delta.constraints.pos": "id >= 0"})
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
    deltatx.write(dml_data(spark, 0, 40), path, partition_by=["p"], properties=props)
    DeltaTable.for_path(spark, path).delete("id % 7 = 0")
    sets = {"n": "n * 2 + sm", "p": "'q'", "d": "d - 0.25"}
    assert _update_both(spark, path, tmp_path, spy, "s IS NULL OR n = 1", sets)
