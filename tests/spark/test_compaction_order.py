"""Compaction without deletion vectors: each output keeps its sources' rows in tag order.

Such bins are read by Spark's plain scan (:mod:`deltatx.spark.commands.compaction_read`). A
bin written alone is read in the order Spark plans its files, each file's place checked; other
bins are ordered by the path Spark reports for each row. The sources are listed in the order
taken, which need not be the order of the log's paths.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.provenance import SOURCES_TAG, segments_of
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands import compaction_read, compaction_write
from deltatx.spark.commands.compaction_read import (
    SCAN_ORDER_BROKEN,
    _directory_of_exactly,
    read_in_path_order,
    read_in_scan_order,
)
from deltatx.spark.commands.dv_dml import physical_rows
from deltatx.spark.write import TableLocation, decode_uri_path, encode_uri_path
from deltatx.storage.location import Location


def _table(spark: SparkSession, path: Path, *, files: int, partitioned: bool) -> DeltaTable:
    """Ids 0..99 spread over ``files`` appends (a file per partition and append)."""
    data = spark.range(0, 100).select(
        "id", (F.col("id") * 10).alias("v"), (F.col("id") % 2).alias("p")
    )
    for i in range(files):
        deltatx.write(
            data.filter(F.col("id") % files == i).coalesce(1),
            str(path),
            partition_by=["p"] if partitioned else None,
        )
    return DeltaTable.for_path(spark, str(path))


def _rows_by_source(dt: DeltaTable) -> dict[str, list[int]]:
    out = {}
    location = dt.log.location
    for f in dt.snapshot().add_files():
        table = pq.read_table(location.file(f.path), filesystem=location.fs)
        out[f.path] = table.column("id").to_pylist()
    return out


def _assert_outputs_trace(dt: DeltaTable, before: dict[str, list[int]]) -> list[list[str]]:
    """Every output is its segments' rows in order; returns each output's source paths."""
    orders = []
    for out in dt.snapshot().add_files():
        assert out.tags is not None and SOURCES_TAG in out.tags
        assert not out.data_change
        segments = segments_of(out)
        assert segments is not None
        want = [r for s in segments for r in before[s.path]]
        assert [s.live_rows for s in segments] == [len(before[s.path]) for s in segments]
        location = dt.log.location
        got = pq.read_table(location.file(out.path), filesystem=location.fs)
        assert got.column("id").to_pylist() == want
        stats = json.loads(out.stats or "{}")
        assert stats["numRecords"] == len(want)
        assert (stats["minValues"]["id"], stats["maxValues"]["id"]) == (min(want), max(want))
        orders.append([s.path for s in segments])
    return orders


@pytest.mark.parametrize("partitioned", [False, True])
def test_outputs_keep_source_order_without_deletion_vectors(
    spark: SparkSession, table_dir: Path, partitioned: bool
) -> None:
    dt = _table(spark, table_dir, files=5, partitioned=partitioned)
    before = _rows_by_source(dt)
    metrics = dt.optimize().execute_compaction()
    assert metrics.num_removed_files == len(before)
    assert metrics.num_added_files == (2 if partitioned else 1)
    _assert_outputs_trace(dt, before)
    assert sorted(r["id"] for r in dt.to_df().collect()) == list(range(100))


def _rename(dt: DeltaTable, table_dir: Path, names: list[tuple[str, str]]) -> None:
    """Renames the table's files to ``(name on disk, path in the log)``, in one commit."""
    log = dt.log
    txn = OptimisticTransaction(log, log.snapshot())
    files = sorted(txn.scan(), key=lambda f: f.path)
    renamed: list[AddFile] = []
    for add, (name, logged) in zip(files, names, strict=True):
        (table_dir / decode_uri_path(add.path)).rename(table_dir / name)
        renamed.append(dataclasses.replace(add, path=logged))
    txn.remove_files(files, data_change=False)
    txn.add_files(renamed)
    txn.record_operation(Operation(OperationName.MANUAL_UPDATE, {}), {})
    txn.commit()


