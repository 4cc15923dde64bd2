"""4 writer processes appending to one table on S3, with faults injected into their PUTs.

500s, 409s, timeouts and responses lost after the PUT landed: no acknowledged commit is lost,
none appears twice, and the versions stay contiguous. A few seconds in the default run, 60 s
under ``make stress``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .s3_appender import MIN_COMMITS, check_log, create, run_appenders

pytestmark = pytest.mark.s3

SECONDS = 60.0 if os.environ.get("DELTATX_STRESS_FULL") else 6.0
PROCESSES = 4


def test_four_processes_append_under_faults(s3_table: str, tmp_path: Path) -> None:
    create(s3_table)
    run_appenders(
        s3_table,
        tmp_path,
        processes=PROCESSES,
        seconds=SECONDS,
        faults="error_500:0.05,timeout:0.05,lost_response:0.05,conflict_409:0.02",
    )
    acked, failed = check_log(s3_table, tmp_path)
    print(f"S3 appenders: {acked} acknowledged commits, {failed} failed")
    # Every attempt of every writer has its outcome recorded, and more than one writer's
    # worth of them landed.
    assert acked + failed >= PROCESSES * MIN_COMMITS
    assert acked > MIN_COMMITS
