"""The commit loop and transactions at log level (no Spark): conflicts, retries, idempotence."""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from deltatx.errors import (
    CommitRetriesExceededError,
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    InvalidArgumentError,
    MetadataChangedException,
    ProtocolChangedException,
    TransactionStateError,
)
from deltatx.kernel.actions import CommitInfo, Metadata
from deltatx.kernel.codec import parse_commit
from deltatx.kernel.features import DEFAULT_PROTOCOL
from deltatx.kernel.log_paths import checkpoint_name, commit_name
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.transaction import ReadTracker
from deltatx.log import commit as commit_module
from deltatx.log.commit import commit
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage import LocalLogStore, MemoryLogStore

from ..logtables import SCHEMA, add, append, begin, create_table, eq

ROOT = "/mem/table"


def _commit_info(log: DeltaLog, version: int) -> CommitInfo:
    actions = log.read_commit(version)
    assert isinstance(actions[0], CommitInfo), "commitInfo must be the first line"
    return actions[0]


def test_first_commit_records_provenance() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    info = _commit_info(log, 0)
    assert info.operation == "CREATE TABLE"
    assert info.read_version is None
    assert info.isolation_level == "WriteSerializable"
    assert info.txn_id and info.engine_info and info.engine_info.startswith("deltatx/")
    v = append(log, add("part=a/f1.parquet", "a"))
    info = _commit_info(log, v)
    assert (v, info.read_version, info.is_blind_append) == (1, 0, True)


def test_concurrent_blind_appends_both_commit_by_retrying() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    t1, t2 = begin(log), begin(log)
    t1.add_files([add("part=a/1.parquet", "a")])
    t2.add_files([add("part=a/2.parquet", "a")])
    for t in (t1, t2):
        t.record_operation(Operation(OperationName.WRITE, {}), {})
    assert t1.commit() == 1
    assert t2.commit() == 2
    assert t2.result is not None and t2.result.attempts == 2
    assert {f.path for f in log.snapshot().add_files()} == {"part=a/1.parquet", "part=a/2.parquet"}


def test_conflict_writes_nothing_and_names_the_winner() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    append(log, add("part=a/0.parquet", "a"))
    reader = begin(log)
    assert reader.scan(eq("part", "a"))  # an INSERT ... SELECT reading partition a
    reader.add_files([add("part=b/copy.parquet", "b")])
    reader.record_operation(Operation(OperationName.WRITE, {}), {})
    # The winner deleted the file the reader read.
    winner = begin(log)
    winner.remove_files(winner.scan(None))
    winner.record_operation(Operation(OperationName.DELETE, {}), {})
    assert winner.commit() == 2
    with pytest.raises(ConcurrentDeleteReadException) as info:
        reader.commit()
    assert info.value.winning_version == 2
    assert info.value.winning_operation == "DELETE"
    assert info.value.file == "part=a/0.parquet"
    assert log.latest_version() == 2
    with pytest.raises(TransactionStateError):
        reader.commit()


def test_write_serializable_lets_a_blind_append_through_serializable_does_not() -> None:
    """Seed 000: 'Con el nivel de aislamiento predeterminado de WriteSerializable, los archivos
    agregados por operaciones a ciegas INSERT ... no entra en conflicto ... Si el nivel de
    aislamiento se establece en Serializable, los anexos a ciegas pueden estar en conflicto.'"""
    for level, fails in (("WriteSerializable", False), ("Serializable", True)):
        log = create_table(MemoryLogStore(), ROOT, configuration={"delta.isolationLevel": level})
        append(log, add("part=a/0.parquet", "a"))
        reader = begin(log)
        reader.remove_files(reader.scan(eq("part", "a")))
        reader.add_files([add("part=a/r.parquet", "a")])
        reader.record_operation(Operation(OperationName.DELETE, {}), {})
        append(log, add("part=a/blind.parquet", "a"))
        if fails:
            with pytest.raises(ConcurrentAppendException) as info:
                reader.commit()
            assert "Serializable" in info.value.hint
        else:
            assert reader.commit() == 3
            assert _commit_info(log, 3).isolation_level == "WriteSerializable"


def test_commit_without_data_change_downgrades_to_snapshot_isolation() -> None:
    """Seed 004: commits that only rearrange data (dataChange=false) run at SnapshotIsolation."""
    log = create_table(
        MemoryLogStore(), ROOT, configuration={"delta.isolationLevel": "Serializable"}
    )
    append(log, add("part=a/0.parquet", "a"), add("part=a/1.parquet", "a"))
    txn = begin(log)
    old = txn.scan(eq("part", "a"))
    txn.remove_files(old, data_change=False)
    txn.add_files([add("part=a/c.parquet", "a", data_change=False)])
    txn.record_operation(Operation(OperationName.OPTIMIZE, {}), {})
    append(log, add("part=a/new.parquet", "a"))  # concurrent append into the same partition
    v = txn.commit()
    assert _commit_info(log, v).isolation_level == "SnapshotIsolation"


