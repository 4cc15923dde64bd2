"""Table services over the kernel and storage: snapshots, history and checkpoints (no Spark)."""

from deltatx.log.delta_log import DeltaLog, HistoryEntry
from deltatx.log.snapshot import Snapshot

__all__ = ["DeltaLog", "HistoryEntry", "Snapshot"]
