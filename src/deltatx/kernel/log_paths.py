"""File names in ``_delta_log``: commits, checkpoints and ``_last_checkpoint``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_UUID_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")


class LogFileKind(StrEnum):
    """What a file in ``_delta_log`` is."""

    COMMIT = "commit"
    CHECKPOINT = "checkpoint"
    MULTIPART_CHECKPOINT = "multipart_checkpoint"
    V2_CHECKPOINT = "v2_checkpoint"


@dataclass(frozen=True, slots=True)
class LogFile:
    """A recognised file of the log: its name, version and kind (and part for multi-part)."""

    name: str
    version: int
    kind: LogFileKind
    part: int = 1
    num_parts: int = 1


def commit_name(version: int) -> str:
    """``00000000000000000007.json`` for version 7."""
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    """The classic single-file checkpoint name for a version."""
    return f"{version:020d}.checkpoint.parquet"


def multipart_checkpoint_name(version: int, part: int, num_parts: int) -> str:
    """The name of part ``part`` (1-based) of ``num_parts`` of a multi-part checkpoint."""
    return f"{version:020d}.checkpoint.{part:010d}.{num_parts:010d}.parquet"


def parse_log_file(name: str) -> LogFile | None:
    """Recognises a log file name; None for anything that is not a commit or checkpoint."""
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
    return None


# Spark writes a command's files under this directory in the table root before they are moved
# into place; a crash can leave one behind, which VACUUM removes once it is old enough.
STAGING_PREFIX = "_deltatx_staging-"
