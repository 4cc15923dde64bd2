"""Builders for table-driven conflict scenarios (conflict-spec section 6) at the log level.

A scenario is: a table (schema, partition columns, files at the read version), what the
current transaction A read and writes, and the winning commits B. ``run`` resolves A's
isolation level the way the commit loop does (seed 004's downgrade) or forces one, and runs the
ConflictChecker against each winner in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltatx.errors import ConcurrentModificationException
from deltatx.kernel.actions import (
    Action,
    AddFile,
    CommitInfo,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
)
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.conflicts import ConflictChecker
from deltatx.kernel.evaluation import file_may_match
from deltatx.kernel.expressions import TRUE, Expression
from deltatx.kernel.isolation import IsolationLevel, resolve_isolation_level
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.schema import PrimitiveType, StructField, StructType
from deltatx.kernel.transaction import ReadTracker, is_blind_append
from deltatx.spark.expressions import parse_condition

S = IsolationLevel.SERIALIZABLE
WS = IsolationLevel.WRITE_SERIALIZABLE
SI = IsolationLevel.SNAPSHOT_ISOLATION


def schema(**cols: str) -> StructType:
    return StructType(tuple(StructField(n, PrimitiveType(t)) for n, t in cols.items()))


@dataclass(frozen=True)
class Table:
    schema: StructType
    partition_columns: tuple[str, ...] = ()
    files: tuple[AddFile, ...] = ()

    def pred(self, sql: str) -> Expression:
        return parse_condition(sql, schema=self.schema)


def add(
    path: str,
    pv: dict[str, str | None] | None = None,
    *,
    dc: bool = True,
    stats: dict[str, Any] | None = None,
) -> AddFile:
    return AddFile(
        path=path,
        partition_values=pv or {},
        size=100,
        modification_time=0,
        data_change=dc,
        stats=None if stats is None else json.dumps(stats),
    )


def value_stats(lo: Any, hi: Any, *, column: str = "value", n: int = 10) -> dict[str, Any]:
    return {
        "numRecords": n,
        "minValues": {column: lo},
        "maxValues": {column: hi},
        "nullCount": {column: 0},
    }


def rm(path: str, pv: dict[str, str | None] | None = None, *, dc: bool = True) -> RemoveFile:
    return RemoveFile(
        path=path,
        deletion_timestamp=1,
        data_change=dc,
        extended_file_metadata=pv is not None,
        partition_values=pv,
    )


def metadata(table: Table | None = None) -> Metadata:
    t = table or Table(schema(id="long"))
    return Metadata(
        id="winner-metadata",
        schema_string=t.schema.to_json(),
        partition_columns=t.partition_columns,
    )


def protocol(reader: int = 1, writer: int = 2) -> ProtocolAction:
    return ProtocolAction(reader, writer)


def txn(app_id: str, version: int = 1) -> SetTransaction:
    return SetTransaction(app_id=app_id, version=version)


Read = Callable[[ReadTracker, Table], None]


def scan(sql: str | None = None) -> Read:
    """A scan: predicate (TRUE when None) plus the files it returns after pruning/skipping."""

    def go(tracker: ReadTracker, table: Table) -> None:
        pred = TRUE if sql is None else table.pred(sql)
        files = [
            f
            for f in table.files
            if file_may_match(
                pred, f, schema=table.schema, partition_columns=table.partition_columns
            )
        ]
        tracker.record_scan(pred, files)

    return go


def whole() -> Read:
    return lambda tracker, table: tracker.record_whole_table()


def dpo(sql: str) -> Read:
    """Dynamic partition overwrite: a partition predicate, no read files (OT15-OT18)."""
    return lambda tracker, table: tracker.record_partition_predicate(table.pred(sql))


def app(app_id: str) -> Read:
    return lambda tracker, table: tracker.record_app_id(app_id)


def meta() -> Read:
    return lambda tracker, table: tracker.record_metadata_read()


@dataclass(frozen=True)
class Winner:
    actions: tuple[Action, ...]
    operation: str = "Manual Update"
    read: bool = False  # B recorded reads (filterFiles()), so it is never blind
    commit_info: bool = True  # delta-rs test winners carry no commitInfo

    def commit(self, version: int) -> WinningCommit:
        acts = list(self.actions)
        if self.commit_info:
            only_adds = all(not isinstance(a, RemoveFile) for a in acts)
            acts.insert(
                0,
                CommitInfo(
                    operation=self.operation,
                    is_blind_append=only_adds and not self.read,
                ),
            )
        return WinningCommit(version=version, actions=tuple(acts))


def win(*actions: Action, op: str = "Manual Update", read: bool = False) -> Winner:
    return Winner(tuple(actions), op, read)


def bare(*actions: Action) -> Winner:
    """A winner without commitInfo (old writers, delta-rs tests): never a blind append."""
    return Winner(tuple(actions), commit_info=False)


Outcome = type[ConcurrentModificationException] | None


@dataclass(frozen=True)
class Case:
    """One scenario. ``expect`` = outcome with the table at (S, WS) and with A forced to SI."""

    id: str
    checks: str  # the seed sentence or spec row it checks
    table: Table
    reads: tuple[Read, ...]
    writes: tuple[Action, ...]
    winners: tuple[Winner, ...]
    expect: tuple[Outcome, Outcome, Outcome]
    op: OperationName = OperationName.MANUAL_UPDATE
    read_version: int = 1
    first_winner_version: int = 2
    attrs: dict[str, Any] = field(default_factory=dict)  # checked on the S outcome
    adjusted: str = ""  # why deltatx differs from delta-spark here (a decision of the spec)


# The seed sentences the scenarios check (seed 000 is Spanish; quoted here in English).
SEED_META = "seed 000: metadata changes fail all concurrent writes (protocol, properties, schema)"
SEED_CA = (
    "seed 000 ConcurrentAppendException: a concurrent operation adds files in the same "
    "partition (or anywhere in an unpartitioned table) that your operation reads"
)
SEED_WS_BLIND = (
    "seed 000: under WriteSerializable, files added by blind INSERTs do not conflict with any "
    "operation; under Serializable blind appends may conflict"
)
SEED_CDR = (
    "seed 000 ConcurrentDeleteReadException: a concurrent operation deletes a file your "
    "operation reads"
)
SEED_CDD = (
    "seed 000 ConcurrentDeleteDeleteException: a concurrent operation deletes a file your "
    "operation also deletes, e.g. two concurrent compactions rewriting the same files"
)
SEED_CT = "seed 000 ConcurrentTransactionException: same checkpoint / application id used twice"
SEED_PC = "seed 000 ProtocolChangedException: protocol upgrade, or several writers create the table"
SEED_PARTITIONS = (
    "seed 000: operations on disjoint partitions with explicit conditions do not conflict"
)
SEED_DOWNGRADE = "seed 004: a commit that changes no data downgrades to SnapshotIsolation"
D3 = (
    "decision 3: a file removed by both commits is ConcurrentDeleteDeleteException; "
    "delta-spark raises CA/CDR first"
)


def pending_for(case: Case, level: IsolationLevel, *, forced: bool) -> PendingCommit:
    tracker = ReadTracker()
    for r in case.reads:
        r(tracker, case.table)
    read_set = tracker.freeze()
    op = Operation(case.op)
    resolved = (
        level
        if forced
        else resolve_isolation_level(
            case.writes, table_level=level, operation_changes_data=op.changes_data
        )
    )
    return PendingCommit(
        read_version=case.read_version,
        read_set=read_set,
        actions=case.writes,
        operation=op,
        isolation_level=resolved,
        is_blind_append=is_blind_append(case.writes, read_set),
        schema=case.table.schema,
        partition_columns=case.table.partition_columns,
    )


def run(case: Case, level: IsolationLevel, *, forced: bool = False) -> None:
    """Checks A against each winner in turn, and again against all of them at once (as the
    commit loop does); both must raise the same conflict, which is raised."""
    pending = pending_for(case, level, forced=forced)
    winners = [w.commit(case.first_winner_version + i) for i, w in enumerate(case.winners)]
    one_by_one = outcome_of(lambda: each(pending, winners))
    at_once = outcome_of(lambda: ConflictChecker(pending).check_all(winners))
    assert describe(at_once) == describe(one_by_one)
    if one_by_one is not None:
        raise one_by_one


def each(pending: PendingCommit, winners: Sequence[WinningCommit]) -> None:
    checker = ConflictChecker(pending)
    for w in winners:
        checker.check(w)


def outcome_of(check: Callable[[], None]) -> ConcurrentModificationException | None:
    try:
        check()
    except ConcurrentModificationException as exc:
        return exc
    return None


def describe(exc: ConcurrentModificationException | None) -> tuple[Any, ...] | None:
    """Everything a conflict tells: its kind, message and attributes."""
    if exc is None:
        return None
    return (type(exc), str(exc), sorted((k, repr(v)) for k, v in vars(exc).items()))


def outcome_ids(cases: Sequence[Case]) -> list[str]:
    return [c.id for c in cases]
