"""A transaction against one table: a pinned snapshot, a read set, staged actions.

Phase one (read) goes through :meth:`OptimisticTransaction.scan` and friends so that every read
is recorded; phase two (write) stages actions whose data files are already written but
invisible; phase three is :meth:`OptimisticTransaction.commit`. Several statements may stage
into one transaction, and later statements see the earlier ones' staged changes, so they all
publish as one version or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from deltatx.errors import (
    InvalidArgumentError,
    InvalidTableError,
    TransactionStateError,
    UnsupportedFeatureError,
)
from deltatx.kernel.actions import (
    Action,
    AddCDCFile,
    AddFile,
    DomainMetadata,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
)
from deltatx.kernel.column_mapping import FEATURE as COLUMN_MAPPING
from deltatx.kernel.column_mapping import is_mapped, mapped_metadata, mode_of
from deltatx.kernel.deletion_vectors import descriptor_location
from deltatx.kernel.evaluation import file_may_match
from deltatx.kernel.expressions import TRUE, Expression
from deltatx.kernel.features import protocol_with_features, writer_features
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import TableProperties
from deltatx.kernel.schema import StructType
from deltatx.kernel.table_configuration import TableConfiguration
from deltatx.kernel.transaction import ReadTracker
from deltatx.log.commit import CommitResult, commit
from deltatx.log.deletion_vectors import DvReader, write_dvs

if TYPE_CHECKING:
    from deltatx.log.delta_log import DeltaLog
    from deltatx.log.snapshot import Snapshot

# A staged file's identity: its path, or (path, vector id) when it has a deletion vector (a
# string never equals a tuple, and the common key costs no tuple).
FileKey = str | tuple[str, str]


class TransactionState(StrEnum):
    """Where a transaction is in its life."""

    ACTIVE = "active"
    COMMITTED = "committed"
    ABORTED = "aborted"


def _key(action: AddFile | RemoveFile) -> FileKey:
    dv = action.deletion_vector
    return action.path if dv is None else (action.path, dv.unique_id)


class OptimisticTransaction:
    """One optimistic transaction on a table (no Spark here: files are given, not written).

    Attributes:
        log: The table's log.
        snapshot: The pinned snapshot, or None when the table does not exist yet.
        read_version: The pinned version (-1 for a new table).
    """

    def __init__(self, log: DeltaLog, snapshot: Snapshot | None) -> None:
        """Pins ``snapshot``; use :meth:`DeltaLog.snapshot` to get one."""
        self.log = log
        self.snapshot = snapshot
        self.read_version = -1 if snapshot is None else snapshot.version
        self.tracker = ReadTracker()
        self.state = TransactionState.ACTIVE
        self.result: CommitResult | None = None
        self._adds: dict[FileKey, AddFile] = {}
        self._removes: dict[FileKey, RemoveFile] = {}
        self._metadata: Metadata | None = None
        self._protocol: ProtocolAction | None = None
        self._txns: dict[str, SetTransaction] = {}
        self._domains: dict[str, DomainMetadata] = {}
        self._operations: list[Operation] = []
        self._metrics: dict[str, int] = {}
        self._configuration: TableConfiguration | None = None
        self._annotations: dict[str, Any] = {}
        self._constraints_checked: set[str] = set()
        self._cdc: dict[str, AddCDCFile] = {}
        self._cdc_covered: set[str] = set()

    # -- what the transaction sees -------------------------------------------------------

    @property
    def metadata(self) -> Metadata:
        """The metadata in force: staged, else the snapshot's."""
        if self._metadata is not None:
            return self._metadata
        if self.snapshot is None:
            raise InvalidArgumentError("the table does not exist yet: set its metadata first")
        return self.snapshot.metadata

    @property
    def protocol(self) -> ProtocolAction:
        """The protocol in force: staged, else the snapshot's."""
        if self._protocol is not None:
            return self._protocol
        if self.snapshot is None:
            raise InvalidArgumentError("the table does not exist yet: set its protocol first")
        return self.snapshot.protocol

    @property
    def has_protocol(self) -> bool:
        """Whether there is a protocol in force (the table exists or one is staged)."""
        return self._protocol is not None or self.snapshot is not None

    @property
    def has_metadata(self) -> bool:
        """Whether there is metadata to read (the table exists or is being created)."""
        return self._metadata is not None or self.snapshot is not None

    @property
    def configuration(self) -> TableConfiguration:
        """How the table is configured, staged changes included (derived once per change)."""
        if self._metadata is None and self._protocol is None and self.snapshot is not None:
            return self.snapshot.table_configuration
        metadata, protocol = self.metadata, self.protocol
        cached = self._configuration
        if cached is None or cached.metadata is not metadata or cached.protocol is not protocol:
            cached = TableConfiguration.of(protocol, metadata)
            self._configuration = cached
        return cached

    @property
    def schema(self) -> StructType:
        """The schema in force."""
        return self.configuration.schema

    @property
    def partition_columns(self) -> tuple[str, ...]:
        """The partition columns in force."""
        return self.metadata.partition_columns

    @property
    def properties(self) -> TableProperties:
        """The interpreted table properties in force."""
        return self.configuration.properties

    @property
    def metadata_changed(self) -> bool:
        """Whether this transaction stages a metadata change."""
        return self._metadata is not None

    def scan(self, predicate: Expression | None = None) -> list[AddFile]:
        """The live files that may hold rows matching ``predicate``, recording the read.

        Files this transaction staged itself are included but not recorded: reading one's own
        writes cannot conflict with anyone.
        """
        self._check_active()
        pred = TRUE if predicate is None else predicate
        base: list[AddFile] = []
        if self.snapshot is not None:
            base = self.snapshot.scan_files(None if predicate is None else pred)
            self.tracker.record_scan(pred, base)
        schema, parts = self.schema, self.partition_columns
        visible = [f for f in base if _key(f) not in self._removes]
        staged = [
            f
            for f in self._adds.values()
            if predicate is None or file_may_match(pred, f, schema=schema, partition_columns=parts)
        ]
        return visible + staged

    def read_whole_table(self) -> None:
        """Records that the whole table was read (e.g. an opaque self-join)."""
        self._check_active()
        self.tracker.record_whole_table()

    def record_partition_predicate(self, predicate: Expression) -> None:
        """Records a read of some partitions without reading their files."""
        self._check_active()
        self.tracker.record_partition_predicate(predicate)

    def record_row_level(self, files: list[AddFile], matched: Mapping[str, Iterable[int]]) -> None:
        """Records a deletion-vector DML's reads and matched rows (row-level concurrency)."""
        self._check_active()
        self.tracker.record_row_level(files, matched)

    def record_row_level_fallback(self, reason: str) -> None:
        """Records why row-level concurrency cannot apply; conflicts are then per file."""
        self._check_active()
        self.tracker.record_row_level_fallback(reason)

    def app_transaction_version(self, app_id: str) -> int | None:
        """The latest version committed by ``app_id``, recording that it was looked up."""
        self._check_active()
        self.tracker.record_app_id(app_id)
        if app_id in self._txns:
            return self._txns[app_id].version
        return None if self.snapshot is None else self.snapshot.app_transaction_version(app_id)

    # -- staging ---------------------------------------------------------------------------

    def add_files(self, files: list[AddFile]) -> None:
        """Stages new files."""
        self._check_active()
        adds = self._adds
        for f in files:
            # ``_key(f)``, inline: this runs once per staged file.
            dv = f.deletion_vector
            adds[f.path if dv is None else (f.path, dv.unique_id)] = f

    def remove_files(self, files: list[AddFile], *, data_change: bool = True) -> None:
        """Stages removal of live files; removing a file this transaction added un-stages it."""
        self._check_active()
        now = int(time.time() * 1000)
        for f in files:
            key = _key(f)
            if key in self._adds:
                del self._adds[key]
                continue
            self._removes[key] = f.remove(timestamp=now, data_change=data_change)

    def add_cdc_files(self, files: Iterable[AddCDCFile], *, covering: Iterable[str]) -> None:
        """Stages change data files (``cdc`` actions) recording a statement's row changes.

        Args:
            files: The change data files written.
            covering: Paths of the data files the statement added or removed; their changes
                are the ones ``files`` record.
        """
        self._check_active()
        for f in files:
            self._cdc[f.path] = f
        self._cdc_covered.update(covering)

    @property
    def staged_cdc(self) -> list[AddCDCFile]:
        """Change data files this transaction adds."""
        return list(self._cdc.values())

    def record_constraints_checked(self, files: Iterable[AddFile]) -> None:
        """Notes files whose rows were checked against the table's constraints when written."""
        self._check_active()
        self._constraints_checked.update(f.path for f in files)

    def update_metadata(self, metadata: Metadata, *, replacing: bool = False) -> None:
        """Stages a new metadata action (schema, properties, partitioning).

        With column mapping on, new columns get their ids and physical names here, before any
        data file is written under them, and the protocol is raised to name the feature.

        Args:
            metadata: The metadata to stage.
            replacing: Whether the transaction replaces the whole table (every file goes), so
                the column mapping mode may change freely.

        Raises:
            InvalidPropertyError: The column mapping mode change is not allowed.
        """
        self._check_active()
        previous = None if self.snapshot is None else self.snapshot.metadata
        metadata = mapped_metadata(
            metadata, previous, table=f"table {self.log.table_path}", replacing=replacing
        )
        self._metadata = metadata
        if is_mapped(mode_of(metadata.configuration)) and self.has_protocol:
            protocol = self.protocol
            if COLUMN_MAPPING not in writer_features(protocol):
                self.update_protocol(protocol_with_features(protocol, [COLUMN_MAPPING]))

    def update_protocol(self, protocol: ProtocolAction) -> None:
        """Stages a protocol change; never a downgrade of an existing table."""
        self._check_active()
        if self.snapshot is not None:
            old = self.snapshot.protocol
            if (
                protocol.min_reader_version < old.min_reader_version
                or protocol.min_writer_version < old.min_writer_version
            ):
                raise InvalidArgumentError("deltatx never downgrades a table's protocol")
            if protocol == old:
                return
        self._protocol = protocol

    def set_app_transaction(self, app_id: str, version: int) -> None:
        """Stages a ``txn`` action: ``app_id`` has committed ``version``."""
        self._check_active()
        self._txns[app_id] = SetTransaction(app_id, version, int(time.time() * 1000))

    def add_domain_metadata(self, domain: DomainMetadata) -> None:
        """Stages a domain metadata action."""
        self._check_active()
        self._domains[domain.domain] = domain

    def record_operation(self, operation: Operation, metrics: Mapping[str, int]) -> None:
        """Adds a statement's operation and metrics to what commitInfo will say."""
        self._check_active()
        self._operations.append(operation)
        for k, v in metrics.items():
            self._metrics[k] = self._metrics.get(k, 0) + int(v)

    def annotate(
        self,
        *,
        parameters: Mapping[str, Any] | None = None,
        metrics: Mapping[str, int] | None = None,
    ) -> None:
        """Adds facts about how the transaction ran (not what it did) to its commitInfo.

        Unlike :meth:`record_operation` this adds no statement: ``parameters`` join the
        committed operation's parameters and ``metrics`` replace same-named metrics.
        """
        self._check_active()
        self._annotations.update(parameters or {})
        self._metrics.update({k: int(v) for k, v in (metrics or {}).items()})

    def staged_actions(self) -> list[Action]:
        """Every action that :meth:`commit` will publish (commitInfo aside)."""
        out: list[Action] = []
        if self._protocol is not None:
            out.append(self._protocol)
        if self._metadata is not None:
            out.append(self._metadata)
        out.extend(self._txns.values())
        out.extend(self._domains.values())
        out.extend(self._removes.values())
        out.extend(self._adds.values())
        out.extend(self._cdc.values())
        return out

    @property
    def staged_adds(self) -> list[AddFile]:
        """Files this transaction adds."""
        return list(self._adds.values())

    @property
    def staged_removes(self) -> list[RemoveFile]:
        """Files this transaction removes."""
        return list(self._removes.values())

    # -- phase three -------------------------------------------------------------------------

    def operation(self) -> Operation:
        """The operation commitInfo records: the statement's, or a summary of several."""
        op = self._statements_operation()
        if not self._annotations:
            return op
        return replace(op, parameters={**op.parameters, **self._annotations})

    def _statements_operation(self) -> Operation:
        if len(self._operations) == 1:
            return self._operations[0]
        if not self._operations:
            return Operation(OperationName.MANUAL_UPDATE, {})
        names = [op.name.value for op in self._operations]
        changes = any(op.changes_data for op in self._operations)
        first = self._operations[0]
        params: dict[str, Any] = {"statements": names}
        return replace(first, name=_summary_name(changes), parameters=params)

    def commit(self, *, user_metadata: str | None = None) -> int:
        """Validates against concurrent commits and publishes; returns the new version.

        Raises:
            ConcurrentModificationException: A concurrent commit conflicts.
            TransactionStateError: The transaction already committed or aborted.
        """
        self._check_active()
        self._check_upgrade_alone()
        self._check_change_data_complete()
        self._consolidate_deletion_vectors()
        try:
            self.result = commit(
                self.log,
                read_snapshot=self.snapshot,
                actions=self.staged_actions(),
                operation=self.operation(),
                read_set=self.tracker.freeze(),
                operation_metrics=self._metrics,
                user_metadata=user_metadata,
                constraints_checked=frozenset(self._constraints_checked),
            )
        except BaseException:
            self.state = TransactionState.ABORTED
            raise
        self.state = TransactionState.COMMITTED
        return self.result.version

    def _consolidate_deletion_vectors(self) -> None:
        """Puts the deletion vectors this transaction wrote into one file per commit.

        Each statement writes its vectors into a file of its own; a transaction of several
        statements would otherwise publish several small DV files in one commit. Vectors in
        files that a staged remove also references (re-added as they were, e.g. by RESTORE)
        are left alone.
        """

        def location(a: AddFile | RemoveFile) -> str | None:
            dv = a.deletion_vector
            if dv is None or dv.storage_type != "u":
                return None
            try:
                return descriptor_location(dv)
            except InvalidTableError:
                return None  # left for validate_actions to refuse, naming the file

        old = {location(r) for r in self._removes.values()}
        fresh = [
            (key, add)
            for key, add in self._adds.items()
            if add.deletion_vector is not None
            and location(add) is not None
            and location(add) not in old
        ]
        if len({location(add) for _, add in fresh}) <= 1:
            return
        reader = DvReader(self.log)
        rows = [reader.rows(add.deletion_vector, data_file=add.path) for _, add in fresh]
        for (key, add), dv in zip(fresh, write_dvs(self.log, rows), strict=True):
            del self._adds[key]
            moved = replace(add, deletion_vector=dv)
            self._adds[_key(moved)] = moved

    def _check_upgrade_alone(self) -> None:
        """Refuses a protocol upgrade of an existing table committed together with data.

        The docs: a protocol change fails every concurrent write, and readers that cannot read
        the new protocol must not lose data silently; keeping the upgrade in a commit of its
        own makes it a pure metadata step that can be retried on its own.

        Raises:
            InvalidArgumentError: Data changes are staged with the upgrade.
        """
        if self._protocol is None or self.snapshot is None:
            return
        before = self.snapshot.protocol
        if self._protocol.min_reader_version == before.min_reader_version and set(
            self._protocol.reader_features or ()
        ) == set(before.reader_features or ()):
            # A writer-only feature (invariants for a NOT NULL column of a replaced table)
            # changes nothing for readers; concurrent writers still fail on the protocol change.
            return
        staged: list[AddFile | RemoveFile] = [*self._adds.values(), *self._removes.values()]
        data = [a for a in staged if a.data_change]
        if data:
            raise InvalidArgumentError(
                "this transaction upgrades the table protocol (e.g. by setting "
                "delta.enableDeletionVectors) and also changes data; commit the property "
                "change in a transaction of its own first (dt.set_properties(...)), then the "
                "data change. Nothing was committed."
            )

    def _check_change_data_complete(self) -> None:
        """Refuses a commit whose change data files leave out some of its data changes.

        A reader of the change data feed takes a version's changes from its ``cdc`` actions
        alone when it has any, so a data change no change file records would be lost from
        the feed (e.g. an append staged together with an UPDATE in one transaction).

        Raises:
            UnsupportedFeatureError: A staged data change is not recorded in the cdc files.
        """
        if not self._cdc:
            return
        staged: list[AddFile | RemoveFile] = [*self._adds.values(), *self._removes.values()]
        missing = sorted({a.path for a in staged if a.data_change} - self._cdc_covered)
        if missing:
            raise UnsupportedFeatureError(
                "the table records its change data feed, and this transaction combines a "
                "statement that writes change data files (UPDATE, DELETE, MERGE) with one whose "
                f"changes they do not record (file {missing[0]}); deltatx cannot yet combine "
                "them in one commit. Commit them in separate transactions. Nothing was "
                "committed.",
                feature="changeDataFeed",
            )

    def abort(self) -> None:
        """Drops the staged work; the data files it wrote stay invisible for VACUUM."""
        if self.state is TransactionState.ACTIVE:
            self.state = TransactionState.ABORTED

    def _check_active(self) -> None:
        if self.state is not TransactionState.ACTIVE:
            raise TransactionStateError(f"the transaction is {self.state.value}; begin a new one")


def _summary_name(changes_data: bool) -> OperationName:
    return OperationName.WRITE if changes_data else OperationName.MANUAL_UPDATE
