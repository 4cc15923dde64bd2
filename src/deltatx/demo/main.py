"""``deltatx demo``: the pipeline, the two documented conflict tables observed live, examples.

The first table is the one without row-level concurrency, the second the one with it
(deletion vectors, :mod:`deltatx.demo.row_level`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deltatx.demo.conflicts import GROUPS, AnyOp, Cell, Op, observe_table
from deltatx.demo.examples import (
    ExampleOutcome,
    merge_by_partition,
    txn1_txn2,
    update_delete_by_date,
)
from deltatx.demo.legend import code, legend
from deltatx.demo.pipeline import run_pipeline
from deltatx.demo.report import TableSection, write_report
from deltatx.demo.row_level import ALL_OPS, ROW_LEVEL_GROUPS, observe_row_level_table
from deltatx.kernel.isolation import IsolationLevel
from deltatx.session import spark_session


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo did: where it left things, and how many observations disagreed."""

    directory: Path
    report: Path
    disagreements: int
    seconds: float


def _print_legend(console: Console, errors: Sequence[str | None]) -> None:
    rows = legend(errors)
    if rows:
        console.print(
            "[dim]codes: " + ", ".join(f"{c} = {n}" for c, n in rows) + "[/]", overflow="fold"
        )


def _print_table(
    console: Console, title: str, cells: list[Cell], groups: Sequence[str] = GROUPS
) -> None:
    for level in sorted({c.level for c in cells}, key=lambda lvl: lvl.value):
        grid = Table(title=f"{title} — {level.value}", show_lines=True)
        grid.add_column("", overflow="fold")
        for g in groups:
            grid.add_column(g, overflow="fold")
        by_key = {frozenset((c.row, c.column)): c for c in cells if c.level is level}
        for i, row in enumerate(groups):
            values = []
            for j, column in enumerate(groups):
                cell = by_key.get(frozenset((row, column)))
                if j > i or cell is None:
                    values.append("")
                    continue
                seen = "conflict" if cell.observed_conflict else "no conflict"
                said = "can" if cell.documented_may_conflict else "cannot"
                mark = "[green]✓" if cell.agrees else "[bold red]✗ DISAGREES"
                runs = " ".join(code(o.error) for o in cell.outcomes)
                values.append(f"{mark}[/] {seen}\n[dim]docs: {said}\nruns: {runs}[/]")
            grid.add_row(row, *values)
        console.print(grid)
        _print_legend(console, [o.error for c in cells if c.level is level for o in c.outcomes])
    console.print(
        "[dim]Each cell: what happened (✓ = as documented), what Delta Lake's documentation "
        "says (can / cannot conflict), and the result of each commit order (ok = committed).[/]"
    )


def run_demo(directory: Path, *, quick: bool = False, console: Console | None = None) -> DemoResult:
    """Runs everything under ``directory`` and prints it; see :class:`DemoResult`."""
    out = console or Console()
    started = time.monotonic()
    spark = spark_session()
    directory.mkdir(parents=True, exist_ok=True)
    disagreements = 0

    pipeline = run_pipeline(spark, directory, console=out)
    disagreements += pipeline.disagreements

    out.rule("[bold]Write conflicts without row-level concurrency")
    ops = (Op.INSERT, Op.DELETE, Op.OPTIMIZE) if quick else tuple(Op)
    cells = observe_table(
        spark,
        directory / "conflicts",
        ops=ops,
        progress=lambda line: out.print(f"  [dim]{line}[/]"),
    )
    _print_table(out, "Without row-level concurrency", cells)
    disagreements += sum(not c.agrees for c in cells)

    out.rule("[bold]Write conflicts with row-level concurrency (deletion vectors)")
    row_ops: tuple[AnyOp, ...] = (Op.INSERT, Op.DELETE, Op.OPTIMIZE) if quick else ALL_OPS
    row_cells = observe_row_level_table(
        spark,
        directory / "row-level",
        ops=row_ops,
        progress=lambda line: out.print(f"  [dim]{line}[/]"),
    )
    _print_table(out, "With row-level concurrency", row_cells, ROW_LEVEL_GROUPS)
    disagreements += sum(not c.agrees for c in row_cells)

    out.rule("[bold]The documented examples")
    examples: list[ExampleOutcome] = [
        update_delete_by_date(spark, directory / "examples" / "dates-flat", partitioned=False),
        update_delete_by_date(
            spark, directory / "examples" / "dates-partitioned", partitioned=True
        ),
        merge_by_partition(spark, directory / "examples" / "merge-keys-only", explicit=False),
        merge_by_partition(spark, directory / "examples" / "merge-explicit", explicit=True),
    ]
    for level in (IsolationLevel.WRITE_SERIALIZABLE, IsolationLevel.SERIALIZABLE):
        examples.append(
            txn1_txn2(spark, directory / "examples" / f"txn1-txn2-{level.value}", level=level)
        )
    grid = Table(title="worked examples", show_lines=True)
    for name in ("example", "variant", "documented", "observed", "detail"):
        grid.add_column(name, overflow="fold")
    for e in examples:
        mark = "[green]✓" if e.agrees else "[bold red]✗ DISAGREES"
        grid.add_row(
            escape(e.name),
            escape(e.variant),
            "conflict" if e.expected_conflict else "no conflict",
            f"{mark}[/] {code(e.error) if e.error else 'committed'}",
            escape(e.detail),
        )
    out.print(grid)
    _print_legend(out, [e.error for e in examples])
    disagreements += sum(not e.agrees for e in examples)

    seconds = time.monotonic() - started
    tables = [
        *pipeline.tables,
        *sorted(p for p in (directory / "examples").iterdir() if p.is_dir()),
    ]
    report = write_report(
        directory / "report.html",
        sections=[
            TableSection(
                "Write conflicts without row-level concurrency",
                "Unpartitioned table without deletion vectors; UPDATE, DELETE, MERGE and OPTIMIZE "
                "touch the same files, INSERT is a blind append.",
                cells,
            ),
            TableSection(
                "Write conflicts with row-level concurrency",
                "Unpartitioned table with deletion vectors; every UPDATE, DELETE and MERGE "
                "changes the same row and INSERT appends a row with its id, so 'can conflict' "
                "cells are provoked on purpose; OPTIMIZE compacts the files the DML changes. "
                "Each run also checks that the final rows are those of a serial run of what "
                "committed (nothing lost).",
                row_cells,
                ROW_LEVEL_GROUPS,
            ),
        ],
        examples=examples,
        tables=tables,
        seconds=seconds,
    )
    verdict = (
        "[bold green]every observation agrees with Delta Lake's isolation-level documentation"
        if not disagreements
        else f"[bold red]{disagreements} observation(s) disagree with Delta Lake's "
        "isolation-level documentation"
    )
    out.print(verdict)
    out.print(f"report: {report}")
    out.print(f"tables left in {directory}; {seconds:.0f} s")
    return DemoResult(directory, report, disagreements, seconds)
