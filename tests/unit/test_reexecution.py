"""Re-execution of conflicting statements, at log level (no Spark session is started).

The policy (which conflicts, which statements) is table-driven; the replay loop runs through
the facade's Transaction with statements declared via ``run(work, statement=...)`` that stage
log-level actions, so the interleavings are exact and cheap.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentModificationException,
    ConcurrentTransactionException,
    InvalidArgumentError,
    MetadataChangedException,
    ProtocolChangedException,
)
from deltatx.kernel.actions import CommitInfo
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.reexecution import (
    NO_BACKOFF,
    Backoff,
    Reexecution,
    Statement,
    StatementKind,
    commit_annotations,
    conflict_reason,
    refuse,
    statement_reason,
    transaction_reason,
)
from deltatx.storage import MemoryLogStore
from deltatx.tables import Transaction

from .logtables import add, append, create_table, eq

ROOT = "/mem/table"
NO_SPARK: Any = None  # the statements below stage log actions only


def _conflict(cls: type[ConcurrentModificationException]) -> ConcurrentModificationException:
    return cls(winning_version=3, winning_operation="WRITE")


# Delta Lake's isolation-level documentation: the three data conflicts mean the statement read
# or removes data a winner changed (re-running reads it as it now is); metadata, protocol and
# application-id conflicts change what the statement means or would write work twice.
@pytest.mark.parametrize(
    ("cls", "retried", "because"),
    [
        (ConcurrentAppendException, True, None),
        (ConcurrentDeleteReadException, True, None),
        (ConcurrentDeleteDeleteException, True, None),
        (MetadataChangedException, False, "metadata (schema or properties) changed"),
        (ProtocolChangedException, False, "protocol changed"),
        (ConcurrentTransactionException, False, "same application id"),
    ],
)
def test_which_conflicts_are_re_executed(
    cls: type[ConcurrentModificationException], retried: bool, because: str | None
) -> None:
    reason = conflict_reason(_conflict(cls))
    if retried:
        assert reason is None
    else:
        assert reason is not None
        assert cls.__name__ in reason and because in reason


@pytest.mark.parametrize(
    ("expressions", "offending"),
    [
        ([("condition", "id = 1")], None),
        ([("condition", None)], None),
        ([("condition", "part = 'a' AND value BETWEEN 1 AND 5")], None),
        ([("SET value", "value + 1"), ("SET part", "upper(part)")], None),
        ([("condition", "date >= current_date()")], None),
        ([("condition", "rand() < 0.5")], "rand() < 0.5"),
        ([("condition", "id = 1"), ("SET tag", "uuid()")], "uuid()"),
        ([("condition", "id IN (SELECT id FROM other)")], "SELECT id FROM other"),
        ([("condition", "monotonically_increasing_id() = 3")], "monotonically_increasing_id"),
        ([("condition", "id = (")], "id = ("),
    ],
)
def test_which_statements_qualify(
    expressions: list[tuple[str, str | None]], offending: str | None
) -> None:
    reason = statement_reason(StatementKind.UPDATE, expressions)
    if offending is None:
        assert reason is None
    else:
        assert reason is not None
        assert offending in reason and "not deterministic" in reason and "UPDATE" in reason


def _noop(spark: Any, txn: OptimisticTransaction) -> None:
    del spark, txn


def test_a_transaction_qualifies_only_when_every_statement_does() -> None:
    good = Statement(StatementKind.DELETE, _noop)
    bad = Statement(StatementKind.READ, _noop, "the transaction read the table")
    assert transaction_reason([good, good]) is None
    reason = transaction_reason([good, bad, good])
    assert reason is not None
    assert reason.startswith("statement 2 of 3 (READ): the transaction read the table")
    assert transaction_reason([]) is not None


def test_backoff_grows_caps_and_is_validated() -> None:
    fixed = Backoff(initial_ms=10, max_ms=50, multiplier=2, jitter=0)
    assert [fixed.delay_ms(n) for n in (1, 2, 3, 4)] == [10, 20, 40, 50]
    jittered = Backoff(initial_ms=100, max_ms=100, jitter=1)
    assert all(0 <= jittered.delay_ms(1) <= 100 for _ in range(20))
    for bad in (
        {"initial_ms": -1},
        {"multiplier": 0.5},
        {"jitter": 2},
    ):
        with pytest.raises(InvalidArgumentError):
            Backoff(**bad)
    for retries in (-1, 1.5, True, "3"):
        with pytest.raises(InvalidArgumentError, match="retries"):
            Reexecution.of(retries, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="Backoff"):
        Reexecution.of(1, 5)  # type: ignore[arg-type]


def test_refused_conflict_says_why_in_message_and_attributes() -> None:
    exc = refuse(_conflict(ConcurrentAppendException), "because of reasons", [4, 6])
    assert str(exc).endswith("Not re-executed: because of reasons.")
    assert str(exc).startswith("[DELTA_CONCURRENT_APPEND]")
    assert exc.not_retried_because == "because of reasons"
    assert (exc.attempts, exc.read_versions) == (2, (4, 6))


def test_commit_annotations() -> None:
    assert commit_annotations([4]) == ({}, {"numAttempts": 1})
    params, metrics = commit_annotations([4, 6, 9])
    assert metrics == {"numAttempts": 3}
    assert params == {"deltatx.reexecution": {"attempts": 3, "readVersions": [4, 6, 9]}}


# -- the replay loop ------------------------------------------------------------------------


def _table(store: MemoryLogStore | None = None) -> DeltaLog:
    log = create_table(store or MemoryLogStore(), ROOT)
    append(log, add("part=a/0.parquet", "a"), add("part=b/0.parquet", "b"))
    return log  # version 1


def _rewrite_partition(part: str, tag: str, calls: list[int]) -> Callable[..., None]:
    """A DML-like statement: reads one partition, replaces its files with a new one."""

    def work(spark: Any, txn: OptimisticTransaction) -> None:
        del spark
        calls.append(txn.read_version)
        files = txn.scan(eq("part", part))
        txn.remove_files(files)
        txn.add_files([add(f"part={part}/{tag}-{txn.read_version}.parquet", part)])
        txn.record_operation(Operation(OperationName.UPDATE, {"predicate": part}), {})

    return work


def _interfere(log: DeltaLog, part: str, times: int) -> Callable[..., None]:
    """A statement whose first ``times`` executions see a concurrent DML add to ``part``."""
    state = {"left": times}

    def work(spark: Any, txn: OptimisticTransaction) -> None:
        if state["left"] > 0:
            state["left"] -= 1
            other = OptimisticTransaction(log, log.snapshot())
            other.scan(eq("part", part))  # it reads what it adds to: not a blind append
            other.add_files([add(f"part={part}/other-{log.latest_version()}.parquet", part)])
            other.record_operation(Operation(OperationName.MERGE, {}), {})
            other.commit()

    return work


def _info(log: DeltaLog, version: int) -> CommitInfo:
    info = log.read_commit(version)[0]
    assert isinstance(info, CommitInfo)
    return info


def test_conflicting_transaction_is_replayed_on_the_latest_snapshot() -> None:
    log = _table()
    calls: list[int] = []
    txn = Transaction(NO_SPARK, log, log.snapshot(), retries=3, backoff=NO_BACKOFF)
    with txn:
        txn.run(_rewrite_partition("a", "mine", calls), statement=StatementKind.UPDATE)
        txn.run(_interfere(log, "a", times=2), statement=StatementKind.WRITE)
    # Attempt 1 read v1 (v2 landed), attempt 2 read v2 (v3 landed), attempt 3 read v3.
    assert calls == [1, 2, 3]
    assert txn.read_versions == (1, 2, 3) and txn.attempts == 3
    assert log.latest_version() == 4
    live = sorted(f.path for f in log.snapshot().add_files())
    # The replay read the concurrent appends and replaced them: a serial order, nothing lost.
    assert live == ["part=a/mine-3.parquet", "part=b/0.parquet"]
    info = _info(log, 4)
    assert info.read_version == 3
    assert info.operation_metrics is not None and info.operation_metrics["numAttempts"] == "3"
    assert info.operation_parameters is not None
    assert json.loads(info.operation_parameters["deltatx.reexecution"]) == {
        "attempts": 3,
        "readVersions": [1, 2, 3],
    }


def test_a_statement_that_commits_first_time_records_one_attempt() -> None:
    log = _table()
    txn = Transaction(NO_SPARK, log, log.snapshot(), retries=2, backoff=NO_BACKOFF)
    with txn:
        txn.run(_rewrite_partition("a", "mine", []), statement=StatementKind.UPDATE)
    info = _info(log, 2)
    assert info.operation_metrics is not None and info.operation_metrics["numAttempts"] == "1"
    assert "deltatx.reexecution" not in (info.operation_parameters or {})


def test_without_retries_nothing_changes() -> None:
    log = _table()
    txn = Transaction(NO_SPARK, log, log.snapshot())
    txn.run(_rewrite_partition("a", "mine", []), statement=StatementKind.UPDATE)
    txn.run(_interfere(log, "a", times=1), statement=StatementKind.WRITE)
    with pytest.raises(ConcurrentAppendException) as info:
        txn.commit()
    assert info.value.not_retried_because is None
    assert "Not re-executed" not in str(info.value)
    assert "numAttempts" not in (_info(log, 2).operation_metrics or {})


def test_retries_run_out_and_the_last_conflict_says_so() -> None:
    log = _table()
    calls: list[int] = []
    txn = Transaction(NO_SPARK, log, log.snapshot(), retries=2, backoff=NO_BACKOFF)
    txn.run(_rewrite_partition("a", "mine", calls), statement=StatementKind.UPDATE)
    txn.run(_interfere(log, "a", times=10), statement=StatementKind.WRITE)
    with pytest.raises(ConcurrentAppendException) as info:
        txn.commit()
    assert calls == [1, 2, 3]
    assert info.value.read_versions == (1, 2, 3)
    assert info.value.not_retried_because is not None
    assert "retries=2" in info.value.not_retried_because
    # Only the three interfering appends landed; no attempt of ours did.
    assert log.latest_version() == 4
    assert all(_info(log, v).operation == "MERGE" for v in (2, 3, 4))


@pytest.mark.parametrize(
    ("stage", "reason"),
    [
        (lambda t, w: t.run(w), "run(work)"),
        (lambda t, w: t.run(w, statement=StatementKind.UPDATE, not_replayable="it is odd"), "odd"),
    ],
    ids=["undeclared-function", "declared-not-replayable"],
)
def test_a_statement_that_does_not_qualify_is_not_replayed(
    stage: Callable[[Transaction, Callable[..., None]], None], reason: str
) -> None:
    log = _table()
    calls: list[int] = []
    txn = Transaction(NO_SPARK, log, log.snapshot(), retries=3, backoff=NO_BACKOFF)
    txn.run(_rewrite_partition("a", "mine", calls), statement=StatementKind.UPDATE)
    stage(txn, _interfere(log, "a", times=1))
    with pytest.raises(ConcurrentAppendException) as info:
        txn.commit()
    assert calls == [1], "a statement that does not qualify must not run again"
    assert info.value.not_retried_because is not None
    assert reason in info.value.not_retried_because
    assert "statement 2 of 2" in str(info.value)


def test_metadata_conflict_is_not_replayed() -> None:
    log = _table()
    calls: list[int] = []

    def change_metadata(spark: Any, txn: OptimisticTransaction) -> None:
        other = OptimisticTransaction(log, log.snapshot())
        other.update_metadata(log.snapshot().metadata)
        other.record_operation(Operation(OperationName.SET_TBLPROPERTIES, {}), {})
        other.commit()

    txn = Transaction(NO_SPARK, log, log.snapshot(), retries=3, backoff=NO_BACKOFF)
    txn.run(_rewrite_partition("a", "mine", calls), statement=StatementKind.UPDATE)
    txn.run(change_metadata, statement=StatementKind.WRITE)
    with pytest.raises(MetadataChangedException) as info:
        txn.commit()
    assert calls == [1]
    assert "never re-executed" in (info.value.not_retried_because or "")


def test_statement_retries_belong_to_the_transaction() -> None:
    log = _table()
    txn = Transaction(NO_SPARK, log, log.snapshot(), retries=1)
    with pytest.raises(InvalidArgumentError, match="begin"):
        txn.run(_noop, statement=StatementKind.DELETE, retries=2)


class _AckLostStore(MemoryLogStore):
    """Publishes the commit, then reports a failure, as a lost acknowledgement would."""

    def __init__(self, error: type[Exception]) -> None:
        super().__init__()
        self.armed = False
        self.error = error

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        super().write(path, data, overwrite=overwrite)
        if self.armed and path.endswith(".json"):
            self.armed = False
            raise self.error("acknowledgement lost after the write")


@pytest.mark.parametrize("error", [OSError, FileExistsError], ids=["io-error", "already-exists"])
def test_a_commit_that_landed_is_never_re_executed(error: type[Exception]) -> None:
    """Never twice: an ambiguous write resolved by txnId is the commit, not a conflict."""
    from deltatx.storage.log_store import FileAlreadyExistsError

    store = _AckLostStore(FileAlreadyExistsError if error is FileExistsError else error)
    log = _table(store)
    calls: list[int] = []
    txn = Transaction(NO_SPARK, log, log.snapshot(), retries=5, backoff=NO_BACKOFF)
    txn.run(_rewrite_partition("a", "mine", calls), statement=StatementKind.UPDATE)
    store.armed = True
    version = txn.commit()
    assert version == 2 and calls == [1] and txn.attempts == 1
    assert log.latest_version() == 2
    assert sorted(f.path for f in log.snapshot().add_files()) == [
        "part=a/mine-1.parquet",
        "part=b/0.parquet",
    ]
