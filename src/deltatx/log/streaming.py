"""What a streaming read of a table delivers, commit by commit, and where it stands.

A stream's position is a :class:`StreamOffset`: a table version, the index of the last file
delivered within it, and whether that version is the *starting snapshot* (every live file of
the version, read once when a stream starts without ``startingVersion``) or a single commit.
Files are delivered in log order: the starting snapshot's files (oldest first), then the
``add`` actions of each later commit in the order the commit lists them.

Every commit the stream passes is judged against the table's metadata and protocol the stream
started with (see :class:`StreamingLog`): a commit that changes them stops the stream, a commit
that removes rows stops it unless change commits are skipped, and a commit that only
reorganises files (every action ``dataChange = false``, as OPTIMIZE and REORG write) delivers
nothing.

A stream of the change data feed delivers :class:`~deltatx.log.change_feed.ChangeFile` entries
instead of ``add`` actions: the starting snapshot's files as inserts, then each commit's change
files (:func:`~deltatx.log.change_feed.changes_between`). Commits that remove or rewrite rows
are what such a stream is for, so they never stop it; metadata changes still do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from deltatx.errors import (
    ChangeDataNotRecordedError,
    InvalidArgumentError,
    StreamDataChangedError,
    StreamingSourceError,
    StreamMetadataChangedError,
    VersionNotFoundError,
)
from deltatx.kernel.actions import AddFile, CommitInfo, Metadata, ProtocolAction, RemoveFile
from deltatx.kernel.schema import parse_schema
from deltatx.log.change_feed import (
    ChangeFile,
    changes_between,
    inserted_files,
    version_timestamp,
)
from deltatx.log.delta_log import DeltaLog, to_millis

OFFSET_FORMAT_VERSION = 1
"""The ``sourceVersion`` written into every offset; offsets of another format are refused."""


@dataclass(frozen=True, slots=True)
class StreamOffset:
    """A position in a table's stream: everything up to and including it was delivered.

    Attributes:
        reservoir_id: The table's ``metaData.id``, so an offset is never applied to another
            table created at the same path.
        reservoir_version: The version the position is in.
        index: The last delivered file of that version (-1: none of it yet).
        is_starting_version: The version is read as a whole snapshot, not as one commit.
    """

    reservoir_id: str
    reservoir_version: int
    index: int
    is_starting_version: bool

    def to_dict(self) -> dict[str, Any]:
        """The offset as Spark stores it in the query's checkpoint (plain JSON values)."""
        return {
            "sourceVersion": OFFSET_FORMAT_VERSION,
            "reservoirId": self.reservoir_id,
            "reservoirVersion": self.reservoir_version,
            "index": self.index,
            "isStartingVersion": self.is_starting_version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, table_id: str) -> StreamOffset:
        """Reads an offset from a checkpoint, checking it belongs to the table being read.

        Raises:
            InvalidArgumentError: The offset is of another format or another table.
        """
        if data.get("sourceVersion") != OFFSET_FORMAT_VERSION:
            raise InvalidArgumentError(
                f"the query's checkpoint holds a Delta stream offset of an unknown format "
                f"({dict(data)!r}); start the query with a new checkpoint location"
            )
        if data.get("reservoirId") != table_id:
            raise InvalidArgumentError(
                f"the query's checkpoint was written for the table with id "
                f"{data.get('reservoirId')!r}, but the table at this path now has id "
                f"{table_id!r} (it was deleted and created again); start the query with a new "
                "checkpoint location"
            )
        return cls(
            reservoir_id=table_id,
            reservoir_version=int(data["reservoirVersion"]),
            index=int(data["index"]),
            is_starting_version=bool(data["isStartingVersion"]),
        )


@dataclass(frozen=True, slots=True)
class StreamFile:
    """A file the stream delivers, with its position.

    Attributes:
        version: The version it belongs to.
        index: Its place among that version's files.
        file: The ``add`` action (appended rows), or the change file of a change feed stream.
    """

    version: int
    index: int
    file: AddFile | ChangeFile


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """Admission control: how much one micro-batch may take (None: no limit).

    A batch always takes at least one file, so a file larger than ``max_bytes`` still moves
    the stream forward.
    """

    max_files: int | None = None
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class _Step:
    version: int
    is_starting_version: bool
    files: tuple[AddFile | ChangeFile, ...]
    problem: StreamingSourceError | ChangeDataNotRecordedError | None = None


