"""OPTIMIZE and REORG race UPDATE, DELETE and MERGE on tables with deletion vectors.

Seed 000 (with row-level concurrency): OPTIMIZE vs UPDATE, DELETE and MERGE INTO "Puede entrar
en conflicto cuando se usa ZORDER BY. De lo contrario, no puede entrar en conflicto." -- and
partitioned tables "pueden evitar conflictos entre OPTIMIZE y todas las demás operaciones de
escritura cuando se habilitan los vectores de eliminación". Both commit orders are run; a
DML is never lost.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import ConcurrentModificationException
from deltatx.kernel.row_level.provenance import SOURCES_TAG, segments_of
from deltatx.log.deletion_vectors import DvReader
from deltatx.tables import Transaction

Op = Callable[[Transaction], object]
LEVELS = ["WriteSerializable", "Serializable"]
KINDS = ["delete", "update", "merge"]


def make_table(
    spark: SparkSession, path: Path, level: str, *, partitioned: bool = False, files: int = 4
) -> DeltaTable:
    """Ids 0..99, v = id * 10, in ``files`` small files (per partition when partitioned)."""
    data = spark.range(0, 100).select(
        "id", (F.col("id") * 10).alias("v"), (F.col("id") % 2).alias("p")
    )
    for i in range(files):
        chunk = data.filter(F.col("id") % files == i).coalesce(1)
        deltatx.write(
            chunk,
            str(path),
            partition_by=["p"] if partitioned else None,
            properties={"delta.isolationLevel": level},
        )
    return DeltaTable.for_path(spark, str(path))


def values(dt: DeltaTable) -> dict[int, int]:
    return {int(r["id"]): int(r["v"]) for r in dt.to_df().collect()}


def dml(spark: SparkSession, kind: str, ids: list[int]) -> Op:
    cond = f"id IN ({', '.join(map(str, ids))})"
    if kind == "delete":
        return lambda t: t.delete(cond)
    if kind == "update":
        return lambda t: t.update(cond, {"v": "-1"})

    def run(t: Transaction) -> object:
        src = spark.createDataFrame([(i, -2) for i in ids], "id BIGINT, v BIGINT")
        return (
            t.alias("t")
            .merge(src.alias("s"), "t.id = s.id")
            .when_matched_update(set={"v": "s.v"})
            .execute()
        )

    return run


def optimize(t: Transaction) -> object:
    return t.optimize().execute_compaction()


def reorg(t: Transaction) -> object:
    return t.reorg_purge()


def race(dt: DeltaTable, first: Op, second: Op) -> int:
    """Stages ``first``, commits ``second`` as the winner, then commits ``first``."""
    a = dt.begin()
    first(a)
    b = dt.begin()
    second(b)
    b.commit()
    return a.commit()


def expected(kind: str, ids: list[int]) -> dict[int, int]:
    out = {i: i * 10 for i in range(100)}
    for i in ids:
        if kind == "delete":
            del out[i]
        else:
            out[i] = -1 if kind == "update" else -2
    return out


def assert_no_duplicates(dt: DeltaTable) -> None:
    ids = [int(r["id"]) for r in dt.to_df().select("id").collect()]
    assert len(ids) == len(set(ids))


IDS = [0, 1, 6, 13, 42, 77, 99]


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("order", ["dml-first", "optimize-first"])
def test_compaction_and_dml_do_not_conflict(
    spark: SparkSession, table_dir: Path, partitioned: bool, level: str, kind: str, order: str
) -> None:
    """Seed: OPTIMIZE vs DML "De lo contrario, no puede entrar en conflicto" (no ZORDER BY),
    partitioned tables with deletion vectors included; the DML's rows survive the move."""
    dt = make_table(spark, table_dir, level, partitioned=partitioned)
    # A vector already present before the race: the compaction must skip those rows too.
    dt.delete("id = 50")
    change = dml(spark, kind, IDS)
    if order == "dml-first":
        race(dt, change, optimize)  # the DML commits after the compaction
    else:
        race(dt, optimize, change)  # the compaction commits after the DML
    want = expected(kind, IDS)
    del want[50]
    assert values(dt) == want
    assert_no_duplicates(dt)
    ops = [r["operation"] for r in dt.history().select("operation").collect()]
    assert "OPTIMIZE" in ops


@pytest.mark.parametrize("order", ["dml-first", "reorg-first"])
def test_reorg_and_dml_do_not_conflict(spark: SparkSession, table_dir: Path, order: str) -> None:
    """Seed: "Las operaciones REORG tienen una semántica de aislamiento idéntica a OPTIMIZE"."""
    dt = make_table(spark, table_dir, "WriteSerializable")
    dt.delete("id IN (3, 7, 11)")  # REORG purges the files holding these vectors
    change = dml(spark, "update", [19, 23, 2])
    if order == "dml-first":
        race(dt, change, reorg)
    else:
        race(dt, reorg, change)
    want = expected("update", [19, 23, 2])
    for i in (3, 7, 11):
        del want[i]
    assert values(dt) == want
    assert_no_duplicates(dt)


