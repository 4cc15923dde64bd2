"""Fixtures of the stress suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .servers import WriterServers


@pytest.fixture(scope="session")
def writer_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WriterServers]:
    """Writer processes with their own Spark sessions, shared by the stress tests."""
    pool = WriterServers(tmp_path_factory.mktemp("writer-servers"))
    yield pool
    pool.close()
