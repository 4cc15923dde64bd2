"""The S3 LogStore against a real S3 API server (moto) on loopback.

A commit is a conditional PUT (``If-None-Match: *``); 412 sends it to conflict checking, 409
and 5xx are retried with backoff, and an ambiguous outcome (the PUT landed, the answer was
lost) is resolved by reading the object back: never committed twice, never reported as failed
when it landed.
"""

from __future__ import annotations

import os
import threading

import pytest

from deltatx.errors import (
    CommitFailedError,
    InvalidArgumentError,
    InvalidTableError,
    UnsupportedFeatureError,
)
from deltatx.kernel.file_paths import table_root
from deltatx.log.delta_log import DeltaLog
from deltatx.storage.location import Location
from deltatx.storage.log_store import FileAlreadyExistsError
from deltatx.storage.s3 import AmbiguousWriteError, S3LogStore, S3Settings, split
from deltatx.storage.s3_faults import (
    FaultInjectingS3Client,
    S3Fault,
    scripted,
)

from ..logtables import add, append, create_table

pytestmark = pytest.mark.s3

COMMIT = "_delta_log/00000000000000000000.json"


def _faulty(*faults: S3Fault | None) -> tuple[S3LogStore, FaultInjectingS3Client]:
    client = FaultInjectingS3Client(S3Settings.from_environment().client(), scripted(faults))
    return S3LogStore(client, backoff=0.001), client


def _objects(table: str) -> list[str]:
    store = S3LogStore()
    return sorted(s.path for s in store.walk(table))


# --- where a table lives -----------------------------------------------------------------------


def test_s3_and_s3a_spell_one_root_and_credentials_come_from_the_environment(
    s3_server: str,
) -> None:
    assert table_root("s3a://bkt/a//b/") == table_root("s3://bkt/a/b") == "s3://bkt/a/b"
    settings = S3Settings.from_environment()
    assert settings.endpoint_url == s3_server and settings.region == "us-east-1"
    credentials = settings.client()._request_signer._credentials
    assert credentials.access_key == os.environ["AWS_ACCESS_KEY_ID"]
    location = Location.of("s3a://bkt/t")
    assert isinstance(location.store, S3LogStore)
    assert location.log_dir == "s3://bkt/t/_delta_log"
    assert location.fs_path(location.child("x.parquet")) == "bkt/t/x.parquet"
    assert split("s3://bkt/t/x") == ("bkt", "t/x")


@pytest.mark.parametrize("uri", ["s3://", "s3:///key", "s3://bkt/a/../b"])
def test_a_malformed_s3_uri_is_refused(uri: str) -> None:
    with pytest.raises(InvalidArgumentError):
        table_root(uri)


@pytest.mark.parametrize("uri", ["gs://b/t", "abfss://c@acct.dfs.core.windows.net/t"])
def test_gcs_and_azure_are_refused_as_designed_but_not_yet_tested(uri: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=r"designed to slot in.*not yet tested"):
        Location.of(uri)


def test_a_relative_path_under_an_s3_root_may_not_climb_out(s3_table: str) -> None:
    location = Location.of(s3_table)
    assert location.file("a%20b/c.parquet") == f"{s3_table}/a b/c.parquet"
    with pytest.raises(Exception, match="outside the table root"):
        location.file("../other/x.parquet")
    with pytest.raises(UnsupportedFeatureError, match="local filesystem"):
        location.file("file:///etc/passwd")


# --- the LogStore contract ---------------------------------------------------------------------


def test_write_if_absent_read_list_walk_delete(s3_table: str) -> None:
    store = S3LogStore()
    log = f"{s3_table}/_delta_log"
    for v in range(3):
        store.write(f"{log}/{v:020d}.json", f"v{v}".encode())
    with pytest.raises(FileAlreadyExistsError):
        store.write(f"{log}/{1:020d}.json", b"other")
    assert store.read(f"{log}/{1:020d}.json") == b"v1"
    store.write(f"{log}/_last_checkpoint", b"a", overwrite=True)
    store.write(f"{log}/_last_checkpoint", b"b", overwrite=True)
    assert store.read(f"{log}/_last_checkpoint") == b"b"
    names = [s.name for s in store.list_from(log, f"{1:020d}")]
    assert names == [f"{1:020d}.json", f"{2:020d}.json", "_last_checkpoint"]
    assert store.list_from(log)[0].name == f"{0:020d}.json"
    assert store.exists(log) and store.exists(f"{log}/{0:020d}.json")
    assert not store.exists(f"{s3_table}/nothing")
    with pytest.raises(FileNotFoundError):
        store.read(f"{log}/missing.json")
    store.delete(f"{log}/{2:020d}.json")
    store.delete(f"{log}/{2:020d}.json")
    assert len(_objects(s3_table)) == 3


