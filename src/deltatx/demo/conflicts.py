"""The documented conflict tables, reproduced with real concurrent Spark transactions.

Each cell of a table is a pair of operations. For a pair, both orders are run: transaction A
begins and stages its work (reading its snapshot, writing its files), transaction B begins on
the same snapshot, stages and commits, then A commits. The cell is "can conflict" when some
order raised a documented conflict exception, and "cannot conflict" when both orders committed.
The operations are built to overlap as much as the pair allows (same files, same rows), so a
"cannot conflict" cell is a real promise and a "can conflict" cell a real collision.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import ConcurrentModificationException
from deltatx.kernel.isolation import IsolationLevel
from deltatx.tables import DeltaTable, Transaction, write

LEVELS: tuple[IsolationLevel, ...] = (
    IsolationLevel.WRITE_SERIALIZABLE,
    IsolationLevel.SERIALIZABLE,
)


class Op(StrEnum):
    """The operations of the documented tables ("INSERT" is a blind append)."""

    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    MERGE = "MERGE"
    OPTIMIZE = "OPTIMIZE"

    @property
    def group(self) -> str:
        """The documented row/column: INSERT, UPDATE/DELETE/MERGE, or OPTIMIZE."""
        if self in (Op.UPDATE, Op.DELETE, Op.MERGE):
            return "UPDATE, DELETE, MERGE"
        return self.value


class ExtraOp(StrEnum):
    """Operations the row-level table adds to the documented groups (not in the first table)."""

    ZORDER = "OPTIMIZE ZORDER BY"

    @property
    def group(self) -> str:
        """Its own row and column: the documents name it inside the OPTIMIZE cells."""
        return self.value


AnyOp = Op | ExtraOp
GROUPS: tuple[str, ...] = ("INSERT", "UPDATE, DELETE, MERGE", "OPTIMIZE")
SCHEMA = "id BIGINT, k INT, v DOUBLE"


def documented_without_row_level(a: str, b: str, level: IsolationLevel) -> bool:
    """The documents' table without row-level concurrency: may the pair conflict at ``level``?

    Tables without deletion vectors (or partitioned ones); OPTIMIZE here is a compaction on a
    table without deletion vectors, which the documents say can conflict with DML and OPTIMIZE.
    """
    pair = frozenset((a, b))
    dml = "UPDATE, DELETE, MERGE"
    if pair == {"INSERT"} or pair == {"INSERT", "OPTIMIZE"}:
        return False  # "Sin riesgo de conflicto"
    if pair == {dml, "INSERT"}:
        return level is IsolationLevel.SERIALIZABLE
    return True  # DML/DML, OPTIMIZE/DML and OPTIMIZE/OPTIMIZE "puede entrar en conflicto"


DOCUMENTED_SENTENCE = {
    frozenset({"INSERT"}): "INSERT / INSERT: 'Sin riesgo de conflicto'",
    frozenset({"INSERT", "UPDATE, DELETE, MERGE"}): (
        "UPDATE, DELETE y MERGE INTO / INSERT: 'No puede entrar en conflicto en "
        "WriteSerializable. Puede entrar en conflicto en Serializable.'"
    ),
    frozenset({"UPDATE, DELETE, MERGE"}): (
        "UPDATE, DELETE y MERGE INTO / same: 'Puede entrar en conflicto en Serializable y "
        "WriteSerializable.'"
    ),
    frozenset({"INSERT", "OPTIMIZE"}): "OPTIMIZE / INSERT: 'Sin riesgo de conflicto'",
    frozenset({"OPTIMIZE", "UPDATE, DELETE, MERGE"}): (
        "OPTIMIZE / UPDATE, DELETE, MERGE: 'No puede entrar en conflicto en tablas con vectores "
        "de eliminación habilitados, a menos que se use ZORDER BY. De lo contrario, puede entrar "
        "en conflicto.'"
    ),
    frozenset({"OPTIMIZE"}): "OPTIMIZE / OPTIMIZE: as OPTIMIZE / UPDATE, DELETE, MERGE",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run: B (the winner) committed first, then A; ``error`` is A's exception, if any.

    ``lost`` is set when the final table matches no serial order of the committed operations
    (a change was lost or doubled); only the row-level table checks it.
    """

    level: IsolationLevel
    first: AnyOp
    second: AnyOp
    error: str | None
    message: str | None = None
    lost: bool = False


@dataclass(frozen=True, slots=True)
class Cell:
    """A cell of the observed table: both orders of a pair at one level."""

    level: IsolationLevel
    row: str
    column: str
    outcomes: tuple[Outcome, ...]
    documented_may_conflict: bool

    @property
    def observed_conflict(self) -> bool:
        """Whether any order raised a conflict."""
        return any(o.error is not None for o in self.outcomes)

    @property
    def agrees(self) -> bool:
        """Whether what happened is what the documents say may happen (and nothing was lost)."""
        lost = any(o.lost for o in self.outcomes)
        return self.observed_conflict == self.documented_may_conflict and not lost


