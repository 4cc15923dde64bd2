"""The demo's HTML report: the conflict tables as coloured grids, examples, histories."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from deltatx.demo.conflicts import GROUPS, Cell
from deltatx.demo.examples import ExampleOutcome
from deltatx.kernel.isolation import IsolationLevel
from deltatx.log.delta_log import DeltaLog


@dataclass(frozen=True, slots=True)
class TableSection:
    """One conflict table: its title, the seed's framing, and the observed cells."""

    title: str
    note: str
    cells: Sequence[Cell]
    groups: Sequence[str] = GROUPS


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:72rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}
td,th{border:1px solid #999;padding:.4rem .6rem;vertical-align:top;font-size:.9rem}
th{background:#eee}
.ok{background:#d7f2d0}.conflict{background:#fde2c8}.bad{background:#f7a1a1;font-weight:bold}
.small{font-size:.8rem;color:#555}
code{background:#f4f4f4;padding:0 .2rem}
"""


def _label(may: bool) -> str:
    return "can conflict" if may else "cannot conflict"


def _grid(cells: Sequence[Cell], level: IsolationLevel, groups: Sequence[str]) -> str:
    by_key = {frozenset((c.row, c.column)): c for c in cells if c.level is level}
    head = "".join(f"<th>{html.escape(g)}</th>" for g in groups)
    rows = []
    for i, row in enumerate(groups):
        tds = []
        for j, column in enumerate(groups):
            cell = by_key.get(frozenset((row, column)))
            if j > i or cell is None:
                tds.append("<td></td>")
                continue
            css = "bad" if not cell.agrees else ("conflict" if cell.observed_conflict else "ok")
            runs = "<br>".join(
                html.escape(
                    f"{o.first.value} then {o.second.value}: {o.error or 'committed'}"
                    + (" — A CHANGE WAS LOST" if o.lost else "")
                )
                for o in cell.outcomes
            )
            verdict = "" if cell.agrees else "<br><b>DISAGREES WITH THE SEED</b>"
            tds.append(
                f'<td class="{css}">seed: {_label(cell.documented_may_conflict)}<br>'
                f"observed: {_label(cell.observed_conflict)}{verdict}"
                f'<div class="small">{runs}</div></td>'
            )
        rows.append(f"<tr><th>{html.escape(row)}</th>{''.join(tds)}</tr>")
    return f"<table><tr><th>{level.value}</th>{head}</tr>{''.join(rows)}</table>"


def _examples(examples: Sequence[ExampleOutcome]) -> str:
    rows = []
    for e in examples:
        css = "bad" if not e.agrees else ("conflict" if e.error else "ok")
        rows.append(
            f'<tr class="{css}"><td>{html.escape(e.name)}</td><td>{html.escape(e.variant)}</td>'
            f"<td>{'conflict' if e.expected_conflict else 'no conflict'}</td>"
            f"<td>{html.escape(e.error or 'committed')}</td><td>{html.escape(e.detail)}</td>"
            f'<td class="small">{html.escape(e.message or "")}</td></tr>'
        )
    return (
        "<table><tr><th>example</th><th>variant</th><th>seed</th><th>observed</th>"
        f"<th>detail</th><th>message</th></tr>{''.join(rows)}</table>"
    )


def _history(path: Path) -> str:
    log = DeltaLog.for_table(str(path))
    if not log.table_exists():
        return ""
    rows = []
    for e in log.history():
        ci = e.commit_info
        metrics = (
            ""
            if ci is None or not ci.operation_metrics
            else ", ".join(f"{k}={v}" for k, v in sorted(ci.operation_metrics.items()) if v != "0")
        )
        when = datetime.fromtimestamp(e.timestamp / 1000, UTC).strftime("%H:%M:%S")
        rows.append(
            f"<tr><td>{e.version}</td><td>{when}</td>"
            f"<td>{html.escape(str(ci.operation if ci else ''))}</td>"
            f"<td>{html.escape(str(ci.isolation_level if ci else ''))}</td>"
            f"<td>{html.escape(str(ci.is_blind_append if ci else ''))}</td>"
            f'<td class="small">{html.escape(metrics)}</td></tr>'
        )
    return (
        f"<h3><code>{html.escape(str(path))}</code></h3><table><tr><th>version</th><th>time</th>"
        f"<th>operation</th><th>isolation</th><th>blind append</th><th>metrics</th></tr>"
        f"{''.join(rows)}</table>"
    )


def write_report(
    target: Path,
    *,
    sections: Sequence[TableSection],
    examples: Sequence[ExampleOutcome],
    tables: Sequence[Path],
    seconds: float,
) -> Path:
    """Writes the HTML report and returns its path."""
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>deltatx demo</title>"
        f"<style>{_STYLE}</style></head><body><h1>deltatx demo</h1>"
        f"<p>Every cell ran for real on Spark: two transactions open on the same snapshot, one "
        f"commits, then the other. Green: both orders committed. Orange: a documented conflict "
        f"exception. Red: the observation disagrees with seed 000. Ran in {seconds:.0f} s.</p>"
    ]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2><p>{html.escape(section.note)}</p>")
        for level in sorted({c.level for c in section.cells}, key=lambda lvl: lvl.value):
            parts.append(_grid(section.cells, level, section.groups))
    parts.append("<h2>Seed 000's worked examples</h2>" + _examples(examples))
    parts.append("<h2>Table histories</h2>" + "".join(_history(p) for p in tables))
    parts.append("</body></html>")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(parts), encoding="utf-8")
    return target
