"""CHECK constraints: ADD/DROP CONSTRAINT (API, SQL, properties) and enforcement on every write.

PROTOCOL.md "CHECK Constraints": writers must validate that every row they write satisfies
every ``delta.constraints.*`` expression, and the table needs the ``checkConstraints`` writer
feature (implied by writer version 3). A refused write publishes no version.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    ConstraintViolationError,
    InvalidArgumentError,
    InvalidConditionError,
)
from deltatx.kernel.features import writer_features
from deltatx.log.delta_log import DeltaLog

SCHEMA = "id BIGINT, v BIGINT"


def _df(spark: SparkSession, rows: list[tuple[int, int]]) -> DataFrame:
    return spark.createDataFrame(rows, SCHEMA)


def _table(spark: SparkSession, path: Path, *, dv: bool = True) -> DeltaTable:
    props = {"delta.enableDeletionVectors": str(dv).lower()}
    deltatx.write(_df(spark, [(1, 10), (2, 20)]), str(path), properties=props)
    return DeltaTable.for_path(spark, str(path))


def _rows(spark: SparkSession, path: Path) -> list[tuple[int, int]]:
    got = DeltaTable.for_path(spark, str(path)).to_df().collect()
    return sorted((r["id"], r["v"]) for r in got)


@pytest.mark.parametrize("dv", [True, False])
def test_add_constraint_upgrades_the_protocol(
    spark: SparkSession, tmp_path: Path, dv: bool
) -> None:
    dt = _table(spark, tmp_path / "t", dv=dv)
    version = dt.add_constraint("Positive", "v > 0")
    snapshot = DeltaLog.for_table(str(tmp_path / "t")).snapshot()
    assert snapshot.version == version
    assert snapshot.metadata.configuration["delta.constraints.positive"] == "v > 0"
    assert "checkConstraints" in writer_features(snapshot.protocol)
    if not dv:
        # A legacy table stays legacy: writer version 3 implies checkConstraints.
        assert (snapshot.protocol.min_reader_version, snapshot.protocol.min_writer_version) == (
            1,
            3,
        )


def test_adding_a_constraint_checks_existing_rows(spark: SparkSession, tmp_path: Path) -> None:
    dt = _table(spark, tmp_path / "t")
    before = dt.version()
    with pytest.raises(ConstraintViolationError) as info:
        dt.add_constraint("small", "v < 15")
    assert "small" in str(info.value) and "20" in str(info.value)
    assert dt.version() == before
    with pytest.raises(InvalidConditionError):
        dt.add_constraint("bad", "nope > 1")
    with pytest.raises(InvalidArgumentError, match="identifier"):
        dt.add_constraint("no spaces", "v > 0")
    dt.add_constraint("pos", "v > 0")
    with pytest.raises(InvalidArgumentError, match="already has a constraint"):
        dt.add_constraint("POS", "v > 1")


def test_a_constraint_set_as_a_property_checks_existing_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    dt = _table(spark, tmp_path / "t")
    with pytest.raises(ConstraintViolationError):
        dt.set_properties({"delta.constraints.small": "v < 15"})
    # A write that sets the property checks the rows already in the table too.
    with pytest.raises(ConstraintViolationError, match="small"):
        deltatx.write(
            _df(spark, [(3, 5)]),
            str(tmp_path / "t"),
            properties={"delta.constraints.small": "v < 15"},
        )
    assert (3, 5) not in _rows(spark, tmp_path / "t")
    dt.set_properties({"delta.constraints.pos": "v > 0"})
    with pytest.raises(ConstraintViolationError, match="pos"):
        deltatx.write(_df(spark, [(3, -5)]), str(tmp_path / "t"))


def _append(spark: SparkSession, path: str) -> object:
    return deltatx.write(_df(spark, [(3, 30), (4, -40)]), path)


def _overwrite(spark: SparkSession, path: str) -> object:
    return deltatx.write(_df(spark, [(5, -1)]), path, mode="overwrite")


def _update(spark: SparkSession, path: str) -> object:
    return DeltaTable.for_path(spark, path).update(set={"v": "v - 15"}, condition="id = 1")


def _merge(spark: SparkSession, path: str) -> object:
    source = _df(spark, [(2, -2), (9, 90)])
    return (
        DeltaTable.for_path(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def _datasource_append(spark: SparkSession, path: str) -> object:
    _df(spark, [(7, -7)]).write.format("delta").mode("append").save(path)
    return None


def _datasource_overwrite(spark: SparkSession, path: str) -> object:
    _df(spark, [(7, 70), (8, -8)]).write.format("delta").mode("overwrite").save(path)
    return None


def _sql_insert(spark: SparkSession, path: str) -> object:
    return deltatx.sql(f"INSERT INTO delta.`{path}` VALUES (11, -11)", spark=spark)


WRITES: dict[str, Callable[[SparkSession, str], object]] = {
    "append": _append,
    "overwrite": _overwrite,
    "update": _update,
    "merge": _merge,
    "format(delta) append": _datasource_append,
    "format(delta) overwrite": _datasource_overwrite,
    "sql insert": _sql_insert,
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_every_write_path_enforces_the_constraint(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    path = tmp_path / "t"
    dt = _table(spark, path)
    dt.add_constraint("pos", "v > 0")
    before, rows = dt.version(), _rows(spark, path)
    # The format("delta") tasks run in Python workers: Spark re-raises their typed error
    # wrapped, with the error's class name and message inside.
    with pytest.raises(Exception) as info:
        WRITES[name](spark, str(path))
    assert isinstance(info.value, ConstraintViolationError) or (
        name.startswith("format") and "ConstraintViolationError" in str(info.value)
    )
    assert "pos" in str(info.value)
    assert dt.version() == before
    assert _rows(spark, path) == rows


def test_sql_add_and_drop_constraint(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(spark, path)
    deltatx.sql(
        f"ALTER TABLE delta.`{path}` ADD CONSTRAINT pos CHECK (v > 0 AND id IN (1, 2, 3))",
        spark=spark,
    )
    with pytest.raises(ConstraintViolationError):
        deltatx.write(_df(spark, [(4, 40)]), str(path))
    deltatx.write(_df(spark, [(3, 30)]), str(path))
    deltatx.sql(f"ALTER TABLE delta.`{path}` DROP CONSTRAINT pos", spark=spark)
    deltatx.write(_df(spark, [(4, -40)]), str(path))
    assert (4, -40) in _rows(spark, path)
    with pytest.raises(InvalidArgumentError, match="no constraint named"):
        deltatx.sql(f"ALTER TABLE delta.`{path}` DROP CONSTRAINT pos", spark=spark)
    deltatx.sql(f"ALTER TABLE delta.`{path}` DROP CONSTRAINT IF EXISTS pos", spark=spark)
    history = DeltaTable.for_path(spark, str(path)).history().collect()
    operations = [r["operation"] for r in history]
    assert "ADD CONSTRAINT" in operations and "DROP CONSTRAINT" in operations


def test_format_delta_options_set_table_properties_when_creating(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "opts")
    writer = _df(spark, [(1, 10)]).write.format("delta").mode("append")
    writer.option("delta.appendOnly", "true").option("delta.constraints.pos", "v > 0").save(path)
    conf = DeltaLog.for_table(path).snapshot().metadata.configuration
    assert conf["delta.appendOnly"] == "true" and conf["delta.constraints.pos"] == "v > 0"
    # Spark wraps the data source's typed errors; the class name and message stay inside.
    with pytest.raises(Exception, match=r"(?s)InvalidArgumentError.*only when the write creates"):
        _df(spark, [(2, 20)]).write.format("delta").mode("append").option(
            "delta.appendOnly", "true"
        ).save(path)
    with pytest.raises(
        Exception, match=r"(?s)UnsupportedPropertyError.*'delta.autoOptimize.optimizeWrite'"
    ):
        _df(spark, [(2, 20)]).write.format("delta").mode("append").option(
            "delta.autoOptimize.optimizeWrite", "true"
        ).save(str(tmp_path / "other"))
    assert not (tmp_path / "other" / "_delta_log").exists()
