"""Choosing the checkpoint and commits for a version; gaps, missing parts, absent versions."""

from __future__ import annotations

import pytest

from deltatx.errors import InvalidTableError, TableNotFoundError, VersionNotFoundError
from deltatx.kernel.log_segment import (
    CheckpointHint,
    build_log_segment,
    format_versions,
    parse_checkpoint_hint,
)


def c(v: int) -> str:
    return f"{v:020d}.json"


def cp(v: int) -> str:
    return f"{v:020d}.checkpoint.parquet"


def mp(v: int, part: int, n: int) -> str:
    return f"{v:020d}.checkpoint.{part:010d}.{n:010d}.parquet"


def test_commits_only_replays_from_zero() -> None:
    seg = build_log_segment([c(0), c(1), c(2), "_last_checkpoint", ".c.crc", "junk"])
    assert seg.version == 2
    assert seg.checkpoint_version is None and seg.checkpoint_files == ()
    assert seg.commit_files == (c(0), c(1), c(2))
    assert seg.first_commit_version == 0


def test_newest_checkpoint_at_or_before_the_version_is_used() -> None:
    names = [c(v) for v in range(13)] + [cp(5), cp(10)]
    seg = build_log_segment(names)
    assert (seg.version, seg.checkpoint_version) == (12, 10)
    assert seg.checkpoint_files == (cp(10),)
    assert seg.commit_files == (c(11), c(12))
    seg = build_log_segment(names, version=9)
    assert seg.checkpoint_version == 5 and seg.commit_files == (c(6), c(7), c(8), c(9))
    seg = build_log_segment(names, version=10)
    assert seg.checkpoint_version == 10 and seg.commit_files == ()
    seg = build_log_segment(names, version=4)
    assert seg.checkpoint_version is None and len(seg.commit_files) == 5


def test_cleaned_up_commits_before_a_checkpoint_are_not_a_gap() -> None:
    names = [cp(10)] + [c(v) for v in range(10, 14)]
    seg = build_log_segment(names)
    assert seg.checkpoint_version == 10 and seg.commit_files == (c(11), c(12), c(13))


def test_checkpoint_without_later_commits() -> None:
    seg = build_log_segment([cp(3)])
    assert seg.version == 3 and seg.checkpoint_files == (cp(3),) and seg.commit_files == ()


def test_gap_names_the_missing_versions() -> None:
    names = [c(0), c(1), c(4), c(7)]
    with pytest.raises(InvalidTableError, match=r"commit\(s\) 2-3, 5-6 are missing"):
        build_log_segment(names, table="/t")
    # Versions before the gap are still readable.
    assert build_log_segment(names, version=1).commit_files == (c(0), c(1))


def test_gap_after_checkpoint() -> None:
    with pytest.raises(InvalidTableError, match=r"commit\(s\) 7 are missing"):
        build_log_segment([cp(5), c(5), c(6), c(8)])


def test_multipart_checkpoint_complete() -> None:
    names = [c(v) for v in range(5)] + [mp(3, 1, 3), mp(3, 2, 3), mp(3, 3, 3)]
    seg = build_log_segment(names)
    assert seg.checkpoint_version == 3
    assert seg.checkpoint_files == (mp(3, 1, 3), mp(3, 2, 3), mp(3, 3, 3))
    assert seg.commit_files == (c(4),)


def test_multipart_checkpoint_with_missing_part_falls_back_to_older_checkpoint() -> None:
    names = [c(v) for v in range(2, 8)] + [cp(2), mp(6, 1, 2)]
    seg = build_log_segment(names)
    assert seg.checkpoint_version == 2
    assert seg.ignored_checkpoints == (6,)
    assert seg.commit_files == tuple(c(v) for v in range(3, 8))


def test_multipart_checkpoint_with_missing_part_falls_back_to_commits() -> None:
    names = [c(v) for v in range(0, 6)] + [mp(4, 1, 2)]
    seg = build_log_segment(names)
    assert seg.checkpoint_version is None and len(seg.commit_files) == 6


def test_missing_part_and_no_other_way_is_invalid() -> None:
    names = [mp(4, 1, 2), c(4), c(5)]
    with pytest.raises(InvalidTableError, match="version 4 are missing parts"):
        build_log_segment(names, table="/t")


