"""delta-spark reads every table deltatx writes and sees the same rows at every version.

Table-driven: each scenario builds a table with deltatx's public API, step by step; the test
then compares both engines' rows at every version under ``make peer`` (at a sample of them,
``tables.compared_versions``, under ``make test``), protocol features included (FEATURES: the
table properties that switch each on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable

from .engine import DeltaSpark
from .tables import (
    canonical,
    checkpoints,
    compared_versions,
    events,
    has_deletion_vectors,
    latest_version,
    ours,
    scenario_params,
    table_properties,
)

Step = Callable[[SparkSession, str], object]


@dataclass(frozen=True)
class Scenario:
    properties: dict[str, str]
    steps: list[Step]
    partition_by: list[str] | None = None
    expect_dv: bool = False
    expect_checkpoint: bool = False
    schema: str = "id BIGINT, date STRING, v DOUBLE"
    extra: dict[str, str] = field(default_factory=dict)
    final_partition_by: list[str] | None = None  # after renames; else partition_by


def _append(start: int, n: int, day: str = "2024-01-01") -> Step:
    return lambda spark, path: deltatx.write(events(spark, start, n, day), path)


def _delete(condition: str) -> Step:
    return lambda spark, path: DeltaTable.for_path(spark, path).delete(condition)


def _update(condition: str, set_: dict[str, str]) -> Step:
    return lambda spark, path: DeltaTable.for_path(spark, path).update(
        condition=condition, set=set_
    )


def _merge(start: int, n: int, day: str = "2024-01-01") -> Step:
    def run(spark: SparkSession, path: str) -> object:
        source = events(spark, start, n, day).alias("s")
        return (
            DeltaTable.for_path(spark, path)
            .alias("t")
            .merge(source, "t.id = s.id")
            .when_matched_update(set={"v": "s.v + 100"})
            .when_not_matched_insert_all()
            .execute()
        )

    return run


def _optimize(spark: SparkSession, path: str) -> object:
    return DeltaTable.for_path(spark, path).optimize().execute_compaction()


def _zorder(spark: SparkSession, path: str) -> object:
    return DeltaTable.for_path(spark, path).optimize().execute_z_order_by("id")


def _purge(spark: SparkSession, path: str) -> object:
    return DeltaTable.for_path(spark, path).reorg_purge()


def _overwrite_day(day: str, start: int) -> Step:
    return lambda spark, path: deltatx.write(
        events(spark, start, 5, day), path, mode="overwrite", replace_where=f"date = '{day}'"
    )


def _set_properties(properties: dict[str, str]) -> Step:
    return lambda spark, path: DeltaTable.for_path(spark, path).set_properties(properties)


POSITIVE = {"delta.constraints.positive": "id >= 0"}
NO_DV = {"delta.enableDeletionVectors": "false"}
DV = {"delta.enableDeletionVectors": "true"}

SCENARIOS: dict[str, Scenario] = {
    "appends-overwrite": Scenario(
        NO_DV,
        [
            _append(0, 20),
            _append(20, 20),
            lambda spark, path: deltatx.write(events(spark, 100, 7), path, mode="overwrite"),
            _append(200, 3),
        ],
    ),
    "partitioned-dml": Scenario(
        NO_DV,
        [
            _append(0, 10, "2024-01-01"),
            _append(10, 10, "2024-01-02"),
            _append(20, 10, "2024-01-03"),
            _delete("date = '2024-01-02'"),
            _update("id % 3 = 0", {"v": "v * 2"}),
            _merge(25, 10, "2024-01-03"),
            _overwrite_day("2024-01-01", 500),
        ],
        partition_by=["date"],
    ),
    "deletion-vectors": Scenario(
        DV,
        [
            _append(0, 50),
            _append(50, 50),
            _delete("id % 4 = 0"),
            _update("id % 5 = 1", {"v": "-v"}),
            _merge(90, 20),
            _delete("id between 10 and 12"),
            _purge,
        ],
        expect_dv=True,
    ),
    "deletion-vectors-partitioned": Scenario(
        DV,
        [
            _append(0, 30, "2024-01-01"),
            _append(30, 30, "2024-01-02"),
            _delete("id % 3 = 0"),
            _update("date = '2024-01-02' and id % 2 = 0", {"v": "0.0"}),
            _merge(55, 10, "2024-01-02"),
        ],
        partition_by=["date"],
        expect_dv=True,
    ),
    "checkpoints": Scenario(
        {**NO_DV, "delta.checkpointInterval": "2"},
        [*(_append(i * 5, 5) for i in range(6)), _delete("id < 7"), _append(100, 2)],
        expect_checkpoint=True,
    ),
    "checkpoints-with-dvs": Scenario(
        {**DV, "delta.checkpointInterval": "3"},
        [
            _append(0, 40),
            _delete("id % 2 = 0"),
            _append(40, 10),
            _delete("id = 41"),
            _append(60, 1),
        ],
        expect_dv=True,
        expect_checkpoint=True,
    ),
    # CHECK constraints: deltatx adds one (a property), writes under it, and delta-spark must
    # both read every version and enforce the constraint on its own writes.
    "check-constraint": Scenario(
        DV,
        [
            _append(0, 10),
            _set_properties(POSITIVE),
            _append(10, 10),
            _delete("id % 4 = 0"),
            _update("id = 5", {"v": "-v"}),
            _merge(15, 10),
        ],
        expect_dv=True,
    ),
    "optimize-zorder": Scenario(
        DV,
        [*(_append(i * 4, 4) for i in range(5)), _delete("id = 3"), _optimize, _zorder],
        expect_dv=True,
    ),
}


def _rename(old: str, new: str) -> Step:
    return lambda spark, path: DeltaTable.for_path(spark, path).rename_column(old, new)


def _drop(*names: str) -> Step:
    return lambda spark, path: DeltaTable.for_path(spark, path).drop_columns(*names)


def _add_columns(ddl: str) -> Step:
    return lambda spark, path: DeltaTable.for_path(spark, path).add_columns(ddl)


def _append_as(start: int, n: int, day: str, columns: dict[str, str]) -> Step:
    """Appends rows whose columns are the table's current (renamed, added) ones."""

    def run(spark: SparkSession, path: str) -> object:
        rows = events(spark, start, n, day).withColumn("note", F.lit("n"))
        current = DeltaTable.for_path(spark, path).to_df().columns
        renamed = rows.select(*[F.col(src).alias(dst) for src, dst in columns.items()])
        return deltatx.write(renamed.select(*current), path)

    return run


