"""deltatx reads every table delta-spark writes, and sees the same rows at every version.

(At every version under ``make peer``; at a sample of them, ``tables.compared_versions``,
under ``make test``.)

Table-driven: each scenario is a list of SQL statements run by delta-spark (``{t}`` is the
table). Every table delta-spark writes here must read in deltatx with the same rows at every
version; READ_FEATURES also says whether deltatx may write the table or must refuse, naming
the feature.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable, UnsupportedFeatureError
from deltatx.log import DeltaLog

from .engine import DeltaSpark
from .tables import (
    canonical,
    checkpoints,
    compared_versions,
    has_deletion_vectors,
    latest_version,
    ours,
    scenario_params,
)

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
    "v2-checkpoints": Scenario(
        [
            _create({**DV, "delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"}),
            *(_insert(i * 5, 5) for i in range(3)),
            "DELETE FROM {t} WHERE id % 4 = 0",
            _insert(100, 5),
        ],
        expect_dv=True,
        expect_checkpoint=".checkpoint.",
    ),
    "v2-checkpoints-json-sidecars": Scenario(
        [
            _create({**NO_DV, "delta.checkpointPolicy": "v2", "delta.checkpointInterval": "3"}),
            *(_insert(i * 5, 5) for i in range(4)),
            "DELETE FROM {t} WHERE id % 4 = 0",
        ],
        expect_checkpoint=".json",
        conf=(
            ("spark.databricks.delta.checkpointV2.topLevelFileFormat", "json"),
            ("spark.databricks.delta.checkpoint.partSize", "2"),
        ),
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


def _column_mapping(mode: str, props: dict[str, str]) -> Scenario:
    """Renames, drops and re-adds under column mapping: rows must survive each change."""
    columns = f"{COLUMNS}, note STRING, s STRUCT<a: INT, b: STRING>"
    return Scenario(
        [
            _create({**props, "delta.columnMapping.mode": mode}, partitioned=True, columns=columns),
            "INSERT INTO {t} SELECT id, '2024-01-01', id * 1.5, 'n', named_struct('a', "
            "CAST(id AS INT), 'b', 'x') FROM range(0, 20, 1, 2)",
            "ALTER TABLE {t} RENAME COLUMN v TO value",
            "ALTER TABLE {t} RENAME COLUMN date TO day",
            "ALTER TABLE {t} DROP COLUMN note",
            "INSERT INTO {t} SELECT id, '2024-01-02', id * 2.0, named_struct('a', 1, 'b', 'y') "
            "FROM range(20, 30, 1, 2)",
            "DELETE FROM {t} WHERE value < 3",
            "UPDATE {t} SET value = -value, s = named_struct('a', 0, 'b', 'u') WHERE id % 3 = 0",
            "ALTER TABLE {t} ADD COLUMNS (note STRING)",
            "INSERT INTO {t} SELECT id, '2024-01-03', 1.0, named_struct('a', 2, 'b', 'z'), 'new' "
            "FROM range(40, 42)",
        ],
        expect_dv=props == DV,
    )


READ["column-mapping-name"] = _column_mapping("name", NO_DV)
READ["column-mapping-id"] = _column_mapping("id", DV)

# Features deltatx reads; the value says whether it may also write (or must refuse, naming it).
READ_FEATURES: dict[str, tuple[str, str | None]] = {
    "change-data-feed": (_create({"delta.enableChangeDataFeed": "true"}), None),
    "check-constraint": (_create(NO_DV), None),
    "generated-column": (
        _create(NO_DV, columns=f"{COLUMNS}, w DOUBLE GENERATED ALWAYS AS (v * 2)"),
        None,
    ),
    "identity-column": (
        _create(NO_DV, columns=f"{COLUMNS}, k BIGINT GENERATED ALWAYS AS IDENTITY"),
        "identityColumns",
    ),
    "in-commit-timestamps": (_create({"delta.enableInCommitTimestamps": "true"}), None),
    "v2-checkpoint-writes": (
        _create({"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"}),
        None,
    ),
    "type-widening": (
        _create({**NO_DV, "delta.enableTypeWidening": "true"}, columns=f"{COLUMNS}, n INT"),
        None,
    ),
    "vacuum-protocol-check": (
        _create({**NO_DV, "delta.feature.vacuumProtocolCheck": "supported"}),
        None,
    ),
    "variant": (_create(NO_DV, columns=f"{COLUMNS}, j VARIANT"), None),
    "clustered-domain-metadata": (
        f"CREATE TABLE {{t}} ({COLUMNS}) USING DELTA CLUSTER BY (id) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
        "clustering",
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


def _assert_same_rows(
    spark: SparkSession, delta_spark: DeltaSpark, path: str, versions: set[int] | None = None
) -> None:
    """Both engines' rows agree at ``versions`` (``compared_versions`` if None)."""
    latest = latest_version(path)
    assert DeltaTable.for_path(spark, path).version() == latest
    for version in sorted(compared_versions(path) if versions is None else versions):
        assert ours(spark, path, version) == canonical(delta_spark.rows(path, version)), version


