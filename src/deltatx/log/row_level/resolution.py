"""Row-level concurrency: settle what the kernel checker left as data, then rebase.

The kernel's :meth:`~deltatx.kernel.row_level.rules.RowLevelChecker.check_row_level` says
which files a winner changed only through their deletion vector and (under Serializable) which
appended files may hold rows this transaction's condition matches. Here the vectors and rows
are read:

* a winner's newly deleted rows that meet rows this transaction matched are a conflict whose
  exception names the rows;
* otherwise, where this transaction also changed the file's vector, its ``remove(P, ours
  before)`` + ``add(P, ours after)`` pair is rewritten to ``remove(P, winner's)`` + ``add(P,
  winner's + ours)``, so no concurrent deletion is lost;
* an appended live row that satisfies the condition is a conflict (Serializable only);
* a compaction's race with a DML is settled by row position
  (:mod:`deltatx.log.row_level.compaction_races`).

Settling writes nothing: it returns a :class:`~deltatx.kernel.row_level.plan.RebasePlan`
whose vectors are row sets; :mod:`deltatx.log.row_level.vectors` writes them when the commit
loop is about to publish. The rows of a data file that a condition matches are read here too
(:func:`matching_rows`), for the Serializable append check and ``deltatx conflicts``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    InvalidTableError,
)
from deltatx.kernel.actions import AddFile, RemoveFile
from deltatx.kernel.column_mapping import physical_name
from deltatx.kernel.commits import PendingCommit
from deltatx.kernel.expressions import Expression, columns_of, has_opaque, or_
from deltatx.kernel.row_evaluation import evaluate_on_row
from deltatx.kernel.row_level.plan import RebasePlan
from deltatx.kernel.row_level.rules import RowLevelWork
from deltatx.kernel.schema import StructType
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.row_level.compaction_races import follow_compactions, settle_source_changes
from deltatx.log.row_level.vectors import own_rows

if TYPE_CHECKING:
    from deltatx.log.delta_log import DeltaLog

_SAME_ROWS_HINT = (
    "Both transactions changed the same rows of this file (row-level concurrency compares "
    "rows, not files, on tables with deletion vectors). Retry the operation; concurrent "
    "UPDATE, DELETE and MERGE on different rows do not conflict."
)


def resolve_row_level(log: DeltaLog, plan: RebasePlan, work: RowLevelWork) -> RebasePlan:
    """Raises the row conflict ``work`` reveals, or returns ``plan`` rebased onto the winner.

    Reads deletion vectors and data files, writes nothing: the vectors the rebased commit
    needs are row sets in the returned plan.

    Raises:
        ConcurrentDeleteReadException: The winner changed rows this transaction matched.
        ConcurrentDeleteDeleteException: ... and this transaction changed those rows too.
        ConcurrentAppendException: Serializable: the winner added a row the condition matches.
    """
    if work.is_empty:
        return plan
    reader = DvReader(log)
    plan = _rebase_dv_updates(reader, plan, work)
    for add in work.appended:
        _check_appended_rows(log, reader, plan.pending, work, add)
    plan = follow_compactions(reader, plan, work)
    return settle_source_changes(reader, plan, work)


def _rebase_dv_updates(reader: DvReader, plan: RebasePlan, work: RowLevelWork) -> RebasePlan:
    """Compares the winner's vector-only changes by rows; unions our vectors onto theirs."""
    pending = plan.pending
    own_removes = {a.path: a for a in pending.actions if isinstance(a, RemoveFile)}
    own_adds = {
        a.path: a
        for a in pending.actions
        if isinstance(a, AddFile) and a.path in own_removes and plan.has_vector(a)
    }
    vectors: dict[str, frozenset[int]] = {}
    swap: dict[str, RemoveFile] = {}
    for update in work.dv_updates:
        theirs = reader.rows_of(update.after) - reader.rows_of(update.before)
        ours = pending.read_set.row_level_rows.get(update.path, frozenset())
        overlap = theirs & ours
        if overlap:
            cls = (
                ConcurrentDeleteDeleteException
                if update.path in own_removes
                else ConcurrentDeleteReadException
            )
            raise cls(
                winning_version=work.winner.version,
                winning_operation=work.winner.operation,
                file=update.path,
                rows=sorted(overlap),
                detail="Row-level conflict: the same rows were changed by both transactions.",
                hint=_SAME_ROWS_HINT,
            )
        if update.path in own_removes:
            if update.path not in own_adds:
                # We removed the whole file (every row we saw); the winner's rows were among
                # them, which the overlap test above already caught. Keep the file-level rule.
                raise ConcurrentDeleteDeleteException(
                    winning_version=work.winner.version,
                    winning_operation=work.winner.operation,
                    file=update.path,
                    hint=_SAME_ROWS_HINT,
                )
            own_remove = own_removes[update.path]
            ours_new = own_rows(reader, plan, own_adds[update.path]) - reader.rows_of(own_remove)
            vectors[update.path] = reader.rows_of(update.after) | ours_new
            # The file entry now in force is the winner's add; our remove must name that one.
            swap[update.path] = update.after.remove(timestamp=own_remove.deletion_timestamp or 0)
    if not swap:
        return plan
    actions = [
        swap[a.path] if isinstance(a, RemoveFile) and a.path in swap else a for a in pending.actions
    ]
    return plan.rebased(actions, vectors=vectors)


