"""The demo's HTML report, rendered in headless Chromium from a synthetic result set.

The real demo takes minutes; the report is rendered here through the same code from cells
built by hand (one of each colour, real exception messages), then loaded in Chromium: the
legend must be on the page, every conflict must carry its hint (tooltip and numbered note),
and nothing may overflow the page horizontally at laptop or narrow widths. A screenshot is
left in ``test-output/`` (or ``$DELTATX_TEST_OUTPUT``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from deltatx.demo.conflicts import Cell, Op, Outcome
from deltatx.demo.examples import ExampleOutcome
from deltatx.demo.legend import hint_of
from deltatx.demo.report import TableSection, render_report
from deltatx.errors import ConcurrentAppendException, ConcurrentDeleteDeleteException
from deltatx.kernel.isolation import IsolationLevel

WS, SER = IsolationLevel.WRITE_SERIALIZABLE, IsolationLevel.SERIALIZABLE
DML = "UPDATE, DELETE, MERGE"
DD_HINT = "A concurrent DELETE already deleted or rewrote this file. Retry the operation."
CA_HINT = "Blind appends conflict under Serializable; WriteSerializable would have allowed it."


def _dd() -> str:
    return str(
        ConcurrentDeleteDeleteException(winning_version=3, winning_operation="DELETE", hint=DD_HINT)
    )


def _ca() -> str:
    return str(
        ConcurrentAppendException(winning_version=4, winning_operation="WRITE", hint=CA_HINT)
    )


def _cells() -> list[Cell]:
    cells = []
    for level in (WS, SER):
        cells.append(
            Cell(
                level,
                "INSERT",
                "INSERT",
                (
                    Outcome(level, Op.INSERT, Op.INSERT, None),
                    Outcome(level, Op.INSERT, Op.INSERT, None),
                ),
                False,
            )
        )
        cells.append(
            Cell(
                level,
                DML,
                DML,
                (
                    Outcome(level, Op.DELETE, Op.UPDATE, "ConcurrentDeleteDeleteException", _dd()),
                    Outcome(level, Op.UPDATE, Op.DELETE, "ConcurrentDeleteDeleteException", _dd()),
                ),
                True,
            )
        )
        # Under Serializable this one "disagrees" on purpose, to show the red colour.
        conflict = level is SER
        cells.append(
            Cell(
                level,
                DML,
                "INSERT",
                (
                    Outcome(
                        level,
                        Op.INSERT,
                        Op.DELETE,
                        "ConcurrentAppendException" if conflict else None,
                        _ca() if conflict else None,
                    ),
                    Outcome(level, Op.DELETE, Op.INSERT, None),
                ),
                False,
            )
        )
    return cells


def _page() -> str:
    examples = [
        ExampleOutcome(
            "UPDATE date > X / DELETE date < X",
            "not partitioned",
            True,
            "ConcurrentAppendException",
            message=_ca(),
        ),
        ExampleOutcome("UPDATE date > X / DELETE date < X", "partitioned by date", False, None),
    ]
    section = TableSection(
        "Write conflicts without row-level concurrency", "Synthetic cells.", _cells()
    )
    return render_report(sections=[section], examples=examples, tables=[], seconds=1.0)


def test_the_hint_is_read_out_of_the_message() -> None:
    assert hint_of(_dd()) == DD_HINT
    assert hint_of("no hint here") is None


def test_the_page_explains_itself() -> None:
    page = _page()
    assert "seed" not in page.lower()
    assert 'id="legend"' in page and page.count('class="swatch') == 3
    assert "Rows and columns are the two concurrent operations" in page
    assert "not a warning" in page  # the colour of an expected conflict
    # Every conflict shows its hint twice: as a tooltip and as a numbered note.
    assert page.count(f'title="ConcurrentDeleteDeleteException: {DD_HINT}"') == 4
    assert (
        page.count(f"<li>DELETE then UPDATE: ConcurrentDeleteDeleteException. {DD_HINT}</li>") == 2
    )
    assert "DD</span> = ConcurrentDeleteDeleteException" in page
    assert "DISAGREES WITH THE DOCUMENTS" in page


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


_PROBE = """<script>
const doc = document.documentElement;
const cells = [...document.querySelectorAll('table.grid td')];
const probe = {
  scrollWidth: doc.scrollWidth,
  clientWidth: doc.clientWidth,
  legendItems: document.querySelectorAll('#legend li').length,
  legendVisible: document.getElementById('legend').getBoundingClientRect().height > 0,
  tablesWiderThanPage: [...document.querySelectorAll('table')].filter(
    t => t.getBoundingClientRect().right > doc.clientWidth + 1).length,
  conflictCellsWithoutHint: cells.filter(
    td => td.classList.contains('expected') && !td.querySelector('abbr[title]')).length,
  colours: [...new Set(cells.map(td => getComputedStyle(td).backgroundColor))],
};
document.body.insertAdjacentHTML('beforeend',
  '<pre id="pro' + 'be">' + JSON.stringify(probe) + '</pre>');
</script>"""


def _run_chromium(binary: str, args: list[str], profile: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run(
        [binary, *flags, *args], capture_output=True, text=True, timeout=120, check=False
    )


def _output_dir() -> Path:
    root = Path(__file__).resolve().parents[2]
    out = Path(os.environ.get("DELTATX_TEST_OUTPUT", root / "test-output"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.mark.parametrize("width", [1280, 720])
def test_report_renders_in_headless_chromium(tmp_path: Path, width: int) -> None:
    binary = _chromium()
    if binary is None:
        pytest.skip("chromium is not installed (make test installs it where apt-get can)")
    page = _page()
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = _run_chromium(
            binary,
            [f"--window-size={width},900", "--dump-dom", probed.as_uri()],
            profile,
        )
    assert dom.returncode == 0, dom.stderr[-2000:]
    match = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert match, dom.stdout[-2000:]
    probe = json.loads(match.group(1).replace("&quot;", '"'))
    assert probe["legendItems"] == 3 and probe["legendVisible"]
    assert probe["scrollWidth"] <= probe["clientWidth"], probe  # no horizontal scrolling
    assert probe["tablesWiderThanPage"] == 0
    assert probe["conflictCellsWithoutHint"] == 0
    assert len(probe["colours"]) >= 4  # green, blue, red, and the empty half
    shot = _output_dir() / f"demo-report-{width}.png"
    with tempfile.TemporaryDirectory() as profile:
        done = _run_chromium(
            binary,
            [f"--window-size={width},1600", f"--screenshot={shot}", report.as_uri()],
            profile,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 10_000


@pytest.mark.parametrize("width", [80, 160])
def test_terminal_grids_cut_nothing(width: int) -> None:
    from rich.console import Console

    from deltatx.demo.main import _print_table
    from deltatx.demo.row_level import ROW_LEVEL_GROUPS

    console = Console(width=width, record=True, color_system=None)
    _print_table(console, "Without row-level concurrency", _cells())
    _print_table(console, "With row-level concurrency", _cells(), ROW_LEVEL_GROUPS)
    text = console.export_text()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    assert "codes: CA = ConcurrentAppendException, DD = ConcurrentDeleteDeleteException" in (
        " ".join(text.split())
    )
    assert "runs: DD DD" in text and "seed" not in text.lower()
