"""The second documented conflict table, WITH row-level concurrency, observed live on Spark.

The table is unpartitioned with deletion vectors (the documents' condition for row-level
concurrency). Every DML targets the same row (``id = 6``) and the INSERT appends a row with
that id, so each "can conflict" cell is provoked on purpose; OPTIMIZE compacts the very files
the DML changes, so each "cannot conflict" cell is a real promise. A ZORDER BY variant shows
the one OPTIMIZE that may conflict.

Conflicts aside, every run checks that nothing was lost: the final rows must be those of
running the committed operations one after the other, in commit order under Serializable, in
either order under WriteSerializable (which only promises that the writes are serializable).
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from deltatx.demo.conflicts import (
    GROUPS,
    LEVELS,
    SCHEMA,
    AnyOp,
    Cell,
    ExtraOp,
    Op,
    Outcome,
    build_template,
    cells_of,
)
from deltatx.errors import ConcurrentModificationException
from deltatx.kernel.isolation import IsolationLevel
from deltatx.tables import DeltaTable, Transaction

ROW_LEVEL_GROUPS: tuple[str, ...] = (*GROUPS, ExtraOp.ZORDER.value)
ALL_OPS: tuple[AnyOp, ...] = (*Op, ExtraOp.ZORDER)
TARGET_ID = 6
"""The row every DML changes and the INSERT appends again."""

_DML = "UPDATE, DELETE, MERGE"
_ZORDER = ExtraOp.ZORDER.value

DOCUMENTED_SENTENCE_ROW_LEVEL = {
    frozenset({"INSERT"}): "INSERT / INSERT: 'Sin riesgo de conflicto'",
    frozenset({"INSERT", _DML}): (
        "UPDATE, DELETE y MERGE INTO / INSERT: 'No puede entrar en conflicto en "
        "WriteSerializable. Puede entrar en conflicto en Serializable al modificar la misma "
        "fila.'"
    ),
    frozenset({_DML}): (
        "UPDATE, DELETE y MERGE INTO / same: 'Puede causar un conflicto al modificar el mismo "
        "registro.'"
    ),
    frozenset({"INSERT", "OPTIMIZE"}): "OPTIMIZE / INSERT: 'Sin riesgo de conflicto'",
    frozenset({"OPTIMIZE", _DML}): (
        "OPTIMIZE / UPDATE, DELETE y MERGE INTO: 'Puede entrar en conflicto cuando se usa ZORDER "
        "BY. De lo contrario, no puede entrar en conflicto.'"
    ),
    frozenset({"OPTIMIZE"}): (
        "OPTIMIZE / OPTIMIZE: 'Puede entrar en conflicto cuando se usa ZORDER BY. De lo "
        "contrario, no puede entrar en conflicto.'"
    ),
    frozenset({_ZORDER, "INSERT"}): "OPTIMIZE / INSERT: 'Sin riesgo de conflicto'",
    frozenset({_ZORDER, _DML}): (
        "OPTIMIZE / UPDATE, DELETE y MERGE INTO: 'Puede entrar en conflicto cuando se usa ZORDER "
        "BY.'"
    ),
    frozenset({_ZORDER, "OPTIMIZE"}): (
        "OPTIMIZE / OPTIMIZE: 'Puede entrar en conflicto cuando se usa ZORDER BY.'"
    ),
    frozenset(
        {_ZORDER}
    ): "OPTIMIZE / OPTIMIZE: 'Puede entrar en conflicto cuando se usa ZORDER BY.'",
}
"""The documented sentence behind each cell of the row-level table."""


def documented_with_row_level(a: str, b: str, level: IsolationLevel) -> bool:
    """The documents' table with row-level concurrency: may the pair conflict at ``level``?

    Args:
        a: A group of :data:`ROW_LEVEL_GROUPS` (the documents' three, or ``OPTIMIZE ZORDER BY``).
        b: Another (or the same) group.
        level: The isolation level.
    """
    pair = frozenset((a, b))
    if "INSERT" in pair:
        # INSERT vs INSERT and OPTIMIZE vs INSERT: "Sin riesgo de conflicto"; DML vs INSERT
        # only in Serializable, when the appended row is one the DML modifies.
        return pair == {_DML, "INSERT"} and level is IsolationLevel.SERIALIZABLE
    if pair == {_DML}:
        return True  # when both modify the same row, which the demo does on purpose
    return _ZORDER in pair  # OPTIMIZE conflicts only with ZORDER BY


def build_row_level_template(spark: SparkSession, path: Path, level: IsolationLevel) -> None:
    """An unpartitioned table with deletion vectors: four small files, one with a vector."""
    build_template(spark, path, level, deletion_vectors=True)
    # A vector already in force: compaction must skip its row, and carry the new ones.
    DeltaTable.for_path(spark, str(path)).delete("id = 33")


def stage_row_level(op: AnyOp, spark: SparkSession, txn: Transaction) -> None:
    """Stages ``op`` on the target row; deterministic, so runs can be replayed serially."""
    if op is Op.INSERT:
        txn.write(spark.createDataFrame([(TARGET_ID, 2, 100.0)], SCHEMA))
    elif op is Op.UPDATE:
        txn.update(f"id = {TARGET_ID}", set={"v": "v + 1"})
    elif op is Op.DELETE:
        txn.delete(f"id = {TARGET_ID}")
    elif op is Op.MERGE:
        source = spark.createDataFrame([(TARGET_ID, 2, 9.0), (500, 0, 1.0)], SCHEMA)
        (
            txn.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .when_matched_update(set={"v": "s.v"})
            .when_not_matched_insert_all()
            .execute()
        )
    elif op is Op.OPTIMIZE:
        txn.optimize().execute_compaction()
    else:
        txn.optimize().execute_z_order_by("v")


def _content(spark: SparkSession, path: Path) -> Counter[tuple[object, ...]]:
    rows = DeltaTable.for_path(spark, str(path)).to_df().collect()
    return Counter(tuple(r) for r in rows)


class SerialRuns:
    """The table after running committed operations one at a time (cached per sequence)."""

    def __init__(self, spark: SparkSession, template: Path, workdir: Path) -> None:
        self.spark = spark
        self.template = template
        self.workdir = workdir
        self._cache: dict[tuple[AnyOp, ...], Counter[tuple[object, ...]]] = {}

    def content(self, ops: tuple[AnyOp, ...]) -> Counter[tuple[object, ...]]:
        """The rows (with multiplicity) after running ``ops`` serially on the template."""
        # Compaction keeps the rows, so only the data-changing operations matter.
        key = tuple(op for op in ops if op not in (Op.OPTIMIZE, ExtraOp.ZORDER))
        if key not in self._cache:
            run_dir = self.workdir / ("serial-" + "-".join(op.name for op in key))
            if run_dir.exists():
                shutil.rmtree(run_dir)
            shutil.copytree(self.template, run_dir)
            dt = DeltaTable.for_path(self.spark, str(run_dir))
            for op in key:
                with dt.begin() as txn:
                    stage_row_level(op, self.spark, txn)
            self._cache[key] = _content(self.spark, run_dir)
        return self._cache[key]


def run_row_level_pair(
    spark: SparkSession,
    table: Path,
    *,
    first: AnyOp,
    second: AnyOp,
    level: IsolationLevel,
    serial: SerialRuns | None = None,
) -> Outcome:
    """Runs ``second`` and ``first`` concurrently on ``table``; ``first`` commits first.

    With ``serial``, the final rows are compared with the serial runs of what committed.
    """
    dt = DeltaTable.for_path(spark, str(table))
    loser = dt.begin()
    stage_row_level(second, spark, loser)
    winner = dt.begin()
    stage_row_level(first, spark, winner)
    winner.commit()
    error: str | None = None
    message: str | None = None
    try:
        loser.commit()
    except ConcurrentModificationException as exc:
        error, message = type(exc).__name__, str(exc)
    lost = False
    if serial is not None:
        got = _content(spark, table)
        committed = (first,) if error else (first, second)
        allowed = [serial.content(committed)]
        if error is None and level is IsolationLevel.WRITE_SERIALIZABLE:
            allowed.append(serial.content((second, first)))
        lost = got not in allowed
    return Outcome(level, first, second, error, message, lost)


def observe_row_level_table(
    spark: SparkSession,
    workdir: Path,
    *,
    ops: tuple[AnyOp, ...] = ALL_OPS,
    levels: tuple[IsolationLevel, ...] = LEVELS,
    progress: Callable[[str], None] | None = None,
) -> list[Cell]:
    """Runs every pair of ``ops`` in both orders at every level; one cell per table cell."""
    cells: list[Cell] = []
    for level in levels:
        template = workdir / f"template-{level.value}"
        build_row_level_template(spark, template, level)
        serial = SerialRuns(spark, template, workdir / f"serial-{level.value}")
        outcomes: dict[frozenset[str], list[Outcome]] = {}
        pairs = [(a, b) for i, a in enumerate(ops) for b in ops[i:]]
        for a, b in pairs:
            orders = [(a, b)] if a is b else [(a, b), (b, a)]
            for first, second in orders:
                run_dir = workdir / f"{level.value}-{first.name}-then-{second.name}"
                if run_dir.exists():
                    shutil.rmtree(run_dir)
                shutil.copytree(template, run_dir)
                outcome = run_row_level_pair(
                    spark, run_dir, first=first, second=second, level=level, serial=serial
                )
                outcomes.setdefault(frozenset((a.group, b.group)), []).append(outcome)
                if progress is not None:
                    result = outcome.error or "committed"
                    lost = " — A CHANGE WAS LOST" if outcome.lost else ""
                    progress(
                        f"{level.value}: {first.value} commits, then {second.value}: {result}{lost}"
                    )
        cells.extend(
            cells_of(ROW_LEVEL_GROUPS, outcomes, level, documented=documented_with_row_level)
        )
    return cells
