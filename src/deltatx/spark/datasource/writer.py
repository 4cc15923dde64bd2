"""The write half of ``format("delta")``: Parquet from the tasks, one Delta commit at the end.

Spark calls :meth:`DeltaWriter.write` in each task with the task's rows as Arrow batches: the
task conforms them to the table schema, writes one Parquet file per partition value under
the table root and returns the files' ``add`` actions with statistics from their footers.
Nothing is visible until :meth:`DeltaWriter.commit` (in a Python process on the driver) stages
those actions in an :class:`OptimisticTransaction` read at the version the write started
from, and commits once: the same rules and conflict checks as :func:`deltatx.write`, so an
append that reads nothing stays a blind append. A failed job deletes the files it wrote.

Spark only lets a Python data source write in the ``append`` and ``overwrite`` modes, and
refuses ``partitionBy(...)`` for it; the ``partitionBy`` option names the partition columns of
a new table instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import (
    InvalidArgumentError,
    InvalidConditionError,
    TableAlreadyExistsError,
    UnsupportedFeatureError,
)
from deltatx.kernel.actions import AddFile, Metadata
from deltatx.kernel.column_mapping import (
    ColumnMappingMode,
    is_mapped,
    mapped_metadata,
)
from deltatx.kernel.expressions import Expression, has_opaque, to_sql
from deltatx.kernel.features import DEFAULT_PROTOCOL, protocol_for_configuration
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.properties import validate_properties
from deltatx.kernel.schema import StructType, parse_schema
from deltatx.kernel.table_configuration import TableConfiguration
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.common import (
    condition_to_predicate,
    covers_whole_files,
    file_metrics,
    new_table_actions,
    to_delta_schema,
)
from deltatx.spark.datasource.options import check_options, table_path
from deltatx.spark.datasource.save import SAVE_MODE_OPTION
from deltatx.spark.datasource.task_files import TaskFiles, WritePlan, rows_outside
from deltatx.spark.schema import check_write_schema
from deltatx.spark.write import (
    TableLocation,
    decode_uri_path,
    resolve_partition_columns,
)

WRITE_OPTIONS = frozenset(
    {
        "path",
        "replaceWhere",
        "mergeSchema",
        "overwriteSchema",
        "txnAppId",
        "txnVersion",
        "userMetadata",
        "partitionBy",
        SAVE_MODE_OPTION,
    }
)
"""The writer's options (matched case-insensitively)."""


class FilesWritten(WriterCommitMessage):
    """A task's ``add`` actions."""

    def __init__(self, files: list[AddFile]) -> None:
        """Holds the files one task wrote."""
        self.files = files


def _flag(options: Mapping[str, str], name: str) -> bool:
    text = options.get(name)
    if text is None:
        return False
    lowered = str(text).strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidArgumentError(f"option '{name}' must be true or false, got {text!r}")
    return lowered == "true"


