"""``df.write.format("delta")`` as Spark users write it, despite two limits of Spark's API.

Spark lets a Python data source be written only in the ``append`` and ``overwrite`` modes
(and ``error`` is the default mode), and refuses ``partitionBy(...)`` for it. So that existing
code runs unchanged, :func:`install` makes PySpark's ``DataFrameWriter`` remember what it was
told; when the format is deltatx's, ``save`` rebuilds the write: ``error`` and ``ignore`` are
decided on the driver from the log (and checked again at commit), and the partition columns
travel as the ``partitionBy`` option. Writers of any other format are untouched.

A Python data source is not told a table's name, so ``saveAsTable`` with deltatx's format is
handed to the :class:`TableWriter` the facade installs with :func:`set_table_writer` (names
live in the catalog, above this layer); with none installed it is refused.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.readwriter import DataFrameWriter
from pyspark.sql.streaming.readwriter import DataStreamWriter

from deltatx.errors import TableAlreadyExistsError, UnsupportedFeatureError
from deltatx.log.delta_log import DeltaLog

_STATE = "_deltatx_state"
_INSTALLED = "_deltatx_installed"
SAVE_MODE_OPTION = "deltatxSaveMode"
"""Set by :func:`install` for ``error``: the writer refuses a table created meanwhile."""


class TableWriter(Protocol):
    """Writes a DataFrame to a Delta table by name (``saveAsTable``)."""

    def __call__(
        self,
        df: DataFrame,
        name: str,
        *,
        source: str,
        mode: str,
        partition_by: Sequence[str] | None,
        options: Mapping[str, Any],
    ) -> None:
        """Writes ``df`` to the table ``name`` with Spark's save ``mode``."""


_table_writer: list[TableWriter] = []


def set_table_writer(writer: TableWriter) -> None:
    """Installs the handler of ``saveAsTable`` for deltatx's formats (the last one wins)."""
    _table_writer[:] = [writer]


class TableLocator(Protocol):
    """The root of an existing Delta table by name (``writeStream.toTable``)."""

    def __call__(self, spark: SparkSession, name: str) -> str:
        """The table's root; a name that is no Delta table raises TableNotFoundError."""


_table_locator: list[TableLocator] = []


def set_table_locator(locator: TableLocator) -> None:
    """Installs how ``writeStream.toTable(name)`` finds a table (the last one wins)."""
    _table_locator[:] = [locator]


def _state(writer: DataFrameWriter) -> dict[str, Any]:
    state: dict[str, Any] | None = writer.__dict__.get(_STATE)
    if state is None:
        state = {"format": None, "mode": None, "partition_by": None, "options": {}}
        writer.__dict__[_STATE] = state
    return state


def _note_format(state: dict[str, Any], source: str) -> None:
    state["format"] = source


def _note_option(state: dict[str, Any], key: str, value: Any) -> None:
    state["options"][key] = value


def _note_options(state: dict[str, Any], **options: Any) -> None:
    state["options"].update(options)


def record_calls(
    cls: type,
    state: Callable[[Any], dict[str, Any]],
    notes: Mapping[str, Callable[..., None]],
) -> None:
    """Makes the builder methods of a PySpark reader or writer note what they were told.

    ``format``, ``option`` and ``options`` are always noted (under ``format`` and
    ``options``); ``notes`` adds the class's own, by method name.
    """
    every: dict[str, Callable[..., None]] = {
        "format": _note_format,
        "option": _note_option,
        "options": _note_options,
        **notes,
    }
    for name, note in every.items():
        original = getattr(cls, name)
        setattr(cls, name, functools.wraps(original)(_noting(original, note, state)))


def _noting(
    original: Callable[..., Any],
    note: Callable[..., None],
    state: Callable[[Any], dict[str, Any]],
) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        note(state(self), *args, **kwargs)
        return original(self, *args, **kwargs)

    return method


def _flatten(cols: Any) -> list[str]:
    if len(cols) == 1 and isinstance(cols[0], list | tuple):
        cols = cols[0]
    return [str(c) for c in cols]


