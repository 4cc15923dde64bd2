"""Bad-input corpus: hostile or broken logs, paths, descriptors, properties, schemas, conditions.

Every case is one test. A case either must raise a typed deltatx error (a DeltaError subclass)
whose message says what and where, or is tolerated by a documented rule (unknown actions are
ignored by readers and survive round trips; a torn checkpoint is ignored in favour of the log;
a checkpoint is authoritative for its version). For every case:

- a failing call modifies nothing: every byte under the test directory (the table and the
  sentinels outside it) is the same afterwards;
- no storage call (read, list, write, delete) touches a path outside the table root, and the
  sentinels outside the root (one where ``../x.parquet`` points) are untouched.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deltatx.errors import (
    DeltaError,
    InvalidArgumentError,
    InvalidConditionError,
    InvalidPropertyError,
    InvalidTableError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from deltatx.kernel.actions import (
    AddFile,
    DeletionVectorDescriptor,
    Metadata,
    UnknownAction,
)
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.deletion_vectors import z85_encode
from deltatx.kernel.log_paths import checkpoint_name, commit_name, multipart_checkpoint_name
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import TableProperties, validate_properties
from deltatx.kernel.schema import parse_schema
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.log.vacuum import vacuum
from deltatx.storage import LocalLogStore
from deltatx.storage.log_store import FileStatus

from .log_helpers import METADATA, PROTOCOL, SCHEMA, add, info, remove, snapshot_dir, write_commit

# -- the scene: a table of three versions with real data files, and sentinels outside it ----


class RecordingStore(LocalLogStore):
    """A local store that remembers every path it was asked to touch."""

    def __init__(self) -> None:
        super().__init__()
        self.touched: list[tuple[str, str]] = []

    def read(self, path: str) -> bytes:
        self.touched.append(("read", path))
        return super().read(path)

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        self.touched.append(("write", path))
        super().write(path, data, overwrite=overwrite)

    def list_from(self, directory: str, start_name: str = "") -> list[FileStatus]:
        self.touched.append(("list", directory))
        return super().list_from(directory, start_name)

    def exists(self, path: str) -> bool:
        self.touched.append(("exists", path))
        return super().exists(path)

    def walk(self, root: str) -> Iterator[FileStatus]:
        self.touched.append(("walk", root))
        for status in super().walk(root):
            self.touched.append(("walked", status.path))
            yield status

    def delete(self, path: str) -> None:
        self.touched.append(("delete", path))
        super().delete(path)


@dataclass
class Scene:
    base: Path
    root: Path

    @property
    def log_dir(self) -> Path:
        return self.root / "_delta_log"

    def commit_file(self, version: int) -> Path:
        return self.log_dir / commit_name(version)

    def write_raw(self, version: int, data: bytes) -> None:
        self.commit_file(version).write_bytes(data)

    def write_actions(self, version: int, *lines: dict[str, Any]) -> None:
        text = "".join(json.dumps(line) + "\n" for line in [{"commitInfo": {}}, *lines])
        self.commit_file(version).write_text(text)


DATA = ("a", "b", "c", "d")


def _scene(tmp_path: Path) -> Scene:
    base = tmp_path
    root = base / "root"
    store = LocalLogStore()
    (root / "part=a").mkdir(parents=True)
    for name in DATA:
        (root / "part=a" / f"{name}.parquet").write_bytes(name.encode() * 8)
    (root / "part=a" / "orphan.parquet").write_bytes(b"orphan")
    p = {name: f"part=a/{name}.parquet" for name in DATA}
    write_commit(store, str(root), 0, [info(1000, "CREATE TABLE"), PROTOCOL, METADATA,
                                       add(p["a"]), add(p["b"])])  # fmt: skip
    write_commit(store, str(root), 1, [info(2000), remove(p["a"]), add(p["c"])])
    write_commit(store, str(root), 2, [info(3000), add(p["d"])])
    # Sentinels outside the root: where ``../x.parquet`` and friends would land.
    (base / "x.parquet").write_bytes(b"SENTINEL x")
    (base / "outside").mkdir()
    (base / "outside" / "sentinel.txt").write_bytes(b"SENTINEL")
    return Scene(base, root)


def _add_json(path: str, **extra: Any) -> dict[str, Any]:
    body = {
        "path": path,
        "partitionValues": {"part": "a"},
        "size": 1,
        "modificationTime": 1,
        "dataChange": True,
    }
    body.update(extra)
    return {"add": body}


def _live(log: DeltaLog) -> list[str]:
    return sorted(f.path for f in log.snapshot().add_files())


def _append(log: DeltaLog, *files: AddFile) -> int:
    txn = OptimisticTransaction(log, log.snapshot())
    txn.add_files(list(files))
    txn.record_operation(Operation(OperationName.WRITE, {"mode": "Append"}), {})
    return txn.commit()


def _dv(storage: str = "u", inline: str | None = None, **kw: Any) -> DeletionVectorDescriptor:
    encoded = inline if inline is not None else z85_encode(bytes(range(16)))
    values: dict[str, Any] = {"size_in_bytes": 34, "cardinality": 1, "offset": 1}
    values.update(kw)
    return DeletionVectorDescriptor(storage, encoded, **values)


def _dv_json(**overrides: Any) -> dict[str, Any]:
    dv = {
        "storageType": "u",
        "pathOrInlineDv": z85_encode(bytes(range(16))),
        "offset": 1,
        "sizeInBytes": 34,
        "cardinality": 1,
    }
    dv.update(overrides)
    return dv


# -- cases -------------------------------------------------------------------------------


Setup = Callable[[Scene], None]
Act = Callable[[Scene, DeltaLog], object]


@dataclass(frozen=True)
class Case:
    """One bad input: how to plant it, what to call, and what must happen."""

    setup: Setup
    act: Act
    error: type[DeltaError] | None  # None: tolerated by a documented rule (act asserts it)
    match: str = ""
    may_change_root: bool = False  # a tolerated maintenance call (VACUUM) may commit/delete


def _nothing(scene: Scene) -> None:
    pass


def _snapshot(scene: Scene, log: DeltaLog) -> object:
    return log.snapshot()


def bad_commit(data: bytes, match: str) -> Case:
    return Case(lambda s: s.write_raw(3, data), _snapshot, InvalidTableError, match)


def bad_actions(match: str, *lines: dict[str, Any]) -> Case:
    return Case(lambda s: s.write_actions(3, *lines), _snapshot, InvalidTableError, match)


V3 = r"00000000000000000003\.json"
CASES: dict[str, Case] = {}

# Corrupt or truncated commit JSON: InvalidTableError naming the file and line.
CASES.update(
    {
        "json-truncated-mid-object": bad_commit(
            b'{"commitInfo":{}}\n{"add":{"path":"e","partitionValues":{"part":"a"},"size":1,',
            V3 + " line 2: not valid JSON",
        ),
        "json-truncated-after-key": bad_commit(b'{"add":', V3 + " line 1: not valid JSON"),
        "json-missing-brace": bad_commit(
            b'{"add":{"path":"e","partitionValues":{},"size":1,"modificationTime":1,'
            b'"dataChange":true}\n',
            V3 + " line 1: not valid JSON",
        ),
        "json-binary-garbage": bad_commit(b"\x00\x01\x02garbage\n", V3 + " line 1"),
        "json-not-utf8": bad_commit(b'{"add":\xff}\n', V3 + ": not UTF-8"),
        "json-utf8-bom": bad_commit(
            b'\xef\xbb\xbf{"commitInfo":{}}\n', V3 + " line 1: not valid JSON"
        ),
        "json-nul-inside": bad_commit(b'{"add":\x00}\n', V3 + " line 1: not valid JSON"),
        "json-array-line": bad_commit(b"[1,2]\n", V3 + " line 1: an action must be"),
        "json-scalar-line": bad_commit(b"42\n", V3 + " line 1: an action must be"),
        "json-two-keys": bad_commit(
            b'{"commitInfo":{},"add":{}}\n', V3 + " line 1: an action must be"
        ),
        "json-empty-object": bad_commit(b"{}\n", V3 + " line 1: an action must be"),
        "json-action-not-object": bad_commit(b'{"add":5}\n', V3 + " line 1.*JSON object"),
        "json-add-null": bad_commit(b'{"add":null}\n', V3 + " line 1.*JSON object"),
        "json-empty-file": bad_commit(b"", V3 + ": the commit file is empty"),
        "json-whitespace-file": bad_commit(b"\n \n\t\n", V3 + ": the commit file is empty"),
        "json-deep-nesting": bad_commit(
            b'{"commitInfo":{"x":' + b"[" * 200_000 + b"]" * 200_000 + b"}}\n",
            V3 + " line 1: JSON nested too deeply",
        ),
        "json-torn-tail": Case(
            lambda s: s.commit_file(2).write_bytes(s.commit_file(2).read_bytes()[:-25]),
            _snapshot,
            InvalidTableError,
            r"00000000000000000002\.json line 2: not valid JSON",
        ),
        "add-missing-path": bad_actions(
            V3 + " line 2.*missing required field 'path'",
            {"add": {"partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}},
        ),
        "add-path-number": bad_actions(V3 + " line 2.*'path'", _add_json(5)),  # type: ignore[arg-type]
        "add-size-string": bad_actions(V3 + " line 2.*'size'", _add_json("e", size="big")),
        "add-size-nan": bad_commit(
            b'{"add":{"path":"e","partitionValues":{"part":"a"},"size":NaN,'
            b'"modificationTime":1,"dataChange":true}}\n',
            V3 + " line 1.*'size'",
        ),
        "add-size-overflows-int64": bad_actions(
            V3 + " line 2.*'size' is out of the int64 range", _add_json("e", size=10**30)
        ),
        "add-partition-values-list": bad_actions(
            V3 + " line 2.*'partitionValues'", _add_json("e", partitionValues=["a"])
        ),
        "add-missing-data-change": bad_actions(
            V3 + " line 2.*'dataChange'",
            {"add": {"path": "e", "partitionValues": {}, "size": 1, "modificationTime": 1}},
        ),
        "add-data-change-string": bad_actions(
            V3 + " line 2.*'dataChange'", _add_json("e", dataChange="yes")
        ),
        "remove-missing-path": bad_actions(
            V3 + " line 2.*'path'", {"remove": {"dataChange": True, "deletionTimestamp": 1}}
        ),
        "protocol-version-string": bad_actions(
            V3 + " line 2.*'minReaderVersion'",
            {"protocol": {"minReaderVersion": "1", "minWriterVersion": 2}},
        ),
        "metadata-missing-schema": bad_actions(
            V3 + " line 2.*'schemaString'", {"metaData": {"id": "x", "format": {}}}
        ),
        "metadata-configuration-not-strings": bad_actions(
            V3 + " line 2.*'configuration.k'",
            {"metaData": {"id": "x", "schemaString": SCHEMA, "configuration": {"k": 1}}},
        ),
        "metadata-schema-does-not-parse": Case(
            lambda s: s.write_actions(
                3, {"metaData": {"id": "x", "schemaString": "not json", "partitionColumns": []}}
            ),
            lambda s, log: log.snapshot().schema,
            InvalidTableError,
            "schemaString is not valid JSON",
        ),
    }
)


# Unknown action types and fields: ignored by readers (PROTOCOL.md), kept on round trips.
def _unknown_survives(scene: Scene, log: DeltaLog) -> None:
    assert _live(log) == ["part=a/b.parquet", "part=a/c.parquet", "part=a/d.parquet", "x"]
    actions = log.read_commit(3)
    assert any(isinstance(a, UnknownAction) and a.key == "futureAction" for a in actions)
    assert serialize_commit(actions) == scene.commit_file(3).read_bytes()


def _unknown_field_survives(scene: Scene, log: DeltaLog) -> None:
    assert "x" in _live(log)
    actions = log.read_commit(3)
    added = next(a for a in actions if isinstance(a, AddFile))
    assert added.extra == {"futureField": {"k": [1, 2]}}
    assert serialize_commit(actions) == scene.commit_file(3).read_bytes()


def _unknown_writer_feature(scene: Scene, log: DeltaLog) -> None:
    assert log.snapshot().version == 3  # readable
    _append(log, add("part=a/new.parquet"))


CASES.update(
    {
        "unknown-action-type-ignored-and-kept": Case(
            lambda s: s.write_raw(
                3,
                serialize_commit(
                    [info(4000), UnknownAction("futureAction", {"x": [1, {"y": None}]})]
                )
                + (json.dumps(_add_json("x"), separators=(",", ":")) + "\n").encode(),
            ),
            _unknown_survives,
            None,
        ),
        "unknown-add-field-kept": Case(
            lambda s: s.write_raw(
                3,
                serialize_commit(
                    [info(4000), add("x", extra={"futureField": {"k": [1, 2]}})]  # type: ignore[arg-type]
                ),
            ),
            _unknown_field_survives,
            None,
        ),
        "unknown-reader-feature": bad_actions(
            "futureReaderFeature",
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["futureReaderFeature"],
                    "writerFeatures": ["futureReaderFeature"],
                }
            },
        ),
        "unknown-writer-feature-refuses-commit": Case(
            lambda s: s.write_actions(
                3,
                {
                    "protocol": {
                        "minReaderVersion": 1,
                        "minWriterVersion": 7,
                        "writerFeatures": ["futureWriterFeature"],
                    }
                },
            ),
            _unknown_writer_feature,
            UnsupportedFeatureError,
            "futureWriterFeature",
        ),
    }
)
CASES["unknown-reader-feature"] = Case(
    CASES["unknown-reader-feature"].setup, _snapshot, UnsupportedFeatureError, "futureReader"
)


# Missing protocol or metadata.
def _fresh(*actions: Any) -> Setup:
    def setup(scene: Scene) -> None:
        for p in scene.log_dir.iterdir():
            p.unlink()
        write_commit(LocalLogStore(), str(scene.root), 0, list(actions))

    return setup


CASES.update(
    {
        "v0-without-protocol": Case(
            _fresh(info(1), METADATA, add("a")), _snapshot, InvalidTableError, "no protocol"
        ),
        "v0-without-metadata": Case(
            _fresh(info(1), PROTOCOL, add("a")), _snapshot, InvalidTableError, "no metaData"
        ),
        "v0-without-either": Case(
            _fresh(info(1), add("a")), _snapshot, InvalidTableError, "no protocol and metaData"
        ),
        "v0-only-commit-info": Case(
            _fresh(info(1)), _snapshot, InvalidTableError, "version 0 has no protocol"
        ),
    }
)


# Versions, gaps, checkpoints and _last_checkpoint.
def _checkpoint(version: int) -> Setup:
    def setup(scene: Scene) -> None:
        log = DeltaLog.for_table(str(scene.root))
        log.checkpoint(log.snapshot(version))

    return setup


def _then(*setups: Setup) -> Setup:
    def setup(scene: Scene) -> None:
        for s in setups:
            s(scene)

    return setup


def _unlink(*names: str) -> Setup:
    return lambda s: [(s.log_dir / n).unlink() for n in names] and None


def _write_log_file(name: str, data: bytes) -> Setup:
    return lambda s: (s.log_dir / name).write_bytes(data) and None


def _truncate_checkpoint(version: int) -> Setup:
    def setup(scene: Scene) -> None:
        path = scene.log_dir / checkpoint_name(version)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return setup


def _reads_as_v2(scene: Scene, log: DeltaLog) -> None:
    snap = log.snapshot()
    assert snap.version == 2
    assert _live(log) == ["part=a/b.parquet", "part=a/c.parquet", "part=a/d.parquet"]


def _checkpoint_wins(scene: Scene, log: DeltaLog) -> None:
    # The checkpoint is authoritative for its version: deltatx does not re-verify it against
    # the commits (that would defeat checkpoints); the result is deterministic.
    assert sorted(f.path for f in log.snapshot(2).add_files()) == [
        "part=a/b.parquet",
        "part=a/c.parquet",
    ]


def _v1_checkpoint_as_v2(scene: Scene) -> None:
    _checkpoint(1)(scene)
    shutil.copyfile(scene.log_dir / checkpoint_name(1), scene.log_dir / checkpoint_name(2))
    (scene.log_dir / checkpoint_name(1)).unlink()


CASES.update(
    {
        "version-gap": Case(
            lambda s: s.write_actions(4, _add_json("e")),
            _snapshot,
            InvalidTableError,
            r"gap: commit\(s\) 3 are missing",
        ),
        "first-commits-missing-no-checkpoint": Case(
            _unlink(commit_name(0)), _snapshot, InvalidTableError, "commits 0 are missing"
        ),
        "checkpoint-disagrees-with-commit-2": Case(_v1_checkpoint_as_v2, _checkpoint_wins, None),
        "torn-checkpoint-falls-back-to-log": Case(
            _then(_checkpoint(2), _truncate_checkpoint(2)), _reads_as_v2, None
        ),
        "torn-checkpoint-without-commits": Case(
            _then(_checkpoint(2), _truncate_checkpoint(2), _unlink(commit_name(0))),
            _snapshot,
            InvalidTableError,
            r"00000000000000000002\.checkpoint\.parquet.*cannot be replayed",
        ),
        "garbage-checkpoint-falls-back-to-log": Case(
            _write_log_file(checkpoint_name(2), b"PAR1 not parquet PAR1"), _reads_as_v2, None
        ),
        "last-checkpoint-beyond-latest": Case(
            _then(_checkpoint(1), _write_log_file("_last_checkpoint", b'{"version":99}')),
            _reads_as_v2,
            None,
        ),
        "last-checkpoint-older-than-newest": Case(
            _then(
                _checkpoint(2),
                _checkpoint(1),  # the pointer now names version 1
            ),
            _reads_as_v2,
            None,
        ),
        "last-checkpoint-disagrees-on-size-and-parts": Case(
            _then(
                _checkpoint(2),
                _write_log_file(
                    "_last_checkpoint", b'{"version":2,"size":999,"parts":3,"numOfAddFiles":77}'
                ),
            ),
            _reads_as_v2,
            None,
        ),
        "last-checkpoint-garbage": Case(
            _then(_checkpoint(2), _write_log_file("_last_checkpoint", b"\xff{nope")),
            _reads_as_v2,
            None,
        ),
        "last-checkpoint-names-missing-checkpoint": Case(
            _write_log_file("_last_checkpoint", b'{"version":2}'), _reads_as_v2, None
        ),
        "multipart-checkpoint-missing-part": Case(
            _then(
                _checkpoint(2),
                lambda s: (s.log_dir / checkpoint_name(2)).rename(
                    s.log_dir / multipart_checkpoint_name(2, 1, 2)
                ),
            ),
            _reads_as_v2,
            None,
        ),
        "unpadded-commit-name-ignored": Case(
            lambda s: (s.log_dir / "3.json").write_text(json.dumps(_add_json("e")) + "\n"),
            _reads_as_v2,
            None,
        ),
        "version-that-does-not-exist": Case(
            _nothing, lambda s, log: log.snapshot(7), VersionNotFoundError, "versions 0 to 2"
        ),
        "negative-version": Case(
            _nothing, lambda s, log: log.snapshot(-1), VersionNotFoundError, "version -1"
        ),
        "timestamp-not-a-date": Case(
            _nothing,
            lambda s, log: log.snapshot(timestamp="yesterday-ish"),
            InvalidArgumentError,
            "yesterday-ish",
        ),
        "empty-log-directory": Case(
            _then(*[_unlink(commit_name(v)) for v in range(3)]),
            _snapshot,
            TableNotFoundError,
            "not a Delta table",
        ),
    }
)

# Paths in add actions that escape the table root.
ESCAPING = {
    "dotdot": "../x.parquet",
    "dotdot-deep": "../../../../../../etc/passwd",
    "absolute": "/etc/passwd",
    "file-uri": "file:///etc/passwd",
    "file-uri-one-slash": "file:/etc/passwd",
    "file-uri-localhost": "file://localhost/etc/passwd",
    "encoded-dotdot": "%2e%2e/x.parquet",
    "encoded-dotdot-upper": "%2E%2E%2Fx.parquet",
    "encoded-slash": "..%2Fx.parquet",
    "encoded-absolute": "%2Fetc%2Fpasswd",
    "inner-dotdot": "part=a/../../x.parquet",
    "other-scheme": "s3://bucket/x.parquet",
    "into-delta-log": "_delta_log/00000000000000000000.json",
    "empty": "",
    "dot": ".",
}


def _commit_refused(path: str) -> Act:
    def act(scene: Scene, log: DeltaLog) -> None:
        _append(log, add(path))

    return act


def _sibling_outside(scene: Scene) -> str:
    return str(scene.base / "outside" / "sentinel.txt")


def _vacuum_spares_outside(path: str) -> Act:
    def act(scene: Scene, log: DeltaLog) -> None:
        # Reading may keep the path (the log is someone else's); VACUUM and a DELETE of the
        # file must never touch anything outside the root.
        assert path in _live(log)
        vacuum(log, retention_hours=0, enforce_retention=False, now_ms=10**13)
        txn = OptimisticTransaction(log, log.snapshot())
        txn.remove_files([f for f in txn.scan() if f.path == path])
        txn.record_operation(Operation(OperationName.DELETE, {"predicate": "[]"}), {})
        txn.commit()
        vacuum(log, retention_hours=0, enforce_retention=False, now_ms=10**13)
        assert not (scene.root / "part=a" / "orphan.parquet").exists()  # VACUUM did run

    return act


def _plant_add(path: str) -> Setup:
    return lambda s: s.write_actions(3, _add_json(path))


for name, bad in ESCAPING.items():
    CASES[f"path-{name}-commit-refused"] = Case(
        _nothing, _commit_refused(bad), InvalidArgumentError, "add '" + bad.replace(".", r"\.")
    )
    CASES[f"path-{name}-in-log-vacuum-stays-inside"] = Case(
        _plant_add(bad), _vacuum_spares_outside(bad), None, may_change_root=True
    )
CASES["path-absolute-into-outside-dir-refused"] = Case(
    _nothing,
    lambda s, log: _commit_refused(_sibling_outside(s))(s, log),
    InvalidArgumentError,
    "outside the table root",
)


def _absolute_under_root_kept(uri: bool) -> Act:
    def act(scene: Scene, log: DeltaLog) -> None:
        target = scene.root / "part=a" / "abs.parquet"
        target.write_bytes(b"abs")
        path = ("file://" if uri else "") + str(target)
        _append(log, add(path))
        vacuum(log, retention_hours=0, enforce_retention=False, now_ms=10**13)
        # Bug fixed: VACUUM compared absolute paths with relative ones and deleted the file.
        assert target.exists()
        assert path in _live(log)

    return act


CASES["path-absolute-under-root-allowed-and-kept"] = Case(
    _nothing, _absolute_under_root_kept(False), None, may_change_root=True
)
CASES["path-file-uri-under-root-allowed-and-kept"] = Case(
    _nothing, _absolute_under_root_kept(True), None, may_change_root=True
)


# Deletion vectors with bad descriptors.
def _vacuum_zero(scene: Scene, log: DeltaLog) -> object:
    return vacuum(log, retention_hours=0, enforce_retention=False, now_ms=10**13)


CASES.update(
    {
        "dv-bad-storage-type": bad_actions(
            V3 + " line 2.*storageType", _add_json("e", deletionVector=_dv_json(storageType="x"))
        ),
        "dv-negative-cardinality": bad_actions(
            V3 + " line 2.*cardinality is negative",
            _add_json("e", deletionVector=_dv_json(cardinality=-1)),
        ),
        "dv-negative-size": bad_actions(
            V3 + " line 2.*sizeInBytes is negative",
            _add_json("e", deletionVector=_dv_json(sizeInBytes=-5)),
        ),
        "dv-negative-offset": bad_actions(
            V3 + " line 2.*offset is negative",
            _add_json("e", deletionVector=_dv_json(offset=-1)),
        ),
        "dv-not-an-object": bad_actions(
            V3 + " line 2.*deletionVector", _add_json("e", deletionVector="u123")
        ),
        "dv-missing-cardinality": bad_actions(
            V3 + " line 2.*'cardinality'",
            _add_json(
                "e",
                deletionVector={"storageType": "u", "pathOrInlineDv": "x" * 20, "sizeInBytes": 1},
            ),
        ),
        "dv-bad-z85-vacuum-deletes-nothing": Case(
            lambda s: s.write_actions(
                3, _add_json("e", deletionVector=_dv_json(pathOrInlineDv="~~~~~~~~~~~~~~~~~~~~"))
            ),
            _vacuum_zero,
            InvalidTableError,
            "not a Z85 character",
        ),
        "dv-short-id-vacuum-deletes-nothing": Case(
            lambda s: s.write_actions(
                3, _add_json("e", deletionVector=_dv_json(pathOrInlineDv="abc"))
            ),
            _vacuum_zero,
            InvalidTableError,
            "too short for a Z85 UUID",
        ),
        "dv-commit-bad-z85": Case(
            _nothing,
            lambda s, log: _append(log, add("e", deletion_vector=_dv(inline="~" * 20))),
            InvalidArgumentError,
            "add 'e': deletion vector is not a valid descriptor",
        ),
        "dv-commit-negative-cardinality": Case(
            _nothing,
            lambda s, log: _append(log, add("e", deletion_vector=_dv(cardinality=-3))),
            InvalidArgumentError,
            "cardinality is negative",
        ),
        "dv-commit-bad-storage-type": Case(
            _nothing,
            lambda s, log: _append(log, add("e", deletion_vector=_dv(storage="q"))),
            InvalidArgumentError,
            "unknown storageType 'q'",
        ),
        "dv-commit-prefix-escapes-root": Case(
            _nothing,
            lambda s, log: _append(
                log, add("e", deletion_vector=_dv(inline="../" + z85_encode(bytes(16))))
            ),
            InvalidArgumentError,
            "escapes the table root",
        ),
        "dv-commit-absolute-outside-root": Case(
            _nothing,
            lambda s, log: _append(
                log, add("e", deletion_vector=_dv(storage="p", inline="/etc/dv.bin"))
            ),
            InvalidArgumentError,
            "outside the table root",
        ),
    }
)


# Crafted logs met by readers and maintenance (hardening): every reader resolves data and
# deletion-vector paths through the table's Location, so a crafted path fails there, typed,
# before any file outside the root is opened.
def _read_every_file(scene: Scene, log: DeltaLog) -> None:
    location = log.location
    reader = DvReader(log)
    for f in log.snapshot().add_files():
        location.file(f.path, what="data file")
        reader.rows(f.deletion_vector, data_file=f.path)


READ_ESCAPING = {
    "dotdot": "../x.parquet",
    "encoded-dotdot": "%2e%2e%2fx.parquet",
    "encoded-dotdot-upper": "%2E%2E/x.parquet",
    "inner-dotdot": "sub/../../x.parquet",
    "deep-dotdot": "part=a/../../../outside/sentinel.txt",
}
for name, bad in READ_ESCAPING.items():
    CASES[f"log-read-{name}-refused"] = Case(
        _plant_add(bad), _read_every_file, InvalidTableError, "outside the table root"
    )


def _assert_not_live(log: DeltaLog, path: str) -> None:
    live = _live(log)
    assert path not in live and path.replace("%20", " ") not in live


def _assert_metadata_id(log: DeltaLog, expected: str) -> None:
    assert log.snapshot().metadata.id == expected


def _dv_file_planted(descriptor: dict[str, Any]) -> Setup:
    return lambda s: s.write_actions(3, _add_json("part=a/b.parquet", deletionVector=descriptor))


def _vacuum_refuses_before_touching(scene: Scene, log: DeltaLog) -> None:
    vacuum(log, retention_hours=0, enforce_retention=False, now_ms=10**13)


def _checkpoint_latest(scene: Scene, log: DeltaLog) -> None:
    log.checkpoint()


_FUTURE_WRITER = {
    "protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["futureW"]}
}

CASES.update(
    {
        "log-dv-p-relative-outside-refused": Case(
            _dv_file_planted(_dv_json(storageType="p", pathOrInlineDv="../outside/evil.bin")),
            _read_every_file,
            InvalidTableError,
            "must name its file by absolute path",
        ),
        "log-dv-u-prefix-escapes-refused": Case(
            _dv_file_planted(_dv_json(pathOrInlineDv="../" + z85_encode(bytes(range(16))))),
            _read_every_file,
            InvalidTableError,
            "outside the table root",
        ),
        "log-spellings-of-one-file-are-one-file": Case(
            lambda s: (
                s.write_actions(3, _add_json("part=a/e%20f.parquet")),
                s.write_actions(
                    4,
                    {
                        "remove": {
                            "path": "part=a/e f.parquet",
                            "deletionTimestamp": 1,
                            "dataChange": True,
                        }
                    },
                ),
            ),
            lambda s, log: _assert_not_live(log, "part=a/e%20f.parquet"),
            None,
        ),
        "log-superseded-partial-metadata-readable": Case(
            lambda s: (
                s.write_actions(3, {"metaData": {"id": "partial", "configuration": {}}}),
                s.write_actions(
                    4,
                    {
                        "metaData": {
                            "id": "full",
                            "schemaString": SCHEMA,
                            "format": {"provider": "parquet", "options": {}},
                            "partitionColumns": ["part"],
                            "configuration": {},
                        }
                    },
                ),
            ),
            lambda s, log: _assert_metadata_id(log, "full"),
            None,
        ),
        "log-dv-p-directory-typed": Case(
            _dv_file_planted(_dv_json(storageType="p", pathOrInlineDv="part=a")),
            _read_every_file,
            InvalidTableError,
            "part=a",
        ),
        "log-dv-p-missing-file-typed": Case(
            _dv_file_planted(_dv_json(storageType="p", pathOrInlineDv="part=a/none.bin")),
            _read_every_file,
            InvalidTableError,
            "none.bin",
        ),
        "log-add-negative-size-refused": bad_actions(
            V3 + ".*size", _add_json("part=a/e.parquet", size=-5)
        ),
        "log-unknown-writer-feature-vacuum-refused-first": Case(
            lambda s: s.write_actions(3, _FUTURE_WRITER),
            _vacuum_refuses_before_touching,
            UnsupportedFeatureError,
            "futureW",
        ),
        "log-unknown-writer-feature-checkpoint-refused": Case(
            lambda s: s.write_actions(3, _FUTURE_WRITER),
            _checkpoint_latest,
            UnsupportedFeatureError,
            "futureW",
        ),
        "log-tombstone-escaping-vacuum-spares-outside": Case(
            lambda s: s.write_actions(
                3,
                {
                    "remove": {
                        "path": "../outside/sentinel.txt",
                        "deletionTimestamp": 1,
                        "dataChange": True,
                    }
                },
            ),
            _vacuum_zero,
            None,
            may_change_root=True,
        ),
    }
)


# Invalid property values: refused when set, read leniently from a log.
BAD_PROPERTIES = {
    "isolation-bogus": ("delta.isolationLevel", "Bogus", "allowed values"),
    "isolation-snapshot": ("delta.isolationLevel", "SnapshotIsolation", "allowed values"),
    "checkpoint-interval-zero": ("delta.checkpointInterval", "0", "positive"),
    "checkpoint-interval-negative": ("delta.checkpointInterval", "-3", "positive"),
    "checkpoint-interval-word": ("delta.checkpointInterval", "ten", "not an integer"),
    "retention-forever": ("delta.deletedFileRetentionDuration", "forever", "interval"),
    "retention-no-interval-word": ("delta.logRetentionDuration", "7 days", "interval"),
    "append-only-yes": ("delta.appendOnly", "yes", "boolean"),
    "deletion-vectors-maybe": ("delta.enableDeletionVectors", "maybe", "boolean"),
    "max-commit-attempts-zero": ("deltatx.maxCommitAttempts", "0", "positive"),
    "mixed-case-key-validated": ("DELTA.checkpointInterval", "0", "positive"),
}


def _validate(key: str, value: str) -> Act:
    return lambda s, log: validate_properties({key: value})


def _commit_property(key: str, value: str) -> Act:
    def act(scene: Scene, log: DeltaLog) -> None:
        snap = log.snapshot()
        txn = OptimisticTransaction(log, snap)
        conf = {**snap.metadata.configuration, key: value}
        txn.update_metadata(Metadata(**{**_md_fields(snap.metadata), "configuration": conf}))
        txn.record_operation(Operation(OperationName.SET_TBLPROPERTIES, {}), {})
        txn.commit()

    return act


def _md_fields(md: Metadata) -> dict[str, Any]:
    return {
        "id": md.id,
        "schema_string": md.schema_string,
        "partition_columns": md.partition_columns,
        "configuration": md.configuration,
    }


for name, (key, value, why) in BAD_PROPERTIES.items():
    CASES[f"property-{name}"] = Case(
        _nothing, _validate(key, value), InvalidPropertyError, f"(?i){key}.*{why}"
    )
CASES["property-empty-key"] = Case(
    _nothing, _validate("", "x"), InvalidPropertyError, "non-empty string"
)
CASES["property-invalid-commit-refused"] = Case(
    _nothing,
    _commit_property("delta.checkpointInterval", "0"),
    InvalidPropertyError,
    "delta.checkpointInterval",
)


def _lenient(scene: Scene, log: DeltaLog) -> None:
    props = log.snapshot().properties
    assert props.checkpoint_interval == 10 and props.append_only is False
    assert TableProperties.from_configuration({"delta.isolationLevel": "???"}).isolation_level
    # Re-committing metadata that keeps an existing unreadable value stays possible.
    _commit_property("delta.appendOnly", "false")(scene, log)


CASES["property-invalid-in-log-read-leniently"] = Case(
    lambda s: s.write_actions(
        3,
        {
            "metaData": {
                "id": "tbl-1",
                "schemaString": SCHEMA,
                "partitionColumns": ["part"],
                "configuration": {"delta.checkpointInterval": "abc", "delta.appendOnly": "maybe"},
            }
        },
    ),
    _lenient,
    None,
    may_change_root=True,
)

# Schema strings that do not parse.
BAD_SCHEMAS = {
    "not-json": ("not json", "not valid JSON"),
    "empty-object": ("{}", "unknown type"),
    "struct-without-fields": ('{"type":"struct"}', "without a 'fields' list"),
    "field-without-type": ('{"type":"struct","fields":[{"name":"a"}]}', "a"),
    "unknown-primitive": (
        '{"type":"struct","fields":[{"name":"a","type":"int128","nullable":true,"metadata":{}}]}',
        "unknown type 'int128'",
    ),
    "not-a-struct": ('"string"', "must describe a struct"),
    "array-without-element": (
        '{"type":"struct","fields":[{"name":"a","type":{"type":"array"},"nullable":true}]}',
        "a",
    ),
    "deep-nesting": ('{"type":' * 50_000 + '"x"' + "}" * 50_000, "nested too deeply"),
    "field-metadata-list": (
        '{"type":"struct","fields":[{"name":"a","type":"long","metadata":"x"}]}',
        "'metadata' must be an object",
    ),
}
for name, (text, match) in BAD_SCHEMAS.items():
    CASES[f"schema-{name}"] = Case(
        _nothing, lambda s, log, t=text: parse_schema(t), InvalidTableError, match
    )
CASES["schema-bad-commit-refused"] = Case(
    _nothing,
    lambda s, log: _commit_schema(log, "{nope"),
    InvalidTableError,
    "schemaString is not valid JSON",
)


def _commit_schema(log: DeltaLog, schema: str) -> None:
    snap = log.snapshot()
    txn = OptimisticTransaction(log, snap)
    txn.update_metadata(Metadata(**{**_md_fields(snap.metadata), "schema_string": schema}))
    txn.record_operation(Operation(OperationName.SET_TBLPROPERTIES, {}), {})
    txn.commit()


# Conditions that do not parse (sqlglot, no JVM).
BAD_CONDITIONS = {
    "dangling-operator": ("id = ", "cannot parse"),
    "bad-operator": ("id ==== 3", "cannot parse"),
    "empty": ("", "empty"),
    "blank": ("   ", "empty"),
    "unbalanced-paren": ("(id = 1", "cannot parse"),
    "unterminated-string": ("id = 'unterminated", "cannot parse"),
    "unknown-column": ("nosuch = 1", "unknown column 'nosuch'"),
    "a-query": ("SELECT * FROM t", "not a boolean expression"),
    "open-in-list": ("id IN (1,", "cannot parse"),
    "dangling-plus": ("1 +", "cannot parse"),
}


def _parse_condition(text: str) -> Act:
    def act(scene: Scene, log: DeltaLog) -> object:
        from deltatx.spark.expressions import parse_condition

        return parse_condition(text, schema=parse_schema(SCHEMA))

    return act


for name, (text, match) in BAD_CONDITIONS.items():
    CASES[f"condition-{name}"] = Case(
        _nothing, _parse_condition(text), InvalidConditionError, match
    )


def test_syntax_errors_name_the_construct_not_parser_internals() -> None:
    from deltatx.errors import ConditionSyntaxError
    from deltatx.spark.expressions import parse_condition

    for text, construct in [("id = 1 AND", "AND"), ("id = = 1", "="), ("(id = 1", "(")]:
        with pytest.raises(ConditionSyntaxError) as info:
            parse_condition(text, schema=parse_schema(SCHEMA))
        assert info.value.construct == construct
        assert 1 <= info.value.column <= len(text)
        assert "<class" not in str(info.value) and "sqlglot" not in str(info.value)
        assert f"at character {info.value.column}" in str(info.value)


# A second statement after ';' must be refused, not read as part of the condition.
CASES["condition-two-statements"] = Case(
    _nothing, _parse_condition("id = 1; DROP TABLE t"), InvalidConditionError, "statements"
)


# -- the runner ------------------------------------------------------------------------------


def _inside(root: Path, path: str) -> bool:
    real = os.path.realpath(path)
    base = os.path.realpath(root)
    return real == base or real.startswith(base + os.sep)


def _run(case: Case, tmp_path: Path) -> None:
    scene = _scene(tmp_path)
    case.setup(scene)
    before = snapshot_dir(str(scene.base))
    outside_before = {k: v for k, v in before.items() if not k.startswith("root" + os.sep)}
    store = RecordingStore()
    log = DeltaLog.for_table(str(scene.root), store=store)
    if case.error is None:
        case.act(scene, log)
    else:
        with pytest.raises(case.error, match=case.match) as caught:
            case.act(scene, log)
        assert isinstance(caught.value, DeltaError)
    after = snapshot_dir(str(scene.base))
    if case.may_change_root:
        assert {k: v for k, v in after.items() if not k.startswith("root" + os.sep)} == (
            outside_before
        )
    else:
        assert after == before, "a call on bad input changed files"
    strays = [(op, p) for op, p in store.touched if not _inside(scene.root, p)]
    assert strays == [], f"storage calls outside the table root: {strays[:5]}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input(name: str, tmp_path: Path) -> None:
    _run(CASES[name], tmp_path)


def test_corpus_size() -> None:
    assert len(CASES) > 150
