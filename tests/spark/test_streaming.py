"""Structured Streaming through format("delta"): the sink and the source, with real queries.

Every query here runs with ``Trigger.AvailableNow`` or is stopped by the test, and waits with a
timeout, so each test ends by itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import udf
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadMaxBytes

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    ConcurrentTransactionException,
    InvalidArgumentError,
    TableNotFoundError,
    UnsupportedOptionError,
)
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.datasource import DeltatxDataSource
from deltatx.spark.datasource.stream_sink import DeltaStreamWriter
from deltatx.spark.datasource.stream_source import DeltaStreamReader
from deltatx.spark.datasource.writer import FilesWritten

pytestmark = pytest.mark.streaming

TIMEOUT = 180
KILL_SCRIPT = Path(__file__).with_name("stream_kill_writer.py")


def _finish(query: StreamingQuery) -> None:
    try:
        assert query.awaitTermination(TIMEOUT), "the streaming query did not finish in time"
    finally:
        query.stop()


def _json_files(spark: SparkSession, folder: Path, batches: list[list[int]]) -> None:
    for ids in batches:
        spark.createDataFrame([(i,) for i in ids], "id long").coalesce(1).write.mode("append").json(
            str(folder)
        )


def _ids(df: DataFrame) -> list[int]:
    return sorted(r.id for r in df.collect())


def _sink_commits(path: Path) -> list[tuple[str, dict[str, Any], list[tuple[str, int]]]]:
    log = DeltaLog.for_table(str(path))
    out = []
    for version in range(log.latest_version() + 1):
        actions = log.read_commit(version)
        info = log.commit_info(version)
        assert info is not None
        txns = [(a.app_id, a.version) for a in actions if type(a).__name__ == "SetTransaction"]
        out.append((info.operation or "", dict(info.operation_parameters or {}), txns))
    return out


def _query_id(checkpoint: Path) -> str:
    return str(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])


# --- the sink --------------------------------------------------------------------------------


def test_file_source_into_the_sink_commits_each_batch_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    source, table, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    _json_files(spark, source, [[1, 2], [3], [4, 5]])

    def run() -> None:
        stream = spark.readStream.schema("id long").option("maxFilesPerTrigger", 1)
        query = (
            stream.json(str(source))
            .writeStream.format("delta")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(str(table))
        )
        _finish(query)

    run()
    assert _ids(spark.read.format("delta").load(str(table))) == [1, 2, 3, 4, 5]
    qid = _query_id(checkpoint)
    commits = _sink_commits(table)
    # "Each micro-batch commits exactly once: the application id comes from the query's
    # checkpoint, and the version is the batch id."
    assert [c[2] for c in commits] == [[(qid, 0)], [(qid, 1)], [(qid, 2)]]
    assert {c[0] for c in commits} == {"STREAMING UPDATE"}
    assert [c[1]["epochId"] for c in commits] == ["0", "1", "2"]

    _json_files(spark, source, [[6]])
    run()
    assert _ids(spark.read.format("delta").load(str(table))) == [1, 2, 3, 4, 5, 6]
    assert _sink_commits(table)[-1][2] == [(qid, 3)]


def test_complete_mode_replaces_the_table_each_batch(spark: SparkSession, tmp_path: Path) -> None:
    source, table, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    _json_files(spark, source, [[1, 2, 3]])

    def run() -> None:
        counts = spark.readStream.schema("id long").json(str(source)).groupBy().count()
        query = (
            counts.writeStream.format("delta")
            .outputMode("complete")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(str(table))
        )
        _finish(query)

    run()
    _json_files(spark, source, [[4, 5]])
    run()
    assert [r[0] for r in spark.read.format("delta").load(str(table)).collect()] == [5]
    assert _sink_commits(table)[-1][1]["outputMode"] == "Complete"


def test_update_mode_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    _json_files(spark, tmp_path / "in", [[1]])
    counts = spark.readStream.schema("id long").json(str(tmp_path / "in")).groupBy("id").count()
    with pytest.raises(Exception, match="does not support Update mode"):
        query = (
            counts.writeStream.format("delta")
            .outputMode("update")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start(str(tmp_path / "t"))
        )
        _finish(query)
    assert not DeltaLog.for_table(str(tmp_path / "t")).table_exists()


def test_the_sink_needs_a_checkpoint_location(spark: SparkSession, tmp_path: Path) -> None:
    schema = spark.range(1).schema
    with pytest.raises(InvalidArgumentError, match="checkpointLocation"):
        DeltaStreamWriter.create({"path": str(tmp_path / "t")}, schema=schema, overwrite=False)


def _planned_batch(
    spark: SparkSession, table: Path, checkpoint: Path, ids: list[int]
) -> tuple[DeltaStreamWriter, list[Any]]:
    schema = spark.range(1).schema
    options = {"path": str(table), "checkpointLocation": str(checkpoint)}
    writer = DeltaStreamWriter.create(options, schema=schema, overwrite=False)
    batch = pa.RecordBatch.from_pydict({"id": pa.array(ids, pa.int64())})
    return writer, [writer.write(iter([batch]))]


def test_two_runs_on_one_checkpoint_collide_and_a_rerun_is_skipped(
    spark: SparkSession, tmp_path: Path
) -> None:
    table, checkpoint = tmp_path / "t", tmp_path / "ck"
    spark.range(0).write.format("delta").save(str(table))
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"query-1"}\n')
    # Both runs plan batch 0 on the same table version, as two processes started at once do.
    first, first_files = _planned_batch(spark, table, checkpoint, [1, 2])
    second, second_files = _planned_batch(spark, table, checkpoint, [1, 2])
    first.commit(first_files, 0)
    # "a streaming query using the same checkpoint location is started several times
    # concurrently and tries to write to the Delta table at the same time"
    with pytest.raises(ConcurrentTransactionException) as err:
        second.commit(second_files, 0)
    message = str(err.value)
    assert "same checkpoint location" in message and "one query per checkpoint" in message
    assert [p.name for p in table.glob("*.parquet")] == [
        f.path for m in first_files for f in m.files
    ]
    # A run that plans batch 0 again after it was committed (a restart) writes nothing.
    version = DeltaLog.for_table(str(table)).latest_version()
    rerun, rerun_files = _planned_batch(spark, table, checkpoint, [1, 2])
    rerun.commit(rerun_files, 0)
    assert DeltaLog.for_table(str(table)).latest_version() == version
    assert _ids(spark.read.format("delta").load(str(table))) == [1, 2]
    assert isinstance(rerun_files[0], FilesWritten)


def test_killed_driver_restarts_and_writes_every_batch_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    source, table, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    batches = [[1, 2], [3], [4, 5], [6]]
    _json_files(spark, source, batches)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, str(KILL_SCRIPT), str(source), str(table), str(checkpoint)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert child.wait(timeout=TIMEOUT) == -signal.SIGKILL
    finally:
        # The driver's JVM is in the child's process group; none of it may outlive the kill.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
    killed_at = DeltaLog.for_table(str(table)).latest_version()
    assert 0 <= killed_at < len(batches) - 1

    stream = spark.readStream.schema("id long").option("maxFilesPerTrigger", 1)
    query = (
        stream.json(str(source))
        .writeStream.format("delta")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(table))
    )
    _finish(query)
    assert _ids(spark.read.format("delta").load(str(table))) == [1, 2, 3, 4, 5, 6]
    txns = [t for c in _sink_commits(table) for t in c[2]]
    assert [v for _, v in txns] == list(range(len(batches)))


# --- the source ------------------------------------------------------------------------------


def _append(spark: SparkSession, table: Path, ids: list[int]) -> None:
    spark.createDataFrame([(i,) for i in ids], "id long").coalesce(1).write.format("delta").mode(
        "append"
    ).save(str(table))


def _to_memory(
    spark: SparkSession, name: str, checkpoint: Path, table: Path, **options: str
) -> StreamingQuery:
    reader = spark.readStream.format("delta")
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load(str(table))
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def test_the_source_streams_into_a_memory_sink_file_by_file(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    for ids in ([1, 2], [3], [4, 5]):
        _append(spark, table, ids)
    query = _to_memory(spark, "src_files", tmp_path / "ck", table, maxFilesPerTrigger="1")
    _finish(query)
    assert _ids(spark.sql("SELECT * FROM src_files")) == [1, 2, 3, 4, 5]
    rows = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sorted(rows) == [1, 2, 2]

    later = _to_memory(spark, "src_later", tmp_path / "ck2", table, startingVersion="1")
    _finish(later)
    assert _ids(spark.sql("SELECT * FROM src_later")) == [3, 4, 5]


def test_the_source_applies_deletion_vectors_of_its_starting_snapshot(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    DeltaTable.create(
        spark, str(table), schema="id long", properties={"delta.enableDeletionVectors": "true"}
    )
    _append(spark, table, [1, 2, 3, 4])
    DeltaTable.for_path(spark, str(table)).delete("id % 2 = 0")
    assert DeltaLog.for_table(str(table)).snapshot().add_files()[0].deletion_vector is not None
    query = _to_memory(spark, "src_dv", tmp_path / "ck", table)
    _finish(query)
    assert _ids(spark.sql("SELECT * FROM src_dv")) == [1, 3]


def test_change_commits_fail_the_stream_unless_skipped_and_optimize_is_silent(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    _append(spark, table, [1, 2])
    _append(spark, table, [3])
    DeltaTable.for_path(spark, str(table)).optimize().execute_compaction()
    _append(spark, table, [4])
    DeltaTable.for_path(spark, str(table)).delete("id = 1")
    _append(spark, table, [5])

    skipping = _to_memory(
        spark, "src_skip", tmp_path / "ck1", table, startingVersion="0", skipChangeCommits="true"
    )
    _finish(skipping)
    # OPTIMIZE (dataChange = false) delivers nothing; the DELETE commit is passed over.
    assert _ids(spark.sql("SELECT * FROM src_skip")) == [1, 2, 3, 4, 5]

    failing = _to_memory(spark, "src_fail", tmp_path / "ck2", table, startingVersion="0")
    with pytest.raises(StreamingQueryException, match="StreamDataChangedError") as err:
        _finish(failing)
    assert "skipChangeCommits" in str(err.value)
    assert _ids(spark.sql("SELECT * FROM src_fail")) == [1, 2, 3, 4]


def test_a_metadata_change_during_a_stream_stops_it(spark: SparkSession, tmp_path: Path) -> None:
    table, out, checkpoint = tmp_path / "t", tmp_path / "out", tmp_path / "ck"
    _append(spark, table, [1])

    def start(trigger: dict[str, Any]) -> StreamingQuery:
        return (
            spark.readStream.format("delta")
            .load(str(table))
            .writeStream.format("delta")
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start(str(out))
        )

    query = start({"processingTime": "200 milliseconds"})
    try:
        query.processAllAvailable()
        _append(spark, table, [2])
        query.processAllAvailable()
        DeltaTable.for_path(spark, str(table)).set_properties({"delta.appendOnly": "true"})
        # "Streaming reads fail when they encounter a commit that changes the table metadata."
        with pytest.raises(StreamingQueryException, match="StreamMetadataChangedError") as err:
            query.awaitTermination(TIMEOUT)
            pytest.fail("the stream went on past a metadata change")
    finally:
        query.stop()
    assert "must be restarted" in str(err.value)
    assert _ids(spark.read.format("delta").load(str(out))) == [1, 2]

    # Restarted from its checkpoint, the query goes on with the new metadata.
    _append(spark, table, [3])
    _finish(start({"availableNow": True}))
    assert _ids(spark.read.format("delta").load(str(out))) == [1, 2, 3]


# --- the source with readChangeFeed --------------------------------------------------------

FEED = ["_change_type", "_commit_version", "_commit_timestamp"]


def _feed_table(spark: SparkSession, table: Path, *, dv: bool) -> DeltaTable:
    properties = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": str(dv)}
    DeltaTable.create(spark, str(table), schema="id long", properties=properties)
    _append(spark, table, [1, 2])
    _append(spark, table, [3])
    return DeltaTable.for_path(spark, str(table))


def _changes(df: DataFrame) -> list[tuple[int, str, int]]:
    rows = df.collect()
    assert all(r._commit_timestamp is not None for r in rows)
    return sorted((r.id, r._change_type, r._commit_version) for r in rows)


@pytest.mark.parametrize("dv", [False, True], ids=["copy-on-write", "dv"])
def test_the_change_feed_streams_updates_and_deletes_as_change_rows(
    spark: SparkSession, tmp_path: Path, dv: bool
) -> None:
    table = tmp_path / "t"
    dt = _feed_table(spark, table, dv=dv)
    dt.update("id = 2", {"id": "20"})
    dt.delete("id = 3")
    name = f"cdf_{'dv' if dv else 'cow'}"
    query = _to_memory(
        spark, name, tmp_path / "ck", table, readChangeFeed="true", startingVersion="1"
    )
    _finish(query)
    df = spark.sql(f"SELECT * FROM {name}")
    assert df.columns == ["id", *FEED]
    # DELETE and UPDATE commits are what a change feed stream delivers, not failures.
    assert _changes(df) == [
        (1, "insert", 1),
        (2, "insert", 1),
        (2, "update_preimage", 3),
        (3, "delete", 4),
        (3, "insert", 2),
        (20, "update_postimage", 3),
    ]


def test_the_change_feed_stream_starts_with_the_snapshot_and_counts_change_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    dt = _feed_table(spark, table, dv=False)
    query = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("maxFilesPerTrigger", "1")
        .load(str(table))
        .writeStream.format("memory")
        .queryName("cdf_latest")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        # Without a starting version the first rows are the latest snapshot, as its inserts.
        assert _changes(spark.sql("SELECT * FROM cdf_latest")) == [
            (1, "insert", 2),
            (2, "insert", 2),
            (3, "insert", 2),
        ]
        # One change file per batch: the snapshot's two files arrive in two batches.
        assert sorted(p["numInputRows"] for p in query.recentProgress if p["numInputRows"]) == [
            1,
            2,
        ]
        dt.delete("id = 1")
        dt.optimize().execute_compaction()  # dataChange = false: passed over
        _append(spark, table, [4])
        query.processAllAvailable()
    finally:
        query.stop()
    assert _changes(spark.sql("SELECT * FROM cdf_latest")) == [
        (1, "delete", 3),
        (1, "insert", 2),
        (2, "insert", 2),
        (3, "insert", 2),
        (4, "insert", 5),
    ]


def test_the_change_feed_reader_from_a_timestamp_takes_one_change_file_per_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    dt = _feed_table(spark, table, dv=False)
    dt.update("id = 3", {"id": "30"})
    log = DeltaLog.for_table(str(table))
    second = datetime.fromtimestamp(log.commit_timestamp(2) / 1000, tz=UTC)
    options = {
        "path": str(table),
        "readChangeFeed": "true",
        "startingTimestamp": second.strftime("%Y-%m-%d %H:%M:%S.%f"),
        "maxFilesPerTrigger": "1",
    }
    source = DeltatxDataSource(options)
    schema = source.schema()
    assert schema.fieldNames() == ["id", *FEED]
    reader = source.streamReader(schema)
    assert isinstance(reader, DeltaStreamReader)
    limit = reader.getDefaultReadLimit()
    start = reader.initialOffset()
    batches = []
    while (end := reader.latestOffset(start, limit)) != start:
        rows = [
            row
            for partition in reader.partitions(start, end)
            for batch in reader.read(partition)
            for row in batch.to_pylist()
        ]
        batches.append(sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in rows))
        start = end
    # Version 3's UPDATE wrote one change data file holding both images of the row.
    assert batches == [
        [(3, "insert", 2)],
        [(3, "update_preimage", 3), (30, "update_postimage", 3)],
    ]


def test_only_a_stream_reads_the_change_feed_without_a_starting_version(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    _feed_table(spark, table, dv=False)
    source = DeltatxDataSource({"path": str(table), "readChangeFeed": "true"})
    assert isinstance(source.streamReader(source.schema()), DeltaStreamReader)
    batch = DeltatxDataSource({"path": str(table), "readChangeFeed": "true"})
    with pytest.raises(InvalidArgumentError, match="starting version or a starting timestamp"):
        batch.reader(batch.schema())


def test_the_change_feed_stream_stops_where_changes_were_not_recorded(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    _append(spark, table, [1])
    _append(spark, table, [2])
    query = _to_memory(
        spark, "cdf_off", tmp_path / "ck", table, readChangeFeed="true", startingVersion="0"
    )
    with pytest.raises(StreamingQueryException, match="ChangeDataNotRecordedError") as err:
        _finish(query)
    assert "stopped at version 0" in str(err.value)


def test_the_change_feed_stream_stops_on_a_metadata_change(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    dt = _feed_table(spark, table, dv=False)
    dt.set_properties({"delta.appendOnly": "true"})
    query = _to_memory(
        spark, "cdf_meta", tmp_path / "ck", table, readChangeFeed="true", startingVersion="1"
    )
    with pytest.raises(StreamingQueryException, match="StreamMetadataChangedError"):
        _finish(query)
    assert _changes(spark.sql("SELECT * FROM cdf_meta")) == [
        (1, "insert", 1),
        (2, "insert", 1),
        (3, "insert", 2),
    ]


def test_stream_options_are_refused_in_a_batch_read(spark: SparkSession, tmp_path: Path) -> None:
    _append(spark, tmp_path / "t", [1])
    with pytest.raises(UnsupportedOptionError, match="batch read option 'startingVersion'"):
        spark.read.format("delta").option("startingVersion", "0").load(str(tmp_path / "t"))
    source = DeltatxDataSource({"path": str(tmp_path / "t"), "maxBytesPerTrigger": "lots"})
    with pytest.raises(InvalidArgumentError, match="maxBytesPerTrigger"):
        source.streamReader(source.schema())


def test_to_table_streams_into_a_named_table(spark: SparkSession, tmp_path: Path) -> None:
    name = "stream_named_events"
    deltatx.sql(f"CREATE TABLE {name} (id long) USING DELTA", spark=spark)
    try:
        _json_files(spark, tmp_path / "in", [[1, 2], [3]])
        stream = spark.readStream.schema("id long").json(str(tmp_path / "in"))
        query = (
            stream.writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / "c"))
            .trigger(availableNow=True)
            .toTable(name)
        )
        _finish(query)
        dt = DeltaTable.for_name(spark, name)
        assert _ids(dt.to_df()) == [1, 2, 3]
        commits = _sink_commits(Path(dt.path))
        assert commits[-1][0] == "STREAMING UPDATE" and commits[-1][2]  # one txn-keyed batch
    finally:
        deltatx.sql(f"DROP TABLE IF EXISTS {name}", spark=spark)


def test_to_table_refuses_a_name_that_is_no_table(spark: SparkSession, tmp_path: Path) -> None:
    _json_files(spark, tmp_path / "in", [[1]])
    stream = spark.readStream.schema("id long").json(str(tmp_path / "in"))
    writer = stream.writeStream.format("delta").option("checkpointLocation", str(tmp_path / "c"))
    with pytest.raises(TableNotFoundError, match="no Delta table named no_such_stream_table"):
        writer.toTable("no_such_stream_table")
    assert spark.streams.active == []


def test_foreach_batch_merge_is_an_exactly_once_upsert(spark: SparkSession, tmp_path: Path) -> None:
    target, source = tmp_path / "t", tmp_path / "in"
    DeltaTable.create(spark, str(target), schema="id long, v string")
    for rows in ([(1, "a"), (2, "a")], [(2, "b"), (3, "b")]):
        spark.createDataFrame(rows, "id long, v string").coalesce(1).write.mode("append").json(
            str(source)
        )
    app = "upsert-events"

    def upsert(batch: DataFrame, batch_id: int) -> None:
        (
            DeltaTable.for_path(spark, str(target))
            .alias("t")
            .merge(batch.alias("s"), "t.id = s.id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(app_id=app, app_version=batch_id)
        )

    query = (
        spark.readStream.schema("id long, v string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    _finish(query)
    expected = [(1, "a"), (2, "b"), (3, "b")]
    table = spark.read.format("delta").load(str(target))
    assert sorted(tuple(r) for r in table.collect()) == expected
    log = DeltaLog.for_table(str(target))
    version = log.latest_version()
    assert log.snapshot().app_transaction_version(app) == 1

    # A batch run again (the query restarted after a crash that followed the MERGE) is a no-op.
    upsert(spark.createDataFrame([(1, "replayed")], "id long, v string"), 0)
    assert log.latest_version() == version
    table = spark.read.format("delta").load(str(target))
    assert sorted(tuple(r) for r in table.collect()) == expected


def test_starting_timestamp_and_byte_limits_drive_the_reader(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    for ids in ([1], [2], [3]):
        _append(spark, table, ids)
    log = DeltaLog.for_table(str(table))
    second = datetime.fromtimestamp(log.commit_timestamp(1) / 1000, tz=UTC)
    options = {
        "path": str(table),
        "startingTimestamp": second.strftime("%Y-%m-%d %H:%M:%S.%f"),
        "maxBytesPerTrigger": "1b",
    }
    source = DeltatxDataSource(options)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, DeltaStreamReader)
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxBytes(1)
    start = reader.initialOffset()
    assert start["reservoirVersion"] == 1 and not start["isStartingVersion"]
    seen = []
    while (end := reader.latestOffset(start, limit)) != start:
        for partition in reader.partitions(start, end):
            seen += [row for batch in reader.read(partition) for row in batch.column(0).to_pylist()]
        seen.append("|")
        start = end
    # One file per batch under a one-byte limit, from the commit made at the timestamp.
    assert seen == [2, "|", 3, "|"]


def test_a_second_run_committing_the_same_batch_fails_the_query(
    spark: SparkSession, tmp_path: Path
) -> None:
    source, table, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    spark.range(0).write.format("delta").save(str(table))
    _json_files(spark, source, [[1, 2]])
    table_path, checkpoint_path = str(table), str(checkpoint)

    def other_run_commits_batch_zero(value: int) -> int:
        # Runs in a task of batch 0, after the batch was planned: another run of the same
        # query (same checkpoint, so same query id) commits batch 0 first.
        log = DeltaLog.for_table(table_path)
        qid = json.loads((Path(checkpoint_path) / "metadata").read_text().splitlines()[0])["id"]
        if log.snapshot().app_transaction_version(qid) is None:
            txn = OptimisticTransaction(log, log.snapshot())
            txn.set_app_transaction(qid, 0)
            txn.record_operation(Operation(OperationName.STREAMING_UPDATE, {"epochId": "0"}), {})
            txn.commit()
        return value

    race = udf(other_run_commits_batch_zero, "long")
    query = (
        spark.readStream.schema("id long")
        .json(str(source))
        .select(race("id").alias("id"))
        .writeStream.format("delta")
        .option("checkpointLocation", checkpoint_path)
        .trigger(availableNow=True)
        .start(table_path)
    )
    with pytest.raises(StreamingQueryException, match="DELTA_CONCURRENT_TRANSACTION") as err:
        _finish(query)
    assert "same checkpoint location" in str(err.value)
    assert "one query per checkpoint" in str(err.value)
    assert spark.read.format("delta").load(table_path).count() == 0
    assert list(table.glob("*.parquet")) == []


def test_merge_app_id_and_app_version_go_together(spark: SparkSession, tmp_path: Path) -> None:
    DeltaTable.create(spark, str(tmp_path / "t"), schema="id long")
    builder = (
        DeltaTable.for_path(spark, str(tmp_path / "t"))
        .alias("t")
        .merge(spark.range(1).alias("s"), "t.id = s.id")
        .when_not_matched_insert_all()
    )
    with pytest.raises(InvalidArgumentError, match="go together"):
        builder.execute(app_id="only-the-id")
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        builder.execute(app_id="app", app_version=-1)
    assert DeltaLog.for_table(str(tmp_path / "t")).latest_version() == 0
