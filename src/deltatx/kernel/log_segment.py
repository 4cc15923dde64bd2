"""Which log files make up a table version: the newest usable checkpoint plus later commits.

A checkpoint is a classic one (``n.checkpoint.parquet``), a complete multi-part one, or a v2
one (``n.checkpoint.<uuid>.json|parquet``, whose file actions may live in sidecars). Log
compaction files (``x.y.compacted.json``) that fall wholly after the checkpoint stand in for
the run of commits they reconcile.

Pure: the caller lists ``_delta_log`` and passes the names; nothing here touches storage. Old
commits before a checkpoint may have been cleaned up (that is normal), so gaps only matter
between the chosen checkpoint (or version 0) and the requested version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from deltatx.errors import InvalidTableError, TableNotFoundError, VersionNotFoundError
from deltatx.kernel.log_paths import LogFileKind, parse_log_file


@dataclass(frozen=True, slots=True)
class CheckpointHint:
    """The content of ``_last_checkpoint`` that matters for finding a checkpoint."""

    version: int
    size: int | None = None
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None


@dataclass(frozen=True, slots=True)
class LogSegment:
    """The files to replay for ``version``.

    Attributes:
        version: The table version the segment reconstructs.
        checkpoint_version: The version of the checkpoint it starts from, or None (replay
            from version 0).
        checkpoint_files: The checkpoint's file names (parts in order); empty without one.
        commit_files: Names of the commits after the checkpoint up to ``version``, in order.
        ignored_checkpoints: Versions of checkpoints skipped because a part is missing.
        compactions: ``(first, last, name)`` of the log compaction files replayed instead of
            the commits ``first`` to ``last``.
    """

    version: int
    checkpoint_version: int | None
    checkpoint_files: tuple[str, ...]
    commit_files: tuple[str, ...]
    ignored_checkpoints: tuple[int, ...] = ()
    compactions: tuple[tuple[int, int, str], ...] = ()

    def replay_files(self) -> tuple[tuple[str, int], ...]:
        """``(name, version)`` of each file to replay after the checkpoint, in order.

        A compaction file stands for the commits it covers and carries the last one's version.
        """
        starts = {first: (last, name) for first, last, name in self.compactions}
        out: list[tuple[str, int]] = []
        version = self.first_commit_version
        while version <= self.version:
            if version in starts:
                last, name = starts[version]
                out.append((name, last))
                version = last + 1
            else:
                out.append((f"{version:020d}.json", version))
                version += 1
        return tuple(out)

    @property
    def first_commit_version(self) -> int:
        """The version of the first commit to replay."""
        return 0 if self.checkpoint_version is None else self.checkpoint_version + 1


def parse_checkpoint_hint(data: bytes) -> CheckpointHint | None:
    """Parses ``_last_checkpoint``; None when it is unreadable (the caller lists instead)."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        return None

    def opt_int(key: str) -> int | None:
        value = obj.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return CheckpointHint(
        version=version,
        size=opt_int("size"),
        parts=opt_int("parts"),
        size_in_bytes=opt_int("sizeInBytes"),
        num_of_add_files=opt_int("numOfAddFiles"),
    )


def format_versions(versions: Sequence[int]) -> str:
    """Renders sorted versions compactly: ``3, 5-9, 12``."""
    out: list[str] = []
    i = 0
    while i < len(versions):
        j = i
        while j + 1 < len(versions) and versions[j + 1] == versions[j] + 1:
            j += 1
        out.append(str(versions[i]) if i == j else f"{versions[i]}-{versions[j]}")
        i = j + 1
    return ", ".join(out)


