"""Copy-on-write DML rewritten on the driver: no Spark job when the change is small.

Once the driver has found the matched rows (:mod:`deltatx.spark.commands.driver_match`), each
touched file is read whole with pyarrow. The rows its deletion vector deletes are dropped, and
so are the matched rows for a DELETE; an UPDATE applies its SET to the matched rows in place
(:mod:`deltatx.log.row_level.arrow_assignments`), so the file's row order is kept. Each file's
result goes to new files of its own, written by the ``format("delta")`` task writer (same file
naming, compression and footer statistics), the touched files read and written at once by the
driver's threads. The commit is the same remove-and-add the Spark job stages. A copy-on-write
MERGE whose new rows the driver builds from its copy of the source
(:mod:`deltatx.spark.commands.merge_driver_write`) copies the unchanged rows of its touched
files the same way.

It steps aside, and the statement runs its Spark job, on the grounds the driver UPDATE with
deletion vectors does (:mod:`deltatx.spark.commands.driver_update`), and when the touched
files hold more than :data:`~deltatx.spark.commands.driver_update.DRIVER_UPDATE_ROWS` rows or
:data:`~deltatx.spark.commands.driver_update.DRIVER_UPDATE_BYTES` bytes: every row of a touched
file counts, since every live row is written again. A rewrite that gives up or fails part way
leaves none of the files it wrote behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from deltatx.kernel.actions import AddFile
from deltatx.kernel.deletion_vectors import num_records
from deltatx.log.row_level.arrow_assignments import Value
from deltatx.log.row_level.arrow_matching import FileRows
from deltatx.log.row_level.driver_threads import driver_pool
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands import driver_update
from deltatx.spark.commands.driver_update import (
    apply_assignments,
    driver_reader,
    driver_write_plan,
    driver_writes_allowed,
)
from deltatx.spark.commands.rewrite import Rewritten
from deltatx.spark.datasource.reader import FileReader, file_task
from deltatx.spark.datasource.task_files import TaskFiles
from deltatx.spark.dv_filter import deleted_row_indexes


@dataclass(frozen=True, slots=True)
class _FileRewrite:
    """One touched file and what becomes of its rows (physical row indexes).

    Attributes:
        add: The file.
        physical: How many rows the file stores, as the statement counted them (None: the
            log does not say).
        deleted: The rows its deletion vector deletes.
        dropped: The rows the statement removes.
        updated: The rows the statement's SET applies to.
    """

    add: AddFile
    physical: int | None
    deleted: npt.NDArray[np.int64]
    dropped: npt.NDArray[np.int64]
    updated: npt.NDArray[np.int64]


_NONE = np.zeros(0, dtype=np.int64)


def rewrite_on_driver(
    txn: OptimisticTransaction,
    candidates: Sequence[AddFile],
    found: Mapping[int, FileRows],
    *,
    values: Mapping[str, Value] | None,
    spark: SparkSession,
) -> Rewritten | None:
    """Rewrites the files holding matched rows and stages it; None to use the Spark job.

    Args:
        txn: The transaction to stage into (nothing is staged when None is returned).
        candidates: The files the statement read, indexed as in ``found``.
        found: Candidate index -> the live rows the condition matches in it.
        values: An UPDATE's SET, translated for the driver; None for a DELETE.
        spark: The session, whose Parquet codec the written files must have.

    Raises:
        InvalidTableError: A touched data file is missing or is not readable Parquet.
    """
    deleting = values is None
    touched = sorted(i for i, rows in found.items() if len(rows.matched))
    # A DELETE drops a file whose live rows all match without reading it.
    rewritten = [i for i in touched if not (deleting and len(found[i].matched) == found[i].live)]
    jobs = [
        _FileRewrite(
            add=candidates[i],
            physical=found[i].physical,
            deleted=found[i].deleted,
            dropped=found[i].matched if deleting else _NONE,
            updated=_NONE if deleting else found[i].matched,
        )
        for i in rewritten
    ]
    rows = sum(found[i].physical for i in rewritten)
    size = sum(candidates[i].size for i in rewritten)
    if jobs and not (_within_caps(rows, size) and driver_writes_allowed(txn, spark)):
        return None
    added: list[AddFile] = []
    if jobs:
        step("writing")
        files = _write(txn, jobs, values)
        if files is None:
            return None
        added = files
    removed = [candidates[i] for i in touched]
    txn.remove_files(removed)
    txn.add_files(added)
    return Rewritten(
        added=added,
        removed=removed,
        matched_rows=sum(len(found[i].matched) for i in touched),
        copied_rows=sum(found[i].live - len(found[i].matched) for i in rewritten),
    )


def copies_fit(files: Sequence[AddFile]) -> bool:
    """Whether the driver may copy the live rows of ``files`` (a copy-on-write MERGE's).

    Whether the table lets the driver write at all is the MERGE's own plan's to say
    (:func:`~deltatx.spark.commands.merge_driver_write.plan_driver_rows`).
    """
    counts = [num_records(f.stats) for f in files]
    if any(n is None for n in counts):
        return False
    return _within_caps(sum(n or 0 for n in counts), sum(f.size for f in files))


def rewrite_for_merge(
    txn: OptimisticTransaction,
    candidates: Sequence[AddFile],
    changed: Mapping[int, Sequence[int]],
    new_rows: pa.Table,
) -> list[AddFile]:
    """A copy-on-write MERGE's files: ``new_rows`` and each touched file less its changed rows.

    Args:
        txn: The transaction (nothing is staged: the caller adds and removes the files).
        candidates: The files the statement read, indexed as in ``changed``.
        changed: Candidate index -> physical indexes of the rows a clause updates or deletes.
        new_rows: The updated rows' new versions and the inserted rows.

    Raises:
        InvalidTableError: A touched data file is missing or is not readable Parquet.
    """
    jobs = []
    for i in sorted(changed):
        add = candidates[i]
        dv = add.deletion_vector
        jobs.append(
            _FileRewrite(
                add=add,
                physical=num_records(add.stats),
                deleted=_NONE
                if dv is None
                else deleted_row_indexes(txn.log.table_path, dv, data_file=add.path),
                dropped=np.asarray(changed[i], dtype=np.int64),
                updated=_NONE,
            )
        )
    step("writing")
    files = _write(txn, jobs, None, new_rows=new_rows)
    assert files is not None  # only a SET the driver cannot evaluate gives up
    return files


def _within_caps(rows: int, size: int) -> bool:
    return rows <= driver_update.DRIVER_UPDATE_ROWS and size <= driver_update.DRIVER_UPDATE_BYTES


def _write(
    txn: OptimisticTransaction,
    jobs: Sequence[_FileRewrite],
    values: Mapping[str, Value] | None,
    *,
    new_rows: pa.Table | None = None,
) -> list[AddFile] | None:
    """The new files of every rewritten file (and of ``new_rows``), or None (none left)."""
    reader = driver_reader(txn)
    plan = driver_write_plan(txn)
    extra = [] if new_rows is None or not new_rows.num_rows else [new_rows]
    outputs = [TaskFiles(plan) for _ in range(len(jobs) + len(extra))]

    def work(k: int) -> list[AddFile] | None:
        if k < len(jobs):
            return _rewrite_file(txn, reader, outputs[k], jobs[k], values)
        return outputs[k].write(extra[k - len(jobs)])

    try:
        if len(outputs) == 1:
            # Handing one file to a thread costs more than it saves.
            results = [work(0)]
        else:
            futures: list[Future[list[AddFile] | None]] = [
                driver_pool().submit(work, k) for k in range(len(outputs))
            ]
            # Every rewrite ends before any is judged: a failed one's siblings may still be
            # writing files that must be discarded with the rest.
            wait(futures)
            results = [f.result() for f in futures]
    except BaseException:
        _discard(outputs)
        raise
    if any(r is None for r in results):
        _discard(outputs)
        return None
    return [add for r in results if r is not None for add in r]


def _discard(outputs: Sequence[TaskFiles]) -> None:
    for out in outputs:
        out.discard()


def _rewrite_file(
    txn: OptimisticTransaction,
    reader: FileReader,
    out: TaskFiles,
    job: _FileRewrite,
    values: Mapping[str, Value] | None,
) -> list[AddFile] | None:
    """One touched file written again without its deleted rows, with its updates applied."""
    drop = np.concatenate([job.deleted, job.dropped])
    batches = reader.read_physical(file_task(job.add), drop=drop, rows=job.physical)
    table = pa.Table.from_batches(list(batches), schema=reader.arrow_schema).combine_chunks()
    if values is not None and 0 < len(job.updated) == table.num_rows:
        # Every kept row is updated (the matched rows are live and distinct): the SET applies
        # to the whole table, with no rows to pick out and put back.
        whole = apply_assignments(table, values, txn.schema)
        return None if whole is None else out.write(whole)
    if values is not None and len(job.updated):
        # The updated rows' places among the kept rows: each moves up by the rows deleted
        # before it (an UPDATE drops no other row).
        at = job.updated - np.searchsorted(job.deleted, job.updated)
        updated = apply_assignments(table.take(pa.array(at)), values, txn.schema)
        if updated is None:
            return None
        hit = np.zeros(table.num_rows, dtype=bool)
        hit[at] = True
        mask = pa.array(hit)
        for name in values:
            i = table.schema.get_field_index(name)
            column = pc.replace_with_mask(
                table.column(i).combine_chunks(), mask, updated.column(name).combine_chunks()
            )
            table = table.set_column(i, table.schema.field(i), column)
    return out.write(table)
