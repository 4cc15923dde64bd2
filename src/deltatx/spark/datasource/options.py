"""Options of ``format("delta")``, checked before anything is read or written."""

from __future__ import annotations

from collections.abc import Mapping

from deltatx.errors import InvalidArgumentError, UnsupportedOptionError

BATCH_READ_OPTIONS = frozenset({"path", "versionAsOf", "timestampAsOf"})
"""A batch read's options (matched case-insensitively, as Spark matches option names)."""


def check_options(options: Mapping[str, str], allowed: frozenset[str], *, what: str) -> None:
    """Refuses any option not in ``allowed``, naming it.

    Raises:
        UnsupportedOptionError: An option deltatx does not implement.
    """
    known = {name.lower() for name in allowed}
    for key in options:
        if key.lower() not in known:
            raise UnsupportedOptionError(
                f"{what} option '{key}' is not supported by deltatx's data source; supported: "
                f"{', '.join(sorted(allowed - {'path'}))}",
                option=key,
            )


def table_path(options: Mapping[str, str]) -> str:
    """The ``path`` given to ``load``/``save``.

    Raises:
        InvalidArgumentError: No path was given.
    """
    path = options.get("path")
    if not path:
        raise InvalidArgumentError(
            "format('delta') needs a table path: load(path) or save(path); for a table by "
            "name use deltatx.sql or DeltaTable"
        )
    return path


def int_option(options: Mapping[str, str], key: str) -> int | None:
    """The integer option ``key`` (None when absent).

    Raises:
        InvalidArgumentError: The value is not an integer.
    """
    text = options.get(key)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidArgumentError(f"{key} must be an integer, got {text!r}") from None


__all__ = ["BATCH_READ_OPTIONS", "check_options", "int_option", "table_path"]
