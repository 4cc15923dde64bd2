"""Faults injected between the S3 LogStore and the store, for the tests of its fault handling.

:class:`FaultInjectingS3Client` wraps a botocore client; each ``PutObject`` first asks a plan
which fault, if any, to suffer:

- ``error_500``: the store answers 500 and writes nothing.
- ``conflict_409``: the store answers 409 (a concurrent conditional write) and writes nothing.
- ``timeout``: the request times out before reaching the store; nothing is written.
- ``lost_response``: the store writes the object, then the answer is lost (a timeout).

A writer process arms it with ``DELTATX_S3_FAULTS=<fault>:<probability>,...`` (each PUT draws
at random); unarmed, the S3 store talks to the client directly.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any

import botocore.exceptions

ENV = "DELTATX_S3_FAULTS"


class S3Fault(StrEnum):
    """What goes wrong with one PUT."""

    ERROR_500 = "error_500"
    CONFLICT_409 = "conflict_409"
    TIMEOUT = "timeout"
    LOST_RESPONSE = "lost_response"


def _error(status: int, code: str) -> botocore.exceptions.ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": f"injected {status}"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return botocore.exceptions.ClientError(response, "PutObject")


def _timeout() -> botocore.exceptions.ReadTimeoutError:
    return botocore.exceptions.ReadTimeoutError(endpoint_url="injected")


class FaultInjectingS3Client:
    """A botocore S3 client whose PUTs suffer the faults a plan picks (see the module)."""

    def __init__(self, client: Any, plan: Callable[[], S3Fault | None]) -> None:
        """Wraps ``client``; ``plan`` is asked once per PUT."""
        self._client = client
        self._plan = plan
        self._lock = threading.Lock()
        self.injected: list[S3Fault] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def put_object(self, **kwargs: Any) -> Any:
        """``PutObject``, after the plan's fault."""
        with self._lock:
            fault = self._plan()
            if fault is not None:
                self.injected.append(fault)
        if fault is S3Fault.ERROR_500:
            raise _error(500, "InternalError")
        if fault is S3Fault.CONFLICT_409:
            raise _error(409, "ConditionalRequestConflict")
        if fault is S3Fault.TIMEOUT:
            raise _timeout()
        answer = self._client.put_object(**kwargs)
        if fault is S3Fault.LOST_RESPONSE:
            raise _timeout()
        return answer


def scripted(faults: Iterable[S3Fault | None]) -> Callable[[], S3Fault | None]:
    """A plan that suffers ``faults`` in order, one per PUT, then none."""
    pending = list(faults)
    return lambda: pending.pop(0) if pending else None


def at_random(
    odds: dict[S3Fault, float], *, seed: int | None = None
) -> Callable[[], S3Fault | None]:
    """A plan where each PUT suffers each fault with the given probability."""
    rng = random.Random(seed)

    def plan() -> S3Fault | None:
        draw = rng.random()
        for fault, p in odds.items():
            if draw < p:
                return fault
            draw -= p
        return None

    return plan


def plan_from_env() -> Callable[[], S3Fault | None] | None:
    """The plan ``DELTATX_S3_FAULTS`` arms, or None."""
    armed = os.environ.get(ENV)
    if not armed:
        return None
    odds: dict[S3Fault, float] = {}
    for item in armed.split(","):
        name, _, p = item.partition(":")
        odds[S3Fault(name.strip())] = float(p or 1)
    return at_random(odds)