def _check_appended_rows(
    log: DeltaLog,
    reader: DvReader,
    pending: PendingCommit,
    work: RowLevelWork,
    add: AddFile,
) -> None:
    """Serializable: fails when a live row of an appended file matches the read condition."""
    predicate = or_(*pending.read_set.predicates)
    matches: list[int] = []
    if pending.read_set.read_whole_table or has_opaque(predicate):
        matches = [0]  # cannot evaluate: statistics said it may match, so it conflicts
    else:
        matches = matching_rows(log, reader, add, predicate, pending.schema, limit=10)
    if matches:
        raise ConcurrentAppendException(
            winning_version=work.winner.version,
            winning_operation=work.winner.operation,
            file=add.path,
            rows=matches,
            detail="Row-level check: an added row matches this transaction's condition.",
            hint=(
                "Under Serializable isolation a concurrently added row that this "
                "transaction's condition matches is a conflict; WriteSerializable (the default) "
                "would have allowed this commit. Retry the operation."
            ),
        )


def matching_rows(
    log: DeltaLog,
    reader: DvReader,
    add: AddFile,
    predicate: Expression,
    schema: StructType,
    *,
    limit: int | None = None,
) -> list[int]:
    """The live physical rows of a data file that satisfy ``predicate`` (at most ``limit``).

    Reads only the columns the predicate names, with pyarrow, not Spark: this serves the
    commit-time check of an appended file and the log-only ``deltatx conflicts``.

    Raises:
        InvalidTableError: The data file is missing (vacuumed) or is not readable Parquet.
    """
    location = log.location.file(add.path, what="data file")
    needed = {c.lower() for c in columns_of(predicate)}
    try:
        parquet = pq.ParquetFile(pa.BufferReader(log.store.read(location)))
        # Files and partition values name columns physically; the predicate logically.
        logical = {physical_name(f).lower(): f.name for f in schema.fields}
        wanted = {physical_name(f).lower() for f in schema.fields if f.name.lower() in needed}
        names = [n for n in parquet.schema_arrow.names if n.lower() in wanted]
        # Without reader threads: pyarrow's pool can abort the interpreter at exit
        # (apache/arrow#34314), and one data file gains nothing from them.
        table = parquet.read(columns=names, use_threads=False)
    except FileNotFoundError:
        raise InvalidTableError(f"data file {location} does not exist (vacuumed?)") from None
    except (pa.ArrowException, OSError) as exc:
        raise InvalidTableError(f"data file {location} is not readable Parquet: {exc}") from None
    deleted = reader.rows_of(add)
    out: list[int] = []
    for index, row in enumerate(table.to_pylist()):
        if index in deleted:
            continue
        full = {
            logical.get(k.lower(), k): v
            for k, v in (row | add.partition_values if add.partition_values else row).items()
        }
        if evaluate_on_row(predicate, full, schema=schema):
            out.append(index)
            if limit is not None and len(out) >= limit:
                break
    return out