def _rename_oddly(dt: DeltaTable, table_dir: Path) -> None:
    """Four files named as the log and Spark spell differently: "é" (the log encodes it,
    Spark does not), a space and "[" (both encode them), one path absolute in the log."""
    _rename(
        dt,
        table_dir,
        [
            ("é.parquet", "%C3%A9.parquet"),
            ("f.parquet", "f.parquet"),
            ("a b.parquet", "a%20b.parquet"),
            ("z[1].parquet", "file://" + encode_uri_path(f"{table_dir}/z[1].parquet")),
        ],
    )


def _sorts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the bins sent to the sorting path, the one read in scan order turned off."""
    calls: list[int] = []
    sort = compaction_write._bins_in_path_order

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return sort(*args, **kwargs)

    monkeypatch.setattr(compaction_write, "_bins_in_path_order", counted)
    return calls


def test_sources_are_listed_in_the_order_spark_sorts_their_paths(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log may spell a path otherwise than Spark reports it: "%C3%A9" sorts first as
    the log spells it and last as Spark reports it (raw UTF-8), "[" is encoded by Spark."""
    monkeypatch.setattr(compaction_write, "read_in_scan_order", lambda *a, **k: None)
    dt = _table(spark, table_dir, files=4, partitioned=False)
    _rename_oddly(dt, table_dir)
    before = _rows_by_source(dt)
    dt.optimize().execute_compaction()
    (order,) = _assert_outputs_trace(dt, before)
    assert order[0] == "a%20b.parquet" and order[-1] == "%C3%A9.parquet"


