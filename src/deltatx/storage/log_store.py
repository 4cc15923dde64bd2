"""The LogStore contract: what the log layer may ask of storage."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


class FileAlreadyExistsError(FileExistsError):
    """``write(..., overwrite=False)`` found the target already there."""


@dataclass(frozen=True, slots=True)
class FileStatus:
    """A file's path, size and modification time (milliseconds since the epoch)."""

    path: str
    size: int
    modification_time: int

    @property
    def name(self) -> str:
        """The last path component."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]


class LogStore(Protocol):
    """Storage for a table's log and files, addressed by absolute paths with ``/``.

    ``write`` with ``overwrite=False`` is the atomic commit primitive: exactly one of many
    concurrent writers of the same path succeeds, the others get ``FileAlreadyExistsError``,
    and no reader ever sees a partial file.
    """

    def read(self, path: str) -> bytes:
        """The whole file; ``FileNotFoundError`` if absent."""
        ...

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Writes a whole file atomically; without ``overwrite`` only if it is absent."""
        ...

    def list_from(self, directory: str, start_name: str = "") -> list[FileStatus]:
        """Files directly in ``directory`` whose names sort at or after ``start_name``.

        Sorted by name; an absent directory lists as empty.
        """
        ...

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        ...

    def walk(self, root: str) -> Iterator[FileStatus]:
        """Every file under ``root``, recursively (for VACUUM)."""
        ...

    def delete(self, path: str) -> None:
        """Removes a file; a missing file is not an error."""
        ...
