"""Why a transaction that read an old version collides with the commits after it (log only).

``deltatx conflicts`` models the failed transaction from what an operator knows (the version
it read, its condition, what it did) and settles it against every later commit with the same
code a real commit runs (:func:`deltatx.log.commit.settle`): file- and partition-level checks,
and on tables with deletion vectors the row-level ones, which read the vectors and the data
files' rows with pyarrow. Settling only plans the deletion vectors a rebase needs (only the
commit loop writes them), so explaining reads the table and never changes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from deltatx.errors import ConcurrentModificationException, InvalidArgumentError
from deltatx.kernel.actions import Action, AddFile
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.deletion_vectors import num_records
from deltatx.kernel.expressions import TRUE, Expression
from deltatx.kernel.isolation import IsolationLevel, resolve_isolation_level
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.limitations import row_level_limitation
from deltatx.kernel.row_level.plan import RebasePlan, with_deleted_rows
from deltatx.kernel.row_level.provenance import SOURCES_TAG, encode_sources
from deltatx.kernel.row_level.rules import RowLevelWork, checker_for
from deltatx.kernel.transaction import ReadTracker, is_blind_append
from deltatx.log.commit import settle
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.delta_log import DeltaLog
from deltatx.log.row_level.resolution import matching_rows
from deltatx.log.snapshot import Snapshot

_DML = frozenset({OperationName.DELETE, OperationName.UPDATE, OperationName.MERGE})
_MODELLED = _DML | {OperationName.WRITE, OperationName.OPTIMIZE}
_OUTPUT_DIR = "_deltatx_explained"


@dataclass(frozen=True, slots=True)
class Collision:
    """How one later commit meets the explained transaction.

    Attributes:
        version: The later commit.
        operation: Its operation (from its commitInfo).
        conflict: The exception a real commit would raise (its class name), or None.
        partition: Where it collided, for partition-level conflicts.
        file: The data file it collided on.
        rows: The rows (physical row indexes of ``file``) both changed or read.
        hint: How to avoid the conflict, as the exception says.
        detail: The exception's message without the hint.
        note: For a commit that does not collide, how rows settled it (which rows of which
            file it changed, a compaction followed), or None.
    """

    version: int
    operation: str | None
    conflict: str | None = None
    partition: str | None = None
    file: str | None = None
    rows: tuple[int, ...] | None = None
    hint: str | None = None
    detail: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Explanation:
    """The explained transaction and every later commit.

    Attributes:
        read_version: The version it read.
        isolation_level: Its level (after the downgrade for commits that change no data).
        row_level: Whether rows were compared (deletion vectors, no documented limitation).
        fallback: Why rows were not compared though the table has deletion vectors, or None.
        matched_rows: Per data file, the live rows its condition matched (row level only).
        collisions: One entry per later commit, in version order.
    """

    read_version: int
    isolation_level: IsolationLevel
    row_level: bool
    fallback: str | None
    matched_rows: dict[str, tuple[int, ...]]
    collisions: tuple[Collision, ...]


def explain_conflicts(
    log: DeltaLog,
    snap: Snapshot,
    *,
    operation: OperationName,
    predicate: Expression | None = None,
    condition_text: str | None = None,
) -> Explanation:
    """Settles a modelled transaction that read ``snap`` against every later commit.

    Args:
        log: The table's log (only read).
        snap: The snapshot the transaction read (the caller has it, to parse the condition).
        operation: What it did: WRITE (a blind append), DELETE, UPDATE, MERGE or OPTIMIZE.
        predicate: Its condition in the IR (None: it read the whole table).
        condition_text: The condition as written, to spot the docs's row-level limitations.

    Raises:
        InvalidArgumentError: ``operation`` is not one of those modelled.
    """
    if operation not in _MODELLED:
        names = ", ".join(sorted(n.value for n in _MODELLED))
        raise InvalidArgumentError(f"cannot explain a {operation.value}; use one of {names}")
    model = _model(log, snap, operation, predicate, condition_text)
    plan = model.plan
    checker = checker_for(plan.pending)
    out: list[Collision] = []
    for version in range(snap.version + 1, log.latest_version() + 1):
        winner = WinningCommit(version=version, actions=tuple(log.read_commit(version)))
        try:
            settled = settle(log, checker, plan, winner)
        except ConcurrentModificationException as exc:
            out.append(
                Collision(
                    version,
                    winner.operation,
                    conflict=type(exc).__name__,
                    partition=exc.partition,
                    file=exc.file,
                    rows=exc.rows,
                    hint=exc.hint,
                    detail=str(exc).split("\n")[0],
                )
            )
            continue  # a real commit stops here; later commits are judged on their own
        plan, checker = settled.plan, settled.checker
        note = None if settled.work is None else _note(DvReader(log), settled.work)
        out.append(Collision(version, winner.operation, note=note))
    return Explanation(
        read_version=snap.version,
        isolation_level=model.plan.pending.isolation_level,
        row_level=bool(model.matched),
        fallback=model.fallback,
        matched_rows={p: tuple(sorted(r)) for p, r in model.matched.items() if r},
        collisions=tuple(out),
    )


@dataclass(frozen=True, slots=True)
class _Model:
    plan: RebasePlan
    matched: dict[str, list[int]]
    fallback: str | None


def _model(
    log: DeltaLog,
    snap: Snapshot,
    operation: OperationName,
    predicate: Expression | None,
    condition_text: str | None,
) -> _Model:
    """The commit a transaction like the one described would have made, vectors unwritten."""
    dv = snap.table_configuration.deletion_vectors_enabled
    tracker = ReadTracker()
    files: list[AddFile] = []
    if operation is not OperationName.WRITE:
        files = snap.scan_files(predicate)
        tracker.record_scan(TRUE if predicate is None else predicate, files)
    now = int(time.time() * 1000)
    actions: list[Action] = []
    vectors: dict[str, frozenset[int]] = {}
    matched: dict[str, list[int]] = {}
    fallback = None
    if operation in _DML and dv:
        fallback = row_level_limitation(predicate, snap.schema, condition_text=condition_text)
    if operation in _DML and dv and fallback is None:
        reader = DvReader(log)
        condition = TRUE if predicate is None else predicate
        matched = {f.path: matching_rows(log, reader, f, condition, snap.schema) for f in files}
        tracker.record_row_level(files, matched)
        actions, vectors = _deletion_vector_changes(reader, files, matched, now)
    elif operation in _DML:
        if fallback is not None:
            tracker.record_row_level_fallback(fallback)
        actions = [f.remove(timestamp=now) for f in files]
    elif operation is OperationName.OPTIMIZE:
        actions = [*(f.remove(timestamp=now, data_change=False) for f in files)]
        if dv:
            actions.extend(_compaction_outputs(files, now))
    op = Operation(operation, {})
    read_set = tracker.freeze()
    pending = PendingCommit(
        read_version=snap.version,
        read_set=read_set,
        actions=tuple(actions),
        operation=op,
        isolation_level=resolve_isolation_level(
            actions,
            table_level=snap.properties.isolation_level,
            operation_changes_data=op.changes_data,
        ),
        is_blind_append=is_blind_append(actions, read_set),
        schema=snap.schema,
        partition_columns=snap.partition_columns,
        deletion_vectors=dv,
    )
    return _Model(RebasePlan(pending, vectors), matched, fallback)


def _deletion_vector_changes(
    reader: DvReader,
    files: Sequence[AddFile],
    matched: dict[str, list[int]],
    now: int,
) -> tuple[list[Action], dict[str, frozenset[int]]]:
    """What a deletion-vector DML changing the matched rows stages, its vectors as row sets."""
    actions: list[Action] = []
    vectors: dict[str, frozenset[int]] = {}
    for f in files:
        rows = matched.get(f.path)
        if not rows:
            continue
        deleted = reader.rows_of(f) | frozenset(rows)
        actions.append(f.remove(timestamp=now))
        kept = with_deleted_rows(f, deleted, physical_rows=num_records(f.stats))
        if kept is not None:
            actions.append(replace(kept, data_change=True))
            vectors[f.path] = deleted
    return actions, vectors


def _compaction_outputs(files: Sequence[AddFile], now: int) -> list[AddFile]:
    """One output per partition, tagged with its sources like a real compaction's."""
    bins: dict[str, list[AddFile]] = {}
    for f in files:
        bins.setdefault(json.dumps(f.partition_values, sort_keys=True), []).append(f)
    outputs: list[AddFile] = []
    for index, members in enumerate(bins.values()):
        sources = []
        for f in members:
            physical = num_records(f.stats)
            if physical is None:
                break
            deleted = 0 if f.deletion_vector is None else f.deletion_vector.cardinality
            sources.append((f.path, physical - deleted, f.deletion_vector))
        traced = len(sources) == len(members)
        total = sum(n for _, n, _ in sources)
        outputs.append(
            AddFile(
                path=f"{_OUTPUT_DIR}/part-{index:05d}.parquet",
                partition_values=dict(members[0].partition_values),
                size=0,
                modification_time=now,
                data_change=False,
                stats=json.dumps({"numRecords": total}) if traced else None,
                tags={SOURCES_TAG: encode_sources(sources)} if traced else None,
            )
        )
    return outputs


def _note(reader: DvReader, work: RowLevelWork) -> str | None:
    """How a winner that did not collide was settled by rows."""
    parts: list[str] = []
    for u in work.dv_updates:
        theirs = sorted(reader.rows_of(u.after) - reader.rows_of(u.before))
        parts.append(f"changed other rows of {u.path} ({_rows(theirs)}): rebased")
    for c in work.compacted:
        parts.append(f"compacted {c.path}: rows followed onto {c.output.path}")
    for ch in work.source_changes:
        parts.append(f"changed {ch.path}: its deleted rows carried onto {ch.output.path}")
    for a in work.appended:
        parts.append(f"appended {a.path}: no live row matches the condition")
    return "; ".join(parts) or None


def _rows(rows: Sequence[int]) -> str:
    shown = ", ".join(str(r) for r in rows[:10])
    more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
    return f"rows {shown}{more}"
