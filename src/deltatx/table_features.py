"""Dropping a table feature: the features deltatx can remove safely, and only those.

``deletionVectors`` is dropped in three commits: the property is turned off (so no writer adds
new deletion vectors), the files that carry one are rewritten without it (REORG ... PURGE),
and the protocol stops naming the feature. ``appendOnly`` needs only the first and last.
Any other feature is refused: deltatx cannot prove that nothing in the table still uses it.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import SparkSession

from deltatx.errors import InvalidArgumentError, UnsupportedFeatureError
from deltatx.kernel.actions import ProtocolAction
from deltatx.kernel.features import reader_features, writer_features
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.optimize import stage_compaction

# The property that turns each droppable feature on.
DROPPABLE: dict[str, str] = {
    "deletionVectors": "delta.enableDeletionVectors",
    "appendOnly": "delta.appendOnly",
}


def drop_feature(spark: SparkSession, log: DeltaLog, feature: str) -> int:
    """Removes ``feature`` from the table's protocol; returns the last version committed.

    Raises:
        UnsupportedFeatureError: deltatx cannot drop this feature, or the table uses a legacy
            protocol (features implied by version numbers cannot be removed without a
            protocol downgrade, which deltatx never does).
        InvalidArgumentError: The table does not have the feature.
    """
    name = next((k for k in DROPPABLE if k.lower() == feature.lower()), None)
    if name is None:
        raise UnsupportedFeatureError(
            f"deltatx cannot drop table feature '{feature}'; it can drop "
            f"{', '.join(sorted(DROPPABLE))}",
            feature=feature,
        )
    snapshot = log.snapshot()
    protocol = snapshot.protocol
    if protocol.writer_features is None:
        raise UnsupportedFeatureError(
            f"the table uses legacy protocol versions ({protocol.min_reader_version}, "
            f"{protocol.min_writer_version}); deltatx drops features only from tables that "
            f"name their features",
            feature=name,
        )
    if name not in writer_features(protocol) | reader_features(protocol):
        raise InvalidArgumentError(f"the table does not have feature '{name}'; nothing to drop")
    key = DROPPABLE[name]
    if snapshot.metadata.configuration.get(key, "false").lower() != "false":
        txn = OptimisticTransaction(log, snapshot)
        config = {**txn.metadata.configuration, key: "false"}
        txn.update_metadata(replace(txn.metadata, configuration=config))
        txn.record_operation(
            Operation(OperationName.SET_TBLPROPERTIES, {"properties": {key: "false"}}), {}
        )
        txn.commit()
    if name == "deletionVectors":
        txn = OptimisticTransaction(log, log.snapshot())
        files = [f for f in txn.scan(None) if f.deletion_vector is not None]
        if files:
            stage_compaction(spark, txn, files=files, operation=OperationName.REORG)
            txn.commit()
        else:
            txn.abort()
    txn = OptimisticTransaction(log, log.snapshot())
    if name == "deletionVectors" and any(f.deletion_vector is not None for f in txn.scan(None)):
        txn.abort()
        raise InvalidArgumentError(
            "a concurrent writer added deletion vectors while the feature was being dropped; "
            "run DROP FEATURE again"
        )
    current = txn.protocol
    readers = None
    if current.reader_features is not None:
        readers = tuple(f for f in current.reader_features if f != name)
    writers = tuple(f for f in current.writer_features or () if f != name)
    txn.update_protocol(
        ProtocolAction(
            min_reader_version=current.min_reader_version,
            min_writer_version=current.min_writer_version,
            reader_features=readers,
            writer_features=writers,
        )
    )
    txn.record_operation(Operation(OperationName.DROP_FEATURE, {"featureName": name}), {})
    return txn.commit()


__all__ = ["DROPPABLE", "drop_feature"]
