"""The ``deltatx`` command: the demo, and log-level tools for people who run tables.

Exit codes: 0 success; 1 the demo saw a disagreement with the documents; 2 bad usage or input
(missing table, invalid property, bad version); 3 a conflict or other deltatx error.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from deltatx.errors import (
    ConcurrentModificationException,
    DeltaError,
    InvalidArgumentError,
    TableNotFoundError,
    VersionNotFoundError,
)
from deltatx.log.delta_log import DeltaLog
from deltatx.log.snapshot import Snapshot

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=__doc__,
    pretty_exceptions_enable=False,
)
console = Console()

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _open(path: str) -> DeltaLog:
    log = DeltaLog.for_table(path)
    if not log.table_exists():
        raise TableNotFoundError(f"there is no Delta table at {path}")
    return log


def _ts(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _emit(rows: list[dict[str, Any]], as_json: bool, title: str) -> None:
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    grid = Table(title=title)
    columns = list(rows[0]) if rows else []
    for c in columns:
        grid.add_column(c)
    for r in rows:
        grid.add_row(*["" if r[c] is None else str(r[c]) for c in columns])
    console.print(grid)


@app.command()
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Where to leave the tables.")] = Path(
        "demo-tables"
    ),
    quick: Annotated[bool, typer.Option("--quick", help="Run a small subset.")] = False,
) -> None:
    """Run the main job on local Spark and local files."""
    from deltatx.demo.main import run_demo

    result = run_demo(directory, quick=quick, console=console)
    if result.disagreements:
        raise typer.Exit(1)


@app.command()
def history(
    path: str, limit: Annotated[int | None, typer.Option()] = None, as_json: JsonFlag = False
) -> None:
    """Show the commits of a table, newest first."""
    log = _open(path)
    rows = []
    for e in log.history(limit):
        ci = e.commit_info
        rows.append(
            {
                "version": e.version,
                "timestamp": _ts(e.timestamp),
                "operation": None if ci is None else ci.operation,
                "readVersion": None if ci is None else ci.read_version,
                "isolationLevel": None if ci is None else ci.isolation_level,
                "isBlindAppend": None if ci is None else ci.is_blind_append,
                "operationMetrics": None if ci is None else ci.operation_metrics,
            }
        )
    _emit(rows, as_json, f"history of {path}")


def _describe(snap: Snapshot) -> dict[str, Any]:
    p, configuration = snap.protocol, snap.table_configuration
    return {
        "path": snap.log.table_path,
        "version": snap.version,
        "id": snap.metadata.id,
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        "readerFeatures": sorted(configuration.reader_features),
        "writerFeatures": sorted(configuration.writer_features),
        "isolationLevel": configuration.isolation_level.value,
        "partitionColumns": list(snap.partition_columns),
        "numFiles": snap.num_files,
        "sizeInBytes": snap.size_in_bytes,
        "properties": dict(snap.metadata.configuration),
        "schema": json.loads(snap.metadata.schema_string),
    }


@app.command()
def describe(path: str, as_json: JsonFlag = False) -> None:
    """Show protocol, features, properties, isolation level, files and partitions."""
    info = _describe(_open(path).snapshot())
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    grid = Table(title=f"{path}", show_header=False)
    grid.add_column("key")
    grid.add_column("value")
    for k, v in info.items():
        if k != "schema":
            grid.add_row(k, json.dumps(v) if isinstance(v, dict | list) else str(v))
    grid.add_row("columns", ", ".join(f"{f['name']} {f['type']}" for f in info["schema"]["fields"]))
    console.print(grid)


@app.command()
def files(
    path: str,
    version: Annotated[int | None, typer.Option(help="A past version.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the live data files of a version."""
    snap = _open(path).snapshot(version)
    rows = []
    for f in snap.add_files():
        stats = json.loads(f.stats) if f.stats else {}
        rows.append(
            {
                "path": f.path,
                "partitionValues": f.partition_values,
                "size": f.size,
                "numRecords": stats.get("numRecords"),
                "deletionVector": None
                if f.deletion_vector is None
                else f.deletion_vector.cardinality,
            }
        )
    _emit(rows, as_json, f"files of {path} at version {snap.version}")


@app.command()
def checkpoint(path: str, as_json: JsonFlag = False) -> None:
    """Write a checkpoint at the latest version."""
    log = _open(path)
    snap = log.snapshot()
    log.checkpoint(snap)
    if as_json:
        typer.echo(json.dumps({"version": snap.version, "numFiles": snap.num_files}))
        return
    console.print(f"checkpoint written at version {snap.version}")


@app.command("set-property")
def set_property(path: str, assignment: str, as_json: JsonFlag = False) -> None:
    """Set one table property, e.g. delta.isolationLevel=Serializable."""
    from dataclasses import replace

    from deltatx.kernel.features import protocol_for_configuration
    from deltatx.kernel.operations import Operation, OperationName
    from deltatx.kernel.properties import validate_properties
    from deltatx.log.transaction import OptimisticTransaction

    key, sep, value = assignment.partition("=")
    if not sep or not key:
        raise InvalidArgumentError(f"expected KEY=VALUE, got '{assignment}'")
    updates = validate_properties({key.strip(): value.strip()})
    log = _open(path)
    txn = OptimisticTransaction(log, log.snapshot())
    config = {**txn.metadata.configuration, **updates}
    txn.update_metadata(replace(txn.metadata, configuration=config))
    txn.update_protocol(protocol_for_configuration(config, txn.protocol))
    txn.record_operation(Operation(OperationName.SET_TBLPROPERTIES, {"properties": updates}), {})
    version = txn.commit()
    if as_json:
        typer.echo(json.dumps({"version": version, "properties": updates}))
        return
    console.print(f"set {', '.join(f'{k}={v}' for k, v in updates.items())}: version {version}")


