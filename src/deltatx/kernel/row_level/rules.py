"""Which winner/loser pairs need rows compared: the row-level conflict rules, as data.

On tables with deletion vectors (the docs, "Conflictos de escritura con simultaneidad de nivel
de fila"), some file-level conflicts are not conflicts at all:

* UPDATE, DELETE and MERGE on an unpartitioned table conflict only when they change the same
  rows: a winner that only added rows to a file's deletion vector is compared by rows.
* OPTIMIZE and REORG conflict with nothing unless they use ZORDER BY, on partitioned tables
  too: a compaction's outputs record which rows of which source they hold
  (:mod:`deltatx.kernel.row_level.provenance`), so a deletion vector written on one side is
  carried to the other by row position, in either commit order.

The kernel cannot read deletion vectors (that is I/O), so :class:`RowLevelChecker` raises the
conflicts that rows cannot settle and returns a :class:`RowLevelWork` describing the rest;
:func:`deltatx.log.row_level.resolution.resolve_row_level` reads the vectors, raises row
conflicts and plans the rebase (:mod:`deltatx.kernel.row_level.plan`). Which conditions and
tables row-level concurrency refuses is in :mod:`deltatx.kernel.row_level.limitations`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from deltatx.kernel.actions import AddFile, Metadata, RemoveFile
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.conflicts import ConflictChecker
from deltatx.kernel.evaluation import file_may_match
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.row_level.provenance import Segment, sources_by_path


@dataclass(frozen=True, slots=True)
class DvUpdate:
    """A winner replaced a file only by adding rows to its deletion vector (same path).

    Attributes:
        path: The data file.
        before: The winner's ``remove`` (the vector it replaced).
        after: The winner's ``add`` (the vector now in force).
    """

    path: str
    before: RemoveFile
    after: AddFile


@dataclass(frozen=True, slots=True)
class CompactedSource:
    """A winning compaction moved the rows of a file this transaction read or changed.

    Attributes:
        path: The compacted (now removed) file.
        removed: The winner's ``remove``: its vector is the one in force at compaction time.
        output: The winner's output file that holds the source's live rows.
        segment: Where in ``output`` they are.
    """

    path: str
    removed: RemoveFile
    output: AddFile
    segment: Segment


@dataclass(frozen=True, slots=True)
class SourceChange:
    """A winner changed a file that this (pending) compaction compacted.

    Attributes:
        path: The source file.
        before: The winner's ``remove`` of it.
        after: The winner's ``add`` of the same path (a new deletion vector), or None when the
            winner removed the file whole (its rows are gone or live elsewhere now).
        output: This compaction's output that copied the source's rows.
        segment: Where in ``output`` they are.
    """

    path: str
    before: RemoveFile
    after: AddFile | None
    output: AddFile
    segment: Segment


@dataclass(frozen=True, slots=True)
class RowLevelWork:
    """What is left to settle a winner at row level; pure data, the log layer does the I/O.

    Attributes:
        winner: The winning commit.
        dv_updates: The winner's vector-only changes to files this transaction read at row
            level: conflict iff the winner's newly deleted rows meet the rows this transaction
            matched; otherwise this transaction's own vector on the file (if any) is rebased
            onto the winner's by union.
        appended: Serializable only: files the winner added whose statistics may match this
            transaction's condition; conflict iff one of their live rows does.
        compacted: Files the winner compacted that this transaction read or changed: its rows
            and vectors move to the winner's output by position.
        source_changes: This transaction is a compaction and the winner changed some of its
            sources: the rows the winner deleted are deleted from the output too.
    """

    winner: WinningCommit
    dv_updates: tuple[DvUpdate, ...] = ()
    appended: tuple[AddFile, ...] = ()
    compacted: tuple[CompactedSource, ...] = ()
    source_changes: tuple[SourceChange, ...] = ()

    @property
    def is_empty(self) -> bool:
        """Nothing to read or rebase: the winner is settled."""
        return not (self.dv_updates or self.appended or self.compacted or self.source_changes)


def dv_updates_of(winner: WinningCommit) -> dict[str, DvUpdate]:
    """The files a winner changed only through their deletion vector (remove + add, same path)."""
    adds = {a.path: a for a in winner.adds if a.deletion_vector is not None and a.data_change}
    out: dict[str, DvUpdate] = {}
    for rm in winner.removes:
        add = adds.get(rm.path)
        if add is not None and rm.data_change and rm.dv_id != add.dv_id:
            out[rm.path] = DvUpdate(rm.path, rm, add)
    return out


def _without_paths(winner: WinningCommit, paths: Collection[str]) -> WinningCommit:
    """The winner minus its file actions on ``paths`` (those are settled by rows)."""
    if not paths:
        return winner
    return WinningCommit(
        version=winner.version,
        actions=tuple(
            a
            for a in winner.actions
            if not (isinstance(a, AddFile | RemoveFile) and a.path in paths)
        ),
    )


def _own_compaction_sources(pending: PendingCommit) -> dict[str, tuple[AddFile, Segment]]:
    """A pure compaction's sources (path -> its output and segment), or {} for anything else.

    Only on tables that write deletion vectors (the output may need one), and only when every
    file action has ``dataChange=false`` and nothing else changes (no metadata).
    """
    if not pending.deletion_vectors:
        return {}
    adds: list[AddFile] = []
    removed: set[str] = set()
    for a in pending.actions:
        if isinstance(a, Metadata):
            return {}
        if isinstance(a, AddFile | RemoveFile):
            if a.data_change:
                return {}
            if isinstance(a, AddFile):
                adds.append(a)
            else:
                removed.add(a.path)
    return {p: hit for p, hit in sources_by_path(adds).items() if p in removed}


class RowLevelChecker(ConflictChecker):
    """A :class:`ConflictChecker` that leaves row-level questions to the caller as data.

    Use :func:`checker_for` to get one when it applies.

    Attributes:
        rows_resolvable: DML vs DML is judged by rows (an unpartitioned table, the docs).
        follows_compactions: A DML whose file a winning compaction moved follows its rows.
        own_sources: This transaction is a compaction: its sources, to carry a winner's
            deletions onto its outputs.
    """

    def __init__(self, pending: PendingCommit) -> None:
        """Works out which of the row-level rules apply to ``pending``."""
        super().__init__(pending)
        read = pending.read_set
        # Rows are recorded only by deletion-vector DML, and only when no documented limitation
        # (non-deterministic condition, subquery, complex types, identity columns) applies.
        dml_rows = (
            read.row_level_fallback is None
            and bool(read.row_level_rows)
            and not self._changes_metadata
        )
        self.rows_resolvable = dml_rows and not pending.partition_columns
        self.follows_compactions = dml_rows
        self.own_sources = _own_compaction_sources(pending)

    @property
    def applies(self) -> bool:
        """Whether any row-level rule applies to the pending commit."""
        return self.follows_compactions or bool(self.own_sources)

    def check_row_level(self, winner: WinningCommit) -> RowLevelWork:
        """Like :meth:`check`, but leaves row-level questions to the caller as data.

        Metadata, protocol, domain and application id conflicts raise as usual. Files the
        winner changed only through their deletion vector are returned when this transaction
        read them at row level on an unpartitioned table (otherwise they are file-level
        conflicts as before). Files a winning compaction moved (with recorded provenance) are
        returned when this transaction read or changed them; sources of this compaction that
        the winner changed are returned too. Appends never conflict under WriteSerializable
        (the docs: UPDATE, DELETE and MERGE cannot conflict with INSERT); under Serializable the
        added files whose statistics may match are returned for a row check.

        Raises:
            ConcurrentModificationException: A conflict that rows cannot resolve.
        """
        self._check_protocol(winner)
        self._check_metadata(winner)
        self._check_domains(winner)
        self._check_app_ids(winner)
        if self.own_sources:
            return self._settle_own_compaction(winner)
        return self._settle_dml(winner)

    def _settle_own_compaction(self, winner: WinningCommit) -> RowLevelWork:
        adds = {a.path: a for a in winner.adds}
        changes: list[SourceChange] = []
        for rm in winner.removes:
            hit = self.own_sources.get(rm.path)
            if hit is not None:
                changes.append(SourceChange(rm.path, rm, adds.get(rm.path), hit[0], hit[1]))
        rest = _without_paths(winner, {c.path for c in changes})
        # A compaction depends only on the files it rewrites: files it looked at but left
        # alone may change freely, and appends cannot matter (it changes no data, the Delta code).
        # Sources without recorded provenance keep the file-level rule.
        self._check_delete_delete(rest)
        return RowLevelWork(winner, source_changes=tuple(changes))

    def _settle_dml(self, winner: WinningCommit) -> RowLevelWork:
        read = self.pending.read_set
        rows = read.row_level_rows
        outputs = sources_by_path(a for a in winner.adds if not a.data_change)
        compacted: list[CompactedSource] = []
        for rm in winner.removes:
            hit = outputs.get(rm.path)
            if rm.data_change or hit is None:
                continue  # not a compaction with provenance (e.g. ZORDER BY): file level
            if rm.path in rows or rm.path in self._removes:
                compacted.append(CompactedSource(rm.path, rm, hit[0], hit[1]))
        updates = dv_updates_of(winner) if self.rows_resolvable else {}
        resolvable = {p: u for p, u in updates.items() if p in rows}
        rest = _without_paths(winner, set(resolvable) | {c.path for c in compacted})
        self._check_delete_delete(rest)
        appended: tuple[AddFile, ...] = ()
        if not self.rows_resolvable:
            # A partitioned table: DML vs DML stays file level (the docs), only compactions
            # are followed by rows.
            self._check_appends(rest)
        elif self.pending.isolation_level is IsolationLevel.SERIALIZABLE:
            appended = tuple(
                a
                for a in rest.adds
                if a.data_change
                and a.path not in updates
                and (
                    read.read_whole_table
                    or file_may_match(
                        self._predicate,
                        a,
                        schema=self.pending.schema,
                        partition_columns=self.pending.partition_columns,
                    )
                )
            )
        self._check_delete_read(rest)
        return RowLevelWork(winner, tuple(resolvable.values()), appended, tuple(compacted))


def checker_for(pending: PendingCommit) -> ConflictChecker:
    """The checker for ``pending``: a :class:`RowLevelChecker` when a row-level rule applies."""
    checker = RowLevelChecker(pending)
    return checker if checker.applies else ConflictChecker(pending)