def test_metadata_change_never_downgrades() -> None:
    log = create_table(
        MemoryLogStore(), ROOT, configuration={"delta.isolationLevel": "Serializable"}
    )
    txn = begin(log)
    md = txn.metadata
    txn.update_metadata(replace(md, configuration={**md.configuration, "x": "1"}))
    txn.record_operation(Operation(OperationName.SET_TBLPROPERTIES, {}), {})
    v = txn.commit()
    assert _commit_info(log, v).isolation_level == "Serializable"


def test_concurrent_metadata_change_fails_a_blind_append() -> None:
    """Seed 000: 'Los cambios de metadatos hacen que se produzcan errores en todas las
    operaciones de escritura simultáneas.'"""
    log = create_table(MemoryLogStore(), ROOT)
    writer = begin(log)
    writer.add_files([add("part=a/0.parquet", "a")])
    writer.record_operation(Operation(OperationName.WRITE, {}), {})
    alter = begin(log)
    alter.update_metadata(replace(alter.metadata, configuration={"delta.appendOnly": "false"}))
    alter.record_operation(Operation(OperationName.SET_TBLPROPERTIES, {}), {})
    alter.commit()
    with pytest.raises(MetadataChangedException):
        writer.commit()


def test_retry_limit_gives_a_clear_error() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    snap = log.snapshot()
    append(log, add("part=a/0.parquet", "a"))
    with pytest.raises(CommitRetriesExceededError) as info:
        commit(
            log,
            read_snapshot=snap,
            actions=[add("part=a/1.parquet", "a")],
            operation=Operation(OperationName.WRITE, {}),
            read_set=ReadTracker().freeze(),
            max_attempts=1,
        )
    assert "tried 1 times" in str(info.value)
    assert log.latest_version() == 1


class _FlakyStore(MemoryLogStore):
    """Writes the file, then reports an I/O error, as a lost acknowledgement would."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_next = False

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        super().write(path, data, overwrite=overwrite)
        if self.fail_next and path.endswith(".json"):
            self.fail_next = False
            raise OSError("connection reset after write")


def test_ambiguous_write_is_recognised_by_its_transaction_id() -> None:
    store = _FlakyStore()
    log = create_table(store, ROOT)
    store.fail_next = True
    v = append(log, add("part=a/0.parquet", "a"))
    assert v == 1
    assert log.latest_version() == 1
    assert len(log.snapshot().add_files()) == 1


def _create_txn(log: DeltaLog, schema: str = SCHEMA) -> OptimisticTransaction:
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(DEFAULT_PROTOCOL)
    txn.update_metadata(Metadata(id="m", schema_string=schema, partition_columns=("part",)))
    txn.add_files([add(f"part=a/{id(txn)}.parquet", "a")])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    return txn


def test_racing_creators_with_the_same_schema_both_land() -> None:
    log = DeltaLog.for_table(ROOT, store=MemoryLogStore())
    a, b = _create_txn(log), _create_txn(log)
    assert a.commit() == 0
    assert b.commit() == 1
    assert len(log.snapshot().add_files()) == 2
    assert log.snapshot().metadata.id == "m"


def test_racing_creators_with_different_schemas_get_protocol_changed() -> None:
    """Seed 000: ProtocolChangedException 'cuando varios escritores escriben en una ruta de
    acceso vacía al mismo tiempo'."""
    log = DeltaLog.for_table(ROOT, store=MemoryLogStore())
    a = _create_txn(log)
    b = _create_txn(log, SCHEMA.replace('"value"', '"other"'))
    a.commit()
    with pytest.raises(ProtocolChangedException) as info:
        b.commit()
    assert "create the table" in info.value.hint.lower()
    assert log.latest_version() == 0


def _create_table_txn(log: DeltaLog) -> OptimisticTransaction:
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(DEFAULT_PROTOCOL)
    txn.update_metadata(Metadata(id="m", schema_string=SCHEMA, partition_columns=("part",)))
    txn.record_operation(Operation(OperationName.CREATE_TABLE, {}), {})
    return txn


def test_racing_create_table_with_identical_arguments_gets_protocol_changed() -> None:
    """Seed 000: ProtocolChangedException when several writers create or replace a table at
    the same time. Two CREATE TABLEs with the same arguments must not both be recorded (the
    loser has no rows to append, so nothing can be rebased)."""
    log = DeltaLog.for_table(ROOT, store=MemoryLogStore())
    a, b = _create_table_txn(log), _create_table_txn(log)
    assert a.commit() == 0
    with pytest.raises(ProtocolChangedException) as info:
        b.commit()
    assert info.value.winning_version == 0
    assert log.latest_version() == 0
    assert [_commit_info(log, 0).operation] == ["CREATE TABLE"]


