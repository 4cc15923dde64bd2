"""The two sides of a conflict check: the commit that tries to land and a commit that won.

:class:`WinningCommit` sorts a winner's actions into the views each check reads, once;
:class:`PendingCommit` holds what the pending transaction read and writes. The checks
themselves are in :mod:`deltatx.kernel.conflicts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from deltatx.kernel.actions import (
    Action,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
)
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.operations import Operation
from deltatx.kernel.schema import StructType
from deltatx.kernel.transaction import ReadSet


@dataclass(frozen=True, slots=True)
class WinningCommit:
    """A commit that landed after the pending transaction's read version.

    Attributes:
        version: Its version.
        actions: Its actions, as read from ``<version>.json``.
    """

    version: int
    actions: tuple[Action, ...]
    _commit_info: CommitInfo | None = field(init=False, repr=False, compare=False)
    _protocol: ProtocolAction | None = field(init=False, repr=False, compare=False)
    _metadata: Metadata | None = field(init=False, repr=False, compare=False)
    _adds: tuple[AddFile, ...] = field(init=False, repr=False, compare=False)
    _removes: tuple[RemoveFile, ...] = field(init=False, repr=False, compare=False)
    _txns: tuple[SetTransaction, ...] = field(init=False, repr=False, compare=False)
    _domains: tuple[DomainMetadata, ...] = field(init=False, repr=False, compare=False)
    # Only files added (and actions no check looks at): the appends check is the only one.
    _only_adds: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Derived once, in one pass: a checker looks at each view for every pending commit
        # it validates.
        commit_info: CommitInfo | None = None
        protocol: ProtocolAction | None = None
        metadata: Metadata | None = None
        adds: list[AddFile] = []
        removes: list[RemoveFile] = []
        txns: list[SetTransaction] = []
        domains: list[DomainMetadata] = []
        for a in self.actions:
            if isinstance(a, AddFile):
                adds.append(a)
            elif isinstance(a, RemoveFile):
                removes.append(a)
            elif isinstance(a, CommitInfo):
                commit_info = a if commit_info is None else commit_info
            elif isinstance(a, SetTransaction):
                txns.append(a)
            elif isinstance(a, DomainMetadata):
                domains.append(a)
            elif isinstance(a, ProtocolAction):
                protocol = a if protocol is None else protocol
            elif isinstance(a, Metadata):
                metadata = a if metadata is None else metadata
        put = object.__setattr__
        put(self, "_commit_info", commit_info)
        put(self, "_protocol", protocol)
        put(self, "_metadata", metadata)
        put(self, "_adds", tuple(adds))
        put(self, "_removes", tuple(removes))
        put(self, "_txns", tuple(txns))
        put(self, "_domains", tuple(domains))
        put(
            self,
            "_only_adds",
            protocol is None and metadata is None and not (removes or txns or domains),
        )

    @property
    def commit_info(self) -> CommitInfo | None:
        """The commit's ``commitInfo``, if it wrote one."""
        return self._commit_info

    @property
    def operation(self) -> str:
        """``commitInfo.operation``, or ``"TRANSACTION"`` when absent (as delta-spark reports)."""
        ci = self._commit_info
        return ci.operation if ci is not None and ci.operation else "TRANSACTION"

    @property
    def protocol(self) -> ProtocolAction | None:
        """The protocol action, if the commit changed the protocol."""
        return self._protocol

    @property
    def metadata(self) -> Metadata | None:
        """The metaData action, if the commit changed the metadata."""
        return self._metadata

    @property
    def adds(self) -> tuple[AddFile, ...]:
        """The files it added."""
        return self._adds

    @property
    def removes(self) -> tuple[RemoveFile, ...]:
        """The files it removed."""
        return self._removes

    @property
    def txns(self) -> tuple[SetTransaction, ...]:
        """Its application transaction (``txn``) actions."""
        return self._txns

    @property
    def domains(self) -> tuple[DomainMetadata, ...]:
        """Its domain metadata actions."""
        return self._domains

    @property
    def is_blind_append(self) -> bool:
        """True only when ``commitInfo.isBlindAppend`` is true; a missing flag is not blind."""
        ci = self._commit_info
        return ci is not None and ci.is_blind_append is True


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """The transaction that tries to commit.

    Attributes:
        read_version: The snapshot version it read (-1 when it creates the table).
        read_set: What it read.
        actions: What it commits (without commitInfo).
        operation: Its operation.
        isolation_level: The level after the SnapshotIsolation downgrade (the Delta code).
        is_blind_append: Whether it is a blind append (written as ``isBlindAppend``).
        schema: The read snapshot's schema (types partition values and statistics).
        partition_columns: The read snapshot's partition columns.
        deletion_vectors: Whether the table writes deletion vectors (property on and feature
            named); a compaction's race with a DML is then settled by row position.
        compaction_baseline: For a compaction settled against winners: each source file's
            deletion vector as it was when the compaction read it. Positions in the output
            count from that state, however many winners have changed the source since.
    """

    read_version: int
    read_set: ReadSet
    actions: tuple[Action, ...]
    operation: Operation
    isolation_level: IsolationLevel
    is_blind_append: bool
    schema: StructType
    partition_columns: tuple[str, ...]
    deletion_vectors: bool = False
    compaction_baseline: Mapping[str, DeletionVectorDescriptor | None] = field(default_factory=dict)
