"""Short codes for the conflict exceptions, so narrow tables never cut a name.

The terminal grids and the HTML report show a two-letter code per run and print the legend
(code -> exception name) underneath.
"""

from __future__ import annotations

from collections.abc import Iterable

EXCEPTION_CODES: dict[str, str] = {
    "ConcurrentAppendException": "CA",
    "ConcurrentDeleteReadException": "DR",
    "ConcurrentDeleteDeleteException": "DD",
    "MetadataChangedException": "MC",
    "ConcurrentTransactionException": "CT",
    "ProtocolChangedException": "PC",
    "ConcurrentModificationException": "CM",
}
"""Every documented conflict exception (and their base class) and its code."""


def code(exception: str | None) -> str:
    """The code of an exception class name (``"ok"`` when nothing was raised)."""
    if exception is None:
        return "ok"
    return EXCEPTION_CODES.get(exception, exception)


def legend(exceptions: Iterable[str | None]) -> list[tuple[str, str]]:
    """``(code, exception name)`` for each distinct exception raised, in code order."""
    seen = {e for e in exceptions if e is not None}
    return sorted((code(e), e) for e in seen)


def hint_of(message: str | None) -> str | None:
    """The hint inside a conflict exception's message (``Hint: ...``), if it has one."""
    if not message or "Hint: " not in message:
        return None
    hint = message.split("Hint: ", 1)[1]
    return hint.split(" Refer to https://", 1)[0].strip() or None
