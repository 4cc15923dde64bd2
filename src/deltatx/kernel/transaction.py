"""The read set of a transaction: what it read, so that conflicts can be judged.

Every scan inside a transaction records its predicate and the files it returned; the commit
compares that record with each winning commit (see :mod:`deltatx.kernel.conflicts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from deltatx.kernel.actions import Action, AddCDCFile, AddFile, RemoveFile
from deltatx.kernel.expressions import TRUE, Expression


@dataclass(frozen=True, slots=True)
class ReadSet:
    """What a transaction read, frozen at commit time.

    Attributes:
        predicates: Every recorded read predicate; conflicts match added files against their OR.
        read_files: Path to the AddFile a scan returned (as in the read snapshot).
        read_whole_table: The transaction read everything (a read that cannot be expressed as
            a predicate); any added or removed file conflicts.
        read_app_ids: Application ids whose last committed version the transaction asked for.
        read_metadata: The transaction read the table's metadata.
        row_level_rows: Row-level concurrency: per file that a deletion-vector DML read, the
            physical row indexes its conditions matched (and that it changed). A winner that
            only added other rows to such a file's deletion vector does not conflict.
        row_level_fallback: Why row-level concurrency does not apply (a documented limitation,
            e.g. a non-deterministic condition), or None; with a reason, every file read is
            judged at file level and the conflict hint says why.
    """

    predicates: tuple[Expression, ...] = ()
    read_files: Mapping[str, AddFile] = field(default_factory=dict)
    read_whole_table: bool = False
    read_app_ids: frozenset[str] = frozenset()
    read_metadata: bool = False
    row_level_rows: Mapping[str, frozenset[int]] = field(default_factory=dict)
    row_level_fallback: str | None = None

    @property
    def depends_on_files(self) -> bool:
        """Whether any predicate or file was recorded (app ids and metadata do not count)."""
        return bool(self.predicates) or bool(self.read_files)

    @property
    def read_paths(self) -> frozenset[str]:
        """The paths of the files read."""
        return frozenset(self.read_files)


class ReadTracker:
    """Collects a transaction's reads while it runs; :meth:`freeze` gives the :class:`ReadSet`."""

    def __init__(self) -> None:
        self._predicates: list[Expression] = []
        self._files: dict[str, AddFile] = {}
        self._whole_table = False
        self._app_ids: set[str] = set()
        self._metadata = False
        # As recorded: most commits never compare rows, so sets are made only when asked for.
        self._row_level: dict[str, list[Iterable[int]]] = {}
        self._fallback: str | None = None

    def record_scan(self, predicate: Expression, files: Iterable[AddFile]) -> None:
        """Records a scan: its predicate (``TRUE`` for a full scan) and the files it returned."""
        if predicate not in self._predicates:
            self._predicates.append(predicate)
        for f in files:
            self._files.setdefault(f.path, f)

    def record_partition_predicate(self, predicate: Expression) -> None:
        """Records a predicate without files (dynamic partition overwrite, conflict-spec 3.7).

        Without read files a concurrent delete in the same partition is judged as
        delete/delete, not delete/read (OT17).
        """
        if predicate not in self._predicates:
            self._predicates.append(predicate)

    def record_whole_table(self) -> None:
        """Records a read of the whole table (no predicate can describe it)."""
        self._whole_table = True
        if TRUE not in self._predicates:
            self._predicates.append(TRUE)

    def record_app_id(self, app_id: str) -> None:
        """Records that the transaction asked for an application id's last version."""
        self._app_ids.add(app_id)

    def record_metadata_read(self) -> None:
        """Records that the transaction read the table's metadata."""
        self._metadata = True

    def record_row_level(
        self, files: Iterable[AddFile], matched: Mapping[str, Iterable[int]]
    ) -> None:
        """Records a deletion-vector DML's reads at row level.

        Args:
            files: Every file the statement read (matched rows or not).
            matched: Per path, the physical row indexes its conditions matched and it changed;
                kept as given (the caller no longer changes them) until a conflict check asks.
        """
        row_level = self._row_level
        for f in files:
            row_level.setdefault(f.path, [])
        for path, rows in matched.items():
            row_level.setdefault(path, []).append(rows)

    def record_row_level_fallback(self, reason: str) -> None:
        """Records that row-level concurrency cannot apply to this transaction, and why."""
        if self._fallback is None:
            self._fallback = reason

    def freeze(self) -> ReadSet:
        """The read set as recorded so far."""
        files, row_level, app_ids = self._files, self._row_level, self._app_ids
        # Every commit freezes its tracker, and a blind append's recorded no file or row.
        return ReadSet(
            predicates=tuple(self._predicates),
            read_files=MappingProxyType(dict(files)) if files else _NO_FILES,
            read_whole_table=self._whole_table,
            read_app_ids=frozenset(app_ids) if app_ids else _NO_APP_IDS,
            read_metadata=self._metadata,
            row_level_rows=(
                RowSets({p: tuple(r) for p, r in row_level.items()}) if row_level else _NO_ROWS
            ),
            row_level_fallback=self._fallback,
        )


class RowSets(Mapping[str, frozenset[int]]):
    """Per path, the rows a read set recorded; each path's made one frozenset when first asked.

    A 1% DML of a large table records about 100,000 rows a file; most commits meet no
    concurrent change and never compare them.
    """

    __slots__ = ("_frozen", "_recorded")

    def __init__(self, recorded: Mapping[str, tuple[Iterable[int], ...]]) -> None:
        """Holds ``recorded`` (per path, the row collections recorded for it) as they are."""
        self._recorded = dict(recorded)
        self._frozen: dict[str, frozenset[int]] = {}

    def __getitem__(self, path: str) -> frozenset[int]:
        """The rows recorded for ``path``, as one set."""
        rows = self._frozen.get(path)
        if rows is None:
            parts = self._recorded[path]
            rows = frozenset(parts[0]) if len(parts) == 1 else frozenset().union(*parts)
            self._frozen[path] = rows
        return rows

    def __contains__(self, path: object) -> bool:
        """Whether the read set recorded ``path``."""
        return path in self._recorded

    def __iter__(self) -> Iterator[str]:
        """The recorded paths."""
        return iter(self._recorded)

    def __len__(self) -> int:
        """How many paths were recorded."""
        return len(self._recorded)


_NO_FILES: Mapping[str, AddFile] = MappingProxyType({})
_NO_APP_IDS: frozenset[str] = frozenset()
_NO_ROWS = RowSets({})


def is_blind_append(actions: Iterable[Action], read_set: ReadSet) -> bool:
    """Whether a commit is a blind append (written as ``commitInfo.isBlindAppend``).

    Every file action is an AddFile (vacuously true without file actions; a cdc file is not an
    add) and the transaction read no predicate, file or whole table. Reading application ids or
    the metadata does not count: every writer reads the schema (OT01 commits blind after
    reading ``t.metadata``).
    """
    if read_set.depends_on_files or read_set.read_whole_table:
        return False
    # Adds, the bulk of a commit, pass on one type test (a loop, not all() over a generator:
    # this runs on every commit).
    for a in actions:
        if type(a) is not AddFile and isinstance(a, RemoveFile | AddCDCFile):
            return False
    return True
