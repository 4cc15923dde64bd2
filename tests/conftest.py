"""Marks tests by folder so `-m` selections and reports stay readable."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.fspath)
        for folder in ("spark", "interop", "stress"):
            if f"/tests/{folder}/" in path:
                item.add_marker(getattr(pytest.mark, folder))
