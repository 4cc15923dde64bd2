"""The deltatx catalog on the filesystem: names, managed locations, registration races."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltatx.catalog import Catalog, TableIdentifier
from deltatx.errors import InvalidArgumentError, TableAlreadyExistsError


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("events", TableIdentifier("default", "events")),
        ("Sales.Events", TableIdentifier("sales", "events")),
        ("spark_catalog.db.t", TableIdentifier("db", "t")),
        ("`my db`.`t.x`", TableIdentifier("my db", "t.x")),
    ],
)
def test_identifiers(name: str, expected: TableIdentifier) -> None:
    assert TableIdentifier.parse(name) == expected


@pytest.mark.parametrize("name", ["", "a.b.c", "a..b", "other_catalog.db.t"])
def test_bad_identifiers(name: str) -> None:
    with pytest.raises(InvalidArgumentError):
        TableIdentifier.parse(name)


def test_managed_locations_follow_spark_layout(tmp_path: Path) -> None:
    catalog = Catalog(f"file:{tmp_path}")
    assert catalog.managed_location(TableIdentifier("default", "t")) == str(tmp_path / "t")
    assert catalog.managed_location(TableIdentifier("db", "t")) == str(tmp_path / "db.db" / "t")


def test_register_lookup_and_a_new_instance_sees_it(tmp_path: Path) -> None:
    ident = TableIdentifier("db", "t")
    first = Catalog(str(tmp_path))
    assert first.lookup(ident) is None
    entry = first.register(ident, str(tmp_path / "data"), managed=False)
    again = Catalog(str(tmp_path)).lookup(ident)
    assert again == entry and again.location == str(tmp_path / "data") and not again.managed
    with pytest.raises(TableAlreadyExistsError):
        Catalog(str(tmp_path)).register(ident, str(tmp_path / "else"), managed=True)
    assert [e.identifier for e in first.tables("db")] == [ident]
    assert first.tables("nothing") == []
    # no leftovers from the write-aside
    assert sorted(p.name for p in (tmp_path / "_deltatx_catalog" / "db").iterdir()) == ["t.json"]


def test_drop_deletes_managed_data_only(tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path))
    managed = TableIdentifier("default", "m")
    external = TableIdentifier("default", "e")
    (tmp_path / "m").mkdir()
    (tmp_path / "ext").mkdir()
    catalog.register(managed, str(tmp_path / "m"), managed=True)
    catalog.register(external, str(tmp_path / "ext"), managed=False)
    catalog.drop(managed)
    catalog.drop(external)
    assert not (tmp_path / "m").exists()
    assert (tmp_path / "ext").exists()
    assert catalog.lookup(managed) is None and catalog.lookup(external) is None
    assert catalog.drop(managed) is None
