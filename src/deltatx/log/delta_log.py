"""The entry point to a table's transaction log: snapshots, time travel, history, checkpoints."""

from __future__ import annotations

import bisect
import logging
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime

from deltatx.errors import (
    InvalidArgumentError,
    InvalidTableError,
    TableNotFoundError,
    VersionNotFoundError,
)
from deltatx.kernel.actions import Action, CommitInfo
from deltatx.kernel.codec import parse_commit
from deltatx.kernel.log_paths import LOG_DIR, LogFileKind, commit_name, parse_log_file
from deltatx.kernel.log_segment import LogSegment, build_log_segment
from deltatx.log import _state
from deltatx.log.checkpoint import read_checkpoint, read_last_checkpoint, write_checkpoint
from deltatx.log.snapshot import CommitData, Snapshot, TableState, empty_state, replay
from deltatx.storage import store_for
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


def normalise_table_path(table_path: str) -> str:
    """Strips a trailing ``/`` and turns ``file:`` URIs into local paths."""
    path = table_path
    if path.startswith("file:"):
        rest = path[len("file:") :]
        if rest.startswith("//"):
            # file://host/path: only the local host makes sense for a local store.
            rest = rest[2:]
            rest = rest[len("localhost") :] if rest.startswith("localhost/") else rest
        path = urllib.parse.unquote(rest)
    stripped = path.rstrip("/")
    return stripped or "/"


def data_file_location(table_path: str, path: str) -> str:
    """Where the data file an ``add.path`` names lives (relative paths are percent-encoded)."""
    if path.startswith("file:"):
        return normalise_table_path(path)
    decoded = urllib.parse.unquote(path)
    if decoded.startswith("/"):
        return decoded
    return f"{table_path.rstrip('/')}/{decoded}"


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
        table_path: The normalised table root.
        log_path: ``table_path + "/_delta_log"``.
        store: The storage the log lives on.
    """

    __slots__ = ("log_path", "store", "table_path")

    def __init__(self, table_path: str, store: LogStore) -> None:
        """Use :meth:`for_table`."""
        self.table_path = table_path
        self.log_path = f"{table_path.rstrip('/')}/{LOG_DIR}"
        self.store = store

    @classmethod
    def for_table(cls, table_path: str, *, store: LogStore | None = None) -> DeltaLog:
        """The log of the table at ``table_path`` (a local path or ``file:`` URI)."""
        path = normalise_table_path(table_path)
        return cls(path, store if store is not None else store_for(path))

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

    def latest_version(self) -> int:
        """The newest version in the log, or -1 when there is no commit."""
        hint = read_last_checkpoint(self.store, self.log_path)
        for start in ([f"{hint.version:020d}"] if hint else []) + [""]:
            versions = [
                f.version
                for s in self._list(start)
                if (f := parse_log_file(s.name)) is not None
                and f.kind is not LogFileKind.V2_CHECKPOINT
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
                file_keys=_state.table_keys(cp.files),
                tombstones=cp.tombstones,
                tombstone_keys=_state.table_keys(cp.tombstones),
                app_transactions=cp.app_transactions,
                domain_metadata=cp.domain_metadata,
            )
            break
        commits = [
            self._read_commit_data(segment.first_commit_version + i, name, statuses.get(name))
            for i, name in enumerate(segment.commit_files)
        ]
        state, ts = replay(base, commits, table=self.table_path)
        if ts is None and commits:
            ts = commits[-1].modification_time
        return Snapshot(self, segment.version, state, timestamp=ts)

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
        state, ts = replay(snapshot.state(), commits, table=self.table_path)
        return Snapshot(self, commits[-1].version, state, timestamp=ts)

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

    def _commit_timestamp(self, version: int, status: FileStatus | None) -> int:
        try:
            actions = self.read_commit(version)
        except VersionNotFoundError:
            # A checkpoint-only version (its commit was cleaned up): use the checkpoint's time.
            for s in self._list(f"{version:020d}"):
                f = parse_log_file(s.name)
                if f is not None and f.version == version:
                    return s.modification_time
            raise
        for a in actions:
            if isinstance(a, CommitInfo) and a.timestamp is not None:
                return a.timestamp
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
            info = next((a for a in self.read_commit(version) if isinstance(a, CommitInfo)), None)
            ts = info.timestamp if info is not None and info.timestamp is not None else None
            out.append(HistoryEntry(version, status.modification_time if ts is None else ts, info))
        return out

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