def build_log_segment(
    names: Iterable[str],
    *,
    version: int | None = None,
    hint: CheckpointHint | None = None,
    table: str = "table",
) -> LogSegment:
    """Chooses the checkpoint and commits that reconstruct ``version`` (default: the latest).

    ``names`` are the file names in ``_delta_log`` (others are ignored). A multi-part
    checkpoint with a missing part is ignored in favour of an older checkpoint or the commits.
    The hint from ``_last_checkpoint`` is only a shortcut; a hint that names a checkpoint that
    is not listed is ignored.

    Raises:
        TableNotFoundError: There is no commit and no checkpoint at all.
        VersionNotFoundError: ``version`` is outside the range the log can reconstruct.
        InvalidTableError: Commits needed for ``version`` are missing (a gap), or no complete
            checkpoint or run of commits from version 0 can reconstruct it.
    """
    commits: set[int] = set()
    parts_seen: dict[tuple[int, int], set[int]] = {}
    classic: set[int] = set()
    v2: dict[int, str] = {}
    compactions: dict[int, tuple[int, str]] = {}
    for name in names:
        f = parse_log_file(name)
        if f is None:
            continue
        if f.kind is LogFileKind.COMMIT:
            commits.add(f.version)
        elif f.kind is LogFileKind.CHECKPOINT:
            classic.add(f.version)
        elif f.kind is LogFileKind.MULTIPART_CHECKPOINT:
            parts_seen.setdefault((f.version, f.num_parts), set()).add(f.part)
        elif f.kind is LogFileKind.V2_CHECKPOINT:
            # Each is the whole state; of several at one version, any will do.
            if f.version not in v2 or name < v2[f.version]:
                v2[f.version] = name
        elif f.kind is LogFileKind.COMPACTION and (
            f.version not in compactions or compactions[f.version][0] < f.end_version
        ):
            compactions[f.version] = (f.end_version, name)

    complete: dict[int, tuple[str, ...]] = {}
    incomplete: set[int] = set()
    for (v, n), parts in parts_seen.items():
        if len(parts) == n and parts == set(range(1, n + 1)):
            if v not in classic and (v not in complete or len(complete[v]) > n):
                complete[v] = tuple(_multipart(v, p, n) for p in range(1, n + 1))
        else:
            incomplete.add(v)
    for v, name in v2.items():
        complete.setdefault(v, (name,))
    for v in classic:
        complete[v] = (f"{v:020d}.checkpoint.parquet",)
    incomplete -= complete.keys()

    all_versions = commits | complete.keys()
    if not all_versions:
        if incomplete:
            raise InvalidTableError(
                f"{table}: the log holds no commit, and the checkpoint(s) at version "
                f"{format_versions(sorted(incomplete))} are missing parts"
            )
        raise TableNotFoundError(f"{table} is not a Delta table: its log has no commit")
    latest = max(all_versions)
    earliest_candidates = set(complete)
    if 0 in commits:
        earliest_candidates.add(0)
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise VersionNotFoundError(_range_message(table, target, earliest_candidates, latest))

    usable = [v for v in complete if v <= target]
    checkpoint_version = max(usable) if usable else None
    start = 0 if checkpoint_version is None else checkpoint_version + 1
    if checkpoint_version is None and 0 not in commits:
        if version is not None and earliest_candidates and target < min(earliest_candidates):
            raise VersionNotFoundError(_range_message(table, target, earliest_candidates, latest))
        ignored = sorted(v for v in incomplete if v <= target)
        why = (
            f"; checkpoint(s) at version {format_versions(ignored)} are missing parts"
            if ignored
            else ""
        )
        missing = [v for v in range(0, target + 1) if v not in commits]
        raise InvalidTableError(
            f"{table}: cannot reconstruct version {target}: no complete checkpoint at or before "
            f"it and commits {format_versions(missing)} are missing{why}"
        )
    missing = [v for v in range(start, target + 1) if v not in commits]
    if missing:
        raise InvalidTableError(
            f"{table}: the log has a gap: commit(s) {format_versions(missing)} are missing "
            f"(needed to reconstruct version {target})"
        )
    return LogSegment(
        version=target,
        checkpoint_version=checkpoint_version,
        checkpoint_files=() if checkpoint_version is None else complete[checkpoint_version],
        commit_files=tuple(f"{v:020d}.json" for v in range(start, target + 1)),
        ignored_checkpoints=tuple(sorted(v for v in incomplete if v <= target)),
        compactions=_usable_compactions(compactions, start, target),
    )


def _usable_compactions(
    compactions: dict[int, tuple[int, str]], start: int, target: int
) -> tuple[tuple[int, int, str], ...]:
    # Greedy from the first commit to replay: the widest compaction that starts there and ends
    # at or before the target replaces its commits.
    chosen: list[tuple[int, int, str]] = []
    version = start
    while version <= target:
        found = compactions.get(version)
        if found is not None and found[0] <= target:
            chosen.append((version, found[0], found[1]))
            version = found[0] + 1
        else:
            version += 1
    return tuple(chosen)


def _multipart(version: int, part: int, num_parts: int) -> str:
    return f"{version:020d}.checkpoint.{part:010d}.{num_parts:010d}.parquet"


def _range_message(table: str, target: int, earliest: set[int], latest: int) -> str:
    if earliest:
        available = f"versions {min(earliest)} to {latest} are available"
    else:
        available = f"no version can be reconstructed (latest file is version {latest})"
    return f"{table}: version {target} does not exist; {available}"
