"""The threads that read data files on the driver, kept from one statement to the next.

pyarrow releases the GIL while it reads and decodes Parquet, so the few files a small DML
touches are read at once. Starting threads for every statement cost more than the reads they
overlapped on a busy machine (a thread's start waits until the scheduler runs it); these are
started once per process, when first needed, and made again in a forked child.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

DRIVER_THREADS = 4
"""Data files read at once on the driver, over every statement of the process."""

_pool: tuple[int, ThreadPoolExecutor] | None = None
_lock = threading.Lock()


def driver_pool() -> ThreadPoolExecutor:
    """The process's pool of :data:`DRIVER_THREADS` reader threads.

    Tasks given to it must not wait for other tasks of it (none of its callers do).
    """
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            pool = ThreadPoolExecutor(DRIVER_THREADS, thread_name_prefix="deltatx-driver-read")
            _pool = (os.getpid(), pool)
        return _pool[1]
