"""The commit loop: publish ``N.json`` if absent, otherwise check the winners and retry.

This is phase three of optimistic concurrency (the docs): the data files are already written
and invisible; publishing the commit file is the single atomic step. When another writer got
the version first, every winning commit is read in order and run through the
:class:`~deltatx.kernel.conflicts.ConflictChecker`; if none conflicts the same actions are tried
at the next version, rebased where rows allow (the deletion vectors a rebase needs are written
once, just before the attempt that publishes them). A transaction id in ``commitInfo`` lets a
writer recognise its own commit after an ambiguous I/O failure instead of committing twice.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from deltatx.errors import (
    CommitFailedError,
    CommitRetriesExceededError,
    InvalidArgumentError,
    ProtocolChangedException,
)
from deltatx.kernel.actions import (
    Action,
    AddFile,
    CommitInfo,
    Metadata,
    ProtocolAction,
)
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.commit_rules import check_commit
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.conflicts import ConflictChecker
from deltatx.kernel.isolation import IsolationLevel, resolve_isolation_level
from deltatx.kernel.log_paths import commit_name
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import TableProperties, validate_properties
from deltatx.kernel.row_level.plan import RebasePlan
from deltatx.kernel.row_level.rules import RowLevelChecker, RowLevelWork, checker_for
from deltatx.kernel.schema import parse_schema
from deltatx.kernel.table_configuration import (
    ICT_ENABLEMENT_TIMESTAMP,
    ICT_ENABLEMENT_VERSION,
    TableConfiguration,
)
from deltatx.kernel.transaction import ReadSet, is_blind_append
from deltatx.log.row_level.resolution import resolve_row_level
from deltatx.log.row_level.vectors import (
    NOTHING_WRITTEN,
    discard_superseded,
    discard_unpublished,
    write_planned_vectors,
)
from deltatx.progress import step
from deltatx.storage.faults import fault_point, fault_scope
from deltatx.storage.log_store import FileAlreadyExistsError
from deltatx.version import __version__

if TYPE_CHECKING:
    from deltatx.log.delta_log import DeltaLog
    from deltatx.log.snapshot import Snapshot

_log = logging.getLogger(__name__)
ENGINE_INFO = f"deltatx/{__version__}"


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a successful commit published."""

    version: int
    attempts: int
    isolation_level: IsolationLevel
    is_blind_append: bool
    txn_id: str


def _check_changed_properties(md: Metadata, previous: Metadata | None) -> None:
    # Only the values this commit sets are checked: a log written by another engine may carry
    # a value deltatx reads leniently, and re-committing it unchanged must stay possible.
    old = {} if previous is None else previous.configuration
    changed = {k: v for k, v in md.configuration.items() if old.get(k) != v}
    if changed:
        validate_properties(changed)


def validate_actions(
    actions: Sequence[Action],
    *,
    read_snapshot: Snapshot | None,
    operation: Operation,
    table_path: str | None = None,
    constraints_checked: frozenset[str] = frozenset(),
) -> TableConfiguration:
    """Checks the per-commit rules of the protocol before anything is written.

    One metadata and one protocol at most are checked here; the protocol rules of the
    configuration and the structure of the file actions (partition values, no duplicates) are
    :func:`~deltatx.kernel.commit_rules.check_commit`'s, in one pass over the actions.

    Args:
        actions: The actions to commit.
        read_snapshot: The snapshot the transaction read (None for a new table).
        operation: What the commit does.
        table_path: The table root; when given, file paths must stay under it.
        constraints_checked: Added files whose rows were checked against the constraints.

    Returns:
        The configuration the commit leaves in force.

    Raises:
        InvalidArgumentError: The actions break a protocol rule (two metadata actions, a new
            table without metadata, an add whose partition values do not match, a path
            outside the table root, a bad deletion vector descriptor, ...).
        AppendOnlyViolationError: Rows of an append-only table would be removed.
        UnsupportedFeatureError: The table needs a writer feature deltatx does not support.
        InvalidPropertyError: A table property this commit sets has a value not allowed.
    """
    metadata: list[Metadata] = []
    protocols: list[ProtocolAction] = []
    for a in actions:
        if type(a) is AddFile:
            continue  # the bulk of a large commit
        if isinstance(a, Metadata):
            metadata.append(a)
        elif isinstance(a, ProtocolAction):
            protocols.append(a)
    if len(metadata) > 1 or len(protocols) > 1:
        raise InvalidArgumentError("a commit may hold at most one metaData and one protocol")
    if read_snapshot is None and (not metadata or not protocols):
        raise InvalidArgumentError("the first commit of a table must set metaData and protocol")
    if not metadata and not protocols:
        configuration = _require(read_snapshot).table_configuration
    else:
        md = metadata[0] if metadata else _require(read_snapshot).metadata
        proto = protocols[0] if protocols else _require(read_snapshot).protocol
        configuration = TableConfiguration.of(proto, md)
    if metadata:
        _check_changed_properties(
            configuration.metadata, None if read_snapshot is None else read_snapshot.metadata
        )
    root = table_path if table_path is not None else _root_of(read_snapshot)
    check_commit(
        configuration,
        actions,
        operation,
        table_root=root,
        constraints_checked=constraints_checked,
        structure=True,
    )
    return configuration


