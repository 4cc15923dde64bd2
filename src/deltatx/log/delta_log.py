"""The entry point to a table's transaction log: snapshots, time travel, history, checkpoints."""

from __future__ import annotations

import bisect
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from deltatx.errors import (
    InvalidArgumentError,
    InvalidTableError,
    TableNotFoundError,
    VersionNotFoundError,
    VersionNotReadableError,
)
from deltatx.kernel.actions import Action, AddFile, CommitInfo
from deltatx.kernel.codec import action_from_json_obj, parse_commit
from deltatx.kernel.log_paths import LogFileKind, commit_name, parse_log_file
from deltatx.kernel.log_segment import LogSegment, build_log_segment
from deltatx.log import _state
from deltatx.log.checkpoint import read_checkpoint, read_last_checkpoint, write_checkpoint
from deltatx.log.deletion_vectors import dv_file_location
from deltatx.log.snapshot import CommitData, Snapshot, TableState, empty_state, replay
from deltatx.storage.location import Location
from deltatx.storage.log_store import FileStatus, LogStore

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One commit in a table's history.

    Attributes:
        version: The commit's version.
        timestamp: ``commitInfo.timestamp``, else the commit file's modification time (ms).
        commit_info: The commit's ``commitInfo`` action, when it has one.
    """

    version: int
    timestamp: int
    commit_info: CommitInfo | None


def commit_info_of(data: bytes, *, where: str) -> CommitInfo | None:
    """The ``commitInfo`` action of a commit file's bytes, decoding no other line.

    Raises:
        InvalidTableError: The ``commitInfo`` line is malformed.
    """
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if b'"commitInfo"' not in line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # a malformed line is the strict reader's to report
        if type(obj) is dict and len(obj) == 1 and "commitInfo" in obj:
            action = action_from_json_obj(obj, where=f"{where} line {lineno}")
            if isinstance(action, CommitInfo):
                return action
    return None


def _sample(paths: list[str], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    return shown if len(paths) <= limit else f"{shown}, ... and {len(paths) - limit} more"


def to_millis(timestamp: int | str | datetime) -> int:
    """Milliseconds since the epoch for a time-travel timestamp (strings and naive = UTC).

    Raises:
        InvalidArgumentError: The value is not a timestamp.
    """
    if isinstance(timestamp, bool):
        raise InvalidArgumentError(f"timestamp must be ms, a string or a datetime: {timestamp!r}")
    if isinstance(timestamp, int):
        return timestamp
    if isinstance(timestamp, str):
        try:
            parsed = datetime.fromisoformat(timestamp.strip())
        except ValueError:
            raise InvalidArgumentError(
                f"timestamp {timestamp!r} is not like 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM:SS'"
            ) from None
        timestamp = parsed
    if isinstance(timestamp, datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=UTC)
        return int(timestamp.timestamp() * 1000)
    raise InvalidArgumentError(f"timestamp must be ms, a string or a datetime: {timestamp!r}")


class DeltaLog:
    """A table's ``_delta_log``: reads snapshots and history, writes checkpoints.

    Attributes:
        location: Where the table lives (root, store, filesystem), resolved once.
    """

    __slots__ = ("location",)

    def __init__(self, location: Location) -> None:
        """Use :meth:`for_table`."""
        self.location = location

    @classmethod
    def for_table(
        cls, table_path: str, *, store: LogStore | None = None, fsync: bool = True
    ) -> DeltaLog:
        """The log of the table at ``table_path`` (a local path or ``file:`` URI).

        ``fsync=False`` writes a local table's commits without syncing them to disk (see
        :meth:`Location.of`).

        Raises:
            UnsupportedFeatureError: The URI names a store deltatx cannot use yet; nothing
                is read or written.
        """
        return cls(Location.of(table_path, store=store, fsync=fsync))

    @property
    def table_path(self) -> str:
        """The canonical table root."""
        return self.location.root

    @property
    def log_path(self) -> str:
        """The ``_delta_log`` directory."""
        return self.location.log_dir

    @property
    def store(self) -> LogStore:
        """The storage the log lives on."""
        return self.location.store

    def __repr__(self) -> str:
        return f"DeltaLog({self.table_path!r})"

    # -- listing -------------------------------------------------------------------------

    def _list(self, start_name: str = "") -> list[FileStatus]:
        return self.store.list_from(self.log_path, start_name)

    def _commit_statuses(self) -> list[tuple[int, FileStatus]]:
        out = []
        for s in self._list():
            f = parse_log_file(s.name)
            if f is not None and f.kind is LogFileKind.COMMIT:
                out.append((f.version, s))
        return out

    def commit_modification_times(self) -> dict[int, int]:
        """Each published commit's version -> its file's modification time (ms)."""
        return {version: status.modification_time for version, status in self._commit_statuses()}

    def latest_version(self) -> int:
        """The newest version in the log, or -1 when there is no commit."""
        hint = read_last_checkpoint(self.store, self.log_path)
        for start in ([f"{hint.version:020d}"] if hint else []) + [""]:
            versions = [
                f.last_version
                for s in self._list(start)
                if (f := parse_log_file(s.name)) is not None
            ]
            if versions:
                return max(versions)
        return -1

    def table_exists(self) -> bool:
        """Whether a Delta table (at least one commit) is at the path."""
        return self.latest_version() >= 0

    def _segment(self, version: int | None) -> tuple[LogSegment, dict[str, FileStatus]]:
        hint = read_last_checkpoint(self.store, self.log_path)
        if hint is not None and (version is None or hint.version <= version):
            statuses = self._list(f"{hint.version:020d}")
            try:
                segment = build_log_segment(
                    [s.name for s in statuses], version=version, table=self.table_path
                )
            except (InvalidTableError, VersionNotFoundError, TableNotFoundError):
                segment = None
            if segment is not None and segment.checkpoint_version is not None:
                return segment, {s.name: s for s in statuses}
            # The pointer names a checkpoint that is missing or broken: list everything.
        statuses = self._list()
        segment = build_log_segment(
            [s.name for s in statuses], version=version, table=self.table_path
        )
        return segment, {s.name: s for s in statuses}

    def _segment_skipping(
        self, version: int | None, skipped: set[int]
    ) -> tuple[LogSegment, dict[str, FileStatus]] | str:
        """The segment for ``version`` that uses none of the ``skipped`` checkpoints.

        Returns:
            The segment and the listing, or why there is none.
        """
        statuses = [
            s
            for s in self._list()
            if (f := parse_log_file(s.name)) is None
            or f.kind is LogFileKind.COMMIT
            or f.version not in skipped
        ]
        try:
            segment = build_log_segment(
                [s.name for s in statuses], version=version, table=self.table_path
            )
        except (InvalidTableError, VersionNotFoundError, TableNotFoundError) as exc:
            return str(exc)
        return segment, {s.name: s for s in statuses}

    # -- snapshots -----------------------------------------------------------------------

    def snapshot(
        self,
        version: int | None = None,
        *,
        timestamp: int | str | datetime | None = None,
    ) -> Snapshot:
        """The table at ``version``, at ``timestamp``, or (neither given) the latest version.

        ``timestamp`` selects the latest version committed at or before it: milliseconds
        since the epoch, a ``YYYY-MM-DD[ HH:MM:SS]`` string or a datetime (naive means UTC).

        Raises:
            TableNotFoundError: There is no table at the path.
            VersionNotFoundError: The version (or a version for the timestamp) does not exist.
            InvalidTableError: The log is corrupt or has a gap.
            UnsupportedFeatureError: The table needs a reader feature deltatx lacks.
        """
        if version is not None and timestamp is not None:
            raise InvalidArgumentError("give a version or a timestamp, not both")
        if timestamp is not None:
            version = self._version_at(to_millis(timestamp), timestamp)
        segment, statuses = self._segment(version)
        base = empty_state()
        skipped: set[int] = set()
        while segment.checkpoint_files:
            try:
                cp = read_checkpoint(self.store, self.log_path, segment.checkpoint_files)
            except InvalidTableError as exc:
                # A torn or corrupt checkpoint (a crash on a store without atomic writes, a
                # bad copy) is only an optimisation over the commits: fall back to an older
                # checkpoint or to the commits, as long as they can reconstruct the version.
                assert segment.checkpoint_version is not None
                skipped.add(segment.checkpoint_version)
                fallback = self._segment_skipping(version, skipped)
                if isinstance(fallback, str):
                    raise InvalidTableError(
                        f"{exc}; the log cannot be replayed without it: {fallback}"
                    ) from None
                _log.warning("%s; reading the table without that checkpoint", exc)
                segment, statuses = fallback
                continue
            base = TableState(
                protocol=cp.protocol,
                metadata=cp.metadata,
                files=cp.files,
                file_keys=_state.table_keys(cp.files, root=self.table_path),
                tombstones=cp.tombstones,
                tombstone_keys=_state.table_keys(cp.tombstones, root=self.table_path),
                app_transactions=cp.app_transactions,
                domain_metadata=cp.domain_metadata,
            )
            break
        files = segment.replay_files()
        # Read one file at a time as the replay asks, so a large log is never all in memory.
        commits = (self._read_commit_data(v, name, statuses.get(name)) for name, v in files)
        state, ts = replay(base, commits, table=self.table_path)
        if ts is None and files and files[-1][0] == commit_name(segment.version):
            status = statuses.get(files[-1][0])
            ts = None if status is None else status.modification_time
        if ts is None:
            name = commit_name(segment.version)
            ts = self._commit_timestamp(segment.version, statuses.get(name))
        return Snapshot(self.table_path, segment.version, state, timestamp=ts)

    def _read_commit_data(self, version: int, name: str, status: FileStatus | None) -> CommitData:
        path = f"{self.log_path}/{name}"
        try:
            data = self.store.read(path)
        except FileNotFoundError:
            raise InvalidTableError(f"{path}: commit file disappeared while reading") from None
        return CommitData(version, path, data, None if status is None else status.modification_time)

    def update(self, snapshot: Snapshot | None = None) -> Snapshot:
        """The latest snapshot; given a loaded one, applies only the commits after it."""
        if snapshot is None:
            return self.snapshot()
        commits: list[CommitData] = []
        version = snapshot.version + 1
        while True:
            path = f"{self.log_path}/{commit_name(version)}"
            try:
                data = self.store.read(path)
            except FileNotFoundError:
                break
            commits.append(CommitData(version, path, data))
            version += 1
        if not commits:
            if self.store.exists(f"{self.log_path}/{commit_name(snapshot.version)}"):
                return snapshot
            # The snapshot's own commit is gone (log cleanup): only a fresh load can tell.
            latest = self.snapshot()
            return snapshot if latest.version == snapshot.version else latest
        state, ts = replay(snapshot.state_to_update(), commits, table=self.table_path)
        version = commits[-1].version
        if ts is None:
            ts = self._commit_timestamp(version, None)
        return Snapshot(self.table_path, version, state, timestamp=ts, previous=snapshot)

    # -- commits and history ---------------------------------------------------------------

    def read_commit(self, version: int) -> list[Action]:
        """The actions of commit ``version``, in file order.

        Raises:
            VersionNotFoundError: There is no such commit file.
            InvalidTableError: A line is not a valid action (the message names file and line).
        """
        path = f"{self.log_path}/{commit_name(version)}"
        try:
            data = self.store.read(path)
        except FileNotFoundError:
            latest = self.latest_version()
            if latest < 0:
                raise TableNotFoundError(f"{self.table_path} is not a Delta table") from None
            raise VersionNotFoundError(
                f"{self.table_path}: commit {version} does not exist (latest version is {latest})"
            ) from None
        return parse_commit(data, where=path)

    def commit_timestamp(self, version: int) -> int:
        """``commitInfo.timestamp`` of a commit, else its file's modification time (ms)."""
        return self._commit_timestamp(version, None)

    def commit_info(self, version: int) -> CommitInfo | None:
        """The ``commitInfo`` of commit ``version``, or None when it has none.

        Only that action is decoded, so history reads stay cheap on large commits and do not
        trip over other actions (a superseded, partial ``metaData``).

        Raises:
            VersionNotFoundError: There is no such commit file.
        """
        path = f"{self.log_path}/{commit_name(version)}"
        try:
            data = self.store.read(path)
        except FileNotFoundError:
            raise VersionNotFoundError(
                f"{self.table_path}: commit {version} does not exist"
            ) from None
        return commit_info_of(data, where=path)

    def _commit_timestamp(self, version: int, status: FileStatus | None) -> int:
        try:
            info = self.commit_info(version)
        except VersionNotFoundError:
            # A checkpoint-only version (its commit was cleaned up): use the checkpoint's time.
            for s in self._list(f"{version:020d}"):
                f = parse_log_file(s.name)
                if f is not None and f.version == version:
                    return s.modification_time
            raise
        if info is not None and info.commit_timestamp is not None:
            return info.commit_timestamp
        if status is None:
            name = commit_name(version)
            status = next((s for s in self._list(name) if s.name == name), None)
            if status is None:
                raise VersionNotFoundError(f"{self.table_path}: commit {version} does not exist")
        return status.modification_time

    def _version_at(self, millis: int, original: object) -> int:
        commits = self._commit_statuses()
        if not commits:
            raise TableNotFoundError(f"{self.table_path} is not a Delta table")
        # Commit timestamps grow with versions; find the last one at or before ``millis``.
        cache: dict[int, int] = {}

        def ts(i: int) -> int:
            if i not in cache:
                cache[i] = self._commit_timestamp(commits[i][0], commits[i][1])
            return cache[i]

        index = bisect.bisect_right(range(len(commits)), millis, key=ts) - 1
        if index < 0:
            first = datetime.fromtimestamp(ts(0) / 1000, tz=UTC).isoformat()
            raise VersionNotFoundError(
                f"{self.table_path}: no version was committed at or before {original!r}; the "
                f"earliest available version {commits[0][0]} was committed at {first}"
            )
        return commits[index][0]

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """The commits, newest first (at most ``limit``).

        Raises:
            TableNotFoundError: There is no table at the path.
            InvalidArgumentError: ``limit`` is negative.
        """
        if limit is not None and limit < 0:
            raise InvalidArgumentError(f"history limit must be 0 or more, got {limit}")
        commits = self._commit_statuses()
        if not commits:
            raise TableNotFoundError(f"{self.table_path} is not a Delta table")
        commits.reverse()
        if limit is not None:
            commits = commits[:limit]
        out = []
        for version, status in commits:
            info = self.commit_info(version)
            ts = None if info is None else info.commit_timestamp
            out.append(HistoryEntry(version, status.modification_time if ts is None else ts, info))
        return out

    # -- files -----------------------------------------------------------------------------

    def missing_files(self, files: Iterable[AddFile]) -> list[str]:
        """The data and deletion vector files of ``files`` that are not on storage.

        Raises:
            InvalidTableError: A path climbs out of the table root.
        """
        location = self.location
        missing: dict[str, None] = {}
        for f in files:
            wanted = [location.file(f.path, what="data file")]
            if f.deletion_vector is not None and f.deletion_vector.storage_type != "i":
                wanted.append(dv_file_location(location, f.deletion_vector, owner=f" of {f.path}"))
            for path in wanted:
                if path not in missing and not location.exists(path):
                    missing[path] = None
        return list(missing)

    def require_files(self, snapshot: Snapshot) -> None:
        """Refuses to read a version whose files are gone, naming the oldest readable one.

        Raises:
            VersionNotReadableError: VACUUM removed files the version needs.
        """
        missing = self.missing_files(snapshot.add_files())
        if not missing:
            return
        oldest = self._oldest_readable(snapshot.version)
        after = (
            "no version of the table is readable"
            if oldest is None
            else f"the oldest readable version is {oldest}"
        )
        raise VersionNotReadableError(
            f"{self.table_path}: version {snapshot.version} cannot be read: VACUUM removed "
            f"{len(missing)} of its files ({_sample(missing)}); {after}",
            version=snapshot.version,
            missing_files=tuple(missing),
            oldest_readable_version=oldest,
        )

    def _oldest_readable(self, unreadable: int) -> int | None:
        """The oldest version after ``unreadable`` whose files are all present.

        VACUUM deletes the files of the oldest versions first, so readability only grows
        with the version and a binary search finds the boundary.
        """
        low, high = unreadable + 1, self.latest_version()
        found: int | None = None
        while low <= high:
            middle = (low + high) // 2
            if self.missing_files(self.snapshot(middle).add_files()):
                low = middle + 1
            else:
                found, high = middle, middle - 1
        return found

    # -- checkpoints -----------------------------------------------------------------------

    def checkpoint(self, snapshot: Snapshot | None = None) -> None:
        """Writes a checkpoint of ``snapshot`` (default: the latest) and ``_last_checkpoint``."""
        snap = snapshot if snapshot is not None else self.snapshot()
        write_checkpoint(
            self.store,
            self.log_path,
            version=snap.version,
            files=snap.files,
            tombstones=snap.tombstone_table(),
            protocol=snap.protocol,
            metadata=snap.metadata,
            app_transactions=snap.app_transactions,
            domain_metadata=snap.domain_metadata,
        )
