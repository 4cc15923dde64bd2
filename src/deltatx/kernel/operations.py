"""The operations a commit records in ``commitInfo``, with delta-spark's names and parameters."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class OperationName(StrEnum):
    """``commitInfo.operation`` values, spelled exactly as delta-spark writes them."""

    WRITE = "WRITE"
    CREATE_TABLE = "CREATE TABLE"
    CREATE_TABLE_AS_SELECT = "CREATE TABLE AS SELECT"
    REPLACE_TABLE = "REPLACE TABLE"
    REPLACE_TABLE_AS_SELECT = "REPLACE TABLE AS SELECT"
    CREATE_OR_REPLACE_TABLE = "CREATE OR REPLACE TABLE"
    CREATE_OR_REPLACE_TABLE_AS_SELECT = "CREATE OR REPLACE TABLE AS SELECT"
    DELETE = "DELETE"
    UPDATE = "UPDATE"
    MERGE = "MERGE"
    OPTIMIZE = "OPTIMIZE"
    REORG = "REORG"
    SET_TBLPROPERTIES = "SET TBLPROPERTIES"
    UNSET_TBLPROPERTIES = "UNSET TBLPROPERTIES"
    ADD_COLUMNS = "ADD COLUMNS"
    RENAME_COLUMN = "RENAME COLUMN"
    DROP_COLUMNS = "DROP COLUMNS"
    ADD_CONSTRAINT = "ADD CONSTRAINT"
    DROP_CONSTRAINT = "DROP CONSTRAINT"
    RESTORE = "RESTORE"
    VACUUM_START = "VACUUM START"
    VACUUM_END = "VACUUM END"
    STREAMING_UPDATE = "STREAMING UPDATE"
    UPGRADE_PROTOCOL = "UPGRADE PROTOCOL"
    DROP_FEATURE = "DROP FEATURE"
    MANUAL_UPDATE = "Manual Update"
    TRUNCATE = "TRUNCATE"


# conflict-spec 2.3: operations whose commits change table data even when every file action
# says dataChange=false; under WriteSerializable they never downgrade to SnapshotIsolation.
# Plain CREATE TABLE writes no rows, while every REPLACE discards the old ones.
_CHANGES_DATA: frozenset[OperationName] = frozenset(
    {
        OperationName.WRITE,
        OperationName.STREAMING_UPDATE,
        OperationName.DELETE,
        OperationName.TRUNCATE,
        OperationName.MERGE,
        OperationName.UPDATE,
        OperationName.CREATE_TABLE_AS_SELECT,
        OperationName.REPLACE_TABLE,
        OperationName.REPLACE_TABLE_AS_SELECT,
        OperationName.CREATE_OR_REPLACE_TABLE,
        OperationName.CREATE_OR_REPLACE_TABLE_AS_SELECT,
        OperationName.RESTORE,
    }
)


@dataclass(frozen=True, slots=True)
class Operation:
    """An operation and its parameters, as recorded in ``commitInfo``.

    Attributes:
        name: The operation.
        parameters: Plain Python values (strings, numbers, booleans, lists, dicts); see
            :meth:`commit_parameters` for how they are written.
    """

    name: OperationName
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def changes_data(self) -> bool:
        """Whether the operation changes data by its nature (conflict-spec 2.3, the Delta code)."""
        return self.name in _CHANGES_DATA

    def commit_parameters(self) -> dict[str, str]:
        """``operationParameters`` as delta-spark writes them.

        A string is written as is; any other value is JSON-encoded compactly (``"[]"``,
        ``"true"``, ``'{"a":"1"}'``). Parameters whose value is None are left out.
        """
        out: dict[str, str] = {}
        for key, value in self.parameters.items():
            if value is None:
                continue
            if isinstance(value, str):
                out[key] = value
            else:
                out[key] = json.dumps(value, separators=(",", ":"), default=str)
        return out