class DeltaWriter(DataSourceArrowWriter):
    """Writes a DataFrame into a Delta table as one commit (see the module docstring)."""

    def __init__(
        self,
        *,
        plan: WritePlan,
        overwrite: bool,
        merge_schema: bool,
        overwrite_schema: bool,
        app_id: str | None,
        app_version: int | None,
        user_metadata: str | None,
        error_if_exists: bool,
        data_schema_json: str,
        new_partition_columns: tuple[str, ...] | None,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """Use :meth:`create`."""
        self.properties = dict(properties or {})
        self.plan = plan
        self.overwrite = overwrite
        self.merge_schema = merge_schema
        self.overwrite_schema = overwrite_schema
        self.app_id = app_id
        self.app_version = app_version
        self.user_metadata = user_metadata
        self.error_if_exists = error_if_exists
        self.data_schema_json = data_schema_json
        self.new_partition_columns = new_partition_columns

    @classmethod
    def create(
        cls, options: Mapping[str, str], *, schema: SparkStructType, overwrite: bool
    ) -> DeltaWriter:
        """Checks the options and the data's schema against the table before any row is written.

        Raises:
            UnsupportedOptionError: An option deltatx does not implement.
            InvalidArgumentError: Contradictory or malformed options.
            SchemaMismatchError: The data does not fit the table.
        """
        # delta.* options are the table properties of a table this write creates.
        requested = {k: v for k, v in options.items() if k.lower().startswith("delta.")}
        options = {k: v for k, v in options.items() if k not in requested}
        properties = validate_properties(requested)
        opts = {k.lower(): v for k, v in options.items()}
        check_options(options, WRITE_OPTIONS, what="write")
        path = table_path(options)
        merge_schema = _flag(opts, "mergeschema")
        overwrite_schema = _flag(opts, "overwriteschema")
        replace_where = opts.get("replacewhere")
        app_id = opts.get("txnappid")
        app_version_text = opts.get("txnversion")
        if (app_id is None) != (app_version_text is None):
            raise InvalidArgumentError("options txnAppId and txnVersion go together")
        app_version: int | None = None
        if app_version_text is not None:
            try:
                app_version = int(app_version_text)
            except ValueError:
                raise InvalidArgumentError(
                    f"option txnVersion must be an integer, got {app_version_text!r}"
                ) from None
            if app_version < 0:
                raise InvalidArgumentError(f"option txnVersion must be >= 0, got {app_version}")
        if replace_where is not None and not overwrite:
            raise InvalidArgumentError("option replaceWhere needs mode('overwrite')")
        if overwrite_schema and (not overwrite or replace_where is not None):
            raise InvalidArgumentError(
                "option overwriteSchema needs mode('overwrite') and no replaceWhere"
            )
        requested_parts = opts.get("partitionby")
        partition_by = (
            None
            if requested_parts is None
            else tuple(c.strip() for c in requested_parts.split(",") if c.strip())
        )

        data_schema = to_delta_schema(schema)
        log = DeltaLog.for_table(path)
        snapshot = log.snapshot() if log.table_exists() else None
        if snapshot is not None and opts.get(SAVE_MODE_OPTION.lower()) == "error":
            raise TableAlreadyExistsError(f"a Delta table already exists at {path}")
        generated = () if snapshot is None else snapshot.table_configuration.generated_columns
        if generated:
            raise UnsupportedFeatureError(
                f"the table has the generated column '{generated[0].column}', which the "
                "format('delta') writer does not compute; write with deltatx.write instead. "
                "Nothing was written.",
                feature="generatedColumns",
            )
        replaces_table = snapshot is None or overwrite_schema
        if properties and snapshot is not None:
            raise InvalidArgumentError(
                f"table property options ({', '.join(sorted(properties))}) apply only when the "
                "write creates the table; on an existing table use DeltaTable.set_properties "
                "or ALTER TABLE ... SET TBLPROPERTIES. Nothing was written."
            )
        if replaces_table:
            target = data_schema
            parts = tuple(resolve_partition_columns(target, partition_by or ()))
        else:
            assert snapshot is not None
            parts = snapshot.partition_columns
            if partition_by is not None and [c.lower() for c in partition_by] != [
                c.lower() for c in parts
            ]:
                raise InvalidArgumentError(
                    f"option partitionBy {list(partition_by)} differs from the table's partition "
                    f"columns {list(parts)}; use overwriteSchema to change the partitioning"
                )
            evolved = check_write_schema(snapshot.schema, data_schema, merge_schema=merge_schema)
            target = evolved or snapshot.schema
        mode = (
            ColumnMappingMode.NONE
            if snapshot is None
            else snapshot.table_configuration.column_mapping_mode
        )
        if snapshot is not None and is_mapped(mode):
            # The tasks write physical names, so columns new to the table get theirs now; the
            # commit stages the same schema, whose ids and names it keeps.
            proposed = replace(snapshot.metadata, schema_string=target.to_json())
            target = parse_schema(
                mapped_metadata(
                    proposed,
                    snapshot.metadata,
                    table=f"table {log.table_path}",
                    replacing=replaces_table,
                ).schema_string
            )
        predicate = (
            None if replace_where is None else condition_to_predicate(replace_where, schema=target)
        )
        plan = WritePlan(
            table_path=log.table_path,
            read_version=-1 if snapshot is None else snapshot.version,
            schema_json=target.to_json(),
            partition_columns=parts,
            replace_where=replace_where,
            predicate=predicate,
            column_mapping=str(mode),
            constraints=_constraint_predicates(
                snapshot.table_configuration
                if snapshot is not None
                else TableConfiguration.of(
                    DEFAULT_PROTOCOL,
                    Metadata(id="", schema_string=target.to_json(), configuration=properties),
                ),
                target,
            ),
        )
        return cls(
            plan=plan,
            overwrite=overwrite,
            merge_schema=merge_schema,
            overwrite_schema=overwrite_schema,
            app_id=app_id,
            app_version=app_version,
            user_metadata=opts.get("usermetadata"),
            error_if_exists=opts.get(SAVE_MODE_OPTION.lower()) == "error",
            data_schema_json=data_schema.to_json(),
            new_partition_columns=parts if replaces_table else None,
            properties=properties,
        )

    # -- in the tasks -----------------------------------------------------------------------

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesWritten:
        """Writes this task's rows; returns the files' ``add`` actions."""
        files = TaskFiles(self.plan)
        try:
            for batch in iterator:
                if batch.num_rows:
                    files.add(batch)
            return FilesWritten(files.close())
        except BaseException:
            files.discard()
            raise

    # -- on the driver ----------------------------------------------------------------------

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Deletes the files the tasks wrote; nothing was committed."""
        delete_files(self.plan.table_path, added_files(messages))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Stages the written files and commits them as one version.

        Raises:
            ConcurrentModificationException: A concurrent commit conflicts with this write.
        """
        self.commit_files(added_files(messages))

    def commit_files(
        self,
        added: list[AddFile],
        *,
        app_version: int | None = None,
        operation: Operation | None = None,
    ) -> bool:
        """Commits ``added`` (deleting them when nothing is committed); False if skipped.

        Args:
            added: The files the tasks wrote.
            app_version: Overrides the ``txn`` version (a streaming batch id).
            operation: Overrides the WRITE operation recorded in ``commitInfo``.

        Raises:
            ConcurrentModificationException: A concurrent commit conflicts with this write.
        """
        version = self.app_version if app_version is None else app_version
        try:
            committed = self._commit(added, version, operation)
        except BaseException:
            delete_files(self.plan.table_path, added)
            raise
        if not committed:
            delete_files(self.plan.table_path, added)
        return committed

    def _commit(
        self, added: list[AddFile], app_version: int | None, operation: Operation | None
    ) -> bool:
        plan = self.plan
        log = DeltaLog.for_table(plan.table_path)
        if self.error_if_exists and plan.read_version < 0 and log.table_exists():
            raise TableAlreadyExistsError(f"a Delta table was created at {plan.table_path}")
        snapshot = None if plan.read_version < 0 else log.snapshot(plan.read_version)
        txn = OptimisticTransaction(log, snapshot)
        if self.app_id is not None and app_version is not None:
            done = txn.app_transaction_version(self.app_id)
            if done is not None and done >= app_version:
                return False
        schema = parse_schema(plan.schema_json)
        exists = txn.has_metadata
        if self.new_partition_columns is not None and (not exists or self.overwrite_schema):
            metadata, protocol = new_table_actions(
                schema, partition_by=list(self.new_partition_columns), properties=self.properties
            )
            if exists:
                config = dict(txn.metadata.configuration)
                metadata = replace(metadata, id=txn.metadata.id, configuration=config)
                protocol = protocol_for_configuration(config, txn.protocol)
            txn.update_protocol(protocol)
            txn.update_metadata(metadata, replacing=exists)
        elif schema != txn.schema:
            txn.update_metadata(replace(txn.metadata, schema_string=schema.to_json()))

        removed = 0
        rewritten: list[AddFile] = []
        if exists and self.overwrite:
            if plan.predicate is None:
                old = txn.scan(None)
            else:
                old = txn.scan(plan.predicate)
                if not covers_whole_files(plan.predicate, txn.partition_columns):
                    rewritten = rows_outside(plan, txn, old, plan.predicate)
            txn.remove_files(old)
            removed = len(old)
        txn.add_files([*rewritten, *added])
        if plan.constraints:
            # The tasks checked every new row; kept rows were in the table, so they held.
            txn.record_constraints_checked([*rewritten, *added])
        if self.app_id is not None and app_version is not None:
            txn.set_app_transaction(self.app_id, app_version)
        rows, size = file_metrics(added)
        if operation is None:
            params: dict[str, Any] = {
                "mode": "Overwrite" if self.overwrite and exists else "Append",
                "partitionBy": list(txn.partition_columns),
            }
            if plan.predicate is not None:
                params["predicate"] = [to_sql(plan.predicate)]
            operation = Operation(OperationName.WRITE, params)
        txn.record_operation(
            operation,
            {
                "numFiles": len(added),
                "numOutputRows": rows,
                "numOutputBytes": size,
                "numRemovedFiles": removed,
            },
        )
        txn.commit(user_metadata=self.user_metadata)
        return True


def _constraint_predicates(
    configuration: TableConfiguration, schema: StructType
) -> tuple[tuple[str, str, Expression], ...]:
    """The table's constraints as predicates the tasks evaluate without Spark.

    Raises:
        UnsupportedFeatureError: A constraint uses SQL the tasks cannot evaluate row by row.
    """
    out: list[tuple[str, str, Expression]] = []
    for name, sql in configuration.constraint_checks:
        feature = "invariants" if name.startswith("invariant") else "checkConstraints"
        try:
            predicate = condition_to_predicate(sql, schema=schema)
        except InvalidConditionError as exc:
            raise UnsupportedFeatureError(
                f"the table's {name} ({sql}) cannot be checked by the format('delta') writer "
                f"({exc}); write with deltatx.write instead. Nothing was written.",
                feature=feature,
            ) from None
        if predicate is None or has_opaque(predicate):
            raise UnsupportedFeatureError(
                f"the table's {name} ({sql}) uses SQL the format('delta') writer cannot "
                "evaluate row by row; write with deltatx.write instead. Nothing was written.",
                feature=feature,
            )
        out.append((name, sql, predicate))
    return tuple(out)


def added_files(messages: Sequence[WriterCommitMessage | None]) -> list[AddFile]:
    """The files the tasks' messages report."""
    return [f for m in messages if isinstance(m, FilesWritten) for f in m.files]


def delete_files(path: str, files: Sequence[AddFile]) -> None:
    """Deletes files a job wrote but did not commit."""
    location = TableLocation.parse(path)
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            location.fs.delete_file(location.fs_path(decode_uri_path(f.path)))


__all__ = [
    "WRITE_OPTIONS",
    "DeltaWriter",
    "FilesWritten",
    "WritePlan",
    "added_files",
    "delete_files",
]
