"""Blind appends from delta-spark and deltatx on one table at the same time, for a while.

Each engine appends small batches in its own process until the time is up
(``DELTATX_PEER_APPEND_SECONDS``: 60 under ``make stress``, 4 by default). Then: no
acknowledged batch is lost or doubled; both engines read the same final table; each engine
parses every commit file (the other's included) and reads a version the other wrote.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable

from .engine import DeltaSpark
from .tables import canonical, latest_version, log_actions, ours

SECONDS = float(os.environ.get("DELTATX_PEER_APPEND_SECONDS", "4"))
ROWS = 3

SPARK_LOOP = """
import time
acked, errors, batch = [], [], 0
deadline = time.monotonic() + args['seconds']
while time.monotonic() < deadline:
    df = spark.range(0, args['rows'], 1, 1).selectExpr(
        "'delta-spark' AS writer", f"CAST({batch} AS BIGINT) AS batch", "id AS i")
    try:
        df.write.format('delta').mode('append').save(args['p'])
        acked.append(batch)
    except Exception as exc:
        errors.append(repr(exc)[:300])
    batch += 1
result = {'acked': acked, 'errors': errors}
"""


def test_blind_appends_from_both_engines(
    spark: SparkSession, delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    path = str(tmp_path / "appends")
    DeltaTable.create(spark, path, schema="writer STRING, batch BIGINT, i BIGINT")
    acked: list[int] = []
    errors: list[str] = []
    with delta_spark.held(SPARK_LOOP, hold=False, p=path, seconds=SECONDS, rows=ROWS) as answer:
        deadline = time.monotonic() + SECONDS
        batch = 0
        while time.monotonic() < deadline:
            df = spark.range(0, ROWS, 1, 1).select(
                F.lit("deltatx").alias("writer"), F.lit(batch).cast("bigint").alias("batch"), "id"
            )
            try:
                deltatx.write(df.withColumnRenamed("id", "i"), path)
                acked.append(batch)
            except Exception as exc:  # recorded, then asserted on below
                errors.append(repr(exc)[:300])
            batch += 1
    assert answer["ok"], answer
    theirs_acked, theirs_errors = answer["result"]["acked"], answer["result"]["errors"]
    # INSERT / INSERT cannot conflict (Delta Lake's isolation-level documentation).
    assert errors == [] and theirs_errors == []
    assert acked and theirs_acked, "each engine committed at least one batch"

    final = DeltaTable.for_path(spark, path).to_df()
    counts = {
        (r["writer"], r["batch"]): r["n"]
        for r in final.groupBy("writer", "batch").agg(F.count("*").alias("n")).collect()
    }
    expected = {("deltatx", b): ROWS for b in acked} | {
        ("delta-spark", b): ROWS for b in theirs_acked
    }
    assert counts == expected, "an acknowledged batch is missing, partial or doubled"

    latest = latest_version(path)
    assert latest == len(acked) + len(theirs_acked)
    assert ours(spark, path) == canonical(delta_spark.rows(path))

    # Every commit file parses in both engines: each lists the whole history.
    engines = {
        v: str(a["commitInfo"].get("engineInfo", ""))
        for v, a in log_actions(path)
        if "commitInfo" in a
    }
    assert len(engines) == latest + 1
    theirs_history = delta_spark.exec(
        "result = [r['version'] for r in DeltaTable.forPath(spark, args['p']).history().collect()]",
        p=path,
    )
    assert sorted(theirs_history) == list(range(latest + 1))
    assert DeltaTable.for_path(spark, path).history().count() == latest + 1
    # A version each engine wrote, read by the other.
    spark_versions = [v for v, e in engines.items() if "Delta-Lake" in e]
    our_versions = [v for v in range(1, latest + 1) if v not in spark_versions]
    assert spark_versions and our_versions
    for version in (spark_versions[-1], our_versions[-1]):
        assert ours(spark, path, version) == canonical(delta_spark.rows(path, version))
