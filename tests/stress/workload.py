"""A bounded random workload of appends and partition overwrites, and its checker.

Every acknowledged commit is logged with its version and the rows it wrote. Replaying the
acknowledged commits in version order on a plain model must give exactly the final table:
nothing lost, nothing twice, nothing from a failed attempt.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PARTITIONS = ("p0", "p1", "p2", "p3")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One logged attempt."""

    writer: str
    seq: int
    op: str
    partition: str
    ids: list[int]
    version: int | None
    error: str | None


# Attempts each writer makes however slow the machine: on a loaded CI machine a writer that
# only starts near the end of its seconds still races the others.
MIN_ATTEMPTS = 4


def run_writer(spark: Any, path: str, writer: str, *, seconds: float, out: Path, seed: int) -> None:
    """Appends or overwrites random partitions until ``seconds`` pass; logs every attempt.

    Each writer makes at least ``MIN_ATTEMPTS`` attempts.

    Row ids are ``seed * 1_000_000 + seq * 10 + i``, so writers given distinct seeds never write
    the same id and a duplicated row can only come from the table.
    """
    import deltatx
    from deltatx.errors import ConcurrentModificationException

    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    seq = 0
    with out.open("a") as log:
        while seq < MIN_ATTEMPTS or time.monotonic() < deadline:
            seq += 1
            part = rng.choice(PARTITIONS)
            op = "overwrite" if rng.random() < 0.3 else "append"
            base = seed * 1_000_000 + seq * 10
            ids = [base + i for i in range(rng.randint(1, 3))]
            df = spark.createDataFrame(
                [(i, part, writer) for i in ids], "id BIGINT, part STRING, writer STRING"
            )
            version: int | None = None
            error: str | None = None
            try:
                if op == "append":
                    version = deltatx.write(df, path, mode="append")
                else:
                    version = deltatx.write(
                        df, path, mode="overwrite", replace_where=f"part = '{part}'"
                    )
            except ConcurrentModificationException as exc:
                error = type(exc).__name__
            record = Attempt(writer, seq, op, part, ids, version, error)
            log.write(json.dumps(asdict(record)) + "\n")
            log.flush()


def load_attempts(files: list[Path]) -> list[Attempt]:
    """Every attempt logged in ``files``."""
    out = []
    for f in files:
        for line in f.read_text().splitlines():
            out.append(Attempt(**json.loads(line)))
    return out


def expected_rows(attempts: list[Attempt]) -> set[int]:
    """Replays the acknowledged attempts in version order on a model table."""
    rows: dict[str, set[int]] = {p: set() for p in PARTITIONS}
    for a in sorted((a for a in attempts if a.version is not None), key=lambda a: a.version or 0):
        if a.op == "overwrite":
            rows[a.partition] = set(a.ids)
        else:
            rows[a.partition] |= set(a.ids)
    return set().union(*rows.values())
