"""Whether a session's local commits are synced to disk: ``spark.deltatx.storage.fsync``.

By default every commit, and every deletion-vector file a commit names, reaches the disk
(``fsync``) before the commit counts as written, so a crash of the machine cannot lose or tear
a committed version. delta-spark and delta-rs on local files do not sync; setting this to
``false`` does the same, for a machine whose crash may lose the last commits (tests, scratch
tables, benchmarks against them). Commits stay atomic either way: a reader never sees a
half-written version and two writers never both win a version. Object stores are durable
regardless of the setting.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from deltatx.errors import InvalidArgumentError
from deltatx.log.delta_log import DeltaLog

FSYNC_CONF = "spark.deltatx.storage.fsync"
"""The Spark setting: ``true`` (the default) or ``false``."""

_VALUES = {"true": True, "false": False}


def fsync_enabled(spark: SparkSession | None) -> bool:
    """Whether the session syncs local commits to disk (``spark.deltatx.storage.fsync``).

    Without a session (a handle used for log work alone), commits are synced.

    Raises:
        InvalidArgumentError: The setting is neither ``true`` nor ``false``.
    """
    if spark is None:
        return True
    raw = spark.conf.get(FSYNC_CONF, None)
    if raw is None:
        return True
    value = _VALUES.get(str(raw).strip().lower())
    if value is None:
        raise InvalidArgumentError(f"{FSYNC_CONF} must be 'true' or 'false', not {raw!r}")
    return value


def log_for(spark: SparkSession | None, table_path: str) -> DeltaLog:
    """The log of the table at ``table_path``, synced to disk as the session says.

    Raises:
        InvalidArgumentError: ``spark.deltatx.storage.fsync`` is neither true nor false.
    """
    return DeltaLog.for_table(table_path, fsync=fsync_enabled(spark))