def _column_mapping(mode: str, props: dict[str, str]) -> Scenario:
    """Renames (a partition column too), drops and re-adds: metadata-only, rows must stay."""
    return Scenario(
        {**props, "delta.columnMapping.mode": mode},
        [
            _append(0, 10, "2024-01-01"),
            _rename("v", "value"),
            _rename("date", "day"),
            _append_as(10, 10, "2024-01-02", {"id": "id", "date": "day", "v": "value"}),
            _delete("value < 3"),
            _update("id % 3 = 0", {"value": "-value"}),
            _add_columns("note STRING"),
            _append_as(
                30, 3, "2024-01-03", {"id": "id", "date": "day", "v": "value", "note": "note"}
            ),
            _drop("value"),
        ],
        partition_by=["date"],
        final_partition_by=["day"],
        expect_dv=props == DV,
    )


SCENARIOS["column-mapping-name"] = _column_mapping("name", NO_DV)
SCENARIOS["column-mapping-id"] = _column_mapping("id", DV)

# Features the protocol-coverage work added to deltatx, each switched on by its properties.
FEATURES: dict[str, dict[str, str]] = {
    "change-data-feed": {"delta.enableChangeDataFeed": "true"},
    "v2-checkpoints": {"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"},
    "in-commit-timestamps": {"delta.enableInCommitTimestamps": "true"},
}
for _name, _props in FEATURES.items():
    SCENARIOS[_name] = Scenario(
        {**NO_DV, **_props},
        [_append(0, 5), _delete("id = 2"), _append(5, 5)],
        expect_checkpoint="delta.checkpointInterval" in _props,
    )

CASES = list(SCENARIOS)


@pytest.mark.parametrize(
    "name",
    scenario_params(CASES, sample={"checkpoints-with-dvs", "column-mapping-id"}),
)
def test_delta_spark_reads_every_version(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path, name: str
) -> None:
    scenario = SCENARIOS[name]
    path = str(tmp_path / name)
    DeltaTable.create(
        spark,
        path,
        schema=scenario.schema,
        partition_by=scenario.partition_by,
        properties=scenario.properties,
    )
    for step in scenario.steps:
        step(spark, path)
    latest = latest_version(path)
    assert latest == len(scenario.steps), "every step commits one version"
    assert has_deletion_vectors(path) == scenario.expect_dv
    assert bool(checkpoints(path)) == scenario.expect_checkpoint
    assert delta_spark.version(path) == latest
    for version in compared_versions(path):
        theirs = canonical(delta_spark.rows(path, version))
        assert theirs == ours(spark, path, version), f"version {version}"
    if POSITIVE.items() <= table_properties(path).items():
        refused = delta_spark.try_exec(
            "spark.sql(args['s'])", s=f"INSERT INTO delta.`{path}` VALUES (-1, '2024-01-01', 1.0)"
        )
        assert not refused["ok"] and "positive" in str(refused.get("message")), refused
        assert latest_version(path) == latest, "delta-spark enforces deltatx's constraint"
    if scenario.partition_by:
        detail = delta_spark.exec(
            "result = DeltaTable.forPath(spark, args['p']).detail().collect()[0].asDict()", p=path
        )
        assert detail["partitionColumns"] == (scenario.final_partition_by or scenario.partition_by)
