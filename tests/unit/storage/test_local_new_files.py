"""Files a later commit publishes (deletion vectors): written in place, synced concurrently."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from deltatx.storage import LocalLogStore
from deltatx.storage.location import Location
from deltatx.storage.log_store import FileAlreadyExistsError
from deltatx.storage.memory import MemoryLogStore


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str]]:
    """Each fsync as (is a directory, thread name)."""
    calls: list[tuple[bool, str]] = []
    real = os.fsync

    def spy(fd: int) -> None:
        calls.append((os.path.isdir(f"/proc/self/fd/{fd}"), threading.current_thread().name))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls


def test_write_new_syncs_the_file_and_its_directory_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fsyncs(monkeypatch)
    target = tmp_path / "ab" / "deletion_vector_1.bin"
    LocalLogStore(fsync=True).write_new(str(target), b"rows")
    assert target.read_bytes() == b"rows"
    assert sorted(is_dir for is_dir, _ in calls) == [False, True]
    threads = {name for _, name in calls}
    assert len(threads) == 2  # the directory's fsync ran beside the file's, not after it
    assert not [n for n in os.listdir(target.parent) if n != target.name]


def test_write_new_without_fsync_syncs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fsyncs(monkeypatch)
    LocalLogStore(fsync=False).write_new(str(tmp_path / "dv.bin"), b"rows")
    assert (tmp_path / "dv.bin").read_bytes() == b"rows"
    assert calls == []


def test_write_new_refuses_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "dv.bin"
    target.write_bytes(b"first")
    with pytest.raises(FileAlreadyExistsError):
        LocalLogStore().write_new(str(target), b"second")
    assert target.read_bytes() == b"first"


def test_a_failed_write_new_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space"):
        LocalLogStore().write_new(str(tmp_path / "dv.bin"), b"rows")
    assert os.listdir(tmp_path) == []


def test_location_write_new_goes_through_other_stores_write_if_absent(tmp_path: Path) -> None:
    store = MemoryLogStore()
    location = Location.of(str(tmp_path), store=store)
    target = location.child("dv.bin")
    location.write_new(target, b"rows")
    assert store.read(target) == b"rows"
    with pytest.raises(FileAlreadyExistsError):
        location.write_new(target, b"again")
    assert not (tmp_path / "dv.bin").exists()
