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
    out: dict[str, str] = {}
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
        ax.set_title(title)
        ax.set_xlabel("size")
        ax.set_ylabel(f"median ({label})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        name = f"{slug(title)}.png"
        fig.tight_layout()
        fig.savefig(os.path.join(directory, name), dpi=90)
        plt.close(fig)
        out[title] = name
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