def test_many_racing_writers_of_one_version_have_exactly_one_winner(s3_table: str) -> None:
    store = S3LogStore()
    path = f"{s3_table}/{COMMIT}"
    outcomes: list[str] = []
    lock = threading.Lock()

    def race(i: int) -> None:
        try:
            store.write(path, f"writer {i}".encode())
            result = f"won {i}"
        except FileAlreadyExistsError:
            result = "lost"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1 and len(outcomes) == 8
    assert store.read(path) == f"writer {winners[0].split()[1]}".encode()


# --- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "faults",
    [
        [S3Fault.ERROR_500],
        [S3Fault.CONFLICT_409, S3Fault.CONFLICT_409],
        [S3Fault.TIMEOUT],
        [S3Fault.ERROR_500, S3Fault.TIMEOUT, S3Fault.CONFLICT_409],
    ],
    ids=["500", "409-twice", "timeout", "mixed"],
)
def test_failures_that_decided_nothing_are_retried(s3_table: str, faults: list[S3Fault]) -> None:
    store, client = _faulty(*faults)
    store.write(f"{s3_table}/{COMMIT}", b"data")
    assert client.injected == faults
    assert store.read(f"{s3_table}/{COMMIT}") == b"data"


def test_a_lost_response_after_a_landed_put_counts_as_landed(s3_table: str) -> None:
    store, client = _faulty(S3Fault.LOST_RESPONSE)
    store.write(f"{s3_table}/{COMMIT}", b"mine")
    assert client.injected == [S3Fault.LOST_RESPONSE]
    assert store.read(f"{s3_table}/{COMMIT}") == b"mine"


def test_a_lost_response_does_not_hide_a_real_conflict(s3_table: str) -> None:
    S3LogStore().write(f"{s3_table}/{COMMIT}", b"theirs")
    store, _ = _faulty(S3Fault.TIMEOUT)
    with pytest.raises(FileAlreadyExistsError):
        store.write(f"{s3_table}/{COMMIT}", b"mine")


def test_when_every_attempt_goes_unanswered_the_outcome_is_read_back(s3_table: str) -> None:
    client = FaultInjectingS3Client(S3Settings.from_environment().client(), lambda: S3Fault.TIMEOUT)
    store = S3LogStore(client, attempts=3, backoff=0.001)
    with pytest.raises(AmbiguousWriteError, match="may still appear"):
        store.write(f"{s3_table}/{COMMIT}", b"mine")
    assert _objects(s3_table) == []
    landing = FaultInjectingS3Client(
        S3Settings.from_environment().client(), lambda: S3Fault.LOST_RESPONSE
    )
    S3LogStore(landing, attempts=3, backoff=0.001).write(f"{s3_table}/{COMMIT}", b"mine")
    assert S3LogStore().read(f"{s3_table}/{COMMIT}") == b"mine"


def test_persistent_500s_fail_the_write_and_leave_nothing(s3_table: str) -> None:
    client = FaultInjectingS3Client(
        S3Settings.from_environment().client(), lambda: S3Fault.ERROR_500
    )
    with pytest.raises(OSError):
        S3LogStore(client, attempts=3, backoff=0.001).write(f"{s3_table}/{COMMIT}", b"x")
    assert _objects(s3_table) == []


# --- commits through the log -------------------------------------------------------------------


def _commit_ids(table: str) -> list[str]:
    log = DeltaLog.for_table(table)
    ids = []
    for version in range(log.latest_version() + 1):
        info = log.commit_info(version)
        assert info is not None and info.txn_id is not None
        ids.append(info.txn_id)
    return ids


@pytest.mark.parametrize(
    "fault", [S3Fault.LOST_RESPONSE, S3Fault.ERROR_500, S3Fault.TIMEOUT, S3Fault.CONFLICT_409]
)
def test_a_commit_under_a_fault_lands_exactly_once(s3_table: str, fault: S3Fault) -> None:
    create_table(S3LogStore(), s3_table)
    store, client = _faulty(fault)
    log = DeltaLog.for_table(s3_table, store=store)
    version = append(log, add("part=a/1.parquet", "a"))
    assert version == 1 and client.injected == [fault]
    ids = _commit_ids(s3_table)
    assert len(ids) == 2 and len(set(ids)) == 2


def test_a_commit_whose_outcome_stays_unknown_is_not_reported_as_landed(s3_table: str) -> None:
    create_table(S3LogStore(), s3_table)
    client = FaultInjectingS3Client(S3Settings.from_environment().client(), lambda: S3Fault.TIMEOUT)
    log = DeltaLog.for_table(s3_table, store=S3LogStore(client, attempts=2, backoff=0.001))
    with pytest.raises(CommitFailedError, match="not published"):
        append(log, add("part=a/1.parquet", "a"))
    assert DeltaLog.for_table(s3_table).latest_version() == 0


def test_a_missing_version_is_an_error_not_skipped(s3_table: str) -> None:
    log = create_table(S3LogStore(), s3_table)
    for i in range(2):
        append(log, add(f"part=a/{i}.parquet", "a"))
    S3LogStore().delete(f"{s3_table}/_delta_log/{1:020d}.json")
    with pytest.raises(InvalidTableError, match=r"gap: commit\(s\) 1 are missing"):
        DeltaLog.for_table(s3_table).snapshot()
