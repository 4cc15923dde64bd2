"""The ``deltatx`` command: the demo, and log-level tools for people who run tables.

Exit codes: 0 success; 1 the demo saw a disagreement with the documents; 2 bad usage or input
(missing table, invalid property, bad version, a condition that does not parse); 3 a conflict:
`conflicts` found collisions, or another deltatx error.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deltatx.cli_format import human_size, iso_time, pairs, short_time
from deltatx.errors import (
    ConcurrentModificationException,
    DeltaError,
    InvalidArgumentError,
    InvalidConditionError,
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
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

# Columns at which tables get their wide layout (more columns side by side).
_WIDE = 120


def _console() -> Console:
    # Made per command, so the terminal's width (or COLUMNS) is the one at that moment.
    return Console(soft_wrap=False)


def _open(path: str) -> DeltaLog:
    log = DeltaLog.for_table(path)
    if not log.table_exists():
        raise TableNotFoundError(f"there is no Delta table at {path}")
    return log


def _emit(rows: list[dict[str, Any]], as_json: bool, title: str) -> None:
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    grid = Table(title=escape(title))
    columns = list(rows[0]) if rows else []
    for c in columns:
        grid.add_column(c, overflow="fold")
    for r in rows:
        grid.add_row(*[escape("" if r[c] is None else str(r[c])) for c in columns])
    _console().print(grid)


@app.command()
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Where to leave the tables.")] = Path(
        "demo-tables"
    ),
    quick: Annotated[bool, typer.Option("--quick", help="Run a small subset.")] = False,
) -> None:
    """Run the main job on local Spark and local files."""
    from deltatx.demo.main import run_demo

    result = run_demo(directory, quick=quick, console=_console())
    if result.disagreements:
        raise typer.Exit(1)


@app.command()
def history(
    path: str,
    limit: Annotated[int | None, typer.Option(help="Only the newest N commits.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show the commits of a table, newest first, with their parameters and metrics."""
    log = _open(path)
    rows: list[dict[str, Any]] = []
    for e in log.history(limit):
        ci = e.commit_info
        rows.append(
            {
                "version": e.version,
                "timestamp": iso_time(e.timestamp),
                "operation": None if ci is None else ci.operation,
                "operationParameters": None if ci is None else ci.operation_parameters,
                "readVersion": None if ci is None else ci.read_version,
                "isolationLevel": None if ci is None else ci.isolation_level,
                "isBlindAppend": None if ci is None else ci.is_blind_append,
                "operationMetrics": None if ci is None else ci.operation_metrics,
                "_millis": e.timestamp,
            }
        )
    if as_json:
        typer.echo(
            json.dumps([{k: v for k, v in r.items() if k != "_millis"} for r in rows], indent=2)
        )
        return
    out = _console()
    wide = out.width >= _WIDE
    grid = Table(title=escape(f"history of {path}"), show_lines=True)
    grid.add_column("ver", justify="right", no_wrap=True)
    grid.add_column("time (UTC)", no_wrap=True)
    grid.add_column("operation", overflow="fold")
    if wide:
        grid.add_column("read", justify="right", no_wrap=True)
        grid.add_column("isolation", overflow="fold")
        grid.add_column("parameters", overflow="fold", ratio=1)
        grid.add_column("metrics (non-zero)", overflow="fold", ratio=1)
    else:
        grid.add_column("parameters, then metrics (non-zero)", overflow="fold", ratio=1)
    for r in rows:
        params = pairs(r["operationParameters"])
        metrics = pairs(r["operationMetrics"], skip_zero=True)
        when = short_time(r["_millis"])
        if wide:
            read = r["readVersion"]
            blind = " (blind append)" if r["isBlindAppend"] else ""
            cells = [
                escape(str(r["version"])),
                escape(when),
                escape(r["operation"] or ""),
                "" if read is None else str(read),
                escape((r["isolationLevel"] or "") + blind),
                escape(params.replace("\n", " ")),
                escape(metrics.replace("\n", " ")),
            ]
        else:
            details = escape(params)
            if metrics:
                details += ("\n" if params else "") + f"[dim]{escape(metrics)}[/]"
            cells = [
                str(r["version"]),
                escape(when.replace(" ", "\n")),
                escape(r["operation"] or ""),
                details,
            ]
        grid.add_row(*cells)
    out.print(grid)


