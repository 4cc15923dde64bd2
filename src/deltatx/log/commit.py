"""The commit loop: publish ``N.json`` if absent, otherwise check the winners and retry.

This is phase three of optimistic concurrency (seed 002): the data files are already written
and invisible; publishing the commit file is the single atomic step. When another writer got
the version first, every winning commit is read in order and run through the
:class:`~deltatx.kernel.conflicts.ConflictChecker`; if none conflicts the same actions are tried
at the next version. A transaction id in ``commitInfo`` lets a writer recognise its own commit
after an ambiguous I/O failure instead of committing twice.
"""

from __future__ import annotations

import logging
import posixpath
import random
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from deltatx.errors import (
    CommitFailedError,
    CommitRetriesExceededError,
    InvalidArgumentError,
    InvalidTableError,
    ProtocolChangedException,
)
from deltatx.kernel.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
)
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.conflicts import ConflictChecker, PendingCommit, WinningCommit
from deltatx.kernel.conflicts_row_level import RowLevelChecker, RowLevelWork, checker_for
from deltatx.kernel.deletion_vectors import dv_relative_path
from deltatx.kernel.features import check_writable, writer_features
from deltatx.kernel.isolation import IsolationLevel, resolve_isolation_level
from deltatx.kernel.log_paths import LOG_DIR, commit_name
from deltatx.kernel.operations import Operation
from deltatx.kernel.properties import TableProperties, validate_properties
from deltatx.kernel.schema import parse_schema
from deltatx.kernel.transaction import ReadSet, is_blind_append
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


_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def check_data_path(path: str, *, table_path: str, what: str = "add") -> None:
    """Refuses a file path that would point outside the table root.

    A relative path (the normal case) is percent-decoded, as readers decode it, and normalised;
    it must then stay below the root and out of ``_delta_log``. An absolute path or ``file:``
    URI is accepted only when it lies under the root; any other URI scheme is refused, since
    the table lives on the local filesystem. Without this a commit could make VACUUM, a
    DELETE or a reader act on ``../x`` or ``/etc/passwd``.

    Raises:
        InvalidArgumentError: The path escapes the root; the message names it.
    """
    decoded = unquote(path)
    bad = f"{what} {path!r}"
    if not decoded or "\x00" in decoded:
        raise InvalidArgumentError(f"{bad}: a data file path must be a non-empty file name")
    if _URI_SCHEME.match(decoded) or decoded.startswith("/"):
        local = decoded
        if local.lower().startswith("file:"):
            local = local[len("file:") :]
            if local.startswith("//"):
                local = local[2:]
                local = local[len("localhost") :] if local.startswith("localhost/") else local
        if not local.startswith("/"):
            raise InvalidArgumentError(
                f"{bad}: only relative paths or file: URIs under the table root "
                f"{table_path} are allowed"
            )
        root = posixpath.normpath(table_path)
        normal = posixpath.normpath(local)
        if not normal.startswith(root.rstrip("/") + "/"):
            raise InvalidArgumentError(f"{bad}: the path is outside the table root {table_path}")
        relative = normal[len(root.rstrip("/")) + 1 :]
    else:
        relative = posixpath.normpath(decoded)
        if relative == ".." or relative.startswith("../") or relative == ".":
            raise InvalidArgumentError(
                f"{bad}: the path escapes the table root {table_path} (it resolves to {relative!r})"
            )
    if relative.split("/", 1)[0] == LOG_DIR:
        raise InvalidArgumentError(f"{bad}: a data file cannot live in {LOG_DIR}")


