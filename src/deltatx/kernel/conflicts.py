"""Conflict detection: may a pending commit land after a commit that won the race?

A pure function of the pending transaction (its read set, actions and resolved isolation level)
and one winning commit, applied to each winner in version order. The checks and their order are
deltatx's decisions in ``conflict-spec.md``: protocol, metadata, domain metadata, application
ids, appends, delete/read, delete/delete, except that a file removed by both commits is always a
delete/delete conflict (the docs: two compactions rewriting the same files).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence

from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    MetadataChangedException,
    ProtocolChangedException,
)
from deltatx.kernel.actions import (
    AddFile,
    DomainMetadata,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
)
from deltatx.kernel.column_mapping import physical_columns
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.expressions import Expression, Literal, columns_of, or_, to_sql
from deltatx.kernel.file_predicate import FilePredicate
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.row_level.limitations import FALLBACK_HINT
from deltatx.kernel.schema import parse_schema

# Files asked of the read predicate at once: enough to spread the fixed cost of a batch, few
# enough that their parsed statistics stay small (many live objects make collections slow).
_BATCH_FILES = 256

# Row tracking reassigns row ids instead of failing when both commits touch this domain.
ROW_TRACKING_DOMAIN = "delta.rowTracking"


class ConflictChecker:
    """Checks one pending commit against winning commits, one at a time, in version order."""

    def __init__(self, pending: PendingCommit) -> None:
        """Prepares the pending commit's views once for every winner it will be checked against.

        Args:
            pending: The transaction that tries to commit.
        """
        self.pending = pending
        removes: dict[str, RemoveFile] = {}
        app_ids: set[str] = set()
        domains: set[str] = set()
        changes_metadata = False
        # One pass, adds skipped first: a checker is built for every commit that meets a
        # winner, and most of its actions are added files.
        for a in pending.actions:
            if type(a) is AddFile:
                continue
            if isinstance(a, RemoveFile):
                removes[a.path] = a
            elif isinstance(a, SetTransaction):
                app_ids.add(a.app_id)
            elif isinstance(a, DomainMetadata):
                domains.add(a.domain)
            elif isinstance(a, Metadata):
                changes_metadata = True
        self._removes = removes
        self._own_app_ids = frozenset(app_ids)
        self._domains = frozenset(domains)
        self._changes_metadata = changes_metadata
        self._watched_app_ids = pending.read_set.read_app_ids | self._own_app_ids
        level = pending.isolation_level
        # Whether a winner's added files can conflict at all, and whether a blind append's
        # cannot (the Delta code: WriteSerializable ignores blind appends).
        self._appends_matter = not (
            pending.is_blind_append or level is IsolationLevel.SNAPSHOT_ISOLATION
        )
        self._blind_appends_pass = (
            level is IsolationLevel.WRITE_SERIALIZABLE and not self._changes_metadata
        )
        preds = pending.read_set.predicates
        self._predicate: Expression = or_(*preds)
        # Compiled when a winner first adds files this check must ask it about.
        self._compiled: FilePredicate | None = None

    @property
    def _file_predicate(self) -> FilePredicate:
        if self._compiled is None:
            pending = self.pending
            self._compiled = FilePredicate(
                self._predicate, schema=pending.schema, partition_columns=pending.partition_columns
            )
        return self._compiled

    def check(self, winner: WinningCommit) -> None:
        """Raises the conflict the winner causes, if any.

        Args:
            winner: A commit that landed after the pending transaction's read version.

        Raises:
            ProtocolChangedException: The winner changed the protocol (C1).
            MetadataChangedException: The winner changed the metadata (C2).
            ConcurrentTransactionException: Both wrote the same metadata domain (C3), or the
                winner committed an application id the pending transaction read or writes (C4).
            ConcurrentDeleteDeleteException: Both removed the same file (C9, checked first
                among the file checks).
            ConcurrentAppendException: The winner added a file the pending one should have read
                (C7).
            ConcurrentDeleteReadException: The winner removed a file the pending one read (C8).
        """
        if winner._only_adds:
            # The usual winner, an append: every other check would find nothing.
            if self._appends_matter and winner._adds:
                self._check_appends(winner)
            return
        self._check_protocol(winner)
        self._check_metadata(winner)
        self._check_domains(winner)
        self._check_app_ids(winner)
        self._check_delete_delete(winner)
        self._check_appends(winner)
        self._check_delete_read(winner)

    def check_all(self, winners: Sequence[WinningCommit]) -> None:
        """Raises the first conflict of the winners, in version order, as ``check`` on each would.

        The files added by consecutive winners that only add files (the usual winners) are
        asked of the read predicate as one batch.

        Args:
            winners: Commits that landed after the pending transaction's read version, in
                version order.

        Raises:
            ConcurrentModificationException: The first conflict, as :meth:`check` raises it.
        """
        start = 0
        for i, winner in enumerate(winners):
            if not winner._only_adds:
                self._check_appends_of(winners[start:i])
                self.check(winner)
                start = i + 1
        self._check_appends_of(winners[start:])

    def _check_appends_of(self, appends: Sequence[WinningCommit]) -> None:
        """C7 for winners that only add files, all of their files at once."""
        files: list[AddFile] = []
        owners: list[WinningCommit] = []
        starts: list[int] = []
        for winner in appends:
            added = self._appended(winner)
            if added:
                owners.append(winner)
                starts.append(len(files))
                files += added
                if len(files) >= _BATCH_FILES:
                    self._raise_first_hit(files, owners, starts)
                    files, owners, starts = [], [], []
        self._raise_first_hit(files, owners, starts)

    def _raise_first_hit(
        self, files: list[AddFile], owners: list[WinningCommit], starts: list[int]
    ) -> None:
        """C7 for the files of ``owners`` (file ``starts[i]`` on are ``owners[i]``'s)."""
        hit = self._first_hit(files)
        if hit is not None:
            self._raise_append(owners[bisect_right(starts, hit) - 1], files[hit])

    # C1 -------------------------------------------------------------------------------------

    def _check_protocol(self, winner: WinningCommit) -> None:
        p = winner.protocol
        if p is None:
            return
        if winner.version == 0:
            hint = (
                "Several writers created the table at the same path at the same time; create "
                "the table first (DeltaTable.create or a first write), then start the "
                "concurrent writers."
            )
            detail = (
                "This happens when multiple writers are writing to an empty directory. Creating "
                "the table ahead of time will avoid this conflict."
            )
        else:
            hint = (
                f"A concurrent {winner.operation} changed the table protocol to reader version "
                f"{p.min_reader_version} / writer version {p.min_writer_version}"
                + _features(p)
                + "; protocol changes fail every concurrent write (Delta Lake's isolation-level "
                "documentation). Retry the operation, and run protocol upgrades (e.g. "
                "dt.set_properties({...})) when no other writer is active."
            )
            detail = ""
        raise ProtocolChangedException(
            winning_version=winner.version,
            winning_operation=winner.operation,
            hint=hint,
            detail=detail,
        )

    # C2 -------------------------------------------------------------------------------------

    def _check_metadata(self, winner: WinningCommit) -> None:
        md = winner.metadata
        if md is None:
            return
        raise MetadataChangedException(
            winning_version=winner.version,
            winning_operation=winner.operation,
            hint=(
                f"A concurrent {winner.operation} {self._what_changed(md)}; metadata changes "
                "(schema, table properties, partitioning) fail every concurrent write (Delta "
                "Lake's isolation-level documentation). Retry the operation on the new version, "
                "and change metadata (e.g. dt.set_properties({...})) when no other writer is "
                "active."
            ),
        )

    def _what_changed(self, md: Metadata) -> str:
        try:
            schema = parse_schema(md.schema_string)
        except Exception:  # a broken schema still counts as a change; only the hint is vaguer
            return "replaced the table metadata"
        if tuple(c.lower() for c in md.partition_columns) != tuple(
            c.lower() for c in self.pending.partition_columns
        ):
            cols = ", ".join(md.partition_columns) or "none"
            return f"changed the partition columns (now: {cols})"
        if schema != self.pending.schema:
            return "changed the table schema"
        keys = ", ".join(sorted(md.configuration)) or "none"
        return f"changed the table metadata (table properties now set: {keys})"

    # C3 -------------------------------------------------------------------------------------

    def _check_domains(self, winner: WinningCommit) -> None:
        for dm in winner.domains:
            if dm.domain in self._domains and dm.domain != ROW_TRACKING_DOMAIN:
                raise ConcurrentTransactionException(
                    winning_version=winner.version,
                    winning_operation=winner.operation,
                    detail=f"A conflicting metadata domain {dm.domain} is added.",
                    hint=(
                        f"Both transactions wrote the metadata domain '{dm.domain}'; only one "
                        "writer may change a domain at a time. Retry the operation."
                    ),
                )

    # C4 -------------------------------------------------------------------------------------

    def _check_app_ids(self, winner: WinningCommit) -> None:
        watched = self._watched_app_ids
        for txn in winner.txns:
            if txn.app_id in watched:
                raise ConcurrentTransactionException(
                    winning_version=winner.version,
                    winning_operation=winner.operation,
                    detail=(
                        f"Application id '{txn.app_id}' committed version {txn.version} "
                        "concurrently."
                    ),
                    hint=(
                        f"Two writers committed with the same application id '{txn.app_id}', "
                        "e.g. two instances of one streaming query sharing a checkpoint "
                        "location, or two jobs given the same app_id. Give each writer its own "
                        "app_id (or checkpoint) and never run two instances at once."
                    ),
                )

    # C9 (first among the file checks, decision 3) ----------------------------------------------

    def _check_delete_delete(self, winner: WinningCommit) -> None:
        for rm in winner.removes:
            ours = self._removes.get(rm.path)
            if ours is None:
                continue
            values = ours.partition_values or self._read_partition(rm.path) or rm.partition_values
            compaction = not rm.data_change and not ours.data_change
            if compaction:
                hint = (
                    "Two compactions (OPTIMIZE or REORG) rewrote the same files at the same time "
                    "(Delta Lake's isolation-level documentation); run one compaction at a time, "
                    "or give each its own partitions "
                    "with optimize().where(...)."
                )
            else:
                hint = (
                    f"A concurrent {winner.operation} already deleted or rewrote this file. "
                    "Retry the operation; to avoid this, make concurrent DELETE, UPDATE, MERGE "
                    "and OPTIMIZE work on disjoint partitions with explicit partition "
                    "conditions."
                )
            raise ConcurrentDeleteDeleteException(
                winning_version=winner.version,
                winning_operation=winner.operation,
                file=rm.path,
                partition_values=values if self.pending.partition_columns else None,
                hint=self._hint_with_fallback(hint),
            )

    # C7 -------------------------------------------------------------------------------------

    def _check_appends(self, winner: WinningCommit) -> None:
        self._check_appends_of((winner,))

    def _appended(self, winner: WinningCommit) -> list[AddFile]:
        """The winner's added files that may conflict, if its appends matter at all."""
        if not self._appends_matter or not winner._adds:
            return []
        if self._blind_appends_pass and winner.is_blind_append:
            return []  # the Delta code: WriteSerializable ignores blind appends
        # A compaction's output holds rows that were already in the table; if they were ones
        # this transaction read, the delete/read check catches the removed source.
        return [a for a in winner._adds if a.data_change]

    def _first_hit(self, added: Sequence[AddFile]) -> int | None:
        """The first of ``added`` that the pending transaction should have read, if any."""
        if not added:
            return None
        read = self.pending.read_set
        if read.read_whole_table:
            return 0
        if read.predicates:
            # All of the files at once, read column by column.
            return self._file_predicate.first_match(added)
        return None

    def _raise_append(self, winner: WinningCommit, add: AddFile) -> None:
        raise ConcurrentAppendException(
            winning_version=winner.version,
            winning_operation=winner.operation,
            file=add.path,
            partition_values=add.partition_values if self.pending.partition_columns else None,
            hint=self._append_hint(winner, add),
        )

    def _append_hint(self, winner: WinningCommit, add: AddFile) -> str:
        pending = self.pending
        parts = list(pending.partition_columns)
        cond = to_sql(self._predicate)
        if pending.read_set.read_whole_table:
            why = (
                f"This transaction read the whole table, so any file the concurrent "
                f"{winner.operation} added conflicts."
            )
        elif parts:
            where = ", ".join(
                f"{c}={_value_of(add.partition_values, p)}"
                for c, p in zip(parts, physical_columns(pending.schema, parts), strict=True)
            )
            why = (
                f"The concurrent {winner.operation} added data to partition [{where}], which "
                f"this transaction's read condition ({cond}) covers."
            )
        else:
            why = (
                f"The table is not partitioned, so every file the concurrent {winner.operation} "
                f"adds conflicts with this transaction's read condition ({cond}) unless its "
                "statistics rule it out."
            )
        if winner.is_blind_append and pending.isolation_level is IsolationLevel.SERIALIZABLE:
            return (
                why + " That commit was a blind append (an INSERT that read nothing); "
                "Serializable isolation makes blind appends conflict with transactions that "
                "read the table, while WriteSerializable (the default; set it with "
                "dt.set_properties({'delta.isolationLevel': 'WriteSerializable'})) would have "
                "allowed this commit."
            )
        if winner.is_blind_append:
            return (
                why + " That commit was a blind append; WriteSerializable counts blind appends "
                "here because this transaction changes the table metadata. Retry the operation."
            )
        if parts:
            c = parts[0]
            value = _value_of(add.partition_values, physical_columns(pending.schema, [c])[0])
            example = f"{c} IS NULL" if value == "null" else f"{c} = {to_sql(Literal(value))}"
            return (
                why + " If this operation works on other partitions, make the separation "
                "explicit in its condition: restrict it to the partitions it "
                f'touches, e.g. add "{example}" with your own values (for a MERGE, in the ON '
                "clause as t." + c + " = ...)."
            )
        used = sorted(columns_of(self._predicate)) if pending.read_set.predicates else []
        by = ", ".join(used) if used else "the columns your conditions use"
        return (
            why + " Any added file can conflict on an unpartitioned table; partition the table "
            f"by the column(s) in your conditions ({by}) so concurrent operations work on "
            "disjoint partitions."
        )

    # C8 -------------------------------------------------------------------------------------

    def _check_delete_read(self, winner: WinningCommit) -> None:
        read = self.pending.read_set
        for rm in winner.removes:
            seen = read.read_files.get(rm.path)
            if seen is not None:
                raise ConcurrentDeleteReadException(
                    winning_version=winner.version,
                    winning_operation=winner.operation,
                    file=rm.path,
                    partition_values=(
                        seen.partition_values if self.pending.partition_columns else None
                    ),
                    hint=self._delete_read_hint(winner, rm),
                )
        if read.read_whole_table and winner.removes:
            rm = winner.removes[0]
            raise ConcurrentDeleteReadException(
                winning_version=winner.version,
                winning_operation=winner.operation,
                file=rm.path,
                hint=(
                    "This transaction read the whole table, so any file a concurrent commit "
                    "deletes or rewrites conflicts. Retry the operation, or read through a "
                    "condition on partition columns."
                ),
            )

    def _delete_read_hint(self, winner: WinningCommit, rm: RemoveFile) -> str:
        return self._hint_with_fallback(self._delete_read_hint_base(winner, rm))

    def _hint_with_fallback(self, hint: str) -> str:
        reason = self.pending.read_set.row_level_fallback
        if reason is None:
            return hint
        return hint + " " + FALLBACK_HINT.format(reason=reason)

    def _delete_read_hint_base(self, winner: WinningCommit, rm: RemoveFile) -> str:
        if not rm.data_change:
            return (
                f"A concurrent {winner.operation} compacted files this transaction read "
                "(dataChange=false). Retry the operation, or run OPTIMIZE on other partitions "
                "(optimize().where(...)) or when no other writer is active."
            )
        return (
            f"A concurrent {winner.operation} deleted or rewrote a file this transaction read. "
            "Retry the operation; to avoid this, give concurrent DELETE, UPDATE and MERGE "
            "explicit conditions on disjoint partitions."
        )

    def _read_partition(self, path: str) -> Mapping[str, str | None] | None:
        seen = self.pending.read_set.read_files.get(path)
        return None if seen is None else seen.partition_values


def _features(p: ProtocolAction) -> str:
    feats = sorted(set(p.reader_features or ()) | set(p.writer_features or ()))
    return f" with features {', '.join(feats)}" if feats else ""


def _value_of(values: Mapping[str, str | None] | None, column: str) -> str:
    lowered = {k.lower(): v for k, v in (values or {}).items()}
    v = lowered.get(column.lower())
    return "null" if v is None or v == "" else v