def _describe(snap: Snapshot) -> dict[str, Any]:
    from deltatx.kernel.deletion_vectors import num_records

    p, configuration = snap.protocol, snap.table_configuration
    rows: int | None = 0
    for f in snap.add_files():
        n = num_records(f.stats)
        if n is None or rows is None:
            rows = None
            continue
        rows += n - (0 if f.deletion_vector is None else f.deletion_vector.cardinality)
    return {
        "path": snap.table_path,
        "version": snap.version,
        "id": snap.metadata.id,
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        "readerFeatures": sorted(configuration.reader_features),
        "writerFeatures": sorted(configuration.writer_features),
        "isolationLevel": configuration.isolation_level.value,
        "partitionColumns": list(snap.partition_columns),
        "numFiles": snap.num_files,
        "numRows": rows,
        "sizeInBytes": snap.size_in_bytes,
        "properties": dict(snap.metadata.configuration),
        "schema": json.loads(snap.metadata.schema_string),
    }


@app.command()
def describe(path: str, as_json: JsonFlag = False) -> None:
    """Show protocol, features, properties, isolation level, size, rows and partitions."""
    info = _describe(_open(path).snapshot())
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    grid = Table(title=escape(path), show_header=False)
    grid.add_column("key", no_wrap=True, style="bold")
    grid.add_column("value", overflow="fold")
    shown = {
        "version": str(info["version"]),
        "id": info["id"],
        "protocol": f"reader {info['minReaderVersion']}, writer {info['minWriterVersion']}",
        "features": ", ".join(sorted({*info["readerFeatures"], *info["writerFeatures"]}))
        or "(none)",
        "isolation level": info["isolationLevel"],
        "partition columns": ", ".join(info["partitionColumns"]) or "(not partitioned)",
        "files": f"{info['numFiles']:,}",
        "rows": "unknown (files without statistics)"
        if info["numRows"] is None
        else f"{info['numRows']:,}",
        "size": f"{human_size(info['sizeInBytes'])} ({info['sizeInBytes']:,} bytes)",
        "properties": "\n".join(f"{k}={v}" for k, v in sorted(info["properties"].items()))
        or "(none)",
        "columns": ", ".join(
            f"{f['name']} {_type_name(f['type'])}" for f in info["schema"]["fields"]
        ),
    }
    for key, value in shown.items():
        grid.add_row(key, escape(value))
    _console().print(grid)


def _type_name(t: Any) -> str:
    return t if isinstance(t, str) else str(t.get("type", "struct"))


