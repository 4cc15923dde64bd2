"""How many examples a property test draws.

``make test`` draws a quarter of each heavy property's examples (Hypothesis draws different
ones every run, so the runs add up); ``make stress`` (``DELTATX_STRESS_FULL=1``) draws them all.
"""

from __future__ import annotations

import os

FULL = os.environ.get("DELTATX_STRESS_FULL") == "1"


def examples(full: int) -> int:
    """``full`` under ``make stress``; a quarter of it (at least 100) under ``make test``."""
    return full if FULL else max(100, full // 4)
