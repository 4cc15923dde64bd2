"""``deltatx demo``: the pipeline, seed 000's two conflict tables observed live, the examples.

The first table is the one without row-level concurrency, the second the one with it
(deletion vectors, :mod:`deltatx.demo.row_level`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from deltatx.demo.conflicts import GROUPS, AnyOp, Cell, Op, observe_table
from deltatx.demo.examples import (
    ExampleOutcome,
    merge_by_partition,
    txn1_txn2,
    update_delete_by_date,
)
from deltatx.demo.pipeline import run_pipeline
from deltatx.demo.report import TableSection, write_report
from deltatx.demo.row_level import ALL_OPS, ROW_LEVEL_GROUPS, observe_row_level_table
from deltatx.kernel.isolation import IsolationLevel
from deltatx.spark.session import spark_session


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo did: where it left things, and how many observations disagreed."""

    directory: Path
    report: Path
    disagreements: int
    seconds: float


def _print_table(
    console: Console, title: str, cells: list[Cell], groups: Sequence[str] = GROUPS
) -> None:
    for level in sorted({c.level for c in cells}, key=lambda lvl: lvl.value):
        grid = Table(title=f"{title} — {level.value} (observed / seed)", show_lines=True)
        grid.add_column("")
        for g in groups:
            grid.add_column(g)
        by_key = {frozenset((c.row, c.column)): c for c in cells if c.level is level}
        for i, row in enumerate(groups):
            values = []
            for j, column in enumerate(groups):
                cell = by_key.get(frozenset((row, column)))
                if j > i or cell is None:
                    values.append("")
                    continue
                seen = "conflict" if cell.observed_conflict else "no conflict"
                said = "can conflict" if cell.documented_may_conflict else "cannot conflict"
                mark = "[green]✓" if cell.agrees else "[bold red]✗ DISAGREES"
                values.append(f"{mark}[/] {seen}\n[dim]seed: {said}[/]")
            grid.add_row(row, *values)
        console.print(grid)


def run_demo(directory: Path, *, quick: bool = False, console: Console | None = None) -> DemoResult:
    """Runs everything under ``directory`` and prints it; see :class:`DemoResult`."""
    out = console or Console()
    started = time.monotonic()
    spark = spark_session()
    directory.mkdir(parents=True, exist_ok=True)
    disagreements = 0

    pipeline = run_pipeline(spark, directory, console=out)
    disagreements += pipeline.disagreements

    out.rule("[bold]Seed 000: write conflicts without row-level concurrency")
    ops = (Op.INSERT, Op.DELETE, Op.OPTIMIZE) if quick else tuple(Op)
    cells = observe_table(
        spark,
        directory / "conflicts",
        ops=ops,
        progress=lambda line: out.print(f"  [dim]{line}[/]"),
    )
    _print_table(out, "Without row-level concurrency", cells)
    disagreements += sum(not c.agrees for c in cells)

    out.rule("[bold]Seed 000: write conflicts with row-level concurrency (deletion vectors)")
    row_ops: tuple[AnyOp, ...] = (Op.INSERT, Op.DELETE, Op.OPTIMIZE) if quick else ALL_OPS
    row_cells = observe_row_level_table(
        spark,
        directory / "row-level",
        ops=row_ops,
        progress=lambda line: out.print(f"  [dim]{line}[/]"),
    )
    _print_table(out, "With row-level concurrency", row_cells, ROW_LEVEL_GROUPS)
    disagreements += sum(not c.agrees for c in row_cells)

    out.rule("[bold]Seed 000: the worked examples")
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
    for name in ("example", "variant", "seed", "observed", "detail"):
        grid.add_column(name)
    for e in examples:
        mark = "[green]✓" if e.agrees else "[bold red]✗ DISAGREES"
        grid.add_row(
            e.name,
            e.variant,
            "conflict" if e.expected_conflict else "no conflict",
            f"{mark}[/] {e.error or 'committed'}",
            e.detail,
        )
    out.print(grid)
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
        "[bold green]every observation agrees with seed 000"
        if not disagreements
        else f"[bold red]{disagreements} observation(s) disagree with seed 000"
    )
    out.print(verdict)
    out.print(f"report: {report}")
    out.print(f"tables left in {directory}; {seconds:.0f} s")
    return DemoResult(directory, report, disagreements, seconds)
