from __future__ import annotations

import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltatx.errors import InvalidArgumentError, UnsupportedFeatureError
from deltatx.kernel.file_paths import (
    PLAIN_PATH_NOT,
    file_key,
    is_relative,
    relative_to,
    resolve,
    scheme_of,
    table_root,
)

ROOT = "/data/t"


@pytest.mark.parametrize(
    "spelling",
    [
        "a b/part-0.parquet",
        "a%20b/part-0.parquet",
        "/data/t/a b/part-0.parquet",
        "file:/data/t/a%20b/part-0.parquet",
        "file:///data/t/a%20b/part-0.parquet",
        "file://localhost/data/t/a%20b/part-0.parquet",
        "./a%20b/x/../part-0.parquet",
        "//data/t/a b/part-0.parquet",
    ],
)
def test_every_spelling_of_one_file_resolves_to_one_location(spelling: str) -> None:
    assert resolve(spelling, root=ROOT) == "/data/t/a b/part-0.parquet"


@pytest.mark.parametrize(
    "path", ["../outside/x.parquet", "%2e%2e%2fx.parquet", "%2E%2E/x", "sub/../../x", "/etc/passwd"]
)
def test_paths_that_climb_out_are_not_below_the_root(path: str) -> None:
    assert relative_to(resolve(path, root=ROOT), root=ROOT) is None


def test_other_schemes_are_kept_as_uris() -> None:
    assert resolve("s3://bucket/t/a.parquet", root=ROOT) == "s3://bucket/t/a.parquet"
    assert scheme_of("S3A://b/x") == "s3a"
    assert scheme_of("/a:b") is None
    assert scheme_of("C:/x") is None


def test_file_uri_with_a_remote_host_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="host 'server'"):
        resolve("file://server/t/a.parquet", root=ROOT)
    with pytest.raises(InvalidArgumentError, match="absolute path"):
        resolve("file:a.parquet", root=ROOT)


def test_table_root_reads_paths_literally_and_decodes_uris(tmp_path: object) -> None:
    assert table_root("/data/t/") == "/data/t"
    assert table_root("/data/a%20b") == "/data/a%20b"
    assert table_root("file:///data/a%20b/") == "/data/a b"
    assert table_root("rel/t") == os.path.join(os.getcwd(), "rel/t")


@pytest.mark.parametrize("uri", ["gs://b/x", "abfss://c@a/x", "hdfs://nn/x", "webhdfs://nn/x"])
def test_unsupported_stores_are_refused_by_name(uri: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match="not supported yet") as info:
        table_root(uri)
    assert info.value.feature == f"storage:{scheme_of(uri)}"


def test_paths_under_an_s3_root_resolve_to_keys_below_it() -> None:
    root = table_root("s3a://bkt/t/")
    assert root == "s3://bkt/t"
    assert resolve("p=a%20b/f.parquet", root=root) == "s3://bkt/t/p=a b/f.parquet"
    assert resolve("s3a://bkt/t/f.parquet", root=root) == "s3://bkt/t/f.parquet"
    assert resolve("../u/f.parquet", root=root) == "s3://bkt/u/f.parquet"
    assert file_key("s3://bkt/t/p=a%20b/f.parquet", root=root) == "p=a b/f.parquet"


def test_empty_root_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        table_root("  ")


@given(st.lists(st.text("ab %/.", min_size=1, max_size=4), min_size=1, max_size=4))
def test_a_resolved_relative_path_is_normal_and_joins_back(parts: list[str]) -> None:
    location = resolve("/".join(parts), root=ROOT)
    assert (
        "/./" not in location
        and "/../" not in location
        and (location == "/" or not location.endswith("/"))
    )
    rel = relative_to(location, root=ROOT)
    if rel is not None:
        assert location == f"{ROOT}/{rel}"


@given(st.text("ab %/.:é", min_size=1, max_size=10))
def test_file_key_shortcut_agrees_with_full_resolution(path: str) -> None:
    try:
        location = resolve(path, root=ROOT)
    except InvalidArgumentError:
        assert file_key(path, root=ROOT) == path
        return
    relative = relative_to(location, root=ROOT)
    assert file_key(path, root=ROOT) == (location if relative is None else relative)


def test_paths_that_must_be_resolved_are_flagged_for_vectorised_keys() -> None:
    for path in ("a%20b", "/t/a", "file:/t/a", "a//b", "./a", "a/..", "a/", ""):
        assert re.search(PLAIN_PATH_NOT, path), path
    assert not re.search(PLAIN_PATH_NOT, "date=1/part-0.parquet")
    assert is_relative("a/b") and not is_relative("/a") and not is_relative("file:/a")
