"""OPTIMIZE and REORG vs DML on tables with deletion vectors: follow the rows, in either order.

The docs: with deletion vectors, OPTIMIZE conflicts with UPDATE, DELETE and MERGE (and with
another OPTIMIZE) only when it uses ZORDER BY; partitioned tables get this too. A compaction
output records which rows of which sources it holds (:mod:`deltatx.kernel.row_level.provenance`),
so:

* a DML that commits after a compaction of a file it changed moves its change onto the
  output: ``remove(P)`` + ``add(P, DV)`` becomes ``remove(O)`` + ``add(O, DV')`` where ``DV'``
  deletes the same rows at their positions in ``O`` (or ``remove(O)`` when nothing is left);
  its new files (updated rows) stay, and what it read follows the rows too, so later winners
  are still compared by rows;
* a compaction that commits after a DML changed one of its sources deletes the DML's newly
  deleted rows from its output (a deletion vector on ``O``) and removes the file entry the DML
  left in force; a source the DML removed whole has all its rows deleted from ``O``.

A Z-order output carries no provenance, so those races stay file-level conflicts: they may
conflict, but never lose a change.
"""

from __future__ import annotations

import time
from dataclasses import replace
from types import MappingProxyType

from deltatx.errors import (
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    InvalidTableError,
)
from deltatx.kernel.actions import Action, AddFile, RemoveFile
from deltatx.kernel.deletion_vectors import num_records
from deltatx.kernel.row_level.plan import RebasePlan, with_deleted_rows
from deltatx.kernel.row_level.provenance import RowsNotLiveError, map_rows, segments_of
from deltatx.kernel.row_level.rules import CompactedSource, RowLevelWork
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.row_level.vectors import own_rows

_CHANGED_BEFORE_HINT = (
    "The file changed between this transaction's read and the concurrent compaction in a way "
    "its rows cannot be followed through. Retry the operation."
)


def _physical_rows(add: AddFile) -> int:
    """Rows stored in a compaction output (its statistics, else the sum of its sources)."""
    n = num_records(add.stats)
    if n is not None:
        return n
    return sum(s.live_rows for s in segments_of(add) or ())


def _deleted_at_compaction(reader: DvReader, c: CompactedSource) -> frozenset[int] | None:
    """The source's deleted rows when the compaction read it, or None when unknowable.

    The output's tag records that vector. Outputs written before it did fall back to the
    compaction's ``remove``, which names the same vector unless the compaction was settled
    against a DML (then the row counts disagree and the caller conflicts).
    """
    if not c.segment.vector_recorded:
        return reader.rows_of(c.removed)
    try:
        return frozenset(reader.rows(c.segment.vector, data_file=c.path))
    except InvalidTableError:
        return None  # vacuumed or never committed: judge the file as a whole


def follow_compactions(reader: DvReader, plan: RebasePlan, work: RowLevelWork) -> RebasePlan:
    """Moves a DML's reads and changes on files a winner compacted onto the winner's outputs.

    Raises:
        ConcurrentDeleteReadException: Rows this transaction matched were not in the output
            (they were deleted before the compaction: a winner the row checks missed).
        ConcurrentDeleteDeleteException: The same, for rows this transaction changed.
    """
    if not work.compacted:
        return plan
    pending = plan.pending
    winner = work.winner
    own_removes = {a.path: a for a in pending.actions if isinstance(a, RemoveFile)}
    own_adds = {
        a.path: a
        for a in pending.actions
        if isinstance(a, AddFile) and a.path in own_removes and plan.has_vector(a)
    }
    rows = dict(pending.read_set.row_level_rows)
    files = dict(pending.read_set.read_files)
    outputs: dict[str, AddFile] = {}
    deleted: dict[str, set[int]] = {}
    dropped: set[str] = set()
    for c in work.compacted:
        at_compaction = _deleted_at_compaction(reader, c)
        outputs[c.output.path] = c.output
        own = own_removes.get(c.path)
        physical = num_records(c.removed.stats)
        if (
            at_compaction is None
            or (physical is None and not c.segment.vector_recorded)
            or (physical is not None and physical - len(at_compaction) != c.segment.live_rows)
        ):
            # Without the vector the compaction read, positions cannot be derived: conflict
            # rather than guess (never move a change onto the wrong row).
            cls = ConcurrentDeleteDeleteException if own else ConcurrentDeleteReadException
            raise cls(
                winning_version=winner.version,
                winning_operation=winner.operation,
                file=c.path,
                hint=_CHANGED_BEFORE_HINT,
            )
        ordered = sorted(at_compaction)
        try:
            matched = map_rows(
                rows.pop(c.path, frozenset()), deleted_at_compaction=ordered, segment=c.segment
            )
        except RowsNotLiveError as exc:
            cls = ConcurrentDeleteDeleteException if own else ConcurrentDeleteReadException
            raise cls(
                winning_version=winner.version,
                winning_operation=winner.operation,
                file=c.path,
                rows=exc.rows,
                hint=_CHANGED_BEFORE_HINT,
            ) from None
        rows[c.output.path] = rows.get(c.output.path, frozenset()) | frozenset(matched)
        files.pop(c.path, None)
        files[c.output.path] = c.output
        if own is None:
            continue
        if own.dv_id != c.removed.dv_id:
            # Earlier winners were rebased into our remove, so it names the entry the
            # compaction read; anything else would map rows against the wrong vector.
            raise ConcurrentDeleteDeleteException(
                winning_version=winner.version,
                winning_operation=winner.operation,
                file=c.path,
                hint=_CHANGED_BEFORE_HINT,
            )
        dropped.add(c.path)
        if c.path in own_adds:
            ours = own_rows(reader, plan, own_adds[c.path]) - at_compaction
            positions = map_rows(ours, deleted_at_compaction=ordered, segment=c.segment)
        else:
            positions = list(c.segment.positions())  # we deleted every live row of the file
        deleted.setdefault(c.output.path, set()).update(positions)

    now = int(time.time() * 1000)
    carried: list[Action] = []
    vectors: dict[str, frozenset[int]] = {}
    for path, gone in deleted.items():
        output = outputs[path]
        total = reader.rows_of(output) | frozenset(gone)
        carried.append(output.remove(timestamp=now))
        kept = with_deleted_rows(output, total, physical_rows=_physical_rows(output))
        if kept is not None:
            carried.append(replace(kept, data_change=True))
            vectors[path] = total
    actions = [
        a
        for a in pending.actions
        if not (isinstance(a, AddFile | RemoveFile) and a.path in dropped)
    ]
    read_set = replace(
        pending.read_set,
        row_level_rows=MappingProxyType(rows),
        read_files=MappingProxyType(files),
    )
    return plan.rebased((*actions, *carried), vectors=vectors, read_set=read_set)


