"""``latest.json``, ``latest.md`` and the PNG plots of the scaling cases."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from benchmarks.harness import Row, Stats


def fmt_value(value: float | None, unit: str) -> str:
    """A figure with a readable unit (times scale to us/ms/s)."""
    if value is None:
        return "-"
    if unit != "s":
        return f"{value:,.0f} {unit}" if value >= 100 else f"{value:,.2f} {unit}"
    if value < 1e-3:
        return f"{value * 1e6:.1f} us"
    if value < 1.0:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.2f} s"


def fmt_stats(stats: Stats | None, unit: str, *, p99: bool) -> str:
    """``median`` or ``median (p99 x)``; ``-`` when there is no figure."""
    if stats is None:
        return "-"
    text = fmt_value(stats.median, unit)
    if p99 and stats.n >= 10:
        text += f" (p99 {fmt_value(stats.p99, unit)})"
    return text


def _met(met: bool | None) -> str:
    return "-" if met is None else ("yes" if met else "**no**")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def slug(text: str) -> str:
    """A file name for a plot title."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def write_json(path: str, meta: dict[str, Any], rows: Sequence[Row]) -> None:
    """``latest.json``: the run's metadata and every row."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rows": [r.to_json() for r in rows]}, f, indent=2, default=str)
        f.write("\n")


def write_plots(directory: str, rows: Sequence[Row]) -> dict[str, str]:
    """One PNG per scaling plot (cost vs size, log-log); returns title -> file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.plot is not None and r.x is not None and r.deltatx.stats is not None:
            groups.setdefault(r.plot, []).append(r)
    os.makedirs(directory, exist_ok=True)
    out: dict[str, str] = write_scale_plots(directory, rows)
    for title, members in groups.items():
        if len({r.x for r in members}) < 2:
            continue
        members = sorted(members, key=lambda r: r.x or 0)
        fig, ax = plt.subplots(figsize=(6, 4))
        unit = members[0].unit
        scale, label = (1e3, "ms") if unit == "s" else (1.0, unit)
        xs = [r.x for r in members]
        ax.plot(xs, [r.deltatx.stats.median * scale for r in members], "o-", label="deltatx")  # type: ignore[union-attr]
        peers = [(r.x, r.peer) for r in members if r.peer is not None and r.peer.stats is not None]
        if peers:
            engine = peers[0][1].engine  # type: ignore[union-attr]
            ax.plot(
                [x for x, _ in peers],
                [p.stats.median * scale for _, p in peers],  # type: ignore[union-attr]
                "s--",
                label=engine,
            )
        ax.set_xscale("log")
        if unit == "s":
            ax.set_yscale("log")
        out[title] = _save_plot(
            fig, ax, directory, title, x_label="size", y_label=f"median ({label})"
        )
    return out


