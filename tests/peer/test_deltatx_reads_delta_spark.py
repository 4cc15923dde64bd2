"""deltatx reads every table delta-spark writes, and sees the same rows at every version.

Table-driven: each scenario is a list of SQL statements run by delta-spark (``{t}`` is the
table). Tables that use a protocol feature deltatx does not support yet are listed in
REFUSED with that feature: deltatx must refuse them with UnsupportedFeatureError naming it.
When deltatx learns a feature this test fails on purpose: move the case to READ.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable, UnsupportedFeatureError

from .engine import DeltaSpark
from .tables import canonical, checkpoints, has_deletion_vectors, latest_version, ours

COLUMNS = "id BIGINT, date STRING, v DOUBLE"


def _insert(start: int, n: int, day: str = "2024-01-01") -> str:
    return (
        f"INSERT INTO {{t}} SELECT id, '{day}' AS date, id * 1.5 AS v "
        f"FROM range({start}, {start + n}, 1, 2)"
    )


def _create(props: dict[str, str], *, partitioned: bool = False, columns: str = COLUMNS) -> str:
    tbl = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    part = " PARTITIONED BY (date)" if partitioned else ""
    return f"CREATE TABLE {{t}} ({columns}) USING DELTA{part} TBLPROPERTIES ({tbl})"


MERGE = (
    "MERGE INTO {t} AS t USING (SELECT id, '2024-01-02' AS date, id * 3.0 AS v "
    "FROM range(25, 45)) AS s ON t.id = s.id "
    "WHEN MATCHED AND t.id % 2 = 0 THEN UPDATE SET v = s.v "
    "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *"
)
NO_DV = {"delta.enableDeletionVectors": "false"}
DV = {"delta.enableDeletionVectors": "true"}


@dataclass(frozen=True)
class Scenario:
    statements: list[str]
    expect_dv: bool = False
    expect_checkpoint: str | None = None  # a substring of a checkpoint file name
    conf: tuple[tuple[str, str], ...] = ()  # delta-spark session settings while it writes


READ: dict[str, Scenario] = {
    "partitioned-dml": Scenario(
        [
            _create(NO_DV, partitioned=True),
            _insert(0, 20, "2024-01-01"),
            _insert(20, 20, "2024-01-02"),
            "DELETE FROM {t} WHERE date = '2024-01-01' AND id < 5",
            "UPDATE {t} SET v = v + 1 WHERE id % 3 = 0",
            MERGE,
            "INSERT INTO {t} REPLACE WHERE date = '2024-01-01' "
            "SELECT id, '2024-01-01', 0.5 FROM range(900, 903)",
        ]
    ),
    "deletion-vectors": Scenario(
        [
            _create(DV),
            _insert(0, 60),
            "DELETE FROM {t} WHERE id % 4 = 0",
            "UPDATE {t} SET v = -v WHERE id % 5 = 1",
            MERGE,
            "DELETE FROM {t} WHERE id BETWEEN 10 AND 12",
        ],
        expect_dv=True,
    ),
    "deletion-vectors-partitioned": Scenario(
        [
            _create(DV, partitioned=True),
            _insert(0, 30, "2024-01-01"),
            _insert(30, 30, "2024-01-02"),
            "DELETE FROM {t} WHERE id % 3 = 0",
            "UPDATE {t} SET v = 0.0 WHERE date = '2024-01-02' AND id % 2 = 0",
            MERGE,
        ],
        expect_dv=True,
    ),
    "checkpoints": Scenario(
        [
            _create({**NO_DV, "delta.checkpointInterval": "2"}),
            *(_insert(i * 5, 5) for i in range(5)),
        ],
        expect_checkpoint=".checkpoint.parquet",
    ),
    "multi-part-checkpoints": Scenario(
        [
            _create({**DV, "delta.checkpointInterval": "4"}),
            *(_insert(i * 5, 5) for i in range(2)),
            "DELETE FROM {t} WHERE id % 3 = 0",
            _insert(100, 5),
        ],
        expect_dv=True,
        expect_checkpoint=".checkpoint.0000000001.",  # part 1 of a multi-part checkpoint
        conf=(("spark.databricks.delta.checkpoint.partSize", "2"),),
    ),
    "optimize-zorder-purge": Scenario(
        [
            _create(DV),
            *(_insert(i * 4, 4) for i in range(4)),
            "DELETE FROM {t} WHERE id = 3",
            "OPTIMIZE {t}",
            "OPTIMIZE {t} ZORDER BY (v)",
            "DELETE FROM {t} WHERE id = 9",
            "REORG TABLE {t} APPLY (PURGE)",
        ],
        expect_dv=True,
    ),
}

# Features deltatx does not support yet: (the CREATE TABLE, the feature deltatx must name).
REFUSED: dict[str, tuple[str, str]] = {
    "column-mapping-name": (_create({"delta.columnMapping.mode": "name"}), "columnMapping"),
    "column-mapping-id": (_create({"delta.columnMapping.mode": "id"}), "columnMapping"),
    "v2-checkpoints": (_create({"delta.checkpointPolicy": "v2"}), "v2Checkpoint"),
}

# Features deltatx reads; the value says whether it may also write (or must refuse, naming it).
READ_FEATURES: dict[str, tuple[str, str | None]] = {
    "change-data-feed": (_create({"delta.enableChangeDataFeed": "true"}), None),
    "check-constraint": (_create(NO_DV), None),
    "generated-column": (
        _create(NO_DV, columns=f"{COLUMNS}, w DOUBLE GENERATED ALWAYS AS (v * 2)"),
        "generatedColumns",
    ),
    "identity-column": (
        _create(NO_DV, columns=f"{COLUMNS}, k BIGINT GENERATED ALWAYS AS IDENTITY"),
        "identityColumns",
    ),
    "in-commit-timestamps": (
        _create({"delta.enableInCommitTimestamps": "true"}),
        "inCommitTimestamp",
    ),
    "row-tracking": (_create({"delta.enableRowTracking": "true"}), "rowTracking"),
    "timestamp-ntz": (_create(NO_DV, columns=f"{COLUMNS}, ts TIMESTAMP_NTZ"), None),
}


def _run(delta_spark: DeltaSpark, path: str, statements: list[str], conf: tuple = ()) -> None:
    for key, value in conf:
        delta_spark.exec("spark.conf.set(args['k'], args['v'])", k=key, v=value)
    try:
        for statement in statements:
            delta_spark.sql(statement.format(t=f"delta.`{path}`"))
    finally:
        for key, _ in conf:
            delta_spark.exec("spark.conf.unset(args['k'])", k=key)


def _assert_same_rows(spark: SparkSession, delta_spark: DeltaSpark, path: str) -> None:
    latest = latest_version(path)
    assert DeltaTable.for_path(spark, path).version() == latest
    for version in range(latest + 1):
        assert ours(spark, path, version) == canonical(delta_spark.rows(path, version)), version


@pytest.mark.parametrize("name", list(READ))
def test_deltatx_reads_every_version(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path, name: str
) -> None:
    scenario = READ[name]
    path = str(tmp_path / name)
    _run(delta_spark, path, scenario.statements, scenario.conf)
    assert latest_version(path) == len(scenario.statements) - 1
    assert has_deletion_vectors(path) == scenario.expect_dv
    if scenario.expect_checkpoint:
        assert any(scenario.expect_checkpoint in c for c in checkpoints(path)), checkpoints(path)
    _assert_same_rows(spark, delta_spark, path)


@pytest.mark.parametrize("name", list(READ_FEATURES))
def test_deltatx_reads_feature_tables(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path, name: str
) -> None:
    create, refused_for_writes = READ_FEATURES[name]
    path = str(tmp_path / name)
    statements = [create]
    if name == "check-constraint":
        statements.append("ALTER TABLE {t} ADD CONSTRAINT positive CHECK (id >= 0)")
    if name == "timestamp-ntz":
        statements.append(
            "INSERT INTO {t} SELECT id, '2024-01-01', 1.0, "
            "TIMESTAMP_NTZ'2024-01-01 10:00:00' FROM range(5)"
        )
    elif name in ("generated-column", "identity-column"):
        statements.append("INSERT INTO {t} (id, date, v) SELECT id, 'd', id * 1.0 FROM range(6)")
    else:
        statements += [_insert(0, 10), "DELETE FROM {t} WHERE id = 4", _insert(10, 3)]
    _run(delta_spark, path, statements)
    _assert_same_rows(spark, delta_spark, path)
    before = latest_version(path)
    row = DeltaTable.for_path(spark, path).to_df().limit(1)
    if refused_for_writes is None:
        deltatx.write(row, path)
        assert latest_version(path) == before + 1
        _assert_same_rows(spark, delta_spark, path)
    else:
        with pytest.raises(UnsupportedFeatureError) as caught:
            deltatx.write(row, path)
        assert refused_for_writes in str(caught.value)
        assert latest_version(path) == before


@pytest.mark.parametrize("name", list(REFUSED))
def test_deltatx_refuses_unsupported_features_by_name(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path, name: str
) -> None:
    create, feature = REFUSED[name]
    path = str(tmp_path / name)
    _run(delta_spark, path, [create, _insert(0, 10)])
    with pytest.raises(UnsupportedFeatureError) as caught:
        DeltaTable.for_path(spark, path).to_df().collect()
    assert feature in str(caught.value) or caught.value.feature == feature
