"""The local filesystem LogStore.

Write-if-absent writes a temporary file next to the target, fsyncs it, then ``os.link``s it to
the target name: the link fails if the target exists, which is the atomic exclusion, and a
reader can never observe a half-written commit. The directory is fsynced so the new name
survives a crash.

Paths are canonical local paths (see :class:`deltatx.storage.location.Location`, which turns
table URIs and log paths into them).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator

from deltatx.storage.faults import fault_point
from deltatx.storage.log_store import FileAlreadyExistsError, FileStatus

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalLogStore:
    """LogStore over the local filesystem (or a POSIX mount)."""

    def __init__(self, *, fsync: bool = True) -> None:
        """Creates a store; ``fsync=False`` trades durability for speed (tests, benchmarks)."""
        self._fsync = fsync

    def read(self, path: str) -> bytes:
        """The whole file; ``FileNotFoundError`` if absent."""
        with open(path, "rb") as f:
            return f.read()

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Writes a whole file atomically; without ``overwrite`` only if it is absent."""
        target = path
        directory = os.path.dirname(target) or "."
        tmp = os.path.join(directory, f".{os.path.basename(target)}.{os.urandom(8).hex()}.tmp")
        try:
            try:
                fd = os.open(tmp, _CREATE, 0o666)
            except FileNotFoundError:
                # The directory is created on first need: a commit then costs no extra calls.
                os.makedirs(directory, exist_ok=True)
                fd = os.open(tmp, _CREATE, 0o666)
            try:
                # Written in two halves, so that a crash armed at the partial-write point
                # leaves a truly half-written temporary file on disk.
                view = memoryview(data)
                half = len(view) // 2
                _write_all(fd, view[:half])
                fault_point("log_store.partial_write")
                _write_all(fd, view[half:])
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if overwrite:
                os.replace(tmp, target)
            else:
                try:
                    os.link(tmp, target)
                except FileExistsError:
                    raise FileAlreadyExistsError(target) from None
            fault_point("log_store.after_link")
            if self._fsync:
                _fsync_dir(directory)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def list_from(self, directory: str, start_name: str = "") -> list[FileStatus]:
        """Files directly in ``directory`` sorted by name, from ``start_name`` on."""
        out: list[FileStatus] = []
        try:
            entries = os.scandir(directory)
        except FileNotFoundError:
            return []
        with entries:
            for entry in entries:
                if entry.name < start_name or entry.name.startswith("."):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                out.append(
                    FileStatus(
                        path=os.path.join(directory, entry.name),
                        size=st.st_size,
                        modification_time=st.st_mtime_ns // 1_000_000,
                    )
                )
        out.sort(key=lambda s: s.name)
        return out

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        return os.path.exists(path)

    def walk(self, root: str) -> Iterator[FileStatus]:
        """Every regular file under ``root``; symbolic links are neither followed nor listed.

        A link could lead VACUUM to delete, or a reader to trust, a file outside the table.
        """
        for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
            for name in filenames:
                full = os.path.join(dirpath, name)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    yield FileStatus(full, st.st_size, st.st_mtime_ns // 1_000_000)

    def delete(self, path: str) -> None:
        """Removes a file; a missing file is not an error."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