def _check_deletion_vector(a: AddFile, table_path: str) -> None:
    dv = a.deletion_vector
    if dv is None:
        return
    where = f"add {a.path!r}: deletion vector"
    if dv.storage_type not in ("u", "i", "p"):
        raise InvalidArgumentError(f"{where} has unknown storageType {dv.storage_type!r}")
    for name, value in (
        ("cardinality", dv.cardinality),
        ("sizeInBytes", dv.size_in_bytes),
        ("offset", dv.offset),
    ):
        if value is not None and value < 0:
            raise InvalidArgumentError(f"{where} has a negative {name} ({value})")
    if dv.storage_type == "u":
        try:
            relative = dv_relative_path(dv.path_or_inline_dv)
        except (InvalidTableError, ValueError) as exc:
            raise InvalidArgumentError(f"{where} is not a valid descriptor: {exc}") from None
        check_data_path(relative, table_path=table_path, what=f"{where} file")
    elif dv.storage_type == "p":
        check_data_path(dv.path_or_inline_dv, table_path=table_path, what=f"{where} file")


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
    table_path: str | None = None,
) -> tuple[Metadata, ProtocolAction]:
    """Checks the per-commit rules of the protocol before anything is written.

    Args:
        actions: The actions to commit.
        read_snapshot: The snapshot the transaction read (None for a new table).
        table_path: The table root; when given, file paths must stay under it.

    Returns:
        The metadata and protocol the commit leaves in force.

    Raises:
        InvalidArgumentError: The actions break a protocol rule (two metadata actions, a new
            table without metadata, an add whose partition values do not match, a path
            outside the table root, a bad deletion vector descriptor, ...).
        InvalidPropertyError: A table property this commit sets has a value not allowed.
    """
    metadata = [a for a in actions if isinstance(a, Metadata)]
    protocols = [a for a in actions if isinstance(a, ProtocolAction)]
    if len(metadata) > 1 or len(protocols) > 1:
        raise InvalidArgumentError("a commit may hold at most one metaData and one protocol")
    if read_snapshot is None and (not metadata or not protocols):
        raise InvalidArgumentError("the first commit of a table must set metaData and protocol")
    md = metadata[0] if metadata else _require(read_snapshot).metadata
    proto = protocols[0] if protocols else _require(read_snapshot).protocol
    check_writable(proto, md)
    parse_schema(md.schema_string)
    if metadata:
        _check_changed_properties(md, None if read_snapshot is None else read_snapshot.metadata)
    root = table_path if table_path is not None else _root_of(read_snapshot)
    partition_columns = set(md.partition_columns)
    seen_adds: set[tuple[str, str | None]] = set()
    seen_removes: set[tuple[str, str | None]] = set()
    apps: set[str] = set()
    for a in actions:
        if isinstance(a, AddFile):
            if set(a.partition_values) != partition_columns:
                raise InvalidArgumentError(
                    f"add {a.path}: partition values {sorted(a.partition_values)} do not match "
                    f"the table's partition columns {sorted(partition_columns)}"
                )
            if root is not None:
                check_data_path(a.path, table_path=root)
                _check_deletion_vector(a, root)
            key = (a.path, a.dv_id)
            if key in seen_adds:
                raise InvalidArgumentError(f"add {a.path} appears twice in one commit")
            seen_adds.add(key)
        elif isinstance(a, RemoveFile):
            key = (a.path, a.dv_id)
            if key in seen_removes:
                raise InvalidArgumentError(f"remove {a.path} appears twice in one commit")
            seen_removes.add(key)
        elif isinstance(a, AddCDCFile) and root is not None:
            check_data_path(a.path, table_path=root, what="cdc")
        elif isinstance(a, SetTransaction):
            if a.app_id in apps:
                raise InvalidArgumentError(f"app id {a.app_id!r} appears twice in one commit")
            apps.add(a.app_id)
    return md, proto


def _root_of(snapshot: Snapshot | None) -> str | None:
    return None if snapshot is None else snapshot.log.table_path