def write_markdown(
    path: str, meta: dict[str, Any], rows: Sequence[Row], plots: dict[str, str], plot_dir: str
) -> None:
    """The human report: machine, versions, one table per case, plots, goals."""
    m = meta["machine"]
    v = meta["versions"]
    lines = [
        f"# deltatx benchmarks ({meta['suite']})",
        "",
        f"Run {meta['started']} with `{meta['command']}` in {meta['elapsed_s']:.0f} s.",
        "",
        f"- Machine: {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gib']} GiB, "
        f"{m['cpu']}, {m['os']}, Python {m['python']}.",
        f"- Load average at start / end: {meta['load_start']} / {meta['load_end']} "
        "(other work on the machine inflates every figure, deltatx's and the peers' alike).",
        f"- Host gauge at start / end: {meta['host_gauge_start']:.2f} s / "
        f"{meta['host_gauge_end']:.2f} s of CPU for a fixed loop of 5 million Python additions. "
        "On a shared virtual machine it moves by half within minutes; figures in microseconds "
        "or milliseconds move with it, ratios measured side by side do not. The metadata "
        "cases note it per case.",
        f"- Versions: deltatx {v['deltatx']}, delta-rs (deltalake) {v['deltalake']}, "
        f"PySpark {v['pyspark']}, pyarrow {v['pyarrow']}.",
    ]
    if meta.get("spark_startup_s") is not None:
        lines.append(
            f"- Spark session start-up (once, excluded from every figure): "
            f"{meta['spark_startup_s']:.2f} s."
        )
    lines += [
        "- Each figure is the median of at least 3 runs after a warm-up; p99 is shown where "
        "there are 10 or more runs. Ratio = deltatx / peer for times and peer / deltatx for "
        "throughputs, so below 1 means deltatx is ahead. Goals are recorded, never asserted.",
    ]
    lines += [f"- {note}" for note in meta.get("notes", [])]
    lines.append("")
    by_case: dict[str, list[Row]] = {}
    for r in rows:
        by_case.setdefault(r.case.split(" ", 1)[0], []).append(r)
    for _key, members in by_case.items():
        lines += [f"## {members[0].case}", ""]
        lines.append("| what | size | deltatx | peer | peer figure | ratio | goal | met | notes |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for r in members:
            peer = "-" if r.peer is None else f"{r.peer.engine} {r.peer.version}"
            ratio = "-" if r.ratio is None else f"{r.ratio:.3g}"
            p99 = r.unit == "s"
            cells = [
                r.name,
                r.size,
                fmt_stats(r.deltatx.stats, r.unit, p99=p99),
                peer,
                "-" if r.peer is None else fmt_stats(r.peer.stats, r.unit, p99=p99),
                ratio,
                r.target,
                _met(r.met),
                r.notes,
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
        lines += scale_section(members, plots, plot_dir)
        for title, name in plots.items():
            if any(r.plot == title for r in members):
                lines.append(f"![{title}]({plot_dir}/{name})")
                lines.append("")
    judged = [r for r in rows if r.met is not None]
    lines += [
        "## Goals",
        "",
        f"{sum(1 for r in judged if r.met)} of {len(judged)} judged goals met.",
        "",
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


# -- case 15: cost and memory against the table's size ------------------------------------------

_SCALE_COLUMNS = (
    "deltatx copy-on-write",
    "deltatx deletion vectors",
    "deltatx deletion vectors, no fsync",
    "plain Spark",
    "delta-rs",
)
# deltatx's variants synced to disk (its default), and the one without fsync, as delta-rs runs.
_SYNCED = ("copy-on-write", "deletion vectors")
_UNSYNCED = ("deletion vectors, no fsync",)
# Issue 16 judges "ahead of delta-rs" from this size (the same as scale_case.AHEAD_FROM_ROWS).
_AHEAD_FROM_ROWS = 10_000_000


def _scale_grid(rows: Sequence[Row]) -> dict[str, dict[float, dict[str, tuple[float, str]]]]:
    """op -> rows -> column -> (median seconds, peak memory in words)."""
    grid: dict[str, dict[float, dict[str, tuple[float, str]]]] = {}
    for r in rows:
        op = r.deltatx.extra.get("scale_op")
        if op is None or r.x is None:
            continue
        cells = grid.setdefault(str(op), {}).setdefault(r.x, {})
        mine = r.deltatx.extra
        if r.deltatx.stats is not None:
            cells[f"deltatx {mine['scale_variant']}"] = (
                r.deltatx.stats.median,
                f"{mine['driver_peak_rss_mb']:.0f} / {mine['jvm_peak_heap_mb']:.0f}",
            )
        if r.peer is not None and r.peer.stats is not None:
            theirs = r.peer.extra
            memory = (
                f"{theirs['peak_rss_mb']:.0f} / -"
                if "peak_rss_mb" in theirs
                else f"{theirs.get('driver_peak_rss_mb', 0):.0f} / "
                f"{theirs.get('jvm_peak_heap_mb', 0):.0f}"
            )
            cells[r.peer.engine] = (r.peer.stats.median, memory)
    return grid


def scale_section(rows: Sequence[Row], plots: dict[str, str], plot_dir: str) -> list[str]:
    """Markdown for case 15: seconds and peak memory against rows, per operation."""
    grid = _scale_grid(rows)
    skipped = [r for r in rows if "scale_skipped" in r.deltatx.extra]
    if not grid and not skipped:
        return []
    lines = [
        "### Cost against size",
        "",
        "Median seconds per operation; ratios are deltatx / delta-rs (below 1: deltatx is "
        'ahead); "ahead" is given twice, as delta-rs never fsyncs: for deltatx synced to disk '
        "(its default; the faster of its synced variants) and for deltatx without fsync "
        "(`spark.deltatx.storage.fsync=false`); peak memory in MB as driver RSS / "
        "JVM heap (delta-rs: its process's RSS).",
        "",
    ]
    ratios = (*_SYNCED, *_UNSYNCED)
    header = (
        "| operation | rows | "
        + " | ".join(_SCALE_COLUMNS)
        + " | "
        + " | ".join(f"{v} / delta-rs" for v in ratios)
        + " | ahead of delta-rs | peak memory (MB) |"
    )
    width = len(_SCALE_COLUMNS) + len(ratios) + 1
    lines += [header, "|---|---:|" + "---:|" * width + "---|"]
    for op, by_size in grid.items():
        for x in sorted(by_size):
            cells = by_size[x]
            times = [fmt_value(cells[c][0], "s") if c in cells else "-" for c in _SCALE_COLUMNS]
            theirs = cells.get("delta-rs")
            quotients = [
                cells[f"deltatx {v}"][0] / theirs[0]
                if theirs and theirs[0] and f"deltatx {v}" in cells
                else None
                for v in ratios
            ]
            shown = [f"{q:.2f}" if q is not None else "-" for q in quotients]
            by_variant = dict(zip(ratios, quotients, strict=True))
            verdicts = []
            for durability, variants in (("synced", _SYNCED), ("no fsync", _UNSYNCED)):
                known = [q for v in variants if (q := by_variant[v]) is not None]
                if known:
                    verdicts.append(f"{durability}: {'yes' if min(known) < 1.0 else 'no'}")
            ahead = "; ".join(verdicts) or "-"
            if x < _AHEAD_FROM_ROWS and verdicts:
                ahead += " (not judged below 10M rows)"
            memory = "; ".join(f"{c}: {cells[c][1]}" for c in _SCALE_COLUMNS if c in cells)
            lines.append(
                f"| {op.upper()} 1% | {x:,.0f} | "
                + " | ".join(times + shown)
                + f" | {ahead} | {memory} |"
            )
    for r in skipped:
        lines.append(f"| all | {r.x or 0:,.0f} | " + "- | " * width + f"{r.notes} |")
    lines.append("")
    for title, name in plots.items():
        if title.startswith("scale: "):
            lines += [f"![{title}]({plot_dir}/{name})", ""]
    return lines


def write_scale_plots(directory: str, rows: Sequence[Row]) -> dict[str, str]:
    """One PNG per operation of case 15: seconds against rows for every engine, log-log."""
    grid = _scale_grid(rows)
    if not any(len(by_size) >= 2 for by_size in grid.values()):
        return {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    out: dict[str, str] = {}
    styles = ("o-", "D-", "v:", "s--", "^--")
    for op, by_size in grid.items():
        if len(by_size) < 2:
            continue
        title = f"scale: {op.upper()} 1% of the rows"
        fig, ax = plt.subplots(figsize=(6, 4))
        for column, style in zip(_SCALE_COLUMNS, styles, strict=True):
            points = sorted(
                (x, cells[column][0]) for x, cells in by_size.items() if column in cells
            )
            if points:
                ax.plot([x for x, _ in points], [y for _, y in points], style, label=column)
        ax.set_xscale("log")
        ax.set_yscale("log")
        out[title] = _save_plot(
            fig, ax, directory, title, x_label="rows in the table", y_label="median (s)"
        )
    return out


def _save_plot(fig: Any, ax: Any, directory: str, title: str, *, x_label: str, y_label: str) -> str:
    """Labels, saves and closes one plot; returns its file name."""
    import matplotlib.pyplot as plt

    ax.set_title(title)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    name = f"{slug(title)}.png"
    fig.tight_layout()
    fig.savefig(os.path.join(directory, name), dpi=90)
    plt.close(fig)
    return name
