"""deltatx.progress: phases of one operation are logged in order, printed only when enabled."""

from __future__ import annotations

import logging

import pytest

from deltatx import progress


@pytest.fixture(autouse=True)
def _reset() -> object:
    yield
    progress.enable_progress(None)


def test_phases_are_logged_in_order(caplog: pytest.LogCaptureFixture) -> None:
    progress.enable_progress(False)
    with (
        caplog.at_level(logging.INFO, logger="deltatx.progress"),
        progress.operation("MERGE", "/t"),
    ):
        progress.step("scanning")
        progress.step("writing")
        progress.step("committing")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:3] == ["MERGE /t: scanning…", "MERGE /t: writing…", "MERGE /t: committing…"]
    assert lines[3].startswith("MERGE /t: done in ")
    assert "scanning" in lines[3] and "committing" in lines[3]


def test_nested_operations_report_as_the_outer_one(caplog: pytest.LogCaptureFixture) -> None:
    progress.enable_progress(False)
    with (
        caplog.at_level(logging.INFO, logger="deltatx.progress"),
        progress.operation("DELETE", "/t"),
    ):
        progress.step("scanning")
        with progress.operation("COMMIT", "/t"):
            progress.step("committing")
    assert all(r.getMessage().startswith("DELETE /t") for r in caplog.records)


def test_printed_on_stderr_only_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    progress.enable_progress(False)
    with progress.operation("UPDATE", "/t"):
        progress.step("writing")
    assert capsys.readouterr().err == ""
    progress.enable_progress(True)
    with progress.operation("UPDATE", "/t"):
        progress.step("writing")
    err = capsys.readouterr().err
    assert "deltatx: UPDATE /t: writing…" in err and "done in" in err


def test_environment_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTATX_PROGRESS", "1")
    assert progress.progress_enabled()
    monkeypatch.setenv("DELTATX_PROGRESS", "0")
    assert not progress.progress_enabled()


def test_steps_outside_an_operation_say_nothing(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    progress.enable_progress(True)
    with caplog.at_level(logging.INFO, logger="deltatx.progress"):
        progress.step("writing")
    assert capsys.readouterr().err == "" and not caplog.records


def test_a_failed_operation_says_so(caplog: pytest.LogCaptureFixture) -> None:
    progress.enable_progress(False)
    logs = caplog.at_level(logging.INFO, logger="deltatx.progress")
    with logs, pytest.raises(RuntimeError), progress.operation("MERGE", "/t"):
        progress.step("writing")
        raise RuntimeError("boom")
    assert caplog.records[-1].getMessage().startswith("MERGE /t: failed after")
