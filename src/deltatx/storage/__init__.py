"""Bytes on storage and the one atomic primitive the log needs: write-if-absent."""

from deltatx.storage.local import LocalLogStore
from deltatx.storage.log_store import FileStatus, LogStore
from deltatx.storage.memory import MemoryLogStore

__all__ = [
    "FileStatus",
    "LocalLogStore",
    "LogStore",
    "MemoryLogStore",
    "store_for",
]


def store_for(path: str) -> LogStore:
    """The log store for a table path (local paths and ``file:`` URIs)."""
    return LocalLogStore()
