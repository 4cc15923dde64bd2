"""A LogStore that reads through to another and keeps its own writes and deletes in memory.

Explaining a conflict (``deltatx conflicts``) runs the same row-level settlement a real commit
runs, and settling may write a deletion vector. Against this store those writes land in
memory, so an explanation never changes the table it explains.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from deltatx.storage.log_store import FileAlreadyExistsError, FileStatus, LogStore
from deltatx.storage.memory import MemoryLogStore


class OverlayLogStore:
    """Reads from ``base`` unless overlaid; writes and deletes touch only the overlay."""

    def __init__(self, base: LogStore) -> None:
        """Overlays ``base``, which is only ever read."""
        self._base = base
        self._top = MemoryLogStore()
        self._deleted: set[str] = set()
        self._lock = threading.Lock()

    def _hidden(self, path: str) -> bool:
        with self._lock:
            return path in self._deleted

    def read(self, path: str) -> bytes:
        """The overlaid file, else the base's; ``FileNotFoundError`` if absent or deleted."""
        try:
            return self._top.read(path)
        except FileNotFoundError:
            if self._hidden(path):
                raise
        return self._base.read(path)

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Writes into the overlay; without ``overwrite`` only if absent from both layers."""
        with self._lock:
            if not overwrite and path not in self._deleted and self._base.exists(path):
                raise FileAlreadyExistsError(path)
            self._top.write(path, data, overwrite=overwrite)
            self._deleted.discard(path)

    def list_from(self, directory: str, start_name: str = "") -> list[FileStatus]:
        """Both layers' files directly in ``directory``, the overlay's winning, by name."""
        merged = {s.path: s for s in self._base.list_from(directory, start_name)}
        with self._lock:
            for gone in self._deleted:
                merged.pop(gone, None)
        merged.update((s.path, s) for s in self._top.list_from(directory, start_name))
        return sorted(merged.values(), key=lambda s: s.name)

    def exists(self, path: str) -> bool:
        """Whether a file (or a file below ``path``) exists in either layer, deletes applied."""
        if self._top.exists(path):
            return True
        if self._hidden(path):
            return False
        if not self._base.exists(path):
            return False
        with self._lock:
            deleted = set(self._deleted)
        prefix = path.rstrip("/") + "/"
        if not any(p.startswith(prefix) for p in deleted):
            return True
        return any(True for _ in self.walk(path))

    def walk(self, root: str) -> Iterator[FileStatus]:
        """Every file under ``root`` in either layer, deletes applied, by path."""
        merged = {s.path: s for s in self._base.walk(root)}
        with self._lock:
            for gone in self._deleted:
                merged.pop(gone, None)
        merged.update((s.path, s) for s in self._top.walk(root))
        yield from (merged[p] for p in sorted(merged))

    def delete(self, path: str) -> None:
        """Hides a file of either layer; a missing file is not an error."""
        with self._lock:
            self._top.delete(path)
            self._deleted.add(path)
