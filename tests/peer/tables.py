"""Helpers shared by the peer tests: rows in a comparable form and a look at the raw log."""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx import DeltaTable


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as sorted JSON strings, the form both engines' answers are compared in."""
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def ours(spark: SparkSession, path: str, version: int | None = None) -> list[str]:
    """deltatx's rows of the table at ``version`` (latest if None)."""
    df = DeltaTable.for_path(spark, path).to_df(version=version)
    return canonical([r.asDict(recursive=True) for r in df.collect()])


def events(spark: SparkSession, start: int, n: int, day: str = "2024-01-01") -> DataFrame:
    """``n`` rows ``id, date, v`` from ``start``, all on ``day``."""
    return spark.range(start, start + n).select(
        F.col("id"), F.lit(day).alias("date"), (F.col("id") * 1.5).alias("v")
    )


def log_actions(path: str) -> list[tuple[int, dict[str, Any]]]:
    """Every action of every commit file as (version, action), read straight from the JSON."""
    out: list[tuple[int, dict[str, Any]]] = []
    for f in sorted((Path(path) / "_delta_log").glob("*.json")):
        if not f.stem.isdigit():
            continue
        for line in f.read_text().splitlines():
            if line.strip():
                out.append((int(f.stem), json.loads(line)))
    return out


def latest_version(path: str) -> int:
    """The newest commit file's version."""
    return max(v for v, _ in log_actions(path))


def has_deletion_vectors(path: str) -> bool:
    """Whether any add in the log carries a deletion vector."""
    return any("deletionVector" in a.get("add", {}) for _, a in log_actions(path) if "add" in a)


def checkpoints(path: str) -> list[str]:
    """Names of the checkpoint files in the log folder."""
    return sorted(p.name for p in (Path(path) / "_delta_log").glob("*.checkpoint*"))


def table_properties(path: str) -> dict[str, str]:
    """The table properties of the newest metadata action in the log."""
    found: dict[str, str] = {}
    for _, action in log_actions(path):
        if "metaData" in action:
            found = dict(action["metaData"].get("configuration") or {})
    return found


# `make test` (whose whole run must stay under 30 minutes on two cores) compares both engines'
# rows at the versions below; `make peer` (DELTATX_PEER_FULL=1) at every version.
FULL = bool(os.environ.get("DELTATX_PEER_FULL"))


def compared_versions(path: str) -> list[int]:
    """The versions at which the peer tests compare both engines' rows of a table.

    Every version under ``make peer``. Otherwise the first, the newest two (the whole
    history's effect, and one time travel back over the last change), and each version a
    checkpoint was written at (where reading switches from commits to the checkpoint).
    """
    every = sorted(
        int(f.stem) for f in (Path(path) / "_delta_log").glob("*.json") if f.stem.isdigit()
    )
    if FULL or len(every) <= 4:
        return every
    at_checkpoints = {
        int(name.split(".")[0]) for name in checkpoints(path) if name.split(".")[0].isdigit()
    }
    return sorted({every[0], every[-2], every[-1], *(at_checkpoints & set(every))})


def scenario_params(names: Iterable[str], *, sample: Collection[str]) -> list[Any]:
    """Parameters for a scenario table; under ``make test`` only those in ``sample`` run.

    The conformance table (``test_conformance``) reads every feature's table both ways in
    ``make test``; the scenario tables add longer histories, which ``make peer`` runs whole.
    """
    only_full = pytest.mark.skipif(
        not FULL,
        reason=(
            "make test runs a sample of the scenario histories (the conformance table reads "
            "every feature both ways); make peer runs them all"
        ),
    )
    return [n if n in sample else pytest.param(n, marks=only_full) for n in names]