@app.command()
def files(
    path: str,
    version: Annotated[int | None, typer.Option(help="A past version.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the live data files of a version, with their size, rows and deleted rows."""
    from deltatx.kernel.deletion_vectors import num_records

    snap = _open(path).snapshot(version)
    rows: list[dict[str, Any]] = []
    for f in snap.add_files():
        rows.append(
            {
                "path": f.path,
                "partitionValues": f.partition_values,
                "size": f.size,
                "numRecords": num_records(f.stats),
                "deletionVector": None
                if f.deletion_vector is None
                else f.deletion_vector.cardinality,
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    grid = Table(title=escape(f"files of {path} at version {snap.version}"))
    grid.add_column("path", overflow="fold", ratio=1)
    if snap.partition_columns:
        grid.add_column("partition", overflow="fold")
    grid.add_column("size", justify="right", no_wrap=True)
    grid.add_column("rows", justify="right", no_wrap=True)
    grid.add_column("deleted rows (DV)", justify="right")
    for r in rows:
        cells = [r["path"]]
        if snap.partition_columns:
            cells.append(pairs(r["partitionValues"]).replace("\n", ", "))
        cells += [
            human_size(r["size"]),
            "" if r["numRecords"] is None else f"{r['numRecords']:,}",
            "" if r["deletionVector"] is None else f"{r['deletionVector']:,}",
        ]
        grid.add_row(*(escape(c) for c in cells))
    _console().print(grid)


@app.command()
def checkpoint(path: str, as_json: JsonFlag = False) -> None:
    """Write a checkpoint at the latest version."""
    log = _open(path)
    snap = log.snapshot()
    log.checkpoint(snap)
    if as_json:
        typer.echo(json.dumps({"version": snap.version, "numFiles": snap.num_files}))
        return
    _console().print(f"checkpoint written at version {snap.version}")


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
    if any(k.startswith("delta.constraints.") for k in updates):
        # Adding a constraint must check the existing rows first, which needs Spark.
        raise InvalidArgumentError(
            f"'{key.strip()}' is a CHECK constraint: add it with ALTER TABLE ... ADD CONSTRAINT "
            "or DeltaTable.add_constraint, which check the existing rows first"
        )
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
    text = f"set {', '.join(f'{k}={v}' for k, v in updates.items())}: version {version}"
    _console().print(escape(text))


class PastOperation(StrEnum):
    """What the failed transaction did, for ``deltatx conflicts``."""

    INSERT = "INSERT"
    DELETE = "DELETE"
    UPDATE = "UPDATE"
    MERGE = "MERGE"
    OPTIMIZE = "OPTIMIZE"


def _target_predicate(
    condition: str, *, schema: Any, alias: str | None, operation: PastOperation
) -> Any:
    """The condition in the IR, with the table's alias (``t.``) understood, or refused."""
    from deltatx.spark.expressions import (
        condition_qualifiers,
        merge_target_predicate,
        parse_condition,
    )

    qualifiers = condition_qualifiers(condition, schema=schema)
    target = alias.lower() if alias else None
    if target is None and len(qualifiers) == 1:
        target = qualifiers[0]  # ``t.country = 'DE'`` copied from a MERGE ON clause
    if target is None and qualifiers:
        raise InvalidConditionError(
            f"the condition '{condition}' qualifies columns with {', '.join(qualifiers)}; "
            "pass --alias NAME to say which of them is this table (the MERGE target)"
        )
    others = [q for q in qualifiers if q != target]
    if not others:
        return parse_condition(condition, schema=schema, aliases=() if target is None else [target])
    if operation is not PastOperation.MERGE or len(others) > 1 or target is None:
        raise InvalidConditionError(
            f"the condition '{condition}' names other tables ({', '.join(others)}); only a "
            "MERGE ON condition may name its source (use --operation MERGE --alias TARGET)"
        )
    return merge_target_predicate(
        condition, schema=schema, target_alias=target, source_alias=others[0]
    )


@app.command()
def conflicts(
    path: str,
    since: Annotated[int, typer.Option("--since", help="The version the transaction read.")],
    condition: Annotated[
        str | None,
        typer.Option(help="Its condition (SQL); default: it read the whole table."),
    ] = None,
    operation: Annotated[PastOperation, typer.Option(help="What it did.")] = PastOperation.DELETE,
    alias: Annotated[
        str | None,
        typer.Option(
            help="The table's alias in the condition (t in t.country = 'DE'); found on its own "
            "when the condition uses one alias."
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Explain which commits after --since a transaction would collide with, and why.

    Works from the log alone (no Spark): the transaction is modelled as reading the files its
    condition selects at --since (and, for DELETE/UPDATE/MERGE/OPTIMIZE, rewriting them), then
    settled against every later commit with the same code and hints as a real commit. On tables
    with deletion vectors the rows are compared: the condition is evaluated on the data files'
    rows, and a collision names the rows both transactions touched. A MERGE ON condition can be
    pasted as it is: the target's alias is understood and the source's columns are ignored.
    Exits with 3 when at least one commit collides.
    """
    from deltatx.kernel.operations import OperationName
    from deltatx.log.conflict_explanation import explain_conflicts

    log = _open(path)
    names = {
        PastOperation.INSERT: OperationName.WRITE,
        PastOperation.DELETE: OperationName.DELETE,
        PastOperation.UPDATE: OperationName.UPDATE,
        PastOperation.MERGE: OperationName.MERGE,
        PastOperation.OPTIMIZE: OperationName.OPTIMIZE,
    }
    snap = log.snapshot(since)
    predicate = (
        None
        if condition is None
        else _target_predicate(condition, schema=snap.schema, alias=alias, operation=operation)
    )
    explained = explain_conflicts(
        log,
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
    collisions = sum(1 for r in rows if r["conflict"])
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        _print_collisions(rows, explained, operation, condition, collisions)
    if collisions:
        raise typer.Exit(3)


def _print_collisions(
    rows: list[dict[str, Any]],
    explained: Any,
    operation: PastOperation,
    condition: str | None,
    collisions: int,
) -> None:
    title = (
        f"{operation.value} reading {condition or 'the whole table'} at version "
        f"{explained.read_version} ({explained.isolation_level.value})"
    )
    if explained.row_level:
        matched = sum(len(r) for r in explained.matched_rows.values())
        title += f", comparing rows: {matched} matched in {len(explained.matched_rows)} file(s)"
    elif explained.fallback:
        title += f", per file: {explained.fallback}"
    out = _console()
    if out.width < _WIDE:
        # Narrow terminals and logs: one block per commit, nothing cut.
        out.print(escape(title), overflow="fold")
        for r in rows:
            verdict = escape(r["conflict"]) if r["conflict"] else "[green]no conflict[/]"
            out.print(f"[bold]version {r['version']}[/] {escape(str(r['operation']))}: {verdict}")
            if r["partition"]:
                out.print(f"  partition: {escape(r['partition'])}", overflow="fold")
            if r["file"]:
                out.print(f"  file: {escape(r['file'])}", overflow="fold")
            if r["rows"] is not None:
                out.print(f"  rows: {', '.join(map(str, r['rows']))}", overflow="fold")
            if r["hint"]:
                out.print(f"  hint: {escape(r['hint'])}")
            elif r["note"]:
                out.print(f"  note: {escape(r['note'])}")
    else:
        grid = Table(title=escape(title), show_lines=True)
        grid.add_column("ver", justify="right", no_wrap=True)
        grid.add_column("operation", overflow="fold")
        grid.add_column("conflict", no_wrap=True)
        grid.add_column("where", overflow="fold")
        grid.add_column("rows", overflow="fold")
        grid.add_column("why / hint", overflow="fold", ratio=1)
        for r in rows:
            where = "\n".join(str(x) for x in (r["partition"], r["file"]) if x)
            grid.add_row(
                str(r["version"]),
                escape(str(r["operation"])),
                escape(r["conflict"]) if r["conflict"] else "[green]none[/]",
                escape(where),
                "" if r["rows"] is None else ", ".join(map(str, r["rows"])),
                escape(r["hint"] or r["note"] or ""),
            )
        out.print(grid)
    out.print(f"{collisions} of {len(rows)} later commit(s) collide with this transaction")


@app.command()
def vacuum(
    path: str,
    retention_hours: Annotated[float | None, typer.Option(help="Default: the table's.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, delete nothing.")] = False,
    enforce_retention: Annotated[
        bool,
        typer.Option(
            "--enforce-retention/--no-enforce-retention",
            help="Refuse a retention shorter than the table's delta.deletedFileRetentionDuration "
            "(168 hours by default); --no-enforce-retention allows it.",
        ),
    ] = True,
    as_json: JsonFlag = False,
) -> None:
    """Delete files the table no longer references, older than the retention."""
    from deltatx.log.vacuum import vacuum as run_vacuum

    metrics = run_vacuum(
        _open(path),
        retention_hours=retention_hours,
        dry_run=dry_run,
        enforce_retention=enforce_retention,
    )
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
    out = _console()
    verb = "would delete" if dry_run else "deleted"
    size = "" if dry_run else f" ({human_size(metrics.num_deleted_bytes)})"
    out.print(f"{verb} {metrics.num_files_to_delete} file(s){size}")
    for p in metrics.deleted_paths:
        out.print(f"  {escape(p)}", overflow="fold")


def main() -> None:
    """Entry point of the ``deltatx`` command; turns deltatx errors into one-line messages."""
    try:
        # Without standalone mode, click returns the code of typer.Exit instead of exiting.
        code = app(standalone_mode=False)
    except (TableNotFoundError, VersionNotFoundError, InvalidArgumentError) as exc:
        # InvalidArgumentError covers bad properties and conditions (InvalidConditionError).
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
        # Usage errors come from click, which some typer releases vendor under another name.
        kinds = {k.__name__ for k in type(exc).__mro__}
        if "ClickException" in kinds:
            exc.show()  # type: ignore[attr-defined]
            sys.exit(2)
        if "Abort" in kinds:
            sys.exit(130)
        raise
    if isinstance(code, int) and code:
        sys.exit(code)
