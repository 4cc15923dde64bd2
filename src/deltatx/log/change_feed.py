"""The change data feed, at the log level: which rows of which files each version changed.

A version's changes come from its ``cdc`` actions alone when it has any; otherwise its
``add`` actions (``dataChange = true``) are inserted rows and its ``remove`` actions deleted
rows. A file removed and re-added under the same path with another deletion vector (a
deletion-vector DELETE written without change files) changed exactly the rows where the two
vectors differ. Reading a range is refused when a version in it was written while
``delta.enableChangeDataFeed`` was off: its changes were never recorded.

This module decides *what* to read, as picklable :class:`ChangeFile` entries; reading their
rows is an engine's job (the Spark data source reads them task by task with pyarrow).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from deltatx.errors import ChangeDataNotRecordedError, InvalidArgumentError, VersionNotFoundError
from deltatx.kernel.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    Metadata,
    RemoveFile,
)
from deltatx.kernel.table_configuration import CHANGE_DATA_FEED
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.delta_log import DeltaLog, to_millis

CHANGE_TYPE_COLUMN = "_change_type"
"""The column of change data files (and of change feed rows) saying what happened to a row."""

COMMIT_VERSION_COLUMN = "_commit_version"
"""The column of change feed rows holding the version that made the change."""

COMMIT_TIMESTAMP_COLUMN = "_commit_timestamp"
"""The column of change feed rows holding when that version was committed."""

CHANGE_FEED_COLUMNS = (CHANGE_TYPE_COLUMN, COMMIT_VERSION_COLUMN, COMMIT_TIMESTAMP_COLUMN)
"""The columns a change feed read adds to the table's columns, in order."""

CHANGE_DATA_DIR = "_change_data"
"""The directory under the table root that holds change data files."""


class ChangeType(StrEnum):
    """What a change feed row says happened to a row of the table."""

    INSERT = "insert"
    DELETE = "delete"
    UPDATE_PREIMAGE = "update_preimage"
    UPDATE_POSTIMAGE = "update_postimage"


@dataclass(frozen=True, slots=True)
class ChangeFile:
    """One file's share of a version's change rows.

    Attributes:
        version: The version that made the changes.
        timestamp: When it was committed (ms since the epoch).
        path: The file, as its action names it (relative to the table root, or a URI).
        partition_values: ``(column, value)`` pairs, values as the log spells them.
        size: The file's size in bytes (0 when the action does not say).
        change_type: What happened to every row read from the file; None for a change data
            file, whose rows carry their own ``_change_type``.
        deletion_vector: Rows of the file to skip (the vector the action carries).
        only_rows: When set, only these row positions are read (a file whose deletion vector
            alone changed); ``deletion_vector`` is then None.
    """

    version: int
    timestamp: int
    path: str
    partition_values: tuple[tuple[str, str | None], ...]
    size: int
    change_type: ChangeType | None
    deletion_vector: DeletionVectorDescriptor | None = None
    only_rows: tuple[int, ...] | None = None


DvRows = Callable[[AddFile | RemoveFile], frozenset[int]]
"""The deleted rows of a file action's deletion vector."""


