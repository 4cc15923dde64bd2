"""Crash injection: writers SIGKILLed at every fault point and at random times (seed 003).

Rounds of three writer processes (``crash_writer.py``, log level, no Spark) commit blind
appends and partition overwrites to one table. In each round one writer is armed at a fault
point of the commit path (cycling through all of them), one is killed by the parent at a random
moment after it starts, and one runs to the end. After every round, with no writer running:

- the table opens and every commit file parses, versions contiguous from 0 (no partial commit);
- every acknowledged commit is in the log at its version, with its txnId;
- the snapshot equals an independent replay of the commit files without any checkpoint, also
  after a torn checkpoint or ``_last_checkpoint`` left by a crash is put in place, as a store
  without atomic whole-file writes would leave it;
- every file the log references exists; then VACUUM (retention 0, clock in the future) deletes
  exactly the unreferenced data files: afterwards the data files on disk are exactly the live
  files of the latest snapshot.

The totals are printed at the end (``pytest -s``). ``DELTATX_STRESS_FULL=1`` runs hundreds of
crashes; the default run injects ten, one at each fault point.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltatx.kernel.actions import AddFile, CommitInfo, Metadata, RemoveFile
from deltatx.kernel.codec import parse_commit
from deltatx.kernel.features import DEFAULT_PROTOCOL
from deltatx.kernel.log_paths import LogFileKind, commit_name, parse_log_file
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.log.vacuum import vacuum
from deltatx.storage import LocalLogStore

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def create_table(table: str, configuration: dict[str, str]) -> None:
    log = DeltaLog.for_table(table, store=LocalLogStore())
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(DEFAULT_PROTOCOL)
    txn.update_metadata(
        Metadata(
            id=str(uuid.uuid4()),
            schema_string=SCHEMA,
            partition_columns=("part",),
            configuration=configuration,
            created_time=int(time.time() * 1000),
        )
    )
    txn.record_operation(Operation(OperationName.CREATE_TABLE, {}), {})
    txn.commit()


HERE = Path(__file__).parent
FULL = bool(os.environ.get("DELTATX_STRESS_FULL"))
TARGET_CRASHES = int(os.environ.get("DELTATX_STRESS_CRASHES", "320" if FULL else "10"))
COMMITS_PER_WRITER = 6
FAULT_POINTS = (
    "commit.before_write",
    "commit.partial_write",
    "commit.after_link",
    "commit.after_write",
    "log_store.partial_write",
    "log_store.after_link",
    "checkpoint.partial_write",
    "checkpoint.after_link",
    "checkpoint.last_checkpoint",
    "last_checkpoint.partial_write",
)


@dataclass
class Totals:
    rounds: int = 0
    crashes: Counter[str] = field(default_factory=Counter)
    armed_not_reached: int = 0
    attempted: int = 0
    acknowledged: int = 0
    failed_conflicts: int = 0
    unacknowledged_but_committed: int = 0
    torn_checkpoints_planted: int = 0
    torn_pointers_planted: int = 0
    vacuumed_files: int = 0
    vacuumed_orphans: int = 0
    anomalies: list[str] = field(default_factory=list)


def _spawn(
    table: str, name: str, journal: Path, seed: int, fault: str | None
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "DELTATX_FAULT"}
    if fault is not None:
        env["DELTATX_FAULT"] = fault
    return subprocess.Popen(
        [
            sys.executable,
            str(HERE / "crash_writer.py"),
            table,
            name,
            str(COMMITS_PER_WRITER),
            str(journal),
            str(seed),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_later(proc: subprocess.Popen[str], delay: float) -> None:
    assert proc.stdout is not None
    proc.stdout.readline()  # "ready": the imports are done, the writer is about to work
    time.sleep(delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)


def _journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        # Cannot happen with fsynced whole lines; a torn last line would prove nothing anyway.
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def _data_files(root: str) -> set[str]:
    out = set()
    for dirpath, _dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir.split(os.sep)[0] == "_delta_log":
            continue
        for name in files:
            out.add(os.path.normpath(os.path.join(rel_dir, name)))
    return out


def _model_replay(log_dir: Path, latest: int) -> tuple[dict[str, AddFile], dict[int, list[Any]]]:
    """Replays every commit file from 0, ignoring checkpoints: the reference state."""
    live: dict[str, AddFile] = {}
    commits: dict[int, list[Any]] = {}
    for v in range(latest + 1):
        actions = parse_commit((log_dir / commit_name(v)).read_bytes(), where=commit_name(v))
        commits[v] = actions
        for a in actions:
            if isinstance(a, AddFile):
                live[a.path] = a
            elif isinstance(a, RemoveFile):
                live.pop(a.path, None)
    return live, commits


def _plant_torn_files(log_dir: Path, totals: Totals, rng: random.Random) -> None:
    """Puts half-written temp files under their real names, as a non-atomic store would."""
    for tmp in log_dir.glob(".*.tmp"):
        real = tmp.name[1:].rsplit(".", 2)[0]
        f = parse_log_file(real)
        if f is not None and f.kind is LogFileKind.CHECKPOINT:
            shutil.copyfile(tmp, log_dir / real)
            totals.torn_checkpoints_planted += 1
        elif real == "_last_checkpoint" and rng.random() < 0.5:
            shutil.copyfile(tmp, log_dir / real)
            totals.torn_pointers_planted += 1
        tmp.unlink()


def _check(table: str, journals: list[Path], totals: Totals, rng: random.Random) -> None:
    bad = totals.anomalies
    log_dir = Path(table) / "_delta_log"
    _plant_torn_files(log_dir, totals, rng)
    log = DeltaLog.for_table(table, store=LocalLogStore())
    commits_on_disk = sorted(
        f.version
        for p in log_dir.iterdir()
        if (f := parse_log_file(p.name)) is not None and f.kind is LogFileKind.COMMIT
    )
    latest = commits_on_disk[-1]
    if commits_on_disk != list(range(latest + 1)):
        bad.append(f"round {totals.rounds}: versions not contiguous: {commits_on_disk}")
    try:
        live, commits = _model_replay(log_dir, latest)
    except Exception as exc:  # a partial commit would land here
        bad.append(f"round {totals.rounds}: a commit file does not parse: {exc}")
        return
    try:
        snap = log.snapshot()
    except Exception as exc:
        bad.append(f"round {totals.rounds}: the table does not open: {exc!r}")
        return
    if snap.version != latest:
        bad.append(f"round {totals.rounds}: snapshot version {snap.version} != {latest}")
    if {f.path for f in snap.add_files()} != set(live):
        bad.append(f"round {totals.rounds}: snapshot differs from the replay without checkpoints")
    txn_ids: dict[str, int] = {}
    attempts_in_log: dict[str, int] = {}
    for v, actions in commits.items():
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        if info is None or info.txn_id is None:
            bad.append(f"version {v} has no commitInfo.txnId")
            continue
        if info.txn_id in txn_ids:
            bad.append(f"txnId {info.txn_id} committed twice ({txn_ids[info.txn_id]}, {v})")
        txn_ids[info.txn_id] = v
        if info.user_metadata:
            if info.user_metadata in attempts_in_log:
                bad.append(f"attempt {info.user_metadata} committed twice")
            attempts_in_log[info.user_metadata] = v
    for j in journals:
        for rec in _journal(j):
            if rec["kind"] == "ack" and txn_ids.get(rec["txn_id"]) != rec["version"]:
                bad.append(f"acknowledged {rec['attempt']} v{rec['version']} is not in the log")
            if rec["kind"] == "failed" and rec["attempt"] in attempts_in_log:
                bad.append(f"failed attempt {rec['attempt']} is visible in the log")
    on_disk = _data_files(table)
    missing = set(live) - on_disk
    if missing:
        bad.append(f"referenced files missing before VACUUM: {sorted(missing)[:3]}")
    referenced_ever = {a.path for acts in commits.values() for a in acts if isinstance(a, AddFile)}
    orphans = on_disk - referenced_ever
    # VACUUM: retention 0 and a clock an hour ahead, so everything unreferenced is old enough.
    metrics = vacuum(
        log, retention_hours=0, enforce_retention=False, now_ms=int(time.time() * 1000) + 3_600_000
    )
    deleted = {os.path.relpath(p, table) for p in metrics.deleted_paths}
    totals.vacuumed_files += len(deleted)
    totals.vacuumed_orphans += len(deleted & orphans)
    if deleted & set(live):
        bad.append(f"VACUUM deleted live files: {sorted(deleted & set(live))[:3]}")
    if any(p.startswith("..") or os.path.isabs(p) for p in deleted):
        bad.append(f"VACUUM deleted outside the root: {sorted(deleted)[:3]}")
    after = _data_files(table)
    final = {f.path for f in log.snapshot().add_files()}
    if after != final:
        extra, lost = sorted(after - final)[:3], sorted(final - after)[:3]
        bad.append(f"after VACUUM: unreferenced left {extra}, referenced lost {lost}")


def _account(journals: list[Path], totals: Totals, committed_attempts: set[str]) -> None:
    for j in journals:
        recs = _journal(j)
        acked = {r["attempt"] for r in recs if r["kind"] == "ack"}
        totals.attempted += sum(r["kind"] == "intent" for r in recs)
        totals.acknowledged += len(acked)
        totals.failed_conflicts += sum(r["kind"] == "failed" for r in recs)
        intents = {r["attempt"] for r in recs if r["kind"] == "intent"}
        totals.unacknowledged_but_committed += len((intents - acked) & committed_attempts)


def _committed_attempts(table: str) -> set[str]:
    log = DeltaLog.for_table(table)
    out = set()
    for v in range(log.latest_version() + 1):
        info = next((a for a in log.read_commit(v) if isinstance(a, CommitInfo)), None)
        if info is not None and info.user_metadata:
            out.add(info.user_metadata)
    return out


def test_crash_injection(tmp_path: Path) -> None:
    table = str(tmp_path / "table")
    create_table(
        table,
        configuration={"delta.checkpointInterval": "2", "delta.isolationLevel": "Serializable"},
    )
    rng = random.Random(int(os.environ.get("DELTATX_STRESS_SEED", "8")))
    totals = Totals()
    all_journals: list[Path] = []
    started = time.monotonic()
    while sum(totals.crashes.values()) < TARGET_CRASHES or not all(
        totals.crashes[p] for p in FAULT_POINTS
    ):
        totals.rounds += 1
        r = totals.rounds
        if totals.rounds > TARGET_CRASHES * 3:
            totals.anomalies.append("the harness could not inject enough crashes")
            break
        # The point that has crashed least so far, so that every point is covered early.
        point = min(FAULT_POINTS, key=lambda p: (totals.crashes[p], FAULT_POINTS.index(p)))
        armed = f"{point}:{rng.randint(1, 2)}"
        journals = [tmp_path / f"r{r}-w{i}.jsonl" for i in range(3)]
        all_journals.extend(journals)
        procs = [
            _spawn(table, f"r{r}w0", journals[0], rng.randrange(1 << 30), armed),
            _spawn(table, f"r{r}w1", journals[1], rng.randrange(1 << 30), None),
            _spawn(table, f"r{r}w2", journals[2], rng.randrange(1 << 30), None),
        ]
        killer = threading.Thread(target=_kill_later, args=(procs[1], rng.uniform(0.0, 0.4)))
        killer.start()
        for p in procs:
            p.wait(timeout=120)
        killer.join()
        for i, p in enumerate(procs):
            stderr = p.stderr.read() if p.stderr is not None else ""
            if p.stdout is not None:
                p.stdout.close()
            if p.stderr is not None:
                p.stderr.close()
            if p.returncode == -signal.SIGKILL:
                totals.crashes[point if i == 0 else "random"] += 1
            elif p.returncode != 0:
                totals.anomalies.append(f"round {r} writer {i} failed: {stderr[-2000:]}")
            elif i == 0:
                totals.armed_not_reached += 1
        _check(table, journals, totals, rng)
    _account(all_journals, totals, _committed_attempts(table))
    elapsed = time.monotonic() - started
    print(
        "\ncrash injection totals: "
        + json.dumps(
            {
                "rounds": totals.rounds,
                "crashes_injected": sum(totals.crashes.values()),
                "crashes_by_point": dict(sorted(totals.crashes.items())),
                "armed_point_not_reached": totals.armed_not_reached,
                "commits_attempted": totals.attempted,
                "commits_acknowledged": totals.acknowledged,
                "conflicts_raised": totals.failed_conflicts,
                "committed_but_unacknowledged": totals.unacknowledged_but_committed,
                "torn_checkpoints_planted": totals.torn_checkpoints_planted,
                "torn_last_checkpoint_planted": totals.torn_pointers_planted,
                "vacuumed_files": totals.vacuumed_files,
                "vacuumed_orphans": totals.vacuumed_orphans,
                "anomalies": len(totals.anomalies),
                "seconds": round(elapsed, 1),
            },
            indent=1,
        )
    )
    assert not totals.anomalies, "\n".join(totals.anomalies[:20])
    assert all(totals.crashes[p] for p in FAULT_POINTS), totals.crashes
