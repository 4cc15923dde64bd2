"""Progress of long operations, by phase: scanning, writing, committing, rebasing.

A command marks where its phases start with one call, ``step("writing")``; the facade wraps
each operation in :func:`operation`. Every phase is logged on the ``deltatx.progress`` logger
(INFO when it starts, with the time the previous one took). The lines are also printed on
standard error when that is a terminal, or when ``DELTATX_PROGRESS=1``; ``DELTATX_PROGRESS=0``
or :func:`enable_progress` turns that off. Nothing is printed outside an operation.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

logger = logging.getLogger("deltatx.progress")

_enabled: bool | None = None


@dataclass(slots=True)
class _Operation:
    name: str
    target: str
    started: float
    phase: str | None = None
    phase_started: float = 0.0
    phases: list[tuple[str, float]] = field(default_factory=list)


_current: ContextVar[_Operation | None] = ContextVar("deltatx_progress", default=None)


def enable_progress(enabled: bool | None) -> None:
    """Turns the printed progress lines on or off; None restores the default.

    Args:
        enabled: True to print on standard error, False to only log, None for the default
            (``DELTATX_PROGRESS`` if set, else on when standard error is a terminal).
    """
    global _enabled
    _enabled = enabled


def progress_enabled() -> bool:
    """Whether progress lines are printed on standard error (see :func:`enable_progress`)."""
    if _enabled is not None:
        return _enabled
    setting = os.environ.get("DELTATX_PROGRESS", "").strip().lower()
    if setting in ("1", "true", "yes", "on"):
        return True
    if setting in ("0", "false", "no", "off"):
        return False
    return sys.stderr.isatty()


def _say(op: _Operation, text: str) -> None:
    line = f"{op.name} {op.target}: {text}"
    logger.info(line)
    if progress_enabled():
        print(f"deltatx: {line}", file=sys.stderr, flush=True)


def _close_phase(op: _Operation, now: float) -> None:
    if op.phase is not None:
        op.phases.append((op.phase, now - op.phase_started))
        op.phase = None


def step(phase: str) -> None:
    """Marks the start of ``phase`` in the current operation (and the end of the previous one).

    Args:
        phase: What the operation does from now on, e.g. ``"scanning"``, ``"writing"``.
    """
    op = _current.get()
    if op is None or op.phase == phase:
        return
    now = time.monotonic()
    _close_phase(op, now)
    op.phase, op.phase_started = phase, now
    _say(op, f"{phase}…")


@contextmanager
def operation(name: str, target: str) -> Iterator[None]:
    """Reports the phases of one operation, and its total time when it ends.

    Nested operations (a MERGE inside a transaction) report as part of the outer one.

    Args:
        name: The operation, e.g. ``"MERGE"``.
        target: What it works on, usually the table path.

    Yields:
        Nothing; :func:`step` marks the phases inside.
    """
    if _current.get() is not None:
        yield
        return
    op = _Operation(name, target, time.monotonic())
    token = _current.set(op)
    try:
        yield
    except BaseException:
        _close_phase(op, time.monotonic())
        _say(op, f"failed after {time.monotonic() - op.started:.1f} s")
        raise
    else:
        _close_phase(op, time.monotonic())
        spent = ", ".join(f"{p} {s:.1f} s" for p, s in op.phases)
        _say(
            op, f"done in {time.monotonic() - op.started:.1f} s" + (f" ({spent})" if spent else "")
        )
    finally:
        _current.reset(token)


__all__ = ["enable_progress", "operation", "progress_enabled", "step"]