def test_classic_preferred_over_multipart_at_same_version() -> None:
    seg = build_log_segment([cp(3), mp(3, 1, 2), mp(3, 2, 2), c(3)])
    assert seg.checkpoint_files == (cp(3),)


def test_version_beyond_latest_names_the_range() -> None:
    with pytest.raises(VersionNotFoundError, match="version 9 does not exist; versions 0 to 2"):
        build_log_segment([c(0), c(1), c(2)], version=9, table="/t")
    with pytest.raises(VersionNotFoundError):
        build_log_segment([c(0)], version=-1)


def test_version_before_cleaned_history_names_the_range() -> None:
    names = [cp(10)] + [c(v) for v in range(8, 13)]
    with pytest.raises(VersionNotFoundError, match="versions 10 to 12 are available"):
        build_log_segment(names, version=8, table="/t")


def test_no_log_files_means_no_table() -> None:
    with pytest.raises(TableNotFoundError):
        build_log_segment(["_last_checkpoint", "x.tmp"], table="/t")


def test_missing_version_zero_without_checkpoint_is_invalid() -> None:
    with pytest.raises(InvalidTableError, match=r"commits 0-1 are missing"):
        build_log_segment([c(2), c(3)], table="/t")


UUID_A = "3a0d65cd-4056-49b8-937b-95f9e3ee90e5"
UUID_B = "80a083e8-7026-4e79-81be-64bd76c43a11"


def v2(v: int, uuid: str = UUID_A, ext: str = "parquet") -> str:
    return f"{v:020d}.checkpoint.{uuid}.{ext}"


def compacted(a: int, b: int) -> str:
    return f"{a:020d}.{b:020d}.compacted.json"


@pytest.mark.parametrize("ext", ["parquet", "json"])
def test_v2_checkpoints_start_the_segment(ext: str) -> None:
    seg = build_log_segment([c(0), c(1), c(2), v2(2, ext=ext), c(3)])
    assert seg.checkpoint_version == 2 and seg.checkpoint_files == (v2(2, ext=ext),)
    assert seg.commit_files == (c(3),)


def test_of_several_checkpoints_at_one_version_one_is_chosen_deterministically() -> None:
    seg = build_log_segment([v2(4, UUID_B), v2(4, UUID_A), c(5)])
    assert seg.checkpoint_files == (v2(4, UUID_A),)
    seg = build_log_segment([v2(4, UUID_B), cp(4), c(5)])
    assert seg.checkpoint_files == (cp(4),)


def test_a_compaction_replaces_the_commits_it_covers() -> None:
    names = [cp(2), *(c(v) for v in range(0, 9)), compacted(3, 5), compacted(6, 7)]
    seg = build_log_segment(names)
    assert seg.replay_files() == (
        (compacted(3, 5), 5),
        (compacted(6, 7), 7),
        (c(8), 8),
    )


def test_a_compaction_reaching_past_the_target_or_before_the_checkpoint_is_not_used() -> None:
    names = [cp(4), *(c(v) for v in range(0, 9)), compacted(2, 6), compacted(5, 8)]
    assert build_log_segment(names, version=7).replay_files() == tuple(
        (c(v), v) for v in range(5, 8)
    )
    assert build_log_segment(names).replay_files() == ((compacted(5, 8), 8),)


def test_hint_naming_an_unlisted_checkpoint_is_ignored() -> None:
    seg = build_log_segment([c(0), c(1)], hint=CheckpointHint(version=1))
    assert seg.checkpoint_version is None


def test_parse_checkpoint_hint() -> None:
    hint = parse_checkpoint_hint(b'{"version":10,"size":13,"sizeInBytes":16479,"numOfAddFiles":6}')
    assert hint == CheckpointHint(version=10, size=13, size_in_bytes=16479, num_of_add_files=6)
    assert parse_checkpoint_hint(b'{"version":4,"parts":3}') == CheckpointHint(4, parts=3)
    for bad in [b"", b"{", b"[]", b'{"version":"3"}', b'{"version":-1}', b"\xff", b'{"size":1}']:
        assert parse_checkpoint_hint(bad) is None


def test_format_versions() -> None:
    assert format_versions([1, 2, 3, 5, 7, 8]) == "1-3, 5, 7-8"
    assert format_versions([]) == ""