def test_racing_create_if_not_exists_reports_the_table_that_won(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loser of a CREATE TABLE IF NOT EXISTS race learns, by a typed error, that the same
    table now exists; with another schema it gets ProtocolChangedException."""
    from deltatx.errors import TableAlreadyExistsError
    from deltatx.kernel.schema import parse_schema
    from deltatx.tables import DeltaTable

    root = str(tmp_path / "t")
    schema = parse_schema(SCHEMA)
    other = parse_schema(SCHEMA.replace('"value"', '"other"'))
    DeltaTable.create(None, root, schema=schema, partition_by=["part"])  # type: ignore[arg-type]
    # The loser checked for the table before the winner committed.
    monkeypatch.setattr(DeltaLog, "table_exists", lambda self: False)
    with pytest.raises(TableAlreadyExistsError, match="at the same time"):
        DeltaTable.create(None, root, schema=schema, partition_by=["part"], if_not_exists=True)  # type: ignore[arg-type]
    with pytest.raises(ProtocolChangedException):
        DeltaTable.create(None, root, schema=schema, partition_by=["part"])  # type: ignore[arg-type]
    with pytest.raises(ProtocolChangedException):
        DeltaTable.create(None, root, schema=other, partition_by=["part"], if_not_exists=True)  # type: ignore[arg-type]
    assert DeltaLog.for_table(root).latest_version() == 0


def test_invalid_commits_are_refused_before_writing() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    txn = begin(log)
    txn.add_files([add("nopart.parquet", None)])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    with pytest.raises(InvalidArgumentError, match="partition"):
        txn.commit()
    assert log.latest_version() == 0


def test_checkpoint_every_interval(tmp_path: Path) -> None:
    store = LocalLogStore(fsync=False)
    log = create_table(store, str(tmp_path), configuration={"delta.checkpointInterval": "3"})
    for i in range(6):
        append(log, add(f"part=a/{i}.parquet", "a"))
    names = {s.name for s in store.list_from(log.log_path)}
    assert checkpoint_name(3) in names and checkpoint_name(6) in names
    assert len(DeltaLog.for_table(str(tmp_path)).snapshot().add_files()) == 6


def test_read_your_writes_inside_one_transaction() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    append(log, add("part=a/0.parquet", "a"))
    txn = begin(log)
    txn.add_files([add("part=b/1.parquet", "b")])
    assert {f.path for f in txn.scan(None)} == {"part=a/0.parquet", "part=b/1.parquet"}
    txn.remove_files([f for f in txn.scan(eq("part", "b"))])
    assert [f.path for f in txn.scan(None)] == ["part=a/0.parquet"]
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    v = txn.commit()
    actions = parse_commit(log.store.read(f"{log.log_path}/{commit_name(v)}"), where="t")
    assert [type(a).__name__ for a in actions] == ["CommitInfo"]


def test_many_threads_append_without_losing_a_commit() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(15):
                append(log, add(f"part=a/{n}-{i}.parquet", "a"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert log.latest_version() == 120
    paths = [f.path for f in log.snapshot().add_files()]
    assert len(paths) == len(set(paths)) == 120


def test_two_writers_with_the_same_app_id_conflict() -> None:
    """Seed 000: ConcurrentTransactionException when the same streaming checkpoint (app id)
    writes from two places at once."""
    from deltatx.errors import ConcurrentTransactionException

    log = create_table(MemoryLogStore(), ROOT)
    one, two = begin(log), begin(log)
    for n, txn in enumerate((one, two)):
        assert txn.app_transaction_version("stream-1") is None
        txn.add_files([add(f"part=a/s{n}.parquet", "a")])
        txn.set_app_transaction("stream-1", 7)
        txn.record_operation(Operation(OperationName.STREAMING_UPDATE, {}), {})
    one.commit()
    with pytest.raises(ConcurrentTransactionException) as info:
        two.commit()
    assert info.value.winning_version == 1
    assert "stream" in info.value.hint.lower() or "app" in info.value.hint.lower()
    other = begin(log)
    assert other.app_transaction_version("stream-1") == 7


def test_transaction_ids_are_version_4_uuids_spelled_as_uuid_spells_them() -> None:
    ids = [commit_module._txn_id() for _ in range(2_000)]
    assert len(set(ids)) == len(ids)
    for txn_id in ids:
        parsed = uuid.UUID(txn_id)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == txn_id
