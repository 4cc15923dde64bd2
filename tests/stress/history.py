"""Random transactions against one table, logged, and a checker that replays the history.

Rows are (key, counter, writer). Transactions: blind appends of new keys (and, under
WriteSerializable, re-inserts of existing keys, the txn1/txn2 pattern), increments of one key's
counter, deletes of one key, merges (upsert a key), compactions and property changes. Each
attempt logs its read version, its intent and its outcome.

The checker replays the committed transactions in log order on a plain model. A DML
transaction applies to the rows that existed at its read version: under Serializable that is
every row it could see at commit (blind appends in between make it fail); under
WriteSerializable blind appends committed in between are exactly the ones the documented
reordering places after it, so their rows are left alone.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DOCUMENTED = {
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "MetadataChangedException",
    "ConcurrentTransactionException",
    "ProtocolChangedException",
}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One logged transaction attempt."""

    writer: str
    op: str
    key: int
    read_version: int
    version: int | None
    error: str | None
    new_keys: list[int] = field(default_factory=list)


def run_history(
    spark: Any, path: str, writer: str, *, seconds: float, out: Path, seed: int, reinsert: bool
) -> None:
    """Runs random transactions on ``path`` until ``seconds`` pass, logging every attempt."""
    from deltatx import DeltaTable
    from deltatx.errors import ConcurrentModificationException

    rng = random.Random(seed)
    dt = DeltaTable.for_path(spark, path)
    deadline = time.monotonic() + seconds
    serial = 0
    with out.open("a") as log:
        while time.monotonic() < deadline:
            serial += 1
            txn = dt.begin()
            keys = sorted(r["key"] for r in txn.to_df().select("key").distinct().collect())
            op = rng.choice(
                [
                    "append",
                    "append",
                    "increment",
                    "increment",
                    "delete",
                    "merge",
                    "compact",
                    "property",
                ]
            )
            key = rng.choice(keys) if keys else -1
            new_keys: list[int] = []
            if op in ("increment", "delete", "merge") and key < 0:
                op = "append"
            if op == "append":
                base = (seed + 1) * 1_000_000 + serial * 10
                new_keys = [base, base + 1]
                if reinsert and keys and rng.random() < 0.3:
                    new_keys = [rng.choice(keys)]
                df = spark.createDataFrame(
                    [(k, 0, writer) for k in new_keys], "key BIGINT, counter BIGINT, writer STRING"
                )
                txn.write(df)
            elif op == "increment":
                txn.update(f"key = {key}", set={"counter": "counter + 1"})
            elif op == "delete":
                txn.delete(f"key = {key}")
            elif op == "merge":
                src = spark.createDataFrame(
                    [(key, 0, writer)], "key BIGINT, counter BIGINT, writer STRING"
                )
                (
                    txn.alias("t")
                    .merge(src.alias("s"), "t.key = s.key")
                    .when_matched_update(set={"counter": "t.counter + 1"})
                    .when_not_matched_insert_all()
                    .execute()
                )
            elif op == "compact":
                txn.optimize().execute_compaction()
            else:
                txn.set_properties({"history.serial": str(serial)})
            version: int | None = None
            error: str | None = None
            try:
                version = txn.commit()
            except ConcurrentModificationException as exc:
                error = type(exc).__name__
            except Exception as exc:  # recorded so the checker can flag it
                error = f"UNDOCUMENTED {type(exc).__name__}: {exc}"
            attempt = Attempt(writer, op, key, txn.read_version, version, error, new_keys)
            log.write(json.dumps(asdict(attempt)) + "\n")
            log.flush()


def load(files: Iterable[Path]) -> list[Attempt]:
    """Every attempt logged in ``files``."""
    out = []
    for f in files:
        for line in f.read_text().splitlines():
            out.append(Attempt(**json.loads(line)))
    return out


def replay(attempts: list[Attempt], initial: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The model table after the committed attempts, applied in version order.

    A row is ``[key, counter, version it was inserted]``; a DML only touches rows inserted at
    or before its read version (see the module docstring).
    """
    rows: list[list[int]] = [[k, c, 0] for k, c in initial]
    for a in sorted((a for a in attempts if a.version is not None), key=lambda a: a.version or 0):
        assert a.version is not None
        visible = [r for r in rows if r[0] == a.key and r[2] <= a.read_version]
        if a.op == "append":
            rows.extend([k, 0, a.version] for k in a.new_keys)
        elif a.op == "increment":
            for r in visible:
                r[1] += 1
        elif a.op == "delete":
            rows = [r for r in rows if not (r[0] == a.key and r[2] <= a.read_version)]
        elif a.op == "merge":
            if visible:
                for r in visible:
                    r[1] += 1
            else:
                rows.append([a.key, 0, a.version])
    return sorted((k, c) for k, c, _ in rows)