def sample_rows(spark: SparkSession, start: int, n: int) -> DataFrame:
    """``n`` rows of (id, k, v) starting at id ``start``."""
    return spark.range(start, start + n).select(
        F.col("id"), (F.col("id") % 4).cast("int").alias("k"), (F.col("id") * 0.5).alias("v")
    )


def build_template(
    spark: SparkSession,
    path: Path | str,
    level: IsolationLevel,
    *,
    deletion_vectors: bool = False,
) -> None:
    """An unpartitioned table, four small files of ten rows (without deletion vectors).

    ``path`` is a local directory (replaced if present) or a URI of a fresh table root.
    """
    if isinstance(path, Path) and path.exists():
        shutil.rmtree(path)
    DeltaTable.create(
        spark,
        str(path),
        schema=SCHEMA,
        properties={
            "delta.isolationLevel": level.value,
            "delta.enableDeletionVectors": str(deletion_vectors).lower(),
        },
    )
    for i in range(4):
        write(sample_rows(spark, i * 10, 10).coalesce(1), str(path))


def stage(op: Op, spark: SparkSession, txn: Transaction) -> None:
    """Stages ``op`` so that it overlaps any other operation as much as it can."""
    if op is Op.INSERT:
        txn.write(sample_rows(spark, 1000 + id(txn) % 100_000 * 10, 3))
    elif op is Op.UPDATE:
        txn.update("id % 2 = 0", set={"v": "v + 1"})
    elif op is Op.DELETE:
        txn.delete("id % 3 = 0")
    elif op is Op.MERGE:
        source = spark.createDataFrame([(1, 1, 9.0), (2, 2, 9.0), (500, 0, 1.0)], SCHEMA)
        (
            txn.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .when_matched_update(set={"v": "s.v"})
            .when_not_matched_insert_all()
            .execute()
        )
    else:
        txn.optimize().execute_compaction()


def run_pair(
    spark: SparkSession, table: Path | str, *, first: Op, second: Op, level: IsolationLevel
) -> Outcome:
    """Runs ``second`` and ``first`` concurrently on ``table``; ``first`` commits first."""
    dt = DeltaTable.for_path(spark, str(table))
    loser = dt.begin()
    stage(second, spark, loser)
    winner = dt.begin()
    stage(first, spark, winner)
    winner.commit()
    try:
        loser.commit()
    except ConcurrentModificationException as exc:
        return Outcome(level, first, second, type(exc).__name__, str(exc))
    return Outcome(level, first, second, None)


def observe_table(
    spark: SparkSession,
    workdir: Path,
    *,
    ops: tuple[Op, ...] = tuple(Op),
    levels: tuple[IsolationLevel, ...] = LEVELS,
    progress: Callable[[str], None] | None = None,
) -> list[Cell]:
    """Runs every pair of ``ops`` in both orders at every level; one cell per documented cell."""
    cells: list[Cell] = []
    for level in levels:
        template = workdir / f"template-{level.value}"
        build_template(spark, template, level)
        outcomes: dict[frozenset[str], list[Outcome]] = {}
        pairs = [(a, b) for i, a in enumerate(ops) for b in ops[i:]]
        for a, b in pairs:
            orders = [(a, b)] if a is b else [(a, b), (b, a)]
            for first, second in orders:
                run_dir = workdir / f"{level.value}-{first.value}-then-{second.value}"
                if run_dir.exists():
                    shutil.rmtree(run_dir)
                shutil.copytree(template, run_dir)
                outcome = run_pair(spark, run_dir, first=first, second=second, level=level)
                outcomes.setdefault(frozenset((a.group, b.group)), []).append(outcome)
                if progress is not None:
                    result = outcome.error or "committed"
                    progress(f"{level.value}: {first.value} commits, then {second.value}: {result}")
        cells.extend(cells_of(GROUPS, outcomes, level, documented=documented_without_row_level))
    return cells


def cells_of(
    groups: tuple[str, ...],
    outcomes: dict[frozenset[str], list[Outcome]],
    level: IsolationLevel,
    *,
    documented: Callable[[str, str, IsolationLevel], bool],
) -> list[Cell]:
    """The lower triangle of a table: one cell per pair of groups that was run."""
    cells = []
    for i, row in enumerate(groups):
        for column in groups[i:]:
            key = frozenset((row, column))
            if key in outcomes:
                cells.append(
                    Cell(
                        level=level,
                        row=row,
                        column=column,
                        outcomes=tuple(outcomes[key]),
                        documented_may_conflict=documented(row, column, level),
                    )
                )
    return cells