def _root_of(snapshot: Snapshot | None) -> str | None:
    return None if snapshot is None else snapshot.table_path


def _require(snapshot: Snapshot | None) -> Snapshot:
    assert snapshot is not None
    return snapshot


# Winners read before they are checked together: a bound on what a far-behind commit holds.
_WINNERS_AT_ONCE = 64


def commit(
    log: DeltaLog,
    *,
    read_snapshot: Snapshot | None,
    actions: Sequence[Action],
    operation: Operation,
    read_set: ReadSet,
    operation_metrics: Mapping[str, Any] | None = None,
    user_metadata: str | None = None,
    max_attempts: int | None = None,
    constraints_checked: frozenset[str] = frozenset(),
) -> CommitResult:
    """Publishes ``actions`` as the next version of the table, checking for conflicts.

    Args:
        log: The table's log.
        read_snapshot: The snapshot the transaction read, or None when it creates the table.
        actions: Everything to commit except ``commitInfo``, which is written here, first.
        operation: What the transaction did (commitInfo.operation and the downgrade rule).
        read_set: What the transaction read, for the conflict checks.
        operation_metrics: Values for commitInfo.operationMetrics.
        user_metadata: Free text for commitInfo.userMetadata.
        max_attempts: Overrides the table's ``deltatx.maxCommitAttempts``.
        constraints_checked: Added files whose rows were checked against the table's
            invariants and CHECK constraints (the Spark commands check what they write).

    Returns:
        The version that was published and how.

    Raises:
        ConcurrentModificationException: A winning commit conflicts (a documented subclass).
        CommitRetriesExceededError: The retry limit was reached.
    """
    configuration = validate_actions(
        actions,
        read_snapshot=read_snapshot,
        operation=operation,
        table_path=log.table_path,
        constraints_checked=constraints_checked,
    )
    props = configuration.properties
    read_version = -1 if read_snapshot is None else read_snapshot.version
    # Conflicts are judged against the partitioning the transaction read.
    partition_source = configuration if read_snapshot is None else read_snapshot.table_configuration
    level = resolve_isolation_level(
        actions, table_level=props.isolation_level, operation_changes_data=operation.changes_data
    )
    blind = is_blind_append(actions, read_set)
    txn_id = _txn_id()
    limit = max_attempts if max_attempts is not None else props.max_commit_attempts
    pending = PendingCommit(
        read_version=read_version,
        read_set=read_set,
        actions=tuple(actions),
        operation=operation,
        isolation_level=level,
        is_blind_append=blind,
        schema=partition_source.schema,
        partition_columns=tuple(partition_source.metadata.partition_columns),
        deletion_vectors=configuration.deletion_vectors_enabled,
    )
    # Each attempt makes its commitInfo with the time of that attempt.
    info = partial(
        CommitInfo,
        operation=operation.name.value,
        operation_parameters=operation.commit_parameters(),
        read_version=None if read_version < 0 else read_version,
        isolation_level=level.value,
        is_blind_append=blind,
        operation_metrics={k: str(v) for k, v in (operation_metrics or {}).items()} or None,
        user_metadata=user_metadata,
        engine_info=ENGINE_INFO,
        txn_id=txn_id,
    )
    attempt_version = read_version + 1
    started = time.monotonic()
    plan = RebasePlan(pending)
    # Built at the first collision: most commits never meet a winner.
    checker: ConflictChecker | None = None
    written = NOTHING_WRITTEN
    stamps = _Timestamps.of(configuration, read_snapshot)
    for attempt in range(1, limit + 1):
        # The plan's deletion vectors are written here, once per plan, never while checking.
        written = write_planned_vectors(log, plan, written)
        data = serialize_commit(stamps.stamp(info, written.actions(plan), attempt_version))
        path = f"{log.log_path}/{commit_name(attempt_version)}"
        fault_point("commit.before_write")
        try:
            with fault_scope("commit"):
                log.store.write(path, data, overwrite=False)
        except FileAlreadyExistsError:
            pass
        except OSError as exc:
            if not _landed(log, attempt_version, txn_id):
                # Ambiguous: the commit may still appear, so its vectors stay.
                raise CommitFailedError(
                    f"writing {path} failed ({exc}); the commit was not published"
                ) from exc
            discard_superseded(log, pending, written, plan)
            return _published(log, attempt_version, attempt, level, blind, txn_id, props)
        else:
            fault_point("commit.after_write")
            discard_superseded(log, pending, written, plan)
            return _published(log, attempt_version, attempt, level, blind, txn_id, props)
        latest = log.latest_version()
        if checker is None:
            checker = checker_for(plan.pending)
        for first in range(attempt_version, latest + 1, _WINNERS_AT_ONCE):
            winners: list[WinningCommit] = []
            ours: int | None = None
            for version in range(first, min(first + _WINNERS_AT_ONCE, latest + 1)):
                winner = WinningCommit(version=version, actions=tuple(log.read_commit(version)))
                if winner.commit_info is not None and winner.commit_info.txn_id == txn_id:
                    ours = version
                    break
                stamps.after(winner.commit_info)
                winners.append(winner)
            step("rebasing")
            try:
                plan, checker = settle_all(log, checker, plan, winners)
            except BaseException:
                discard_unpublished(log, written)
                raise
            if ours is not None:
                return _published(log, ours, attempt, level, blind, txn_id, props)
        attempt_version = max(latest + 1, attempt_version)
        if attempt > 3:
            time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))
    discard_unpublished(log, written)
    raise CommitRetriesExceededError(
        attempts=limit,
        start_version=read_version + 1,
        failed_version=attempt_version,
        num_actions=len(plan.pending.actions),
        elapsed_ms=(time.monotonic() - started) * 1000,
    )