def _require(snapshot: Snapshot | None) -> Snapshot:
    assert snapshot is not None
    return snapshot


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

    Returns:
        The version that was published and how.

    Raises:
        ConcurrentModificationException: A winning commit conflicts (a documented subclass).
        CommitRetriesExceededError: The retry limit was reached.
    """
    md, proto = validate_actions(actions, read_snapshot=read_snapshot, table_path=log.table_path)
    props = TableProperties.from_configuration(md.configuration)
    read_version = -1 if read_snapshot is None else read_snapshot.version
    partition_source = md if read_snapshot is None else read_snapshot.metadata
    level = resolve_isolation_level(
        actions, table_level=props.isolation_level, operation_changes_data=operation.changes_data
    )
    blind = is_blind_append(actions, read_set)
    txn_id = str(uuid.uuid4())
    limit = max_attempts if max_attempts is not None else props.max_commit_attempts
    pending = PendingCommit(
        read_version=read_version,
        read_set=read_set,
        actions=tuple(actions),
        operation=operation,
        isolation_level=level,
        is_blind_append=blind,
        schema=parse_schema(partition_source.schema_string),
        partition_columns=tuple(partition_source.partition_columns),
        deletion_vectors=props.enable_deletion_vectors
        and "deletionVectors" in writer_features(proto),
    )
    info = CommitInfo(
        timestamp=int(time.time() * 1000),
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
    checker = checker_for(pending)
    for attempt in range(1, limit + 1):
        data = serialize_commit(
            [replace(info, timestamp=int(time.time() * 1000)), *pending.actions]
        )
        path = f"{log.log_path}/{commit_name(attempt_version)}"
        fault_point("commit.before_write")
        try:
            with fault_scope("commit"):
                log.store.write(path, data, overwrite=False)
        except FileAlreadyExistsError:
            pass
        except OSError as exc:
            if not _landed(log, attempt_version, txn_id):
                raise CommitFailedError(
                    f"writing {path} failed ({exc}); the commit was not published"
                ) from exc
            return _published(log, attempt_version, attempt, level, blind, txn_id, props)
        else:
            fault_point("commit.after_write")
            return _published(log, attempt_version, attempt, level, blind, txn_id, props)
        latest = log.latest_version()
        for version in range(attempt_version, latest + 1):
            winner = WinningCommit(version=version, actions=tuple(log.read_commit(version)))
            if winner.commit_info is not None and winner.commit_info.txn_id == txn_id:
                return _published(log, version, attempt, level, blind, txn_id, props)
            step("rebasing")
            settled = settle(log, checker, pending, winner)
            pending, checker = settled.pending, settled.checker
        attempt_version = max(latest + 1, attempt_version)
        if attempt > 3:
            time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))
    raise CommitRetriesExceededError(
        attempts=limit,
        start_version=read_version + 1,
        failed_version=attempt_version,
        num_actions=len(pending.actions),
        elapsed_ms=(time.monotonic() - started) * 1000,
    )


@dataclass(frozen=True, slots=True)
class Settlement:
    """A pending commit after one winner was checked and, where rows allow, rebased onto it.

    Attributes:
        pending: The pending commit to go on with (rebased when the winner required it).
        checker: The checker for ``pending``.
        work: What rows were compared (None when the winner was judged per file).
    """

    pending: PendingCommit
    checker: ConflictChecker
    work: RowLevelWork | None


def settle(
    log: DeltaLog, checker: ConflictChecker, pending: PendingCommit, winner: WinningCommit
) -> Settlement:
    """Checks ``pending`` against one winner: raises its conflict or returns how to go on.

    Raises:
        ConcurrentModificationException: The winner conflicts with ``pending``.
    """
    if isinstance(checker, RowLevelChecker):
        # Row-level concurrency (seed 000): the kernel says what to compare, this layer reads
        # the deletion vectors and rebases our vectors onto the winner's.
        from deltatx.log.row_level import resolve_row_level

        work = checker.check_row_level(winner)
        settled = resolve_row_level(log, pending, work)
        if settled is pending:
            return Settlement(pending, checker, work)
        return Settlement(settled, checker_for(settled), work)
    try:
        checker.check(winner)
    except ProtocolChangedException:
        rebased = _rebase_table_creation(pending, winner)
        if rebased is None:
            raise
        return Settlement(rebased, checker_for(rebased), None)
    return Settlement(pending, checker, None)


def _rebase_table_creation(pending: PendingCommit, winner: WinningCommit) -> PendingCommit | None:
    """Lets a plain append that raced to create a table land on the winner's table.

    Only when the loser created the table (read version -1), the winner is version 0, the
    loser's commit is a blind append, and both tables have the same schema, partitioning and
    properties: then dropping the loser's protocol and metadata leaves an append that cannot
    conflict, and no data is lost. Anything else keeps the ProtocolChangedException.
    """
    if pending.read_version != -1 or winner.version != 0 or not pending.is_blind_append:
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