def version_change_files(
    actions: Sequence[Action], *, version: int, timestamp: int, dv_rows: DvRows
) -> list[ChangeFile]:
    """The change files of one commit, from its actions.

    Args:
        actions: The commit's actions.
        version: Its version.
        timestamp: Its commit timestamp (ms).
        dv_rows: Reads a file action's deletion vector (only called for a file removed and
            re-added under the same path in this commit).
    """

    def entry(
        a: AddFile | RemoveFile | AddCDCFile, change: ChangeType | None, **rest: object
    ) -> ChangeFile:
        values = tuple(sorted((a.partition_values or {}).items()))
        return ChangeFile(
            version=version,
            timestamp=timestamp,
            path=a.path,
            partition_values=values,
            size=a.size or 0,
            change_type=change,
            **rest,  # type: ignore[arg-type]
        )

    cdc = [a for a in actions if isinstance(a, AddCDCFile)]
    if cdc:
        return [entry(a, None) for a in cdc]
    adds = {a.path: a for a in actions if isinstance(a, AddFile) and a.data_change}
    removes = {r.path: r for r in actions if isinstance(r, RemoveFile) and r.data_change}
    out: list[ChangeFile] = []
    for path, removed in removes.items():
        added = adds.get(path)
        if added is None:
            out.append(entry(removed, ChangeType.DELETE, deletion_vector=removed.deletion_vector))
            continue
        before, after = dv_rows(removed), dv_rows(added)
        if after - before:
            out.append(entry(added, ChangeType.DELETE, only_rows=tuple(sorted(after - before))))
        if before - after:
            out.append(entry(added, ChangeType.INSERT, only_rows=tuple(sorted(before - after))))
    for path, added in adds.items():
        if path not in removes:
            out.append(entry(added, ChangeType.INSERT, deletion_vector=added.deletion_vector))
    return out


def inserted_files(adds: Iterable[AddFile], *, version: int, timestamp: int) -> list[ChangeFile]:
    """Live files read as ``insert`` rows of ``version`` (a stream's starting snapshot).

    Args:
        adds: The files, in the order their rows are delivered.
        version: The version the rows are reported under.
        timestamp: That version's commit timestamp (ms).
    """
    return [
        ChangeFile(
            version=version,
            timestamp=timestamp,
            path=a.path,
            partition_values=tuple(sorted((a.partition_values or {}).items())),
            size=a.size or 0,
            change_type=ChangeType.INSERT,
            deletion_vector=a.deletion_vector,
        )
        for a in adds
    ]


def version_timestamp(log: DeltaLog, version: int, actions: Iterable[Action]) -> int:
    """A version's ``_commit_timestamp`` (ms): :func:`commit_timestamp`, else its file's time."""
    timestamp = commit_timestamp(actions)
    return log.commit_timestamp(version) if timestamp is None else timestamp


def records_changes(metadata: Metadata) -> bool:
    """Whether a table with this metadata records its change data feed."""
    return metadata.configuration.get(CHANGE_DATA_FEED, "false").strip().lower() == "true"


def commit_timestamp(actions: Iterable[Action]) -> int | None:
    """A commit's ``_commit_timestamp`` (ms) from its actions, or None when they hold none.

    The in-commit timestamp when the table keeps them; otherwise ``commitInfo.timestamp``, the
    time deltatx's history and time travel use, and the one delta-rs reports. A commit with
    neither falls back to its file's modification time (see :func:`changes_between`).
    """
    for a in actions:
        if isinstance(a, CommitInfo):
            return a.commit_timestamp
    return None


def _first_version(log: DeltaLog, millis: int, *, after: bool) -> int | None:
    """The first version committed at or after ``millis`` (``after``), else the last before.

    None when there is no such version.
    """
    versions = sorted(log.commit_modification_times())
    cache: dict[int, int] = {}

    def ts(i: int) -> int:
        if i not in cache:
            cache[i] = log.commit_timestamp(versions[i])
        return cache[i]

    if after:
        index = bisect.bisect_left(range(len(versions)), millis, key=ts)
        return versions[index] if index < len(versions) else None
    index = bisect.bisect_right(range(len(versions)), millis, key=ts) - 1
    return versions[index] if index >= 0 else None


