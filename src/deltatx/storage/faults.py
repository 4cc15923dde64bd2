"""Named fault points that crash-injection tests can arm.

A test sets ``DELTATX_FAULT=<point>`` (optionally ``<point>:<n>`` to fire at the n-th pass) in a
writer process; when that process reaches the point it kills itself with SIGKILL, as a power
cut would. Unarmed, a fault point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

_counts: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Dies here if the environment arms this point; otherwise does nothing."""
    armed = os.environ.get("DELTATX_FAULT")
    if not armed:
        return
    point, _, nth = armed.partition(":")
    if point != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] >= (int(nth) if nth else 1):
        os.kill(os.getpid(), signal.SIGKILL)
