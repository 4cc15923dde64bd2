"""delta-spark code runs after changing one import: the camelCase names and their conventions."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, lit
from pyspark.sql.types import StringType

import deltatx
import deltatx.catalog
import deltatx.errors
from deltatx import DeltaTable  # was: from delta.tables import DeltaTable
from deltatx.builders import MergeBuilder, OptimizeBuilder
from deltatx.delta_spark_names import NAMES, DeltaTableBuilder
from deltatx.errors import InvalidArgumentError, UnsupportedFeatureError

DOC = Path(__file__).resolve().parents[2] / "docs" / "migrating-from-delta-spark.md"


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "warehouse"
    root.mkdir()
    monkeypatch.setattr(deltatx.catalog, "warehouse_dir", lambda spark: str(root))
    return root


def test_a_delta_spark_script(spark: SparkSession, warehouse: Path) -> None:
    # --- the script, as written for delta-spark -------------------------------------------
    (
        DeltaTable.createIfNotExists(spark)
        .tableName("people")
        .addColumn("id", "BIGINT")
        .addColumn("name", StringType())
        .addColumn("date", "STRING", comment="day of the record")
        .partitionedBy("date")
        .property("delta.isolationLevel", "Serializable")
        .execute()
    )
    people = DeltaTable.forName(spark, "people")
    spark.createDataFrame(
        [(1, "ann", "d1"), (2, "bob", "d1"), (3, "cy", "d2"), (4, "di", "d2")],
        "id BIGINT, name STRING, date STRING",
    ).write.mode("append").parquet(str(warehouse / "staging"))
    staged = spark.read.parquet(str(warehouse / "staging"))
    people.alias("t").merge(staged.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()
    assert DeltaTable.isDeltaTable(spark, people.path)
    assert people.toDF().count() == 4

    people.update(condition=col("id") == 1, set={"name": lit("ANN")})
    people.update("id = 2", {"name": "upper(name)"})
    people.delete(col("id") == 3)
    people.delete("id = 4")

    updates = spark.createDataFrame(
        [(1, "gone", "d1"), (2, "bobby", "d1"), (5, "eve", "d3")],
        "id BIGINT, name STRING, date STRING",
    )
    (
        people.alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s.name = 'gone'")
        .whenMatchedUpdate(set={"name": "s.name"})
        .whenNotMatchedInsert(values={"id": "s.id", "name": "s.name", "date": "s.date"})
        .execute()
    )
    assert sorted(tuple(r) for r in people.toDF().select("id", "name").collect()) == [
        (2, "bobby"),
        (5, "eve"),
    ]
    more = spark.createDataFrame(
        [(5, "EVE", "d3"), (6, "fay", "d3")], "id BIGINT, name STRING, date STRING"
    )
    (
        people.alias("t")
        .merge(more.alias("s"), col("t.id") == col("s.id"))
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll(condition=col("s.id") > 5)
        .whenNotMatchedBySourceUpdate(condition="t.id = 2", set={"name": lit("orphan")})
        .execute()
    )
    assert sorted(tuple(r) for r in people.toDF().select("id", "name").collect()) == [
        (2, "orphan"),
        (5, "EVE"),
        (6, "fay"),
    ]
    people.alias("t").merge(more.alias("s"), "t.id = s.id").whenNotMatchedBySourceDelete().execute()
    assert sorted(r.id for r in people.toDF().collect()) == [5, 6]

    compaction = people.optimize().where("date = 'd3'").executeCompaction()
    assert compaction.num_removed_files >= 1
    people.optimize().executeZOrderBy(["id", "name"])
    history = people.history()
    assert history.first()["operation"] == "OPTIMIZE"  # type: ignore[index]
    assert people.history(1).count() == 1
    assert people.detail().first()["partitionColumns"] == ["date"]  # type: ignore[index]
    version_with_four = 1
    people.restoreToVersion(version_with_four)
    assert people.toDF().count() == 4
    ts = people.history().collect()[-1]["timestamp"]
    people.restoreToTimestamp(ts.isoformat())
    assert people.toDF().count() == 0
    people.vacuum()
    people.vacuum(200)

    people.addFeatureSupport("appendOnly")
    assert "appendOnly" in people.detail().first()["tableFeatures"]  # type: ignore[index]
    people.dropFeatureSupport("appendOnly")
    assert "appendOnly" not in people.detail().first()["tableFeatures"]  # type: ignore[index]
    people.upgradeTableProtocol(1, 2)  # already at least that: nothing to do


def test_builders_replace_and_by_location(
    spark: SparkSession, warehouse: Path, tmp_path: Path
) -> None:
    place = str(tmp_path / "by_location")
    dt = DeltaTable.createOrReplace(spark).location(place).addColumn("a", "INT").execute()
    assert dt.path == place and dt.toDF().columns == ["a"]
    dt = DeltaTable.replace(spark).location(place).addColumn("b", "STRING").execute()
    assert dt.toDF().columns == ["b"]
    assert dt.history(1).first()["operation"] == "CREATE OR REPLACE TABLE"  # type: ignore[index]
    with pytest.raises(deltatx.errors.TableNotFoundError):
        DeltaTable.replace(spark).location(str(tmp_path / "none")).addColumn("b", "INT").execute()
    with pytest.raises(UnsupportedFeatureError, match="identity"):
        DeltaTable.createIfNotExists(spark).addColumn("g", "INT", generatedByDefaultAs="1")


def test_refusals_are_typed(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltatx.write(spark.range(2), path)
    dt = DeltaTable.forPath(spark, path)
    with pytest.raises(UnsupportedFeatureError, match="manifest"):
        dt.generate("symlink_format_manifest")
    with pytest.raises(UnsupportedFeatureError):
        DeltaTable.forPath(spark, path, hadoopConf={"fs.s3a.access.key": "x"})
    with pytest.raises(UnsupportedFeatureError):
        DeltaTable.convertToDelta(spark, f"parquet.`{path}`")
    with pytest.raises(UnsupportedFeatureError, match="addFeatureSupport"):
        dt.upgradeTableProtocol(4, 8)
    with pytest.raises(UnsupportedFeatureError):
        dt.addFeatureSupport("aFutureFeature")
    with pytest.raises(InvalidArgumentError):
        dt.merge(spark.range(1), "true").whenMatchedUpdate(condition="true")


def test_the_mapping_is_documented_and_every_name_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    owners = {
        "DeltaTable": DeltaTable,
        "DeltaMergeBuilder": MergeBuilder,
        "DeltaOptimizeBuilder": OptimizeBuilder,
    }
    for name in NAMES:
        owner, method = name.split(".")
        assert hasattr(owners[owner], method), name
        assert f"{method}(" in text, f"{name} is missing from {DOC.name}"
    for method in ("tableName", "location", "addColumn", "addColumns", "partitionedBy", "property"):
        assert hasattr(DeltaTableBuilder, method)
        assert f"`{method}(" in text