class PastOperation(StrEnum):
    """What the failed transaction did, for ``deltatx conflicts``."""

    INSERT = "INSERT"
    DELETE = "DELETE"
    UPDATE = "UPDATE"
    MERGE = "MERGE"
    OPTIMIZE = "OPTIMIZE"


@app.command()
def conflicts(
    path: str,
    since: Annotated[int, typer.Option("--since", help="The version the transaction read.")],
    condition: Annotated[
        str | None,
        typer.Option(help="Its condition (SQL); default: it read the whole table."),
    ] = None,
    operation: Annotated[PastOperation, typer.Option(help="What it did.")] = PastOperation.DELETE,
    as_json: JsonFlag = False,
) -> None:
    """Explain which commits after --since a transaction would collide with, and why.

    Works from the log alone (no Spark): the transaction is modelled as reading the files its
    condition selects at --since (and, for DELETE/UPDATE/MERGE/OPTIMIZE, rewriting them), then
    settled against every later commit with the same code and hints as a real commit. On tables
    with deletion vectors the rows are compared: the condition is evaluated on the data files'
    rows, and a collision names the rows both transactions touched.
    """
    from deltatx.kernel.operations import OperationName
    from deltatx.log.conflict_explanation import explain_conflicts
    from deltatx.spark.expressions import parse_condition

    log = _open(path)
    names = {
        PastOperation.INSERT: OperationName.WRITE,
        PastOperation.DELETE: OperationName.DELETE,
        PastOperation.UPDATE: OperationName.UPDATE,
        PastOperation.MERGE: OperationName.MERGE,
        PastOperation.OPTIMIZE: OperationName.OPTIMIZE,
    }
    snap = log.snapshot(since)
    predicate = None if condition is None else parse_condition(condition, schema=snap.schema)
    explained = explain_conflicts(
        snap,
        operation=names[operation],
        predicate=predicate,
        condition_text=condition,
    )
    rows: list[dict[str, Any]] = [
        {
            "version": c.version,
            "operation": c.operation,
            "conflict": c.conflict,
            "partition": c.partition,
            "file": c.file,
            "rows": None if c.rows is None else list(c.rows),
            "hint": c.hint,
            "note": c.note,
        }
        for c in explained.collisions
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    title = (
        f"{operation.value} reading {condition or 'the whole table'} at version "
        f"{explained.read_version} ({explained.isolation_level.value})"
    )
    if explained.row_level:
        matched = sum(len(r) for r in explained.matched_rows.values())
        title += f", comparing rows: {matched} matched in {len(explained.matched_rows)} file(s)"
    elif explained.fallback:
        title += f", per file: {explained.fallback}"
    grid = Table(title=title, show_lines=True)
    for name in ("version", "operation", "conflict", "where", "rows", "why / hint"):
        grid.add_column(name)
    for r in rows:
        where = ", ".join(str(x) for x in (r["partition"], r["file"]) if x)
        grid.add_row(
            str(r["version"]),
            str(r["operation"]),
            r["conflict"] or "[green]none",
            where,
            "" if r["rows"] is None else ", ".join(map(str, r["rows"])),
            r["hint"] or r["note"] or "",
        )
    console.print(grid)
    collisions = sum(1 for r in rows if r["conflict"])
    console.print(f"{collisions} of {len(rows)} later commit(s) collide with this transaction")


@app.command()
def vacuum(
    path: str,
    retention_hours: Annotated[float | None, typer.Option(help="Default: the table's.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, delete nothing.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Delete files the table no longer references, older than the retention."""
    from deltatx.log.vacuum import vacuum as run_vacuum

    metrics = run_vacuum(_open(path), retention_hours=retention_hours, dry_run=dry_run)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "dryRun": dry_run,
                    "numFilesToDelete": metrics.num_files_to_delete,
                    "numDeletedFiles": metrics.num_deleted_files,
                    "numDeletedBytes": metrics.num_deleted_bytes,
                    "paths": list(metrics.deleted_paths),
                },
                indent=2,
            )
        )
        return
    verb = "would delete" if dry_run else "deleted"
    console.print(f"{verb} {metrics.num_files_to_delete} file(s)")
    for p in metrics.deleted_paths:
        console.print(f"  {p}")


def main() -> None:
    """Entry point of the ``deltatx`` command; turns deltatx errors into one-line messages."""
    try:
        app(standalone_mode=False)
    except (TableNotFoundError, VersionNotFoundError, InvalidArgumentError) as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except ConcurrentModificationException as exc:
        typer.echo(f"conflict: {exc}", err=True)
        sys.exit(3)
    except DeltaError as exc:
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(3)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(2)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(130)
        raise