@pytest.mark.parametrize(
    "name",
    scenario_params(READ, sample={"deletion-vectors-partitioned", "v2-checkpoints"}),
)
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


@pytest.mark.sample(every=6)
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
    elif name == "type-widening":
        statements += [
            "INSERT INTO {t} SELECT id, 'd', 1.0, CAST(id AS INT) FROM range(5)",
            "ALTER TABLE {t} CHANGE COLUMN n TYPE BIGINT",
            "INSERT INTO {t} SELECT id, 'd', 1.0, id * 10000000000 FROM range(5, 8)",
        ]
    elif name == "variant":
        statements.append(
            "INSERT INTO {t} SELECT id, 'd', 1.0, parse_json(concat('{{\"a\":', id, '}}')) "
            "FROM range(5)"
        )
    elif name in ("generated-column", "identity-column"):
        statements.append("INSERT INTO {t} (id, date, v) SELECT id, 'd', id * 1.0 FROM range(6)")
    else:
        statements += [_insert(0, 10), "DELETE FROM {t} WHERE id = 4", _insert(10, 3)]
    _run(delta_spark, path, statements)
    before = latest_version(path)
    # Time travel through DML is compared version by version in test_deltatx_reads_every_version;
    # a feature's table is compared at its creation, its first change and its latest state, and
    # after deltatx's write at the new version only (the older ones are the same commit files).
    _assert_same_rows(spark, delta_spark, path, {0, 1, before})
    row = DeltaTable.for_path(spark, path).to_df().limit(1)
    if refused_for_writes is None:
        deltatx.write(row, path)
        assert latest_version(path) == before + 1
        _assert_same_rows(spark, delta_spark, path, {before + 1})
    else:
        with pytest.raises(UnsupportedFeatureError) as caught:
            deltatx.write(row, path)
        assert refused_for_writes in str(caught.value)
        assert latest_version(path) == before


def test_in_commit_timestamps_agree_for_history_and_time_travel(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    """Both engines record and use the same in-commit timestamps, whoever wrote each commit."""
    path = str(tmp_path / "ict")
    _run(delta_spark, path, [_create({"delta.enableInCommitTimestamps": "true"}), _insert(0, 5)])
    deltatx.write(DeltaTable.for_path(spark, path).to_df().limit(2), path)
    _run(delta_spark, path, [_insert(5, 5)])
    theirs = delta_spark.exec(
        "h = DeltaTable.forPath(spark, args['p']).history()\n"
        "result = {r['version']: r['ms'] for r in "
        "h.selectExpr('version', 'unix_millis(timestamp) AS ms').collect()}",
        p=path,
    )
    log = DeltaLog.for_table(path)
    ours_history = {e.version: e.timestamp for e in log.history()}
    assert ours_history == {int(k): v for k, v in theirs.items()}
    stamps = [ours_history[v] for v in sorted(ours_history)]
    assert stamps == sorted(set(stamps)), "in-commit timestamps grow strictly"
    for version, ms in ours_history.items():
        assert log.snapshot(timestamp=ms).version == version
        when = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        rows = delta_spark.exec(
            "r = spark.read.format('delta').option('timestampAsOf', args['t']).load(args['p'])\n"
            "result = [x.asDict() for x in r.collect()]",
            p=path,
            t=when,
        )
        assert ours(spark, path, version) == canonical(rows), version
