"""The driver's reader threads: one pool per process, threads that really run together."""

from __future__ import annotations

import threading

import pytest

from deltatx.log.row_level import driver_threads
from deltatx.log.row_level.driver_threads import DRIVER_THREADS, driver_pool


def test_one_pool_serves_every_statement_of_a_process() -> None:
    assert driver_pool() is driver_pool()


def test_a_forked_child_gets_its_own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = driver_pool()
    # A forked child inherits the parent's pool object but none of its threads.
    monkeypatch.setattr(driver_threads.os, "getpid", lambda: -1)
    child = driver_pool()
    assert child is not parent
    assert driver_pool() is child
    assert list(child.map(lambda x: x * 2, range(3))) == [0, 2, 4]


def test_its_threads_read_at_once() -> None:
    # Each task waits for all the others: this finishes only if every thread runs at once.
    barrier = threading.Barrier(DRIVER_THREADS, timeout=10)
    names = list(
        driver_pool().map(
            lambda _: (barrier.wait(), threading.current_thread().name)[1], range(DRIVER_THREADS)
        )
    )
    assert len(set(names)) == DRIVER_THREADS
    assert all(n.startswith("deltatx-driver-read") for n in names)
