"""Case 13: replay of a few very large commits (issue 15), deltatx next to delta-rs.

Three commits hold ``adds`` ``add`` actions between them, each with statistics on 100 long
columns (about 4.5 KB of JSON per action), and no checkpoint, so loading the latest snapshot
is all JSON decoding and state building. Both engines load the same log; delta-rs runs in a
spawned process. Alone: ``python -m benchmarks.replay_case [--adds N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable

from benchmarks import rs_workers
from benchmarks.harness import Figure, Row, Stats, measure, spawn_context
from deltatx.kernel.log_paths import commit_name
from deltatx.log.delta_log import DeltaLog
from deltatx.version import __version__ as DELTATX_VERSION

COLUMNS = 100
COMMITS = 3
FULL_ADDS = 300_000
QUICK_ADDS = 15_000
BASE_TS = 1_700_000_000_000


def _stats(n: int) -> str:
    lo = n * 1000
    return json.dumps(
        {
            "numRecords": 1000,
            "minValues": {f"c{j}": lo + j for j in range(COLUMNS)},
            "maxValues": {f"c{j}": lo + j + 999 for j in range(COLUMNS)},
            "nullCount": {f"c{j}": 0 for j in range(COLUMNS)},
        },
        separators=(",", ":"),
    )


def build_wide_log(table: str, adds: int) -> None:
    """Writes ``COMMITS`` commits holding ``adds`` adds with 100-column statistics in all."""
    log = os.path.join(table, "_delta_log")
    os.makedirs(log, exist_ok=True)
    fields = [
        {"name": f"c{j}", "type": "long", "nullable": True, "metadata": {}} for j in range(COLUMNS)
    ]
    metadata = {
        "id": "bench-wide-0000-0000-000000000000",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": BASE_TS,
    }
    per_commit = -(-adds // COMMITS)
    n = 0
    for version in range(COMMITS):
        info = {"timestamp": BASE_TS + version, "operation": "WRITE", "isBlindAppend": True}
        lines = [json.dumps({"commitInfo": info})]
        if version == 0:
            lines.append(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}))
            lines.append(json.dumps({"metaData": metadata}))
        for _ in range(min(per_commit, adds - n)):
            add = {
                "path": f"part-{n:09d}.parquet",
                "partitionValues": {},
                "size": 100_000 + n % 997,
                "modificationTime": BASE_TS + n,
                "dataChange": True,
                "stats": _stats(n),
            }
            lines.append(json.dumps({"add": add}, separators=(",", ":")))
            n += 1
        with open(os.path.join(log, commit_name(version)), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def _rs_version() -> str:
    try:
        import deltalake

        return str(deltalake.__version__)
    except ImportError:
        return "n/a"


def case_large_commits(workdir: str, adds: int, runs: int, log: Callable[[str], None]) -> list[Row]:
    """Times loading the latest snapshot of the wide log, deltatx and delta-rs."""
    table = os.path.join(workdir, f"wide-{adds}")
    shutil.rmtree(table, ignore_errors=True)
    log(f"building {COMMITS} commits with {adds:,} adds of {COLUMNS}-column stats ...")
    build_wide_log(table, adds)
    dx = measure(lambda: DeltaLog.for_table(table).snapshot(), runs=runs, warmup=1)
    rs: list[float] | None
    try:
        with spawn_context().Pool(1) as pool:
            rs = pool.apply(rs_workers.rs_load, (table, runs, 1))
    except ImportError:
        rs = None
    row = Row(
        case="13 large commits",
        name=f"load latest snapshot: {COMMITS} commits, stats on {COLUMNS} columns",
        size=f"{adds:,} adds",
        unit="s",
        deltatx=Figure("deltatx", DELTATX_VERSION, dx),
        peer=None if rs is None else Figure("delta-rs", _rs_version(), Stats.of(rs)),
        target="no slower than delta-rs",
        x=adds,
    )
    row.met = None if row.ratio is None else row.ratio <= 1.0
    shutil.rmtree(table, ignore_errors=True)
    return [row]


def main(argv: list[str] | None = None) -> int:
    """Runs case 13 alone and prints the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--adds", type=int, default=FULL_ADDS)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="deltatx-bench-replay-")
    try:
        for row in case_large_commits(
            workdir, args.adds, args.runs, lambda m: print(m, file=sys.stderr)
        ):
            peer = row.peer.stats.median if row.peer and row.peer.stats else None
            ours = row.deltatx.stats.median if row.deltatx.stats else None
            print(
                f"{row.name} ({row.size}): deltatx {ours} s, delta-rs {peer} s, ratio {row.ratio}"
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
