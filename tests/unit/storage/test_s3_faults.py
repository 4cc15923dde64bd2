"""The fault plans of the S3 fault-injecting client (no server needed)."""

from __future__ import annotations

import pytest

from deltatx.storage.s3_faults import S3Fault, at_random, plan_from_env, scripted


def test_the_fault_plan_is_armed_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTATX_S3_FAULTS", "lost_response:1")
    plan = plan_from_env()
    assert plan is not None and plan() is S3Fault.LOST_RESPONSE
    monkeypatch.delenv("DELTATX_S3_FAULTS")
    assert plan_from_env() is None
    draws = at_random({S3Fault.ERROR_500: 0.5}, seed=1)
    seen = {draws() for _ in range(200)}
    assert seen == {S3Fault.ERROR_500, None}


def test_a_scripted_plan_suffers_its_faults_in_order_then_none() -> None:
    plan = scripted([S3Fault.TIMEOUT, None, S3Fault.ERROR_500])
    assert [plan() for _ in range(5)] == [S3Fault.TIMEOUT, None, S3Fault.ERROR_500, None, None]
