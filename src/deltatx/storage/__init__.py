"""Bytes on storage and the one atomic primitive the log needs: write-if-absent."""

from deltatx.storage.local import LocalLogStore
from deltatx.storage.location import Location
from deltatx.storage.log_store import FileAlreadyExistsError, FileStatus, LogStore
from deltatx.storage.memory import MemoryLogStore

__all__ = [
    "FileAlreadyExistsError",
    "FileStatus",
    "LocalLogStore",
    "Location",
    "LogStore",
    "MemoryLogStore",
]
