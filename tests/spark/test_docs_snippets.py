"""The README's and the documentation's Python snippets run as written.

Every fenced ```python block of README.md and docs/*.md runs, in order, in a fresh temporary
directory per file, sharing one namespace per file (later blocks build on earlier ones). A
block preceded by a ``<!-- no-test -->`` line is shown but not run (shell output, the planned
SQL surface).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_SKIP = "<!-- no-test -->"


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """``(line number, code)`` of each python block not marked ``<!-- no-test -->``."""
    blocks = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if before.strip() == _SKIP:
            continue
        blocks.append((text[: match.start()].count("\n") + 1, match.group(1)))
    return blocks


def test_the_marker_skips_a_block() -> None:
    text = "a\n<!-- no-test -->\n```python\nraise SystemExit\n```\n\n```python\nx = 1\n```\n"
    assert runnable_blocks(text) == [(7, "x = 1\n")]


@pytest.mark.spark
@pytest.mark.parametrize("document", _documents(), ids=lambda p: p.name)
def test_snippets_run(
    document: Path, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = runnable_blocks(document.read_text(encoding="utf-8"))
    if not blocks:
        pytest.skip(f"{document.name} has no runnable python block")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for line, code in blocks:
        compiled = compile(code, f"{document.name}:{line}", "exec")
        exec(compiled, namespace)
