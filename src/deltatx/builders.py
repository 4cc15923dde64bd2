"""Builders for MERGE and OPTIMIZE, shared by DeltaTable and Transaction.

A builder collects options and, on execute, hands one unit of work to its owner: a
Transaction runs it in place, a DeltaTable runs it in a transaction of its own and commits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession

from deltatx.delta_spark_names import MergeBuilderNames, OptimizeBuilderNames
from deltatx.errors import InvalidArgumentError
from deltatx.kernel.metrics import MergeMetrics, OptimizeMetrics
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import operation
from deltatx.reexecution import Backoff, StatementKind, statement_reason
from deltatx.spark.commands.merge import ClauseKind, MergeClause, stage_merge
from deltatx.spark.commands.optimize import stage_compaction, stage_z_order

T = TypeVar("T")


class Owner(Protocol):
    """Something that can run a statement in a transaction (DeltaTable or Transaction)."""

    @property
    def path(self) -> str:
        """The table's path, for progress reports."""
        ...

    def run(
        self,
        work: Callable[[SparkSession, OptimisticTransaction], T],
        *,
        statement: StatementKind | None = None,
        not_replayable: str | None = None,
        retries: int = 0,
        backoff: Backoff | None = None,
    ) -> T:
        """Runs ``work`` with a session and a transaction (see :meth:`DeltaTable.run`)."""
        ...

    def stable_source(self, df: DataFrame, *, retries: int = 0) -> tuple[DataFrame, str | None]:
        """``df`` materialised when the statement may be re-executed, or why it cannot be."""
        ...


