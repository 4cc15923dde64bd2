"""One contract suite for every LogStore: the local filesystem and the in-memory store.

The local store runs twice: as it is here, and as it is where the kernel has no unnamed files
(``O_TMPFILE``), which makes it use hidden temporary names.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from deltatx.storage import LocalLogStore, LogStore, MemoryLogStore, local
from deltatx.storage.log_store import FileAlreadyExistsError


@pytest.fixture(params=["local", "local-named", "memory"])
def store_and_root(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[LogStore, str]:
    if request.param == "local-named":
        monkeypatch.setattr(local, "_TMPFILE", 0)
    if request.param.startswith("local"):
        return LocalLogStore(), str(tmp_path / "root")
    return MemoryLogStore(), "/mem/root"


def test_write_then_read(store_and_root: tuple[LogStore, str]) -> None:
    store, root = store_and_root
    store.write(f"{root}/_delta_log/a.json", b"hello\n")
    assert store.read(f"{root}/_delta_log/a.json") == b"hello\n"


def test_read_missing_raises_file_not_found(store_and_root: tuple[LogStore, str]) -> None:
    store, root = store_and_root
    with pytest.raises(FileNotFoundError):
        store.read(f"{root}/nope.json")


def test_write_if_absent_refuses_existing_and_keeps_content(
    store_and_root: tuple[LogStore, str],
) -> None:
    store, root = store_and_root
    path = f"{root}/_delta_log/00000000000000000000.json"
    store.write(path, b"first")
    with pytest.raises(FileAlreadyExistsError):
        store.write(path, b"second")
    assert isinstance(FileAlreadyExistsError(path), FileExistsError)
    assert store.read(path) == b"first"


def test_overwrite_replaces(store_and_root: tuple[LogStore, str]) -> None:
    store, root = store_and_root
    path = f"{root}/_delta_log/_last_checkpoint"
    store.write(path, b"old", overwrite=True)
    store.write(path, b"new", overwrite=True)
    assert store.read(path) == b"new"


def test_list_from_is_sorted_direct_children_from_start(
    store_and_root: tuple[LogStore, str],
) -> None:
    store, root = store_and_root
    log = f"{root}/_delta_log"
    for name in [
        "00000000000000000002.json",
        "00000000000000000000.json",
        "_last_checkpoint",
        "00000000000000000001.checkpoint.parquet",
        "00000000000000000001.json",
    ]:
        store.write(f"{log}/{name}", name.encode())
    store.write(f"{log}/_sidecars/x.parquet", b"nested")
    names = [s.name for s in store.list_from(log)]
    assert names == [
        "00000000000000000000.json",
        "00000000000000000001.checkpoint.parquet",
        "00000000000000000001.json",
        "00000000000000000002.json",
        "_last_checkpoint",
    ]
    later = store.list_from(log, "00000000000000000001")
    assert [s.name for s in later] == names[1:]
    status = later[0]
    assert status.path == f"{log}/00000000000000000001.checkpoint.parquet"
    assert status.size == len(b"00000000000000000001.checkpoint.parquet")
    assert status.modification_time > 0


def test_list_of_missing_directory_is_empty(store_and_root: tuple[LogStore, str]) -> None:
    store, root = store_and_root
    assert store.list_from(f"{root}/absent") == []


def test_exists(store_and_root: tuple[LogStore, str]) -> None:
    store, root = store_and_root
    assert not store.exists(f"{root}/_delta_log")
    store.write(f"{root}/_delta_log/x.json", b"")
    assert store.exists(f"{root}/_delta_log/x.json")
    assert store.exists(f"{root}/_delta_log")
    assert not store.exists(f"{root}/_delta_log/y.json")


def test_walk_finds_nested_files(store_and_root: tuple[LogStore, str]) -> None:
    store, root = store_and_root
    for rel in ["a.parquet", "p=1/b.parquet", "p=1/q=2/c.parquet", "_delta_log/0.json"]:
        store.write(f"{root}/{rel}", rel.encode())
    found = {s.path[len(root) + 1 :]: s.size for s in store.walk(root)}
    assert found == {
        "a.parquet": 9,
        "p=1/b.parquet": 13,
        "p=1/q=2/c.parquet": 17,
        "_delta_log/0.json": 17,
    }


def test_delete_removes_and_tolerates_missing(store_and_root: tuple[LogStore, str]) -> None:
    store, root = store_and_root
    path = f"{root}/x.parquet"
    store.write(path, b"x")
    store.delete(path)
    assert not store.exists(path)
    store.delete(path)  # a second delete is not an error
    with pytest.raises(FileNotFoundError):
        store.read(path)


def test_racing_writers_exactly_one_wins(store_and_root: tuple[LogStore, str]) -> None:
    store, root = store_and_root
    path = f"{root}/_delta_log/00000000000000000007.json"
    store.write(f"{root}/_delta_log/00000000000000000006.json", b"")  # the directory exists
    barrier = threading.Barrier(16)
    winners: list[int] = []
    losers: list[int] = []
    errors: list[BaseException] = []

    def writer(i: int) -> Callable[[], None]:
        def run() -> None:
            payload = f'{{"writer":{i}}}\n'.encode() * 50
            barrier.wait()
            try:
                store.write(path, payload)
                winners.append(i)
            except FileAlreadyExistsError:
                losers.append(i)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=writer(i)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(winners) == 1
    assert sorted(losers + winners) == list(range(16))
    assert store.read(path) == f'{{"writer":{winners[0]}}}\n'.encode() * 50
