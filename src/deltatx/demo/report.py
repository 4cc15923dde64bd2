"""The demo's HTML report: the conflict tables as coloured grids, examples, histories.

The page explains itself to someone who has not read Delta Lake's isolation-level
documentation: what the rows and columns of a grid are, what a cell says, what each colour
means, and, for every conflict, the exception's hint (as a tooltip on the cell and as a
numbered note under the grid).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from deltatx.demo.conflicts import GROUPS, Cell
from deltatx.demo.examples import ExampleOutcome
from deltatx.demo.legend import code, hint_of, legend
from deltatx.kernel.isolation import IsolationLevel
from deltatx.log.delta_log import DeltaLog


@dataclass(frozen=True, slots=True)
class TableSection:
    """One conflict table: its title, how it was set up, and the observed cells."""

    title: str
    note: str
    cells: Sequence[Cell]
    groups: Sequence[str] = GROUPS


_STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:72rem;padding:0 1rem;
color:#222;line-height:1.4}
table{border-collapse:collapse;margin:1rem 0;width:100%;table-layout:fixed}
td,th{border:1px solid #999;padding:.4rem .5rem;vertical-align:top;font-size:.9rem;
overflow-wrap:anywhere}
th{background:#eee;text-align:left}
th.corner{background:#fff;font-weight:normal;font-size:.8rem;color:#555}
.ok{background:#d7f2d0}.expected{background:#dbe7fb}.bad{background:#f7a1a1}
.empty{background:#fafafa}
.small{font-size:.8rem;color:#444}
.legend{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;margin:.5rem 0 1rem;padding:0;
list-style:none}
.legend li{display:flex;align-items:center;gap:.4rem}
.swatch{display:inline-block;width:1.4rem;height:1rem;border:1px solid #999}
.codes{font-family:ui-monospace,monospace}
abbr{text-decoration:underline dotted;cursor:help}
ol.notes{font-size:.85rem;padding-left:2rem}
ol.notes li{margin:.3rem 0}
code{background:#f4f4f4;padding:0 .2rem}
.verdict{font-weight:bold}
.history td:nth-child(1),.history th:nth-child(1){width:4rem}
"""

_COLOURS = (
    ("ok", "No conflict, as documented: both commit orders committed."),
    (
        "expected",
        "Conflict, as documented: the documents say this pair can conflict, and it did. "
        "This is the expected, correct outcome, not a warning.",
    ),
    ("bad", "Disagrees with the documents (or a change was lost). The demo then exits 1."),
)


def _label(may: bool) -> str:
    return "can conflict" if may else "cannot conflict"


def _how_to_read() -> str:
    swatches = "".join(
        f'<li><span class="swatch {css}"></span>{html.escape(text)}</li>' for css, text in _COLOURS
    )
    return (
        '<section id="how-to-read"><h2>How to read the grids</h2>'
        "<p>Each grid is one conflict table of Delta Lake's isolation-level documentation, "
        "at one isolation level. <b>Rows and columns are the two concurrent operations</b> "
        "(<code>INSERT</code> is a blind append that reads nothing; "
        "<code>UPDATE, DELETE, MERGE</code> stands for each of the three). Only the lower "
        "half is filled: the table is symmetric.</p>"
        "<p><b>A cell</b> is that pair run for real, in both commit orders: two transactions "
        "open on the same snapshot, one commits, then the other tries to. Its first line says "
        "what the documents say (<i>can conflict</i> or <i>cannot conflict</i>), the second "
        "what happened here. Below, one line per order, e.g. <code>DELETE then UPDATE: DD "
        "[2]</code>: the first operation committed, the second raised "
        "<code>ConcurrentDeleteDeleteException</code> (code DD). Hover over a code to read "
        "the exception's hint; the numbered notes under each grid hold the same hints.</p>"
        f'<p>Colours:</p><ul class="legend" id="legend">{swatches}</ul></section>'
    )