class MergeBuilder(MergeBuilderNames):
    """Collects MERGE clauses; :meth:`execute` runs them (in order) in one transaction."""

    def __init__(
        self,
        owner: Owner,
        source: DataFrame,
        condition: str | Column,
        target_alias: str | None,
    ) -> None:
        """Use :meth:`DeltaTable.merge` or :meth:`Transaction.merge`."""
        self._owner = owner
        self._source = source
        self._condition = condition
        self._target_alias = target_alias
        self._clauses: list[MergeClause] = []
        self._merge_schema = False

    def _add(self, clause: MergeClause) -> MergeBuilder:
        self._clauses.append(clause)
        return self

    def when_matched_update(
        self, set: Mapping[str, str | Column], condition: str | Column | None = None
    ) -> MergeBuilder:
        """For matched rows (meeting ``condition``): set columns."""
        return self._add(MergeClause(ClauseKind.MATCHED_UPDATE, condition, dict(set)))

    def when_matched_update_all(self, condition: str | Column | None = None) -> MergeBuilder:
        """For matched rows: set every column from the source column of the same name."""
        return self._add(MergeClause(ClauseKind.MATCHED_UPDATE, condition, None))

    def when_matched_delete(self, condition: str | Column | None = None) -> MergeBuilder:
        """For matched rows: delete the target row."""
        return self._add(MergeClause(ClauseKind.MATCHED_DELETE, condition, {}))

    def when_not_matched_insert(
        self, values: Mapping[str, str | Column], condition: str | Column | None = None
    ) -> MergeBuilder:
        """For source rows with no match: insert a row with these values (others NULL)."""
        return self._add(MergeClause(ClauseKind.NOT_MATCHED_INSERT, condition, dict(values)))

    def when_not_matched_insert_all(self, condition: str | Column | None = None) -> MergeBuilder:
        """For source rows with no match: insert them as they are."""
        return self._add(MergeClause(ClauseKind.NOT_MATCHED_INSERT, condition, None))

    def when_not_matched_by_source_update(
        self, set: Mapping[str, str | Column], condition: str | Column | None = None
    ) -> MergeBuilder:
        """For target rows no source row matched: set columns."""
        return self._add(MergeClause(ClauseKind.NOT_MATCHED_BY_SOURCE_UPDATE, condition, dict(set)))

    def when_not_matched_by_source_delete(
        self, condition: str | Column | None = None
    ) -> MergeBuilder:
        """For target rows no source row matched: delete them."""
        return self._add(MergeClause(ClauseKind.NOT_MATCHED_BY_SOURCE_DELETE, condition, {}))

    def with_schema_evolution(self) -> MergeBuilder:
        """Lets ``*_all`` clauses add the source's new columns to the table."""
        self._merge_schema = True
        return self

    def execute(
        self,
        *,
        retries: int = 0,
        backoff: Backoff | None = None,
        app_id: str | None = None,
        app_version: int | None = None,
    ) -> MergeMetrics:
        """Runs the merge: stages into the transaction, or commits on a DeltaTable.

        Args:
            retries: On a DeltaTable: re-executions allowed when the commit conflicts. The
                source is then materialised once, before the first attempt, so every
                attempt merges the same rows (see :mod:`deltatx.reexecution`). In a
                transaction, pass ``retries`` to ``begin`` instead.
            backoff: The waits between attempts.
            app_id: With ``app_version``, makes the merge idempotent for that application
                (e.g. ``foreachBatch`` with the batch id): a merge whose ``app_version`` is
                not above the last one the table records for ``app_id`` does nothing and
                returns zero metrics.
            app_version: The application's version of this merge (>= 0).

        Raises:
            InvalidArgumentError: Only one of ``app_id`` and ``app_version``, or a negative
                version.
        """
        if (app_id is None) != (app_version is None):
            raise InvalidArgumentError("app_id and app_version go together")
        if app_version is not None and app_version < 0:
            raise InvalidArgumentError(f"app_version must be >= 0, got {app_version}")
        if app_id is not None and app_version is not None:
            log = DeltaLog.for_table(self._owner.path)
            done = log.snapshot().app_transaction_version(app_id) if log.table_exists() else None
            if done is not None and done >= app_version:
                return MergeMetrics()
        clauses = list(self._clauses)
        expressions: list[tuple[str, str | Column | None]] = [("condition", self._condition)]
        for n, c in enumerate(clauses, 1):
            expressions.append((f"clause {n} ({c.kind}) condition", c.condition))
            for column, value in (c.assignments or {}).items():
                expressions.append((f"clause {n} ({c.kind}) value of {column}", value))
        reason = statement_reason(StatementKind.MERGE, expressions)
        source = self._source
        if reason is None:  # materialising a source that cannot be replayed is wasted work
            source, reason = self._owner.stable_source(self._source, retries=retries)
        target_alias, merge_schema, condition = (
            self._target_alias,
            self._merge_schema,
            self._condition,
        )

        def work(spark: SparkSession, txn: OptimisticTransaction) -> MergeMetrics:
            if app_id is not None and app_version is not None:
                # Checked again in the transaction: the conflict checker then watches app_id.
                done = txn.app_transaction_version(app_id)
                if done is not None and done >= app_version:
                    return MergeMetrics()
                txn.set_app_transaction(app_id, app_version)
            return stage_merge(
                spark,
                txn,
                source=source,
                condition=condition,
                clauses=clauses,
                target_alias=target_alias,
                merge_schema=merge_schema,
            )

        with operation("MERGE", self._owner.path):
            return self._owner.run(
                work,
                statement=StatementKind.MERGE,
                not_replayable=reason,
                retries=retries,
                backoff=backoff,
            )


class OptimizeBuilder(OptimizeBuilderNames):
    """OPTIMIZE: ``where`` limits it to partitions, then compaction or Z-order."""

    def __init__(self, owner: Owner) -> None:
        """Use :meth:`DeltaTable.optimize` or :meth:`Transaction.optimize`."""
        self._owner = owner
        self._where: str | None = None

    def where(self, partition_filter: str) -> OptimizeBuilder:
        """Only files in partitions matching ``partition_filter`` (partition columns only)."""
        self._where = partition_filter
        return self

    def execute_compaction(self, *, target_size: int | None = None) -> OptimizeMetrics:
        """Bin-packs small files toward ``target_size`` bytes (``delta.targetFileSize``)."""
        with operation("OPTIMIZE", self._owner.path):
            return self._owner.run(
                lambda spark, txn: stage_compaction(
                    spark, txn, condition=self._where, target_size=target_size
                )
            )

    def execute_z_order_by(self, *columns: str, target_size: int | None = None) -> OptimizeMetrics:
        """Rewrites the selected files clustered along a Z-order curve over ``columns``."""
        with operation("OPTIMIZE ZORDER BY", self._owner.path):
            return self._owner.run(
                lambda spark, txn: stage_z_order(
                    spark, txn, list(columns), condition=self._where, target_size=target_size
                )
            )
