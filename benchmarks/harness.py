"""Timing, results and the machine description shared by every benchmark case.

A *figure* is the median (and p99) of at least ``runs`` timed runs after ``warmup`` untimed
ones. A *row* puts deltatx's figure next to the comparison's figure measured in the same run,
with the ratio, the size and the goal the issue sets for it. Goals are recorded, never asserted.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

MIN_RUNS = 3


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of repeated measurements of one quantity (seconds unless ``unit`` says not)."""

    median: float
    p99: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        """Summarises ``samples`` (at least one)."""
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)
        return cls(
            median=statistics.median(ordered),
            p99=percentile(ordered, 99.0),
            min=ordered[0],
            max=ordered[-1],
            n=len(ordered),
        )


def percentile(ordered: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile of sorted samples (nearest rank, so p99 of 3 is the maximum)."""
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[rank - 1]


def measure(
    op: Callable[[], object],
    *,
    runs: int,
    warmup: int = 1,
    setup: Callable[[], object] | None = None,
) -> Stats:
    """Times ``op`` ``runs`` times after ``warmup`` untimed calls; ``setup`` runs untimed first."""
    samples: list[float] = []
    for i in range(warmup + max(runs, MIN_RUNS)):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        op()
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            samples.append(elapsed)
    return Stats.of(samples)


@dataclass(slots=True)
class Figure:
    """One side of a comparison: who, which version, and the summary."""

    engine: str
    version: str
    stats: Stats | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Row:
    """One line of the report.

    Attributes:
        case: Case number and short name, e.g. ``"1 commit"``.
        name: What was measured, e.g. ``"commit 100 adds, fsync"``.
        size: The size in words (``"1,000 versions, 100 actions"``).
        x: The numeric size along the case's scaling axis (for plots), or None.
        plot: The plot this row belongs to, or None.
        unit: ``"s"`` for times, otherwise the unit of the figures (e.g. ``"commits/s"``).
        higher_is_better: True for throughputs.
        deltatx: deltatx's figure.
        peer: The comparison's figure, or None when there is no peer.
        target: The goal, in words.
        met: Whether the goal is met; None when it does not apply or cannot be judged.
        notes: Anything a reader needs (Spark jobs per operation, failures, scaling down).
    """

    case: str
    name: str
    size: str
    unit: str
    deltatx: Figure
    peer: Figure | None = None
    target: str = ""
    met: bool | None = None
    x: float | None = None
    plot: str | None = None
    higher_is_better: bool = False
    notes: str = ""

    @property
    def ratio(self) -> float | None:
        """deltatx / peer for times (lower is better), peer / deltatx for throughputs.

        Either way a ratio below 1 means deltatx is ahead.
        """
        if self.peer is None or self.peer.stats is None or self.deltatx.stats is None:
            return None
        ours, theirs = self.deltatx.stats.median, self.peer.stats.median
        if self.higher_is_better:
            return theirs / ours if ours else None
        return ours / theirs if theirs else None

    def to_json(self) -> dict[str, Any]:
        """A plain dict for ``latest.json``."""
        out = asdict(self)
        out["ratio"] = self.ratio
        return out


# A fixed amount of pure-Python work. On a shared virtual machine the speed at which this host
# runs Python moves by half within minutes; figures in microseconds move with it, ratios measured
# side by side do not.
_GAUGE_STEPS = 5_000_000


def host_gauge_s() -> float:
    """CPU seconds this process takes, now, for a fixed loop of 5 million additions."""
    t0 = time.process_time()
    total = 0
    for i in range(_GAUGE_STEPS):
        total += i
    return time.process_time() - t0


def machine() -> dict[str, Any]:
    """Cores, memory, CPU and OS of this machine."""
    mem_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": round(mem_bytes / 2**30, 1),
        "cpu": cpu,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def versions() -> dict[str, str]:
    """The versions of deltatx and of every peer the suite compares with."""
    import deltalake
    import pyarrow
    import pyspark

    from deltatx.version import __version__

    return {
        "deltatx": __version__,
        "deltalake": deltalake.__version__,
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
    }


def spawn_context() -> mp.context.SpawnContext:
    """delta-rs does not survive ``fork``: every peer process is started with ``spawn``."""
    return mp.get_context("spawn")


def run_in_spawned(fn: Callable[..., Any], *args: Any) -> Any:
    """Runs ``fn(*args)`` in one fresh spawned process and returns its (picklable) result."""
    with spawn_context().Pool(1) as pool:
        return pool.apply(fn, args)
