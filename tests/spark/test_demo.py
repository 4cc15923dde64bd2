"""`deltatx demo --quick`: it finds no disagreement with seed 000 and writes its report."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from rich.console import Console

from deltatx.demo.main import run_demo


def test_demo_quick_agrees_with_the_seed(spark: SparkSession, tmp_path: Path) -> None:
    console = Console(record=True, width=120)
    result = run_demo(tmp_path / "demo", quick=True, console=console)
    assert result.disagreements == 0
    html = result.report.read_text()
    assert "DISAGREES" not in html
    assert "can conflict" in html and "cannot conflict" in html
    assert "txn1" in html
    text = console.export_text()
    assert "every observation agrees with Delta Lake" in text
    assert (tmp_path / "demo" / "events-Serializable" / "_delta_log").is_dir()
