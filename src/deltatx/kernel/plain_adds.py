"""The fast path for the bulk of every commit: plain ``add`` actions.

A plain add carries only path, partition values, size, modification time, data change and
statistics, each well typed. Such an add is built without the codec's field-by-field checks
(:mod:`deltatx.kernel.codec`), into the very AddFile the checked path would make; anything
else gets None here and goes through the checked path, which reads or refuses it. Writing is
wider: a run of adds without a deletion vector or unknown fields is written by one encoder
call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import orjson

from deltatx.kernel.actions import AddFile


class _AddRecord(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """An add without a deletion vector or unknown fields, as its commit line spells it.

    Its fields are AddFile's but those two, in the same order (the codec's), spelled out: a
    record built from AddFile's field list took half as long again to fill. The optional
    ones are left out when None. Made and dropped a hundred at a time by each commit; nothing
    they hold can refer back to them, so the cyclic collector need not track them.
    """

    path: str
    partition_values: dict[str, Any]
    size: int
    modification_time: int
    data_change: bool
    stats: str | None = None
    tags: dict[str, Any] | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None


class _AddLine(msgspec.Struct, gc=False):
    add: _AddRecord


_LINES = msgspec.json.Encoder()
# The fields of a plain add as read: the rest go through the checked path.
_PLAIN_ADD_KEYS = frozenset(
    {"path", "partitionValues", "size", "modificationTime", "dataChange", "stats"}
)
_LONG_MIN, _LONG_END = -(2**63), 2**63


def plain_add(obj: Mapping[str, Any]) -> AddFile | None:
    """The AddFile the checked decoder makes of a plain add whose fields are all well typed.

    None for anything else, which the checked path reads (or refuses, with its message). The
    bulk of a commit is plain adds; a conflict check reads every winner's.
    """
    path = obj.get("path")
    values = obj.get("partitionValues")
    size = obj.get("size")
    mtime = obj.get("modificationTime")
    change = obj.get("dataChange")
    stats = obj.get("stats")
    if not (
        type(path) is str
        and type(values) is dict
        and type(size) is int
        and type(mtime) is int
        and type(change) is bool
        and (stats is None or type(stats) is str)
        and obj.keys() <= _PLAIN_ADD_KEYS
        and _LONG_MIN <= size < _LONG_END
        and _LONG_MIN <= mtime < _LONG_END
    ):
        return None
    for v in values.values():
        if v is not None and type(v) is not str:
            return None
    if _SLOT_SETTERS is None:
        return AddFile(
            path=path,
            partition_values=dict(values),
            size=size,
            modification_time=mtime,
            data_change=change,
            stats=stats,
        )
    # The frozen dataclass's __init__ sets each field through object.__setattr__; setting
    # the slots directly builds the same object in half the time.
    add: AddFile = _new_object(AddFile)
    s_path, s_values, s_size, s_mtime, s_change, s_stats, *s_unset, s_extra = _SLOT_SETTERS
    s_path(add, path)
    s_values(add, dict(values))
    s_size(add, size)
    s_mtime(add, mtime)
    s_change(add, change)
    s_stats(add, stats)
    for unset in s_unset:
        unset(add, None)
    s_extra(add, {})
    return add


def _slot_setters() -> tuple[Callable[[AddFile, Any], None], ...] | None:
    """AddFile's slot setters in field order, or None when its fields are not the known ones."""
    names = tuple(f.name for f in dataclasses.fields(AddFile))
    if names != _ADD_FIELDS or any(
        f.default is not None for f in dataclasses.fields(AddFile)[5:-1]
    ):
        return None
    return tuple(getattr(AddFile, name).__set__ for name in names)


_ADD_FIELDS = (
    "path",
    "partition_values",
    "size",
    "modification_time",
    "data_change",
    "stats",
    "tags",
    "deletion_vector",
    "base_row_id",
    "default_row_commit_version",
    "clustering_provider",
    "extra",
)
_new_object = object.__new__
_SLOT_SETTERS = _slot_setters()


def plain_add_line(line: str) -> AddFile | None:
    """The plain add on ``line`` (which starts with ``{"add":``), or None for the checked path.

    orjson reads strict JSON as the standard parser does, except integers beyond 64 bits (as
    floats, which no plain add has), and refuses the rest (NaN tokens, lone surrogates);
    whatever is not a plain add is read again by the checked path.
    """
    try:
        fast = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(fast) is dict and len(fast) == 1:
        value = fast.get("add")
        if type(value) is dict:
            return plain_add(value)
    return None


def add_lines(adds: list[AddFile]) -> bytes | None:
    """The commit lines of adds without deletion vectors or unknown fields, or None.

    Their strings, integers and booleans are written byte for byte as the standard encoder
    writes them; a dict and an encoder call per add were most of serializing a 100-add
    commit. None (a lone surrogate, a partition value keyed by something not text, values
    that are not a dict) leaves the adds to the codec's per-action path.
    """
    try:
        return _LINES.encode_lines(
            [
                _AddLine(
                    _AddRecord(
                        a.path,
                        a.partition_values,
                        a.size,
                        a.modification_time,
                        a.data_change,
                        a.stats,
                        a.tags,
                        a.base_row_id,
                        a.default_row_commit_version,
                        a.clustering_provider,
                    )
                )
                for a in adds
            ]
        )
    except (TypeError, ValueError, UnicodeEncodeError):
        return None
