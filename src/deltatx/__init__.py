"""deltatx: Delta Lake transactions in Python, with Spark doing the data work.

``import deltatx`` loads no Spark: :class:`DeltaTable`, :class:`Transaction`, :func:`write`,
:func:`spark_session` and :func:`configure` are resolved on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deltatx.errors import (
    ChangeDataNotRecordedError,
    CommitFailedError,
    CommitRetriesExceededError,
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentModificationException,
    ConcurrentTransactionException,
    ConditionSyntaxError,
    DeltaError,
    ExtensionBuildError,
    InvalidArgumentError,
    InvalidConditionError,
    InvalidPropertyError,
    InvalidTableError,
    MetadataChangedException,
    ProtocolChangedException,
    SchemaMismatchError,
    SqlError,
    StreamDataChangedError,
    StreamingSourceError,
    StreamMetadataChangedError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TransactionStateError,
    UnsupportedFeatureError,
    UnsupportedOptionError,
    UnsupportedPropertyError,
    UnsupportedStatementError,
    VersionNotFoundError,
    VersionNotReadableError,
)
from deltatx.progress import enable_progress
from deltatx.version import __version__

if TYPE_CHECKING:
    from deltatx.delta_sql import sql
    from deltatx.reexecution import Backoff
    from deltatx.session import configure, spark_jar, spark_session
    from deltatx.tables import DeltaTable, Transaction, write


_LAZY = {
    "Backoff": "deltatx.reexecution",
    "DeltaTable": "deltatx.tables",
    "Transaction": "deltatx.tables",
    "write": "deltatx.tables",
    "spark_session": "deltatx.session",
    "spark_jar": "deltatx.session",
    "configure": "deltatx.session",
    "sql": "deltatx.delta_sql",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'deltatx' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "Backoff",
    "ChangeDataNotRecordedError",
    "CommitFailedError",
    "CommitRetriesExceededError",
    "ConcurrentAppendException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentDeleteReadException",
    "ConcurrentModificationException",
    "ConcurrentTransactionException",
    "ConditionSyntaxError",
    "DeltaError",
    "DeltaTable",
    "ExtensionBuildError",
    "InvalidArgumentError",
    "InvalidConditionError",
    "InvalidPropertyError",
    "InvalidTableError",
    "MetadataChangedException",
    "ProtocolChangedException",
    "SchemaMismatchError",
    "SqlError",
    "StreamDataChangedError",
    "StreamMetadataChangedError",
    "StreamingSourceError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "Transaction",
    "TransactionStateError",
    "UnsupportedFeatureError",
    "UnsupportedOptionError",
    "UnsupportedPropertyError",
    "UnsupportedStatementError",
    "VersionNotFoundError",
    "VersionNotReadableError",
    "__version__",
    "configure",
    "enable_progress",
    "spark_jar",
    "spark_session",
    "sql",
    "write",
]
