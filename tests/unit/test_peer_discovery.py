"""Where the peer suite finds delta-spark, and the one-line reason it gives when it cannot."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _engine() -> ModuleType:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("tests.peer.engine")


@pytest.mark.parametrize("layout", ["vendor-folder", "jars-folder"])
def test_jars_are_found_through_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    engine = _engine()
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "delta-spark_4.2_2.13-4.4.0.jar").write_bytes(b"")
    monkeypatch.setenv(engine.JARS_ENV, str(tmp_path if layout == "vendor-folder" else jars))
    assert engine.jars_dir() == jars


def test_missing_jars_give_one_line_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _engine()
    monkeypatch.setenv(engine.JARS_ENV, str(tmp_path))
    assert engine.jars_dir() is None
    reason = engine.missing_reason()
    assert reason is not None and "\n" not in reason and engine.JARS_ENV in reason


def test_missing_peer_environment_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _engine()
    (tmp_path / "delta-spark_4.2_2.13-4.4.0.jar").write_bytes(b"")
    monkeypatch.setenv(engine.JARS_ENV, str(tmp_path))
    monkeypatch.setenv(engine.PYTHON_ENV, str(tmp_path / "no-python"))
    assert engine.missing_reason() == "delta-spark peer environment missing: run `make peer-venv`"