def settle_source_changes(reader: DvReader, plan: RebasePlan, work: RowLevelWork) -> RebasePlan:
    """Deletes from this compaction's outputs the rows winners deleted from its sources.

    Raises:
        ConcurrentDeleteDeleteException: A winner brought back rows the compaction dropped
            (its vector on a source is not a superset of the one compacted), which an output
            cannot express.
    """
    if not work.source_changes:
        return plan
    pending = plan.pending
    winner = work.winner
    own_removes = {a.path: a for a in pending.actions if isinstance(a, RemoveFile)}
    adds = {a.path: a for a in pending.actions if isinstance(a, AddFile)}
    swaps: dict[str, RemoveFile | None] = {}
    deleted: dict[str, set[int]] = {}
    baseline = dict(pending.compaction_baseline)
    for ch in work.source_changes:
        ours = own_removes[ch.path]
        if ch.path not in baseline:
            baseline[ch.path] = ours.deletion_vector
        # The output was written skipping the rows deleted when the compaction read the
        # source; earlier winners' rows were already added to the output's vector, so only
        # rows new since our (possibly swapped) remove are carried, mapped from that baseline.
        at_compaction = frozenset(reader.rows(baseline[ch.path], data_file=ch.path))
        already_carried = reader.rows_of(ours)
        if ch.after is None:
            positions = list(ch.segment.positions())
            swaps[ch.path] = None  # already gone; our tombstone would be a second one
        else:
            now_deleted = reader.rows_of(ch.after)
            if not at_compaction <= now_deleted:
                raise ConcurrentDeleteDeleteException(
                    winning_version=winner.version,
                    winning_operation=winner.operation,
                    file=ch.path,
                    hint=(
                        "The concurrent commit restored rows of a file this compaction "
                        "rewrote; retry the compaction."
                    ),
                )
            positions = map_rows(
                now_deleted - already_carried,
                deleted_at_compaction=sorted(at_compaction),
                segment=ch.segment,
            )
            # Our remove must name the entry now in force, or log replay would keep it live.
            swaps[ch.path] = ch.after.remove(
                timestamp=ours.deletion_timestamp or int(time.time() * 1000), data_change=False
            )
        deleted.setdefault(ch.output.path, set()).update(positions)

    vectors: dict[str, frozenset[int]] = {}
    # None: every row an output copied is gone or lives in the winner's files.
    outputs: dict[str, AddFile | None] = {}
    for path, gone in deleted.items():
        total = own_rows(reader, plan, adds[path]) | frozenset(gone)
        outputs[path] = with_deleted_rows(
            adds[path], total, physical_rows=_physical_rows(adds[path])
        )
        if outputs[path] is not None:
            vectors[path] = total
    actions: list[Action] = []
    for a in pending.actions:
        if isinstance(a, RemoveFile) and a.path in swaps:
            swapped = swaps[a.path]
            if swapped is not None:
                actions.append(swapped)
        elif isinstance(a, AddFile) and a.path in outputs:
            kept = outputs[a.path]
            if kept is not None:
                actions.append(kept)
        else:
            actions.append(a)
    return plan.rebased(actions, vectors=vectors, compaction_baseline=baseline)