def test_a_bin_written_alone_is_read_in_scan_order_whatever_its_names(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No sort, and Spark's statuses (paths decoded) matched to the log's spellings."""
    sorts = _sorts(monkeypatch)
    dt = _table(spark, table_dir, files=4, partitioned=False)
    _rename_oddly(dt, table_dir)
    before = _rows_by_source(dt)
    dt.optimize().execute_compaction()
    (order,) = _assert_outputs_trace(dt, before)
    assert sorted(order) == sorted(before) and not sorts


def test_partitions_of_several_files_are_read_in_scan_order(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With opening a file made cheap, Spark packs several files into each partition: each
    file is checked at its place in its partition, and the coalesce reads them in turn."""
    sorts = _sorts(monkeypatch)
    dt = _table(spark, table_dir, files=12, partitioned=False)
    sizes = [
        (table_dir / decode_uri_path(f.path)).stat().st_size for f in dt.snapshot().add_files()
    ]
    settings = {
        "spark.sql.files.openCostInBytes": "1",
        "spark.sql.files.maxPartitionBytes": str(3 * max(sizes) + 10),
    }
    saved = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        planned = compaction_read._planned_partitions(
            spark, [(f, size, 0) for f, size in zip(dt.snapshot().add_files(), sizes, strict=True)]
        )
        assert planned is not None and 1 < len(planned) < 12
        before = _rows_by_source(dt)
        dt.optimize().execute_compaction()
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
    (order,) = _assert_outputs_trace(dt, before)
    assert sorted(order) == sorted(before) and not sorts


def test_the_coalesce_must_read_the_planned_number_of_partitions_in_turn(
    spark: SparkSession, table_dir: Path
) -> None:
    _table(spark, table_dir, files=3, partitioned=False)
    scan = spark.read.parquet(str(table_dir))
    partitions = scan.rdd.getNumPartitions()
    assert compaction_read._coalesced_in_turn(spark, scan, partitions)
    assert not compaction_read._coalesced_in_turn(spark, scan, partitions - 1)
    assert not compaction_read._coalesced_in_turn(spark, scan, partitions + 1)
    # A plan that is not a plain scan of files is refused.
    assert not compaction_read._coalesced_in_turn(spark, scan.union(scan), 2 * partitions)


def test_a_row_out_of_its_planned_place_fails_the_read_and_the_bin_is_sorted(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan that lists the files in another order than Spark reads them is caught."""
    sorts = _sorts(monkeypatch)
    planned = compaction_read._planned_partitions

    def reversed_plan(*args: Any) -> Any:
        out = planned(*args)
        return None if out is None else [p[::-1] for p in out[::-1]]

    monkeypatch.setattr(compaction_read, "_planned_partitions", reversed_plan)
    dt = _table(spark, table_dir, files=5, partitioned=False)
    before = _rows_by_source(dt)
    dt.optimize().execute_compaction()
    _assert_outputs_trace(dt, before)
    assert sorts == [1]
    # The read itself is what refuses.
    txn = OptimisticTransaction(dt.log, dt.log.snapshot())
    (out,) = txn.scan()
    files = [out, *_append_one(spark, dt)]
    read = _read_in_scan_order(spark, txn, files)
    assert read is not None
    with pytest.raises(Exception, match=SCAN_ORDER_BROKEN):
        read[0].collect()


def test_a_file_read_in_pieces_fails_the_read(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file larger than Spark's split size is read in pieces, and the planner sorts all
    pieces by length: here two files of one size each start in their planned turn, but the
    first file's last piece comes after the second's first. Its first row is not that of a
    whole file, and the read refuses."""
    data = spark.range(0, 60).select("id", (F.col("id") * 10).alias("v"), F.lit(0).alias("p"))
    for _ in range(2):
        deltatx.write(data.coalesce(1), str(table_dir), mode="append")
    dt = DeltaTable.for_path(spark, str(table_dir))
    files = dt.snapshot().add_files()
    for i, f in enumerate(files):  # row groups of 5 rows: each piece holds some rows
        path = table_dir / decode_uri_path(f.path)
        pq.write_table(pq.read_table(path), path, row_group_size=5)
        os.utime(path, ns=(1_700_000_000_000_000_000 + i * 10**9,) * 2)
    assert len({(table_dir / decode_uri_path(f.path)).stat().st_size for f in files}) == 1
    piece = 400

    def in_pieces(spark: SparkSession, listed: list[tuple[AddFile, int, int]]) -> Any:
        """Spark's plan of the pieces, each alone in its partition (opening one costs more
        than a piece), a file named where its first piece is."""
        pieces = [
            (min(piece, size - start), (add, size, modified) if start == 0 else None)
            for add, size, modified in listed
            for start in range(0, size, piece)
        ]
        return [
            [] if entry is None else [entry] for _, entry in sorted(pieces, key=lambda p: -p[0])
        ]

    # The plan's own refusal of large files set aside: the check alone must catch them.
    monkeypatch.setattr(compaction_read, "_planned_partitions", in_pieces)
    split = "spark.sql.files.maxPartitionBytes"
    old = spark.conf.get(split)
    spark.conf.set(split, str(piece))
    try:
        txn = OptimisticTransaction(dt.log, dt.log.snapshot())
        read = _read_in_scan_order(spark, txn, files)
        assert read is not None
        with pytest.raises(Exception, match=SCAN_ORDER_BROKEN):
            read[0].collect()
    finally:
        spark.conf.set(split, old)


def _read_in_scan_order(
    spark: SparkSession,
    txn: OptimisticTransaction,
    files: list[AddFile],
    rows_of: Callable[[AddFile], int] | None = None,
) -> tuple[DataFrame, list[AddFile]] | None:
    return read_in_scan_order(
        spark,
        location=TableLocation.parse(txn.log.table_path),
        files=files,
        physical_data_schema=txn.schema,
        column_mapping="none",
        rows_of=rows_of or (lambda f: physical_rows(txn, f)),
    )


def _append_one(spark: SparkSession, dt: DeltaTable) -> list[AddFile]:
    """Appends one more file (ids 100..109) and returns its ``add``."""
    known = {f.path for f in dt.snapshot().add_files()}
    data = spark.range(100, 110).select(
        "id", (F.col("id") * 10).alias("v"), (F.col("id") % 2).alias("p")
    )
    deltatx.write(data.coalesce(1), str(dt.log.table_path), mode="append")
    return [f for f in dt.snapshot().add_files() if f.path not in known]


def test_files_spark_cannot_tell_apart_are_sorted_instead(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two files of one size and one modification time bear one mark: the check could not
    tell which of them a row came from, so the bin is not read in scan order."""
    sorts = _sorts(monkeypatch)
    data = spark.range(0, 50).select("id", (F.col("id") * 10).alias("v"), F.lit(0).alias("p"))
    for _ in range(2):  # the same rows twice: two files of the same size
        deltatx.write(data.coalesce(1), str(table_dir), mode="append")
    dt = DeltaTable.for_path(spark, str(table_dir))
    files = dt.snapshot().add_files()
    paths = [table_dir / decode_uri_path(f.path) for f in files]
    assert len({p.stat().st_size for p in paths}) == 1
    for p in paths:
        os.utime(p, ns=(1_700_000_000_123_000_000, 1_700_000_000_123_000_000))
    txn = OptimisticTransaction(dt.log, dt.log.snapshot())
    read = _read_in_scan_order(spark, txn, files)
    assert read is None
    assert _read_in_scan_order(spark, txn, files[:1], rows_of=lambda f: 0) is None  # no rows
    before = _rows_by_source(dt)
    dt.optimize().execute_compaction()
    _assert_outputs_trace(dt, before)
    assert sorts == [1]


def test_a_file_too_large_for_its_key_is_sorted_instead(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's key holds its whole size (the check reads a block as long as the file as the
    file read whole); a size past the key's bits, 2**40 bytes, sends the bin to the sort.
    The limit is lowered here to the size of the files written."""
    dt = _table(spark, table_dir, files=3, partitioned=False)
    files = dt.snapshot().add_files()
    txn = OptimisticTransaction(dt.log, dt.log.snapshot())
    assert _read_in_scan_order(spark, txn, files) is not None
    largest = max(f.size for f in files)
    monkeypatch.setattr(compaction_read, "_SIZE_BITS", largest.bit_length() - 1)
    assert _read_in_scan_order(spark, txn, files) is None
    monkeypatch.setattr(compaction_read, "_SIZE_BITS", largest.bit_length())
    assert _read_in_scan_order(spark, txn, files) is not None


@pytest.mark.parametrize(
    "status",
    [
        "LocatedFileStatus{path=file:/t/a.parquet; isDirectory=false; length=12; replication=1;"
        " blocksize=33554432; modification_time=1700000000123; access_time=0; owner=; group=;"
        " permission=rw-rw-rw-; isSymlink=false; hasAcl=false; isEncrypted=false;"
        " isErasureCoded=false}",
        # A name that repeats Hadoop's fields, and S3A's suffix after the braces.
        "S3AFileStatus{path=s3a://b/x; isDirectory=false; length=1; modification_time=2;.parquet;"
        " isDirectory=false; length=12; replication=1; blocksize=1; modification_time="
        "1700000000123; access_time=0; owner=o; group=g; permission=rw-rw-rw-; isSymlink=false;"
        " hasAcl=false; isEncrypted=true; isErasureCoded=false} isEmptyDirectory=FALSE eTag=e"
        " versionId=null",
    ],
)
def test_a_file_status_is_read_for_its_path_size_and_time(status: str) -> None:
    fields = compaction_read._STATUS.fullmatch(status)
    assert fields is not None
    assert fields.group(1) in (
        "file:/t/a.parquet",
        "s3a://b/x; isDirectory=false; length=1; modification_time=2;.parquet",
    )
    assert (int(fields.group(2)), int(fields.group(3))) == (12, 1_700_000_000_123)


def test_bins_with_deletion_vectors_are_read_by_file_index(
    spark: SparkSession, table_dir: Path
) -> None:
    dt = _table(spark, table_dir, files=3, partitioned=False)
    dt.delete("id IN (3, 4)")
    files = dt.snapshot().add_files()
    assert any(f.deletion_vector is not None for f in files)
    schema = dt.snapshot().schema
    location = TableLocation.parse(dt.log.table_path)
    assert (
        read_in_path_order(
            spark,
            location=location,
            files=files,
            physical_data_schema=schema,
            column_mapping="none",
        )
        is None
    )
    dt.optimize().execute_compaction()
    ids = sorted(r["id"] for r in dt.to_df().collect())
    assert ids == [i for i in range(100) if i not in (3, 4)]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_tables_compact_by_physical_names(
    spark: SparkSession, table_dir: Path, mode: str
) -> None:
    """A renamed column and one added later (NULL in older files) survive compaction."""
    first = spark.createDataFrame([(1, "a"), (2, "b")], "id BIGINT, name STRING")
    deltatx.write(first, str(table_dir), properties={"delta.columnMapping.mode": mode})
    dt = DeltaTable.for_path(spark, str(table_dir))
    dt.rename_column("name", "label")
    later = spark.createDataFrame([(3, "c", 7)], "id BIGINT, label STRING, n INT")
    deltatx.write(later, str(table_dir), mode="append", merge_schema=True)
    before = dt.snapshot().add_files()
    metrics = dt.optimize().execute_compaction()
    assert (metrics.num_removed_files, metrics.num_added_files) == (len(before), 1)
    rows = sorted(tuple(r) for r in dt.to_df().collect())
    assert rows == [(1, "a", None), (2, "b", None), (3, "c", 7)]
    (out,) = dt.snapshot().add_files()
    assert json.loads(out.stats or "{}")["numRecords"] == 3


def test_a_directory_is_read_whole_only_when_spark_lists_exactly_the_bin(tmp_path: Path) -> None:
    root = Location.of(str(tmp_path))
    names = ["a.parquet", "b.parquet"]
    for name in [*names, ".a.parquet.crc", "_SUCCESS"]:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "_delta_log").mkdir()
    canonical = [f"{tmp_path}/{n}" for n in names]
    assert _directory_of_exactly(root, canonical) == str(tmp_path)
    assert _directory_of_exactly(root, canonical[:1]) is None  # b.parquet is not in the bin
    (tmp_path / "p=1").mkdir()  # Spark's recursive listing would go in
    assert _directory_of_exactly(root, canonical) is None
    (tmp_path / "p=1").rmdir()
    (tmp_path / "_metadata").write_bytes(b"x")  # a summary file Spark lists
    assert _directory_of_exactly(root, canonical) is None


def test_a_stray_file_beside_the_sources_is_not_compacted(
    spark: SparkSession, table_dir: Path
) -> None:
    """A Parquet file the log does not name (a failed writer's leftover) lies in the directory."""
    dt = _table(spark, table_dir, files=3, partitioned=False)
    spark.range(1000, 1010).select("id", F.col("id").alias("v"), F.col("id").alias("p")).coalesce(
        1
    ).write.parquet(str(table_dir / "_stray"))
    (stray,) = (table_dir / "_stray").glob("*.parquet")
    stray.rename(table_dir / "stray.parquet")
    before = _rows_by_source(dt)
    dt.optimize().execute_compaction()
    _assert_outputs_trace(dt, before)
    assert sorted(r["id"] for r in dt.to_df().collect()) == list(range(100))


def test_a_compaction_that_would_lose_rows_commits_nothing(
    spark: SparkSession, table_dir: Path
) -> None:
    """With ``spark.sql.files.ignoreCorruptFiles`` Spark skips a source it cannot read: the
    output would lack its rows, and the compaction that removes the source must fail."""
    dt = _table(spark, table_dir, files=3, partitioned=False)
    files = dt.snapshot().add_files()
    broken = table_dir / decode_uri_path(files[0].path)
    broken.write_bytes(b"not parquet" * (broken.stat().st_size // 11 + 1))
    key = "spark.sql.files.ignoreCorruptFiles"
    old = spark.conf.get(key)
    spark.conf.set(key, "true")
    try:
        with pytest.raises(InvalidTableError, match=files[0].path):
            dt.optimize().execute_compaction()
    finally:
        spark.conf.set(key, old)
    assert {f.path for f in dt.snapshot().add_files()} == {f.path for f in files}
    on_disk = {p.name for p in table_dir.iterdir() if p.suffix == ".parquet"}
    assert on_disk == {decode_uri_path(f.path) for f in files}  # the output was removed


def test_a_count_the_log_has_wrong_leaves_the_output_untagged_not_refused(
    spark: SparkSession, table_dir: Path
) -> None:
    """The sources' footers settle a count that differs from the log's statistics: the rows
    are all there, so the compaction commits, and untagged (its races judged per file)."""
    dt = _table(spark, table_dir, files=3, partitioned=False)
    log = dt.log
    txn = OptimisticTransaction(log, log.snapshot())
    files = txn.scan()
    stats = json.loads(files[0].stats or "{}")
    stats["numRecords"] += 1
    txn.remove_files([files[0]], data_change=False)
    txn.add_files([dataclasses.replace(files[0], stats=json.dumps(stats))])
    txn.record_operation(Operation(OperationName.MANUAL_UPDATE, {}), {})
    txn.commit()
    dt.optimize().execute_compaction()
    (out,) = dt.snapshot().add_files()
    assert out.path not in {f.path for f in files} and not out.tags
    assert sorted(r["id"] for r in dt.to_df().collect()) == list(range(100))
