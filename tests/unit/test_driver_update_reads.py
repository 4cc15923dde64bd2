"""The driver UPDATE reads touched files ahead by threads and writes them in their order."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from deltatx.spark.commands.driver_update import _READ_AHEAD, _in_order


def _tables(i: int) -> list[pa.Table] | None:
    # Later files finish first: the order must still be the files' order.
    time.sleep(0.002 * (5 - i % 5))
    return [pa.table({"i": [i]})]


@pytest.mark.parametrize("count", [0, 1, 2, 7])
def test_results_come_in_the_order_of_the_files(count: int) -> None:
    got = [t[0].column("i")[0].as_py() for t in _in_order(_tables, list(range(count))) if t]
    assert got == list(range(count))


def test_at_most_the_read_ahead_is_in_flight() -> None:
    lock = threading.Lock()
    running = [0, 0]

    def read(i: int) -> list[pa.Table] | None:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        time.sleep(0.003)
        with lock:
            running[0] -= 1
        return []

    assert len(list(_in_order(read, list(range(8))))) == 8
    assert running[1] <= _READ_AHEAD


def test_stopping_early_reads_no_further_file() -> None:
    started: list[int] = []

    def read(i: int) -> list[pa.Table] | None:
        started.append(i)
        return None if i == 0 else []

    results = _in_order(read, list(range(10)))
    assert next(results) is None
    results.close()
    assert max(started) <= _READ_AHEAD


def test_a_failed_read_raises_in_the_caller() -> None:
    def read(i: int) -> list[pa.Table] | None:
        if i == 1:
            raise OSError("gone")
        return []

    with pytest.raises(OSError, match="gone"):
        list(_in_order(read, list(range(4))))
