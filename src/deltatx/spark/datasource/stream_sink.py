"""``writeStream.format("delta")``: each micro-batch is one Delta commit, exactly once.

Spark plans every micro-batch by asking the source for a stream writer (in a Python process
on the driver), ships that writer to the tasks, which write Parquet files as a batch write
does, and then commits the batch in another Python process with a freshly built writer and
the batch id. So the planning-time writer, which read the table when the batch began, travels
back in the tasks' messages, and the commit uses it: the batch's commit is checked against
every commit made since the batch started.

Exactly once: the batch's commit carries a ``txn`` action whose application id is the query's
id (kept in the checkpoint, so it survives restarts) and whose version is the batch id. A
batch that a previous run of the query already committed (it crashed before recording so in
its checkpoint) is found in the table and skipped; two runs of one query writing at the same
time collide on that ``txn`` and one fails with ``ConcurrentTransactionException``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import ConcurrentTransactionException, InvalidArgumentError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.operations import Operation, OperationName
from deltatx.spark.datasource.options import check_options
from deltatx.spark.datasource.writer import (
    DeltaWriter,
    FilesWritten,
    added_files,
    delete_files,
)
from deltatx.spark.write import TableLocation

CHECKPOINT_OPTION = "checkpointLocation"
"""The query's checkpoint location, which Spark passes to the sink among its options."""

SINK_OPTIONS = frozenset({"path", CHECKPOINT_OPTION, "mergeSchema", "userMetadata", "partitionBy"})
"""The sink's options (matched case-insensitively)."""


class BatchFilesWritten(FilesWritten):
    """A task's files, with the writer the batch was planned with."""

    def __init__(self, files: list[AddFile], writer: DeltaWriter) -> None:
        """Holds the files one task wrote and the batch's planning-time writer."""
        super().__init__(files)
        self.writer = writer


def query_id(checkpoint: str) -> str:
    """The id Spark keeps in a query's checkpoint (``metadata``), stable across restarts.

    Raises:
        InvalidArgumentError: The checkpoint holds no query id.
    """
    location = TableLocation.parse(checkpoint)
    try:
        with location.fs.open_input_stream(location.fs_path("metadata")) as stream:
            text = stream.read().decode("utf-8")
        found = json.loads(text.splitlines()[0])["id"]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        raise InvalidArgumentError(
            f"the streaming query's checkpoint at {checkpoint} holds no readable query id "
            "(its 'metadata' file); the Delta sink names each batch's commit after it"
        ) from None
    return str(found)


class DeltaStreamWriter(DataSourceStreamArrowWriter):
    """Writes each micro-batch of a streaming query as one commit (see the module docstring)."""

    def __init__(self, *, writer: DeltaWriter, query: str, complete: bool) -> None:
        """Use :meth:`create`."""
        self.writer = writer
        self.query = query
        self.complete = complete

    @classmethod
    def create(
        cls, options: Mapping[str, str], *, schema: SparkStructType, overwrite: bool
    ) -> DeltaStreamWriter:
        """Checks the options and the batch's schema against the table as it is now.

        Args:
            options: The query's sink options (Spark adds ``checkpointLocation``).
            schema: The schema of the streamed rows.
            overwrite: The query runs in ``complete`` output mode.

        Raises:
            UnsupportedOptionError: An option the sink does not implement.
            InvalidArgumentError: The query has no checkpoint location of its own.
            SchemaMismatchError: The rows do not fit the table.
        """
        check_stream_options(options)
        lowered = {k.lower(): v for k, v in options.items()}
        checkpoint = lowered.get(CHECKPOINT_OPTION.lower())
        if not checkpoint:
            raise InvalidArgumentError(
                "a streaming write to a Delta table needs "
                ".option('checkpointLocation', <directory>): each batch's commit is named "
                "after the query kept there, which is how a batch is written exactly once"
            )
        query = query_id(checkpoint)
        batch_options = {k: v for k, v in options.items() if k.lower() != CHECKPOINT_OPTION.lower()}
        batch_options["txnAppId"] = query
        batch_options["txnVersion"] = "0"
        writer = DeltaWriter.create(batch_options, schema=schema, overwrite=overwrite)
        return cls(writer=writer, query=query, complete=overwrite)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BatchFilesWritten:
        """Writes this task's rows of the batch; returns their files."""
        return BatchFilesWritten(self.writer.write(iterator).files, self.writer)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Deletes the files the batch's tasks wrote; nothing was committed."""
        delete_files(self.writer.plan.table_path, added_files(messages))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commits the batch once, or skips it when the table already holds it.

        Raises:
            ConcurrentTransactionException: Another run of this query committed meanwhile.
            ConcurrentModificationException: Another concurrent commit conflicts.
        """
        writer = _planned(messages) or self.writer
        operation = Operation(
            OperationName.STREAMING_UPDATE,
            {
                "outputMode": "Complete" if self.complete else "Append",
                "queryId": self.query,
                "epochId": str(batchId),
            },
        )
        try:
            writer.commit_files(added_files(messages), app_version=batchId, operation=operation)
        except ConcurrentTransactionException as e:
            raise ConcurrentTransactionException(
                winning_version=e.winning_version,
                winning_operation=e.winning_operation,
                detail=(
                    f"Another run of streaming query {self.query} committed to "
                    f"{writer.plan.table_path} while this run was writing batch {batchId}: the "
                    "same checkpoint location is used by two queries running at once."
                ),
                hint=(
                    "Run only one query per checkpoint location: stop the other run and restart "
                    "this one from the same checkpoint (every batch is still written exactly "
                    "once), or give each query its own checkpoint location."
                ),
            ) from e


def check_stream_options(options: Mapping[str, str]) -> None:
    """Refuses sink options deltatx does not implement, naming them.

    Raises:
        UnsupportedOptionError: An unknown option.
    """
    check_options(options, SINK_OPTIONS, what="streaming write")


def _planned(messages: Sequence[WriterCommitMessage | None]) -> DeltaWriter | None:
    for message in messages:
        if isinstance(message, BatchFilesWritten):
            return message.writer
    return None


__all__ = ["CHECKPOINT_OPTION", "SINK_OPTIONS", "DeltaStreamWriter", "query_id"]