class _Notes:
    """The numbered hints under one grid."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> int:
        self.items.append(text)
        return len(self.items)

    def render(self) -> str:
        if not self.items:
            return ""
        lis = "".join(f"<li>{html.escape(t)}</li>" for t in self.items)
        return f'<ol class="notes">{lis}</ol>'


def _codes(names: Sequence[str | None]) -> str:
    rows = legend(names)
    if not rows:
        return ""
    shown = ", ".join(
        f'<span class="codes">{html.escape(c)}</span> = {html.escape(n)}' for c, n in rows
    )
    return f'<p class="small">Exception codes: {shown}.</p>'


def _grid(cells: Sequence[Cell], level: IsolationLevel, groups: Sequence[str]) -> str:
    by_key = {frozenset((c.row, c.column)): c for c in cells if c.level is level}
    head = "".join(f'<th scope="col">{html.escape(g)}</th>' for g in groups)
    notes = _Notes()
    rows = []
    for i, row in enumerate(groups):
        tds = []
        for j, column in enumerate(groups):
            cell = by_key.get(frozenset((row, column)))
            if j > i or cell is None:
                tds.append('<td class="empty"></td>')
                continue
            css = "bad" if not cell.agrees else "expected" if cell.observed_conflict else "ok"
            runs = []
            for o in cell.outcomes:
                order = f"{o.first.value} then {o.second.value}: "
                if o.error is None:
                    what = "both committed"
                else:
                    hint = hint_of(o.message) or "(no hint)"
                    n = notes.add(f"{order}{o.error}. {hint}")
                    what = (
                        f'<abbr class="codes" title="{html.escape(o.error + ": " + hint)}">'
                        f"{html.escape(code(o.error))}</abbr> [{n}]"
                    )
                lost = " — A CHANGE WAS LOST" if o.lost else ""
                runs.append(html.escape(order) + what + html.escape(lost))
            verdict = (
                ""
                if cell.agrees
                else '<br><span class="verdict">DISAGREES WITH THE DOCUMENTS</span>'
            )
            tds.append(
                f'<td class="{css}">documented: {_label(cell.documented_may_conflict)}<br>'
                f"observed: {_label(cell.observed_conflict)}{verdict}"
                f'<div class="small">{"<br>".join(runs)}</div></td>'
            )
        rows.append(f'<tr><th scope="row">{html.escape(row)}</th>{"".join(tds)}</tr>')
    errors = [o.error for c in cells if c.level is level for o in c.outcomes]
    return (
        f'<h3>{html.escape(level.value)}</h3><table class="grid">'
        f'<tr><th class="corner">rows and columns: the two operations</th>{head}</tr>'
        f"{''.join(rows)}</table>{_codes(errors)}{notes.render()}"
    )


def _examples(examples: Sequence[ExampleOutcome]) -> str:
    rows = []
    notes = _Notes()
    for e in examples:
        css = "bad" if not e.agrees else ("expected" if e.error else "ok")
        observed = html.escape(e.error or "committed")
        if e.error:
            hint = hint_of(e.message) or "(no hint)"
            n = notes.add(f"{e.name} ({e.variant}): {e.error}. {hint}")
            observed = f'<abbr title="{html.escape(hint)}">{html.escape(e.error)}</abbr> [{n}]'
        rows.append(
            f'<tr class="{css}"><td>{html.escape(e.name)}</td><td>{html.escape(e.variant)}</td>'
            f"<td>{'conflict' if e.expected_conflict else 'no conflict'}</td>"
            f"<td>{observed}</td><td>{html.escape(e.detail)}</td></tr>"
        )
    return (
        "<p>Each row is one example from Delta Lake's isolation-level documentation, run for "
        "real: <i>documented</i> is what the documents say happens, <i>observed</i> what "
        "happened here (the exception the losing transaction raised, or <i>committed</i>). "
        "The colours are those of the grids.</p>"
        "<table><tr><th>example</th><th>variant</th><th>documented</th><th>observed</th>"
        f"<th>detail</th></tr>{''.join(rows)}</table>{notes.render()}"
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
        f'<h3><code>{html.escape(str(path))}</code></h3><table class="history"><tr>'
        "<th>version</th><th>time (UTC)</th><th>operation</th><th>isolation</th>"
        f"<th>blind append</th><th>metrics (non-zero)</th></tr>{''.join(rows)}</table>"
    )


def render_report(
    *,
    sections: Sequence[TableSection],
    examples: Sequence[ExampleOutcome],
    tables: Sequence[Path],
    seconds: float,
) -> str:
    """The report as one self-contained HTML page (no scripts, no external files)."""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>deltatx demo</title><style>{_STYLE}</style></head><body>"
        "<h1>deltatx demo: concurrent writers, observed</h1>"
        "<p>This page reports what the demo observed when it ran pairs of concurrent Delta "
        "transactions on Spark, next to what Delta Lake's isolation-level documentation says "
        f"should happen. It ran in {seconds:.0f} s.</p>",
        _how_to_read(),
    ]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2><p>{html.escape(section.note)}</p>")
        for level in sorted({c.level for c in section.cells}, key=lambda lvl: lvl.value):
            parts.append(_grid(section.cells, level, section.groups))
    if examples:
        parts.append("<h2>Worked examples</h2>" + _examples(examples))
    histories = "".join(_history(p) for p in tables)
    if histories:
        parts.append(
            "<h2>Table histories</h2><p>Every table the demo left behind, newest commit "
            "first, as <code>deltatx history</code> shows it.</p>" + histories
        )
    parts.append("</body></html>")
    return "".join(parts)


def write_report(
    target: Path,
    *,
    sections: Sequence[TableSection],
    examples: Sequence[ExampleOutcome],
    tables: Sequence[Path],
    seconds: float,
) -> Path:
    """Writes the HTML report (see :func:`render_report`) and returns its path."""
    page = render_report(sections=sections, examples=examples, tables=tables, seconds=seconds)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