def install(formats: frozenset[str]) -> None:
    """Teaches PySpark's ``DataFrameWriter`` to write ``formats`` with every mode.

    Idempotent; ``formats`` (lower-case names) replaces the set of formats handled.
    """
    DataFrameWriter._deltatx_formats = formats  # type: ignore[attr-defined]
    if getattr(DataFrameWriter, _INSTALLED, False):
        return
    setattr(DataFrameWriter, _INSTALLED, True)

    def set_mode(state: dict[str, Any], mode: str | None) -> None:
        state["mode"] = mode

    def set_partition_by(state: dict[str, Any], *cols: Any) -> None:
        state["partition_by"] = _flatten(cols)

    record_calls(DataFrameWriter, _state, {"mode": set_mode, "partitionBy": set_partition_by})

    original_save = DataFrameWriter.save
    original_save_as_table = DataFrameWriter.saveAsTable

    def ours(self: DataFrameWriter, format: str | None) -> bool:
        name = format or _state(self)["format"]
        handled: frozenset[str] = DataFrameWriter._deltatx_formats  # type: ignore[attr-defined]
        return name is not None and str(name).lower() in handled

    @functools.wraps(original_save)
    def save(
        self: DataFrameWriter,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: str | list[str] | None = None,
        **options: Any,
    ) -> None:
        if not ours(self, format):
            original_save(self, path, format, mode, partitionBy, **options)
            return
        state = _state(self)
        source = format or state["format"]
        chosen = (mode or state["mode"] or "error").lower()
        parts = state["partition_by"]
        if partitionBy is not None:
            parts = [partitionBy] if isinstance(partitionBy, str) else list(partitionBy)
        merged = {**state["options"], **options}
        if path is not None:
            merged["path"] = path
        if chosen in ("error", "errorifexists", "default", "ignore"):
            target = merged.get("path")
            if target is not None and DeltaLog.for_table(str(target)).table_exists():
                if chosen == "ignore":
                    return
                raise TableAlreadyExistsError(f"a Delta table already exists at {target}")
            if chosen != "ignore":
                merged[SAVE_MODE_OPTION] = "error"
            chosen = "append"
        if parts:
            merged["partitionBy"] = ",".join(parts)
        fresh = self._df.write.format(source).mode(chosen)
        for key, value in merged.items():
            fresh = fresh.option(key, value)
        original_save(fresh)

    @functools.wraps(original_save_as_table)
    def save_as_table(
        self: DataFrameWriter,
        name: str,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: str | list[str] | None = None,
        **options: Any,
    ) -> None:
        if not ours(self, format):
            original_save_as_table(self, name, format, mode, partitionBy, **options)
            return
        state = _state(self)
        source = str(format or state["format"])
        if not _table_writer:
            raise UnsupportedFeatureError(
                f"saveAsTable('{name}') with format('{source}') needs deltatx's table names: "
                "configure the session with deltatx.configure(spark) or deltatx.spark_session()",
                feature="saveAsTable",
            )
        parts = state["partition_by"]
        if partitionBy is not None:
            parts = [partitionBy] if isinstance(partitionBy, str) else list(partitionBy)
        _table_writer[0](
            self._df,
            name,
            source=source,
            mode=(mode or state["mode"] or "error").lower(),
            partition_by=parts,
            options={**state["options"], **options},
        )

    DataFrameWriter.save = save  # type: ignore[method-assign]
    DataFrameWriter.saveAsTable = save_as_table  # type: ignore[method-assign]
    _install_stream_writer()


def _install_stream_writer() -> None:
    original_format = DataStreamWriter.format
    original_to_table = DataStreamWriter.toTable

    @functools.wraps(original_format)
    def stream_format(self: DataStreamWriter, source: str) -> DataStreamWriter:
        self.__dict__[_STATE] = source
        return original_format(self, source)

    @functools.wraps(original_to_table)
    def to_table(
        self: DataStreamWriter,
        tableName: str,
        format: str | None = None,
        outputMode: str | None = None,
        partitionBy: str | list[str] | None = None,
        queryName: str | None = None,
        **options: Any,
    ) -> Any:
        name = format or self.__dict__.get(_STATE)
        handled: frozenset[str] = DataFrameWriter._deltatx_formats  # type: ignore[attr-defined]
        if name is None or str(name).lower() not in handled:
            return original_to_table(
                self, tableName, format, outputMode, partitionBy, queryName, **options
            )
        if not _table_locator:
            raise UnsupportedFeatureError(
                f"writeStream.toTable('{tableName}') with format('{name}') needs a session set "
                "up by deltatx.configure(spark) or deltatx.spark_session(); or start the query "
                "on the table's path: .start(path).",
                feature="toTable",
            )
        # A Python data source is not told a table's name: the name becomes its path here.
        path = _table_locator[0](self._df.sparkSession, tableName)
        return self.start(
            path,
            format=format,
            outputMode=outputMode,
            partitionBy=partitionBy,
            queryName=queryName,
            **options,
        )

    DataStreamWriter.format = stream_format  # type: ignore[method-assign]
    DataStreamWriter.toTable = to_table  # type: ignore[method-assign]