def starting_version_at(log: DeltaLog, timestamp: int | str | datetime) -> int:
    """The first version committed at or after ``timestamp`` (``startingTimestamp``).

    A timestamp after the latest commit gives the next version, so the stream waits for it.
    """
    millis = to_millis(timestamp)
    try:
        at_or_before = log.snapshot(timestamp=timestamp).version
    except VersionNotFoundError:
        # Earlier than every commit: the stream starts at the oldest one.
        return 0
    if log.commit_timestamp(at_or_before) >= millis:
        return at_or_before
    return at_or_before + 1


class StreamingLog:
    """The files a stream delivers between offsets, judged against its starting state.

    Args:
        log: The table's log.
        metadata: The table metadata the stream reads with.
        protocol: The protocol in force when the stream started.
        skip_change_commits: Pass over commits that remove rows instead of failing.
        change_feed: Deliver change files (``readChangeFeed``) instead of ``add`` actions.
    """

    def __init__(
        self,
        log: DeltaLog,
        *,
        metadata: Metadata,
        protocol: ProtocolAction,
        skip_change_commits: bool,
        change_feed: bool = False,
    ) -> None:
        """See the class docstring."""
        self.log = log
        self.metadata = metadata
        self.protocol = protocol
        self.skip_change_commits = skip_change_commits
        self.change_feed = change_feed

    def starting_offset(self, version: int, *, snapshot: bool) -> StreamOffset:
        """The offset before the first file of ``version`` (its snapshot, or its commit)."""
        return StreamOffset(self.metadata.id, version, -1, snapshot)

    def files_after(
        self,
        start: StreamOffset,
        limits: ReadLimits,
        *,
        last_version: int | None = None,
    ) -> tuple[list[StreamFile], StreamOffset]:
        """The files the next micro-batch takes after ``start``, and the offset it ends at.

        The batch stops before a commit the stream cannot pass, so the rows before it are
        delivered first; the next call, with no rows before that commit, raises. Without new
        files the offset stays ``start``. A change feed stream takes each commit's change
        files whole (a batch may pass the limits by one commit); its starting snapshot is
        split by file.

        Args:
            start: Where the previous batch ended.
            limits: How much the batch may take.
            last_version: Read no commit after this version (``Trigger.AvailableNow``).

        Raises:
            StreamMetadataChangedError: The next commit changes metadata or protocol.
            StreamDataChangedError: The next commit removes rows, and they are not skipped
                (never in a change feed stream).
            ChangeDataNotRecordedError: A change feed stream reached a commit written while
                the table did not record its change data feed.
        """
        out: list[StreamFile] = []
        size = 0
        end = start
        for step in self._steps(start, last_version):
            if step.problem is not None:
                if out:
                    return out, end
                raise step.problem
            first = start.index + 1 if _same_version(step, start) else 0
            if self.change_feed and not step.is_starting_version:
                # A commit's changes go in one batch, so an update's pre- and post-images
                # arrive together.
                if out and _full(limits, len(out), size):
                    return out, end
                for i in range(first, len(step.files)):
                    out.append(StreamFile(step.version, i, step.files[i]))
                    size += step.files[i].size or 0
                end = StreamOffset(start.reservoir_id, step.version + 1, -1, False)
                continue
            for i in range(first, len(step.files)):
                file = step.files[i]
                if out and _full(limits, len(out), size):
                    return out, StreamOffset(
                        start.reservoir_id, step.version, i - 1, step.is_starting_version
                    )
                out.append(StreamFile(step.version, i, file))
                size += file.size or 0
            end = StreamOffset(start.reservoir_id, step.version + 1, -1, False)
        # Without new files the stream stays put, so Spark runs no empty micro-batch.
        return out, end if out else start

    def files_between(self, start: StreamOffset, end: StreamOffset) -> list[StreamFile]:
        """The files after ``start`` up to and including ``end`` (one planned micro-batch).

        Raises:
            StreamingSourceError: A commit in the range cannot be passed (the log changed).
            ChangeDataNotRecordedError: A change feed commit in the range was not recorded.
        """
        out: list[StreamFile] = []
        low, high = _position(start), _position(end)
        if high <= low:
            return out
        for step in self._steps(start, end.reservoir_version):
            flag = 0 if step.is_starting_version else 1
            if (step.version, flag, -1) >= high:
                break
            if step.problem is not None:
                raise step.problem
            for i, file in enumerate(step.files):
                if low < (step.version, flag, i) <= high:
                    out.append(StreamFile(step.version, i, file))
        return out

    # -- reading the log ----------------------------------------------------------------------

    def _steps(self, start: StreamOffset, last_version: int | None) -> Iterator[_Step]:
        version = start.reservoir_version
        if start.is_starting_version:
            snapshot = self.log.snapshot(version)
            files = sorted(snapshot.add_files(), key=lambda f: (f.modification_time, f.path))
            if self.change_feed:
                timestamp = version_timestamp(self.log, version, self.log.read_commit(version))
                inserts = inserted_files(files, version=version, timestamp=timestamp)
                yield _Step(version, True, tuple(inserts))
            else:
                yield _Step(version, True, tuple(files))
            version += 1
        latest = self.log.latest_version()
        if last_version is not None:
            latest = min(latest, last_version)
        while version <= latest:
            yield self._judge(version)
            version += 1

    def _judge(self, version: int) -> _Step:
        actions = self.log.read_commit(version)
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        operation = (info.operation if info is not None else None) or "an unnamed operation"
        changed = self._metadata_change(actions)
        if changed is not None:
            return _Step(
                version,
                False,
                (),
                StreamMetadataChangedError(
                    f"The streaming read of {self.log.table_path} stopped at version {version}: "
                    f"that commit ({operation}) {changed}. A stream keeps the schema, "
                    "partitioning, properties and protocol it started with, so it must be "
                    "restarted to go on; the restarted query reads with the table's new "
                    "metadata from where it stopped (drop startingVersion/startingTimestamp "
                    "when restarting from the same checkpoint).",
                    table_path=self.log.table_path,
                    version=version,
                ),
            )
        if self.change_feed:
            return self._changes(version)
        removes_rows = any(isinstance(a, RemoveFile) and a.data_change for a in actions)
        if removes_rows:
            if self.skip_change_commits:
                return _Step(version, False, ())
            return _Step(
                version,
                False,
                (),
                StreamDataChangedError(
                    f"The streaming read of {self.log.table_path} stopped at version {version}: "
                    f"that commit ({operation}) removed or rewrote existing rows, which a stream "
                    "of appended rows cannot deliver. Set the option skipChangeCommits to true "
                    "to pass over such commits (their changes are not delivered), or restart "
                    f"the query from a later version with startingVersion={version + 1} and a "
                    "new checkpoint location.",
                    table_path=self.log.table_path,
                    version=version,
                ),
            )
        adds = tuple(a for a in actions if isinstance(a, AddFile) and a.data_change)
        return _Step(version, False, adds)

    def _changes(self, version: int) -> _Step:
        try:
            return _Step(version, False, tuple(changes_between(self.log, version, version)))
        except ChangeDataNotRecordedError as err:
            problem = ChangeDataNotRecordedError(
                f"The streaming read of the change data feed of {self.log.table_path} stopped "
                f"at version {version}: {err} Restart the query with a new checkpoint location "
                "and a startingVersion at or after the version that turned the property on.",
                version=version,
            )
            return _Step(version, False, (), problem)

    def _metadata_change(self, actions: list[Any]) -> str | None:
        for action in actions:
            if isinstance(action, ProtocolAction) and action != self.protocol:
                return (
                    f"changed the table protocol (reader version {action.min_reader_version}, "
                    f"writer version {action.min_writer_version})"
                )
            if isinstance(action, Metadata):
                pinned = self.metadata
                if action.id != pinned.id:
                    return "replaced the table (a new table id)"
                if parse_schema(action.schema_string) != parse_schema(pinned.schema_string):
                    return "changed the table schema"
                if [c.lower() for c in action.partition_columns] != [
                    c.lower() for c in pinned.partition_columns
                ]:
                    return "changed the partition columns"
                if action.configuration != pinned.configuration:
                    keys = sorted(
                        k
                        for k in {*action.configuration, *pinned.configuration}
                        if action.configuration.get(k) != pinned.configuration.get(k)
                    )
                    return f"changed the table properties {', '.join(keys)}"
        return None


def _same_version(step: _Step, offset: StreamOffset) -> bool:
    return (
        step.version == offset.reservoir_version
        and step.is_starting_version == offset.is_starting_version
    )


def _position(offset: StreamOffset) -> tuple[int, int, int]:
    # A version's starting snapshot comes before its (never separately read) commit.
    return (offset.reservoir_version, 0 if offset.is_starting_version else 1, offset.index)


def _full(limits: ReadLimits, files: int, size: int) -> bool:
    if limits.max_files is not None and files >= limits.max_files:
        return True
    return limits.max_bytes is not None and size >= limits.max_bytes


__all__ = [
    "OFFSET_FORMAT_VERSION",
    "ReadLimits",
    "StreamFile",
    "StreamOffset",
    "StreamingLog",
    "starting_version_at",
]
