"""Where a compacted file's rows went: the provenance of a compaction's output files.

Compaction writes each output file from one bin of source files, in the order of the bin's
files and, within a file, of the physical row index, skipping the rows the source's deletion
vector deleted at compaction time. The output's ``tags`` name its sources in that order with
their live row counts and the deletion vector each was read with, so that a row position in a
source maps to a row position in the output. That is what lets OPTIMIZE and REORG race a DML
on the same files without a conflict (the docs): the deletion vector written on one side is
carried to the other by position. The vector is recorded because the compaction's own
``remove`` may name a newer one: a compaction settled against a concurrent DML removes the
entry that DML left in force, whose rows it did not skip when writing.

A source's rows occupy ``[offset, offset + live_rows)`` of the output, where ``offset`` is the
sum of the live rows of the sources before it. The physical row ``r`` (not deleted at
compaction) lands at ``offset + r - |{d in deleted : d < r}|``.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import AddFile, DeletionVectorDescriptor
from deltatx.kernel.codec import deletion_vector_from_json, deletion_vector_to_json

SOURCES_TAG = "deltatx.compactedFrom"
"""The ``tags`` key holding an output file's sources: a JSON list of
``[path, liveRows, deletionVector]``, the vector as in an ``add`` action or null. Outputs
written before the vector was recorded hold ``[path, liveRows]``."""


@dataclass(frozen=True, slots=True)
class Segment:
    """The rows one source file contributed to a compaction output.

    Attributes:
        path: The source file's ``add.path``.
        live_rows: How many of its rows were live at compaction time.
        offset: The output position of its first live row.
        vector: The source's deletion vector when the compaction read it (None: no rows
            deleted), meaningful only when ``vector_recorded``.
        vector_recorded: Whether the tag recorded that vector (older outputs did not).
    """

    path: str
    live_rows: int
    offset: int
    vector: DeletionVectorDescriptor | None = None
    vector_recorded: bool = False

    def positions(self) -> range:
        """Every output position this source's rows occupy."""
        return range(self.offset, self.offset + self.live_rows)


def encode_sources(
    sources: Sequence[tuple[str, int, DeletionVectorDescriptor | None]],
) -> str:
    """The :data:`SOURCES_TAG` value for sources given as ``(path, live rows, vector)``."""
    return json.dumps(
        [
            [path, int(live), None if dv is None else deletion_vector_to_json(dv)]
            for path, live, dv in sources
        ],
        separators=(",", ":"),
    )


def segments_of(add: AddFile) -> tuple[Segment, ...] | None:
    """The sources of a compaction output, or None when it carries no (usable) provenance.

    A malformed tag reads as None: the file is then judged at file level, which is only
    coarser, never wrong.
    """
    raw = (add.tags or {}).get(SOURCES_TAG)
    if raw is None:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(parsed, list):
        return None
    out: list[Segment] = []
    offset = 0
    for item in parsed:
        if (
            not isinstance(item, list)
            or len(item) not in (2, 3)
            or not isinstance(item[0], str)
            or not isinstance(item[1], int)
            or isinstance(item[1], bool)
            or item[1] < 0
        ):
            return None
        vector: DeletionVectorDescriptor | None = None
        if len(item) == 3 and item[2] is not None:
            try:
                vector = deletion_vector_from_json(item[2], where=SOURCES_TAG)
            except InvalidTableError:
                return None
        out.append(Segment(item[0], item[1], offset, vector, vector_recorded=len(item) == 3))
        offset += item[1]
    return tuple(out)


def sources_by_path(adds: Iterable[AddFile]) -> dict[str, tuple[AddFile, Segment]]:
    """Source path -> (the output that holds its rows, its segment), over several outputs."""
    out: dict[str, tuple[AddFile, Segment]] = {}
    for add in adds:
        for segment in segments_of(add) or ():
            out[segment.path] = (add, segment)
    return out


class RowsNotLiveError(ValueError):
    """Rows to map were already deleted when the file was compacted."""

    def __init__(self, rows: Sequence[int]) -> None:
        """Keeps the offending physical rows (at most ten, for the message)."""
        self.rows = list(rows)[:10]
        super().__init__(f"rows {self.rows} were deleted before the compaction")


def map_rows(
    rows: Iterable[int], *, deleted_at_compaction: Sequence[int], segment: Segment
) -> list[int]:
    """Output positions of a source's physical ``rows``.

    Args:
        rows: Physical row indexes of the source file.
        deleted_at_compaction: The source's deleted rows when it was compacted, ascending.
        segment: Where the source's live rows went.

    Raises:
        RowsNotLiveError: A row was deleted at compaction time (it is not in the output), or
            lies beyond the source's live rows.
    """
    dead: list[int] = []
    out: list[int] = []
    deleted = set(deleted_at_compaction)
    for r in sorted(set(rows)):
        if r < 0 or r in deleted:
            dead.append(r)
            continue
        rank = r - bisect.bisect_left(deleted_at_compaction, r)
        if rank >= segment.live_rows:
            dead.append(r)
            continue
        out.append(segment.offset + rank)
    if dead:
        raise RowsNotLiveError(dead)
    return out
