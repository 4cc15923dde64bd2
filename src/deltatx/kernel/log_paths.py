"""File names in ``_delta_log``: commits, checkpoints, compactions and ``_last_checkpoint``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_UUID_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")
_COMPACTION = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


class LogFileKind(StrEnum):
    """What a file in ``_delta_log`` is."""

    COMMIT = "commit"
    CHECKPOINT = "checkpoint"
    MULTIPART_CHECKPOINT = "multipart_checkpoint"
    V2_CHECKPOINT = "v2_checkpoint"
    COMPACTION = "compaction"


@dataclass(frozen=True, slots=True)
class LogFile:
    """A recognised file of the log: its name, version and kind (and part for multi-part).

    For a log compaction file ``version`` is the first commit it covers and ``end_version``
    the last; for every other file the two are the same.
    """

    name: str
    version: int
    kind: LogFileKind
    part: int = 1
    num_parts: int = 1
    end_version: int = -1

    @property
    def last_version(self) -> int:
        """The newest version the file covers."""
        return max(self.version, self.end_version)


def commit_name(version: int) -> str:
    """``00000000000000000007.json`` for version 7."""
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    """The classic single-file checkpoint name for a version."""
    return f"{version:020d}.checkpoint.parquet"


def multipart_checkpoint_name(version: int, part: int, num_parts: int) -> str:
    """The name of part ``part`` (1-based) of ``num_parts`` of a multi-part checkpoint."""
    return f"{version:020d}.checkpoint.{part:010d}.{num_parts:010d}.parquet"


def v2_checkpoint_name(version: int, uuid: str, *, json_format: bool = False) -> str:
    """The name of a v2 checkpoint: ``<version>.checkpoint.<uuid>.parquet`` (or ``.json``)."""
    return f"{version:020d}.checkpoint.{uuid}.{'json' if json_format else 'parquet'}"


def compaction_name(start: int, end: int) -> str:
    """The name of a log compaction file covering commits ``start`` to ``end``."""
    return f"{start:020d}.{end:020d}.compacted.json"


def parse_log_file(name: str) -> LogFile | None:
    """Recognises a log file name; None for anything else (``_last_checkpoint``, temp files)."""
    if m := _COMMIT.match(name):
        return LogFile(name, int(m.group(1)), LogFileKind.COMMIT)
    if m := _CLASSIC_CHECKPOINT.match(name):
        return LogFile(name, int(m.group(1)), LogFileKind.CHECKPOINT)
    if m := _MULTIPART_CHECKPOINT.match(name):
        return LogFile(
            name,
            int(m.group(1)),
            LogFileKind.MULTIPART_CHECKPOINT,
            part=int(m.group(2)),
            num_parts=int(m.group(3)),
        )
    if m := _UUID_CHECKPOINT.match(name):
        return LogFile(name, int(m.group(1)), LogFileKind.V2_CHECKPOINT)
    if m := _COMPACTION.match(name):
        start, end = int(m.group(1)), int(m.group(2))
        if start <= end:
            return LogFile(name, start, LogFileKind.COMPACTION, end_version=end)
    return None


# Spark writes a command's files under this directory in the table root before they are moved
# into place; a crash can leave one behind, which VACUUM removes once it is old enough.
STAGING_PREFIX = "_deltatx_staging-"