def _txn_id() -> str:
    """A random (version 4) UUID, as ``str(uuid.uuid4())`` spells it, in a third of the time."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


@dataclass(slots=True)
class _Timestamps:
    """The times an attempt records: ``timestamp`` always, ``inCommitTimestamp`` when enabled.

    In-commit timestamps must grow strictly from commit to commit, so each attempt records
    the later of the clock and one millisecond after the commit it follows (the read version,
    then each winner it is rebased onto). The commit that turns them on for an existing table
    also records its own version and timestamp as the enablement point.
    """

    in_commit: bool
    enabling: bool
    previous: int | None

    @classmethod
    def of(cls, configuration: TableConfiguration, read_snapshot: Snapshot | None) -> _Timestamps:
        before = None if read_snapshot is None else read_snapshot.table_configuration
        return cls(
            in_commit=configuration.in_commit_timestamps,
            enabling=configuration.in_commit_timestamps_enabled_by(before),
            previous=None if read_snapshot is None else read_snapshot.timestamp,
        )

    def after(self, winner: CommitInfo | None) -> None:
        """Notes a winning commit, which the next attempt follows."""
        if winner is not None and winner.commit_timestamp is not None:
            self.previous = winner.commit_timestamp

    def stamp(
        self, info: Callable[..., CommitInfo], actions: Sequence[Action], version: int
    ) -> list[Action]:
        """``commitInfo`` (first, as the protocol requires) and the actions of an attempt.

        Args:
            info: Makes the commitInfo, given its ``timestamp`` and ``in_commit_timestamp``.
            actions: The attempt's other actions.
            version: The version the attempt tries to publish.
        """
        now = int(time.time() * 1000)
        if not self.in_commit:
            return [info(timestamp=now), *actions]
        stamp = now if self.previous is None else max(now, self.previous + 1)
        out: list[Action] = [info(timestamp=now, in_commit_timestamp=stamp)]
        for action in actions:
            if self.enabling and isinstance(action, Metadata):
                conf = dict(action.configuration)
                conf[ICT_ENABLEMENT_VERSION] = str(version)
                conf[ICT_ENABLEMENT_TIMESTAMP] = str(stamp)
                action = replace(action, configuration=conf)
            out.append(action)
        return out


@dataclass(frozen=True, slots=True)
class Settlement:
    """A pending commit after one winner was checked and, where rows allow, rebased onto it.

    Attributes:
        plan: What to go on with: the pending commit (rebased when the winner required it)
            and the deletion vectors it must carry, not yet written.
        checker: The checker for ``plan.pending``.
        work: What rows were compared (None when the winner was judged per file).
    """

    plan: RebasePlan
    checker: ConflictChecker
    work: RowLevelWork | None


def settle(
    log: DeltaLog, checker: ConflictChecker, plan: RebasePlan, winner: WinningCommit
) -> Settlement:
    """Checks ``plan`` against one winner: raises its conflict or returns how to go on.

    Reads the log, deletion vectors and data files; writes nothing.

    Raises:
        ConcurrentModificationException: The winner conflicts with ``plan.pending``.
    """
    if isinstance(checker, RowLevelChecker):
        # Row-level concurrency (the docs): the kernel says what to compare, this layer reads
        # the deletion vectors and plans our vectors on top of the winner's.
        work = checker.check_row_level(winner)
        settled = resolve_row_level(log, plan, work)
        if settled is plan:
            return Settlement(plan, checker, work)
        return Settlement(settled, checker_for(settled.pending), work)
    try:
        checker.check(winner)
    except ProtocolChangedException:
        rebased = _rebase_table_creation(plan.pending, winner)
        if rebased is None:
            raise
        return Settlement(RebasePlan(rebased, plan.vectors), checker_for(rebased), None)
    return Settlement(plan, checker, None)


def settle_all(
    log: DeltaLog, checker: ConflictChecker, plan: RebasePlan, winners: Sequence[WinningCommit]
) -> tuple[RebasePlan, ConflictChecker]:
    """:func:`settle` with each winner in turn; a plain checker asks consecutive appends at once.

    Returns:
        The plan to go on with and its checker.

    Raises:
        ConcurrentModificationException: A winner conflicts with ``plan.pending``.
    """
    i = 0
    while i < len(winners):
        if type(checker) is ConflictChecker:
            try:
                checker.check_all(winners[i:])
                return plan, checker
            except ProtocolChangedException as exc:
                # The one rebase a plain checker allows (a racing table creation).
                while winners[i].version != exc.winning_version:
                    i += 1
                rebased = _rebase_table_creation(plan.pending, winners[i])
                if rebased is None:
                    raise
                plan = RebasePlan(rebased, plan.vectors)
                checker = checker_for(rebased)
        else:
            settled = settle(log, checker, plan, winners[i])
            plan, checker = settled.plan, settled.checker
        i += 1
    return plan, checker


_APPENDS = frozenset({OperationName.WRITE, OperationName.STREAMING_UPDATE})


def _rebase_table_creation(pending: PendingCommit, winner: WinningCommit) -> PendingCommit | None:
    """Lets a plain append that raced to create a table land on the winner's table.

    Only when the loser created the table (read version -1), the winner is version 0, the
    loser's commit is a blind append that carries rows, and both tables have the same schema,
    partitioning and properties: then dropping the loser's protocol and metadata leaves an
    append that cannot conflict, and no data is lost. A creation with no rows (CREATE TABLE)
    has nothing left to append, so it keeps the ProtocolChangedException that Delta Lake's
    isolation-level documentation gives when several writers create a table at once, instead of
    recording a second CREATE TABLE.
    """
    if pending.read_version != -1 or winner.version != 0 or not pending.is_blind_append:
        return None
    if pending.operation.name not in _APPENDS or not any(
        isinstance(a, AddFile) for a in pending.actions
    ):
        return None
    ours = next((a for a in pending.actions if isinstance(a, Metadata)), None)
    theirs = winner.metadata
    if ours is None or theirs is None:
        return None
    if (
        parse_schema(ours.schema_string) != parse_schema(theirs.schema_string)
        or ours.partition_columns != theirs.partition_columns
        or ours.configuration != theirs.configuration
    ):
        return None
    actions = tuple(a for a in pending.actions if not isinstance(a, Metadata | ProtocolAction))
    return replace(pending, read_version=0, actions=actions)


def _landed(log: DeltaLog, version: int, txn_id: str) -> bool:
    try:
        actions = log.read_commit(version)
    except Exception:
        return False
    return any(isinstance(a, CommitInfo) and a.txn_id == txn_id for a in actions)


def _published(
    log: DeltaLog,
    version: int,
    attempts: int,
    level: IsolationLevel,
    blind: bool,
    txn_id: str,
    props: TableProperties,
) -> CommitResult:
    if version > 0 and version % props.checkpoint_interval == 0:
        _checkpoint(log, version)
    return CommitResult(
        version=version,
        attempts=attempts,
        isolation_level=level,
        is_blind_append=blind,
        txn_id=txn_id,
    )


def _checkpoint(log: DeltaLog, version: int) -> None:
    """Writes the checkpoint the interval asks for; a failure never fails the commit."""
    try:
        log.checkpoint(log.snapshot(version))
    except Exception:
        _log.warning(
            "checkpoint at version %d failed; the log stays readable", version, exc_info=True
        )
