"""Named fault points that crash-injection tests can arm.

A test starts a writer process with ``DELTATX_FAULT=<point>`` (optionally ``<point>:<n>`` to fire
at the n-th pass) in its environment; when that process reaches the point it kills itself with
SIGKILL, as a power cut would. The variable is read once, when this module is imported, so
unarmed points cost a comparison: every commit passes several.

The storage layer's points (``log_store.partial_write``, ``log_store.after_link``) fire for every
file the store writes. A caller that wants them told apart wraps the write in
:func:`fault_scope`: inside ``fault_scope("checkpoint")`` the store's ``log_store.partial_write``
also answers to ``checkpoint.partial_write``, so a test can crash a checkpoint half-way without
also crashing the commit that precedes it.

The points the commit path offers:

- ``commit.before_write``: the data files are written, the commit file is not.
- ``commit.partial_write`` / ``log_store.partial_write``: the commit's unnamed (or temporary)
  file is half written.
- ``commit.after_link`` / ``log_store.after_link``: the commit is linked into place, the
  directory is not yet synced.
- ``commit.after_write``: the commit is published, the writer has not yet been told.
- ``checkpoint.partial_write``: the checkpoint's temporary Parquet file is half written.
- ``checkpoint.after_link``: the checkpoint is renamed into place, the directory not yet synced.
- ``checkpoint.last_checkpoint``: the checkpoint is complete, ``_last_checkpoint`` not written.
- ``last_checkpoint.partial_write``: ``_last_checkpoint``'s temporary file is half written.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from contextvars import ContextVar

_ARMED = os.environ.get("DELTATX_FAULT") or None
_UNARMED = contextlib.nullcontext()
_counts: dict[str, int] = {}
_scope: ContextVar[str | None] = ContextVar("deltatx_fault_scope", default=None)


def faults_armed() -> bool:
    """Whether the environment arms any fault point (for code that must shape its I/O to one)."""
    return _ARMED is not None


def fault_point(name: str) -> None:
    """Dies here if the environment arms this point; otherwise does nothing."""
    if _ARMED is None:
        return
    point, _, nth = _ARMED.partition(":")
    scope = _scope.get()
    aliases = [name]
    if scope is not None and name.startswith("log_store."):
        aliases.append(f"{scope}.{name[len('log_store.') :]}")
    if point not in aliases:
        return
    _counts[point] = _counts.get(point, 0) + 1
    if _counts[point] >= (int(nth) if nth else 1):
        os.kill(os.getpid(), signal.SIGKILL)


def fault_scope(scope: str) -> contextlib.AbstractContextManager[None]:
    """Within the block, the store's ``log_store.<x>`` points also answer to ``<scope>.<x>``."""
    return _UNARMED if _ARMED is None else _scoped(scope)


@contextlib.contextmanager
def _scoped(scope: str) -> Iterator[None]:
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)
