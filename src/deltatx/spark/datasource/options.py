"""Options of ``format("delta")``, checked before anything is read or written."""

from __future__ import annotations

from collections.abc import Mapping

from deltatx.errors import InvalidArgumentError, UnsupportedOptionError


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


__all__ = ["check_options", "table_path"]