def test_optimize_vs_optimize_does_not_conflict(spark: SparkSession, table_dir: Path) -> None:
    """Seed: OPTIMIZE vs OPTIMIZE "De lo contrario, no puede entrar en conflicto"; the loser's
    copy of rows the winner already compacted is dropped, so no row is doubled."""
    dt = make_table(spark, table_dir, "WriteSerializable")
    race(dt, optimize, optimize)
    assert values(dt) == expected("delete", [])
    assert_no_duplicates(dt)


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("order", ["dml-first", "zorder-first"])
@pytest.mark.parametrize("kind", KINDS)
def test_zorder_may_conflict_but_loses_nothing(
    spark: SparkSession, table_dir: Path, order: str, kind: str
) -> None:
    """Seed: OPTIMIZE "Puede entrar en conflicto cuando se usa ZORDER BY": the race raises a
    conflict, and the committed table holds the winner's work and nothing else."""
    dt = make_table(spark, table_dir, "WriteSerializable")
    change = dml(spark, kind, IDS)

    def zorder(t: Transaction) -> object:
        return t.optimize().execute_z_order_by("v")

    with pytest.raises(ConcurrentModificationException):
        if order == "dml-first":
            race(dt, change, zorder)
        else:
            race(dt, zorder, change)
    want = expected(kind, IDS) if order == "zorder-first" else expected("delete", [])
    assert values(dt) == want
    assert_no_duplicates(dt)


def test_compaction_output_keeps_source_order_and_names_sources(
    spark: SparkSession, table_dir: Path
) -> None:
    """The provenance the remap relies on: each output holds its sources' live rows in order
    of (source, row index), and its tag names the sources with their live row counts."""
    dt = make_table(spark, table_dir, "WriteSerializable", partitioned=True, files=5)
    dt.delete("id IN (4, 9, 30)")
    sources = {f.path: f for f in dt.snapshot().add_files()}
    reader = DvReader(dt.log)
    expected_rows: dict[str, list[int]] = {}
    for path, f in sources.items():
        table = pq.read_table(io.BytesIO(dt.log.store.read(f"{dt.log.table_path}/{path}")))
        deleted = reader.rows_of(f)
        expected_rows[path] = [
            r for i, r in enumerate(table.column("id").to_pylist()) if i not in deleted
        ]
    dt.optimize().execute_compaction()
    outputs = dt.snapshot().add_files()
    assert len(outputs) == 2  # one per partition
    for out in outputs:
        assert out.tags is not None and SOURCES_TAG in out.tags
        segments = segments_of(out)
        assert segments is not None
        want = [r for s in segments for r in expected_rows[s.path]]
        assert [s.live_rows for s in segments] == [len(expected_rows[s.path]) for s in segments]
        got = pq.read_table(io.BytesIO(dt.log.store.read(f"{dt.log.table_path}/{out.path}")))
        assert got.column("id").to_pylist() == want
        assert json.loads(out.stats or "{}")["numRecords"] == len(want)


@pytest.mark.parametrize("kinds", [("delete", "update"), ("update", "delete"), ("merge", "delete")])
def test_compaction_after_two_dml_winners_on_one_source(
    spark: SparkSession, table_dir: Path, kinds: tuple[str, str]
) -> None:
    """The compaction commits after two DML commits that both changed the same source file:
    each winner's rows must be carried onto the output from the state the compaction read
    (found by the serializability checker: the second winner's delete was mapped from the
    first winner's vector and a deleted row came back)."""
    dt = make_table(spark, table_dir, "WriteSerializable", files=2)
    dt.delete("id = 50")  # a vector in force before the race
    compaction = dt.begin()
    optimize(compaction)
    first_ids, second_ids = [4, 8], [12, 16]
    for kind, ids in zip(kinds, (first_ids, second_ids), strict=True):
        winner = dt.begin()
        dml(spark, kind, ids)(winner)
        winner.commit()
    compaction.commit()
    want = {i: i * 10 for i in range(100) if i != 50}
    for kind, ids in zip(kinds, (first_ids, second_ids), strict=True):
        for i in ids:
            if kind == "delete":
                del want[i]
            else:
                want[i] = -1 if kind == "update" else -2
    assert values(dt) == want
    assert_no_duplicates(dt)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", KINDS)
def test_dml_after_a_compaction_that_was_settled_against_another_dml(
    spark: SparkSession, table_dir: Path, kind: str, level: str
) -> None:
    """A DML that read before a compaction commits after it, and the compaction had itself
    been settled against a third, DML commit on the same file: the late DML is carried onto the
    output by row position, mapped from the vector the compaction read (recorded in the
    output's tag), not the newer one its remove names. Seed 000: OPTIMIZE vs DML "no puede
    entrar en conflicto" without ZORDER BY, so the late DML commits, on the right row."""
    dt = make_table(spark, table_dir, level, files=2)
    dt.delete("id = 50")
    late = dt.begin()
    dml(spark, kind, [12])(late)
    compaction = dt.begin()
    optimize(compaction)
    third = dt.begin()
    third.delete("id = 4")
    third.commit()
    compaction.commit()
    late.commit()
    want = {i: i * 10 for i in range(100) if i not in (4, 50)}
    if kind == "delete":
        del want[12]
    else:
        want[12] = -1 if kind == "update" else -2
    assert values(dt) == want
    assert_no_duplicates(dt)
    ops = [e.commit_info.operation for e in dt.log.history(3) if e.commit_info is not None]
    assert ops == [kind.upper(), "OPTIMIZE", "DELETE"]