def version_range(
    log: DeltaLog,
    *,
    starting_version: int | None = None,
    ending_version: int | None = None,
    starting_timestamp: int | str | datetime | None = None,
    ending_timestamp: int | str | datetime | None = None,
) -> tuple[int, int]:
    """The versions ``[start, end]`` a change feed read covers.

    A starting timestamp selects the first version committed at or after it; an ending
    timestamp the last version committed at or before it. Without an end the range ends at the
    latest version; an end past the latest version is clamped to it.

    Raises:
        InvalidArgumentError: No start, both a version and a timestamp for one end, a
            negative version or an end before the start.
        VersionNotFoundError: The start is after the latest version, or no commit falls in
            the timestamp range.
        TableNotFoundError: There is no table at the path.
    """
    if starting_version is not None and starting_timestamp is not None:
        raise InvalidArgumentError("give a starting version or a starting timestamp, not both")
    if ending_version is not None and ending_timestamp is not None:
        raise InvalidArgumentError("give an ending version or an ending timestamp, not both")
    if starting_version is None and starting_timestamp is None:
        raise InvalidArgumentError(
            "reading the change data feed needs a starting version or a starting timestamp"
        )
    latest = log.latest_version()
    if starting_version is not None:
        if starting_version < 0:
            raise InvalidArgumentError(f"starting version must be >= 0, got {starting_version}")
        start = starting_version
    else:
        assert starting_timestamp is not None
        first = _first_version(log, to_millis(starting_timestamp), after=True)
        if first is None:
            raise VersionNotFoundError(
                f"{log.table_path}: no version was committed at or after {starting_timestamp!r} "
                f"(the latest version is {latest})"
            )
        start = first
    if start > latest:
        raise VersionNotFoundError(
            f"{log.table_path}: the change data feed cannot start at version {start}; the "
            f"latest version is {latest}"
        )
    if ending_timestamp is not None:
        last = _first_version(log, to_millis(ending_timestamp), after=False)
        end = -1 if last is None else last
    else:
        end = latest if ending_version is None else min(ending_version, latest)
    if ending_version is not None and ending_version < start:
        raise InvalidArgumentError(
            f"the ending version {ending_version} is before the starting version {start}"
        )
    if end < start:
        raise VersionNotFoundError(
            f"{log.table_path}: no version was committed between {starting_timestamp!r} and "
            f"{ending_timestamp!r}"
            if starting_timestamp is not None
            else f"{log.table_path}: no version of the range starts at or after {start} and "
            f"was committed at or before {ending_timestamp!r}"
        )
    return start, end


def changes_between(log: DeltaLog, start: int, end: int) -> list[ChangeFile]:
    """The change files of versions ``start`` to ``end`` (inclusive), in version order.

    This is the per-commit entry point a streaming reader calls (``start == end``) as well
    as the batch reader's.

    Raises:
        ChangeDataNotRecordedError: A version in the range was written while the table did
            not record its change data feed.
        VersionNotFoundError: A version's commit file is gone.
    """
    if start > end:
        return []
    metadata = log.snapshot(start).metadata
    reader = DvReader(log)
    out: list[ChangeFile] = []
    for version in range(start, end + 1):
        actions = log.read_commit(version)
        for a in actions:
            if isinstance(a, Metadata):
                metadata = a
        if not records_changes(metadata):
            raise ChangeDataNotRecordedError(
                f"{log.table_path}: change data was not recorded for version {version} (the "
                f"table property {CHANGE_DATA_FEED} was not true then), so the change data "
                f"feed of versions {start} to {end} cannot be read. Read a range that starts "
                f"after the property was turned on.",
                version=version,
            )
        out.extend(
            version_change_files(
                actions,
                version=version,
                timestamp=version_timestamp(log, version, actions),
                dv_rows=reader.rows_of,
            )
        )
    return out


__all__ = [
    "CHANGE_DATA_DIR",
    "CHANGE_FEED_COLUMNS",
    "CHANGE_TYPE_COLUMN",
    "COMMIT_TIMESTAMP_COLUMN",
    "COMMIT_VERSION_COLUMN",
    "ChangeFile",
    "ChangeType",
    "changes_between",
    "commit_timestamp",
    "inserted_files",
    "records_changes",
    "version_change_files",
    "version_range",
    "version_timestamp",
]
