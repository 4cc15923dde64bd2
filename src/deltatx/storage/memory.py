"""An in-memory LogStore for unit tests: same contract as the local one, no disk."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from deltatx.storage.log_store import FileAlreadyExistsError, FileStatus


class MemoryLogStore:
    """LogStore held in a dict; thread-safe, so it can host racing writers in tests."""

    def __init__(self) -> None:
        """Creates an empty store."""
        self._files: dict[str, tuple[bytes, int]] = {}
        self._lock = threading.Lock()

    def read(self, path: str) -> bytes:
        """The whole file; ``FileNotFoundError`` if absent."""
        with self._lock:
            try:
                return self._files[path][0]
            except KeyError:
                raise FileNotFoundError(path) from None

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Writes a whole file atomically; without ``overwrite`` only if it is absent."""
        with self._lock:
            if not overwrite and path in self._files:
                raise FileAlreadyExistsError(path)
            self._files[path] = (bytes(data), int(time.time() * 1000))

    def list_from(self, directory: str, start_name: str = "") -> list[FileStatus]:
        """Files directly in ``directory`` sorted by name, from ``start_name`` on."""
        prefix = directory.rstrip("/") + "/"
        with self._lock:
            items = list(self._files.items())
        out = [
            FileStatus(path, len(data), mtime)
            for path, (data, mtime) in items
            if path.startswith(prefix)
            and "/" not in path[len(prefix) :]
            and path[len(prefix) :] >= start_name
        ]
        out.sort(key=lambda s: s.name)
        return out

    def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``, or any file below it."""
        prefix = path.rstrip("/") + "/"
        with self._lock:
            return path in self._files or any(p.startswith(prefix) for p in self._files)

    def walk(self, root: str) -> Iterator[FileStatus]:
        """Every file under ``root``."""
        prefix = root.rstrip("/") + "/"
        with self._lock:
            items = list(self._files.items())
        for path, (data, mtime) in sorted(items):
            if path.startswith(prefix):
                yield FileStatus(path, len(data), mtime)

    def delete(self, path: str) -> None:
        """Removes a file; a missing file is not an error."""
        with self._lock:
            self._files.pop(path, None)

    def set_modification_time(self, path: str, millis: int) -> None:
        """Test hook: pretend a file was written at ``millis``."""
        with self._lock:
            data, _ = self._files[path]
            self._files[path] = (data, millis)
