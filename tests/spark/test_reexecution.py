"""Conflicting DML re-executed on the latest snapshot (deltatx.reexecution), on Spark.

Each test makes a concurrent commit land between a statement's read and its commit, exactly
once, by running it from another handle when the statement's transaction starts to commit;
so the first attempt always conflicts and the interleaving is deterministic.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import ConcurrentModificationException, MetadataChangedException
from deltatx.log.transaction import OptimisticTransaction
from deltatx.reexecution import NO_BACKOFF

SCHEMA = "key BIGINT, part STRING, v BIGINT"


def _table(spark: SparkSession, path: Path) -> DeltaTable:
    data = spark.createDataFrame(
        [(k, "a" if k % 2 == 0 else "b", 0) for k in range(10)], SCHEMA
    ).coalesce(1)
    deltatx.write(data, str(path))
    return DeltaTable.for_path(spark, str(path))


def _values(dt: DeltaTable) -> dict[int, int]:
    return {int(r["key"]): int(r["v"]) for r in dt.to_df().collect()}


@pytest.fixture
def interfere(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], Any]], None]]:
    """``interfere(commit_other)``: the next commit first lets ``commit_other`` commit."""
    original = OptimisticTransaction.commit
    pending: list[Callable[[], Any]] = []

    def commit(self: OptimisticTransaction, **kwargs: Any) -> int:
        if pending:
            other = pending.pop()
            other()  # its own commit finds the list empty and goes straight through
        return original(self, **kwargs)

    monkeypatch.setattr(OptimisticTransaction, "commit", commit)
    yield pending.append


def _history(dt: DeltaTable) -> dict[str, Any]:
    row = dt.history(1).collect()[0]
    return {"params": row["operationParameters"], "metrics": row["operationMetrics"]}


def test_conflicting_update_is_re_executed_and_both_effects_land(
    spark: SparkSession, tmp_path: Path, interfere: Callable[[Callable[[], Any]], None]
) -> None:
    dt = _table(spark, tmp_path / "t")
    other = DeltaTable.for_path(spark, dt.path)
    start = dt.version()
    interfere(lambda: other.update("part = 'a'", {"v": "v + 10"}))
    metrics = dt.update("part = 'a'", {"v": "v + 1"}, retries=2, backoff=NO_BACKOFF)

    assert metrics.attempts == 2
    assert metrics.read_versions == (start, start + 1)
    assert metrics.num_updated_rows == 5
    assert dt.version() == start + 2, "one commit each: the other's and the re-executed one"
    assert _values(dt) == {k: 11 if k % 2 == 0 else 0 for k in range(10)}
    hist = _history(dt)
    assert hist["metrics"]["numAttempts"] == "2"
    assert json.loads(hist["params"]["deltatx.reexecution"]) == {
        "attempts": 2,
        "readVersions": [start, start + 1],
    }
    # The lost attempt's files were written but never committed: invisible, left for VACUUM.
    committed = {
        a.path for v in range(dt.version() + 1) for a in dt.log.read_commit(v) if hasattr(a, "path")
    }
    on_disk = {
        os.path.relpath(os.path.join(d, f), dt.path)
        for d, _, files in os.walk(dt.path)
        if "_delta_log" not in d
        for f in files
        if f.endswith(".parquet") or f.endswith(".bin")
    }
    assert on_disk - committed, "the first attempt's files should exist, uncommitted"


def test_conflicting_merge_is_re_executed_with_the_same_source(
    spark: SparkSession, tmp_path: Path, interfere: Callable[[Callable[[], Any]], None]
) -> None:
    dt = _table(spark, tmp_path / "t")
    other = DeltaTable.for_path(spark, dt.path)
    start = dt.version()
    source = spark.createDataFrame([(0, "a", 100), (100, "a", 5)], SCHEMA).alias("s")
    interfere(lambda: other.update("key = 0", {"v": "v + 7"}))
    metrics = (
        dt.alias("t")
        .merge(source, "t.key = s.key")
        .when_matched_update(set={"v": "t.v + s.v"})
        .when_not_matched_insert_all()
        .execute(retries=3, backoff=NO_BACKOFF)
    )
    assert (metrics.attempts, metrics.read_versions) == (2, (start, start + 1))
    assert (metrics.num_target_rows_updated, metrics.num_target_rows_inserted) == (1, 1)
    expected = {k: 0 for k in range(10)} | {0: 107, 100: 5}  # 107: it read the winner's 7
    assert _values(dt) == expected
    assert _history(dt)["metrics"]["numAttempts"] == "2"


def test_transaction_replays_its_statements_in_order(
    spark: SparkSession, tmp_path: Path, interfere: Callable[[Callable[[], Any]], None]
) -> None:
    dt = _table(spark, tmp_path / "t")
    other = DeltaTable.for_path(spark, dt.path)
    start = dt.version()
    interfere(lambda: other.update("key = 3", {"v": "v + 7"}))
    txn = dt.begin(retries=1, backoff=NO_BACKOFF)
    with txn:
        txn.update("part = 'b'", {"v": "v * 2 + 1"})  # sees key 3 at 7 only when replayed
        txn.delete("key = 1")
        txn.write(spark.createDataFrame([(50, "b", 1)], SCHEMA))
    assert txn.read_versions == (start, start + 1)
    assert dt.version() == start + 2
    expected = {k: 0 for k in range(10) if k != 1} | {5: 1, 7: 1, 9: 1, 3: 15, 50: 1}
    assert _values(dt) == expected
    hist = dt.history(1).collect()[0]
    assert hist["operationMetrics"]["numAttempts"] == "2"


def _self_merge(dt: DeltaTable) -> object:
    return (
        dt.alias("t")
        .merge(dt.to_df().alias("s"), "t.key = s.key")
        .when_matched_update(set={"v": "s.v + 1"})
        .execute(retries=3)
    )


def _read_in_body(dt: DeltaTable) -> object:
    with dt.begin(retries=3) as txn:
        n = txn.to_df().count()
        txn.update("part = 'a'", {"v": f"v + {n}"})
    return None


# Each case conflicts on its first attempt (the other writer updates partition a) and must
# not be re-executed; the message says why.
@pytest.mark.parametrize(
    ("act", "other_commit", "error", "reason"),
    [
        (
            lambda dt: dt.delete("rand() < 2", retries=3),
            lambda o: o.update("part = 'a'", {"v": "v + 1"}),
            ConcurrentModificationException,  # which one depends on the file layout
            "'rand() < 2' is not deterministic",
        ),
        (
            lambda dt: dt.update(F.rand() < 2, {"v": "v + 1"}, retries=3),
            lambda o: o.update("part = 'a'", {"v": "v + 1"}),
            ConcurrentModificationException,  # which one depends on the file layout
            "not deterministic",
        ),
        (
            _self_merge,
            lambda o: o.update("part = 'a'", {"v": "v + 1"}),
            ConcurrentModificationException,  # which one depends on the file layout
            "reads the target table",
        ),
        (
            _read_in_body,
            lambda o: o.update("part = 'a'", {"v": "v + 1"}),
            ConcurrentModificationException,  # which one depends on the file layout
            "to_df()",
        ),
        (
            lambda dt: dt.delete("key = 1", retries=3),
            lambda o: o.set_properties({"delta.logRetentionDuration": "interval 31 days"}),
            MetadataChangedException,
            "never re-executed",
        ),
    ],
    ids=["nondeterministic-sql", "nondeterministic-column", "self-source", "body-read", "metadata"],
)
def test_statements_that_do_not_qualify_raise_the_original_conflict(
    spark: SparkSession,
    tmp_path: Path,
    interfere: Callable[[Callable[[], Any]], None],
    act: Callable[[DeltaTable], object],
    other_commit: Callable[[DeltaTable], object],
    error: type[ConcurrentModificationException],
    reason: str,
) -> None:
    dt = _table(spark, tmp_path / "t")
    other = DeltaTable.for_path(spark, dt.path)
    start = dt.version()
    interfere(lambda: other_commit(other))
    with pytest.raises(error) as info:
        act(dt)
    assert info.value.not_retried_because is not None
    assert reason in info.value.not_retried_because
    assert "Not re-executed: " in str(info.value)
    assert info.value.read_versions == (start,)
    assert dt.version() == start + 1, "only the other writer's commit landed"


def test_sql_dml_takes_retries_and_other_statements_refuse_them(
    spark: SparkSession, tmp_path: Path, interfere: Callable[[Callable[[], Any]], None]
) -> None:
    """SQL statements take ``retries`` like the Python calls: a conflicting UPDATE and MERGE
    sent through ``deltatx.sql`` are re-executed; a statement they do not apply to refuses."""
    dt = _table(spark, tmp_path / "t")
    other = DeltaTable.for_path(spark, dt.path)
    interfere(lambda: other.update("part = 'a'", {"v": "v + 10"}))
    deltatx.sql(
        f"UPDATE delta.`{dt.path}` SET v = v + 1 WHERE part = 'a'",
        retries=2,
        backoff=NO_BACKOFF,
    )
    assert _values(dt) == {k: 11 if k % 2 == 0 else 0 for k in range(10)}
    assert json.loads(_history(dt)["params"]["deltatx.reexecution"])["attempts"] == 2

    spark.createDataFrame([(1, "b", 5)], SCHEMA).createOrReplaceTempView("sql_retry_source")
    interfere(lambda: other.update("part = 'b'", {"v": "v + 100"}))
    deltatx.sql(
        f"MERGE INTO delta.`{dt.path}` t USING sql_retry_source s ON t.key = s.key "
        "WHEN MATCHED THEN UPDATE SET v = t.v + s.v",
        retries=2,
        backoff=NO_BACKOFF,
    )
    values = _values(dt)
    assert values[1] == 105 and values[3] == 100, "the merge re-read the winner's values"
    with pytest.raises(deltatx.errors.InvalidArgumentError, match="UPDATE, DELETE and MERGE"):
        deltatx.sql(f"OPTIMIZE delta.`{dt.path}`", retries=1)
