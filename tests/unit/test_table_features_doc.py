"""The properties table in the docs lists every delta.* key the registry knows, with its status."""

from __future__ import annotations

import re
from pathlib import Path

from deltatx.kernel.properties import KNOWN_PROPERTIES, PropertyStatus

DOC = Path(__file__).resolve().parents[2] / "docs" / "table-features.md"


def test_every_known_property_is_documented_with_its_status() -> None:
    rows = dict(re.findall(r"^\| `([^`]+)` \| (supported|refused) \|", DOC.read_text(), re.M))
    for entry in KNOWN_PROPERTIES:
        shown = entry.key + ("<name>" if entry.key.endswith("constraints.") else "*")
        key = shown if entry.prefix else entry.key
        assert key in rows, f"{key} is missing from {DOC.name}"
        expected = "supported" if entry.status is PropertyStatus.SUPPORTED else "refused"
        assert rows[key] == expected, key
    assert len(rows) == len(KNOWN_PROPERTIES)
