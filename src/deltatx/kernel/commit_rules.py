"""The protocol rules a commit must satisfy, as pure functions of what is known about it.

Every write path ends in :func:`check_commit` (the log's commit loop calls it before the first
attempt), so no command and no transaction staged through the log API can bypass a rule. Where
a violation is knowable before any data file is written (an unsupported writer feature, a
delete on an append-only table), commands call :func:`check_allowed` first, so a refused
command leaves no orphan files behind.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from urllib.parse import unquote

from deltatx.errors import (
    AppendOnlyViolationError,
    InvalidArgumentError,
    InvalidTableError,
    UnsupportedFeatureError,
)
from deltatx.kernel.actions import Action, AddCDCFile, AddFile, RemoveFile, SetTransaction
from deltatx.kernel.column_mapping import FEATURE as COLUMN_MAPPING
from deltatx.kernel.column_mapping import MODE_KEY, ColumnMappingMode, check_mapping
from deltatx.kernel.deletion_vectors import check_descriptor, dv_relative_path
from deltatx.kernel.file_paths import relative_to, resolve, scheme_of
from deltatx.kernel.log_paths import LOG_DIR
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.table_configuration import TableConfiguration


def check_allowed(
    configuration: TableConfiguration,
    operation: OperationName,
    *,
    deletes_rows: bool,
    table: str = "the table",
) -> None:
    """Refuses, before any file is written, a command the table's configuration forbids.

    Args:
        configuration: The table's configuration (with the transaction's staged changes).
        operation: The command about to run.
        deletes_rows: It will remove or delete existing rows.
        table: Names the table in messages.

    Raises:
        UnsupportedFeatureError: The table needs a writer feature deltatx does not support.
        AppendOnlyViolationError: The table is append-only and the command deletes rows.
    """
    configuration.check_writable()
    if deletes_rows and configuration.append_only:
        raise _append_only(operation, table)


def check_commit(
    configuration: TableConfiguration,
    actions: Sequence[Action],
    operation: Operation,
    *,
    table_root: str | None,
    constraints_checked: Collection[str] = frozenset(),
    structure: bool = False,
) -> None:
    """Checks the protocol rules of one commit; the last gate before it is published.

    Args:
        configuration: The configuration the commit leaves in force (its own metadata and
            protocol, else the read snapshot's).
        actions: The actions to commit (commitInfo aside).
        operation: What the commit does (named in messages).
        table_root: The canonical table root; when given, every file path must lie below it.
        constraints_checked: Paths of added files whose rows were checked against the
            table's invariants and CHECK constraints when they were written.
        structure: Also check the commit's structure (:func:`check_structure`), after the
            rules above, in the same pass over the actions.

    Raises:
        UnsupportedFeatureError: An unsupported writer feature is in use, or a file whose rows
            were not checked is added to a table with constraints.
        AppendOnlyViolationError: Rows of an append-only table would be removed or deleted.
        InvalidArgumentError: A path leaves the table root, a deletion vector descriptor is
            invalid, the commit uses deletion vectors that the protocol does not name, or
            (with ``structure``) its structure is not valid.
    """
    configuration.check_writable()
    # One pass over what may be thousands of actions, then one regular-expression match for
    # all their paths (see check_data_paths). The structure is only suspected here, cheaply
    # (an add whose partition values differ, fewer distinct keys than adds, any remove or
    # txn); check_structure finds and names the fault after the rules, as before.
    partition_columns = set(configuration.physical_partition_columns)
    width = len(partition_columns)
    # With one partition column (the usual case) one key that is its name is the same test as
    # comparing the keys with the set, in fewer steps: it runs for every added file.
    only = next(iter(partition_columns)) if width == 1 else None
    # A file's key is its path, or (path, vector id) when it has a deletion vector.
    plain: list[str] = []
    plain_key = plain.append
    with_dvs: list[tuple[str, str]] = []
    suspect = False
    for a in actions:
        if isinstance(a, AddFile):
            dv = a.deletion_vector
            if dv is None:
                plain_key(a.path)
            else:
                if table_root is not None:
                    check_deletion_vector(a, root=table_root)
                with_dvs.append((a.path, dv.unique_id))
            values = a.partition_values
            # Anything but a dict is left to check_structure, to fail there as it always did.
            if (
                type(values) is not dict
                or len(values) != width
                or (only is not None and only not in values)
                or (width > 1 and values.keys() != partition_columns)
            ):
                suspect = True
        elif isinstance(a, AddCDCFile):
            if table_root is not None:
                check_data_path(a.path, root=table_root, what="cdc")
        elif isinstance(a, RemoveFile | SetTransaction):
            # Rare in bulk: the exact check runs whenever a commit has any.
            suspect = True
    if table_root is not None:
        check_data_paths(plain + [p for p, _ in with_dvs], root=table_root)
    _check_features_used(configuration, with_dvs[0][0] if with_dvs else None)
    if configuration.append_only:
        removes = [a for a in actions if isinstance(a, RemoveFile)]
        _check_append_only(configuration, _adds(actions), removes, operation)
    if configuration.has_constraints:
        # Re-adding a file under a new deletion vector adds no row; only new files must hold.
        replaced = {a.path for a in actions if isinstance(a, RemoveFile)}
        for add in _adds(actions):
            if add.data_change and add.path not in replaced and add.path not in constraints_checked:
                configuration.check_constraints_enforceable(add.path)
    if structure and (
        suspect or len(set(plain)) != len(plain) or len(set(with_dvs)) != len(with_dvs)
    ):
        check_structure(configuration, actions)


def check_structure(configuration: TableConfiguration, actions: Sequence[Action]) -> None:
    """Checks the structural rules of one commit's file and transaction actions.

    Every add's partition values name exactly the table's partition columns (physical
    names); no file (path and deletion vector) is added twice or removed twice; no
    application id has two ``txn`` actions.

    Raises:
        InvalidArgumentError: The first action that breaks a rule, named.
    """
    partition_columns = set(configuration.physical_partition_columns)
    seen_adds: set[tuple[str, str | None]] = set()
    seen_removes: set[tuple[str, str | None]] = set()
    apps: set[str] = set()
    for a in actions:
        if isinstance(a, AddFile):
            if a.partition_values.keys() != partition_columns:
                raise InvalidArgumentError(
                    f"add {a.path}: partition values {sorted(a.partition_values)} do not match "
                    f"the table's partition columns {sorted(partition_columns)}"
                )
            key = (a.path, a.dv_id)
            if key in seen_adds:
                raise InvalidArgumentError(f"add {a.path} appears twice in one commit")
            seen_adds.add(key)
        elif isinstance(a, RemoveFile):
            key = (a.path, a.dv_id)
            if key in seen_removes:
                raise InvalidArgumentError(f"remove {a.path} appears twice in one commit")
            seen_removes.add(key)
        elif isinstance(a, SetTransaction):
            if a.app_id in apps:
                raise InvalidArgumentError(f"app id {a.app_id!r} appears twice in one commit")
            apps.add(a.app_id)


def _adds(actions: Sequence[Action]) -> list[AddFile]:
    return [a for a in actions if isinstance(a, AddFile)]


def _check_features_used(configuration: TableConfiguration, with_dv: str | None) -> None:
    """``with_dv``: the path of the first added file with a deletion vector, if any."""
    _check_column_mapping(configuration)
    if with_dv is not None and "deletionVectors" not in configuration.writer_features:
        raise InvalidArgumentError(
            f"add {with_dv!r} carries a deletion vector, but the table's protocol does not "
            "name the 'deletionVectors' writer feature; enable delta.enableDeletionVectors in a "
            "commit of its own first. Nothing was committed."
        )


def _check_append_only(
    configuration: TableConfiguration,
    adds: Sequence[AddFile],
    removes: Sequence[RemoveFile],
    operation: Operation,
) -> None:
    if not configuration.append_only:
        return
    removed = {r.path for r in removes if r.data_change}
    if removed:
        marked = next(
            (a for a in adds if a.deletion_vector is not None and a.path in removed), None
        )
        if marked is not None:
            what = f"marks rows of {marked.path!r} deleted with a deletion vector"
        else:
            what = f"removes {sorted(removed)[0]!r} with dataChange=true"
        raise AppendOnlyViolationError(
            f"the table is append-only (delta.appendOnly=true) and this "
            f"{operation.name.value} commit {what}; only appends are allowed. "
            "Nothing was committed."
        )


def _append_only(operation: OperationName, table: str) -> AppendOnlyViolationError:
    return AppendOnlyViolationError(
        f"{table} is append-only (delta.appendOnly=true); {operation.value} would delete or "
        "replace rows, so it is refused. Nothing was written."
    )


# A relative path of segments of name characters with inner dots only, the first not the log
# directory, has no scheme, needs no decoding, has no "." or ".." segment and is not in
# _delta_log: it is a valid data file path as written. Most paths a writer produces are of this
# form; the others take the full resolution below. The test runs for every added file of every
# commit, so it is made of whole-string operations in C: each character is mapped to its class
# ("a" a name character, "." a separator: dot, slash or the newline that joins paths, "x"
# anything else), and the form holds when no "x" appears and no two separators touch (an empty
# segment, a segment that starts or ends with a dot).
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=-")
_CHARACTER_CLASSES = bytes(
    ord("a") if chr(c) in _NAME_CHARS else ord(".") if chr(c) in "./\n" else ord("x")
    for c in range(256)
)
_IN_LOG = f"\n{LOG_DIR}/"
_LOG_ITSELF = f"\n{LOG_DIR}\n"


def _all_plain(paths: Sequence[str]) -> bool:
    """Whether every one of ``paths`` is of the plain form.

    A path holding a newline counts as the paths it joins.
    """
    lines = "\n" + "\n".join(paths) + "\n"
    if not lines.isascii():
        return False
    classes = lines.encode("ascii").translate(_CHARACTER_CLASSES)
    return (
        b"x" not in classes
        and b".." not in classes
        and _IN_LOG not in lines
        and _LOG_ITSELF not in lines
    )


def _plain(path: str) -> bool:
    """Whether ``path`` alone is of the plain form."""
    return "\n" not in path and _all_plain((path,))


def check_data_paths(paths: Sequence[str], *, root: str, what: str = "add") -> None:
    """:func:`check_data_path` for each path, with one match when all are of the plain form.

    Raises:
        InvalidArgumentError: A path escapes the root; the message names the first one.
    """
    if not paths:
        return
    # A path with a newline is split here, and passes only if every piece is plain; the full
    # check accepts such a path as well (none of its segments is empty, ".", ".." or the log).
    if _all_plain(paths):
        return
    for path in paths:
        check_data_path(path, root=root, what=what)


def check_data_path(path: str, *, root: str, what: str = "add") -> None:
    """Refuses a file path that would point outside the table root.

    A relative path (the normal case) is percent-decoded, as readers decode it, and must stay
    below the root after normalisation (``../x``, ``%2e%2e%2fx`` and ``sub/../../x`` climb
    out). An absolute path or ``file:`` URI is accepted when it lies under the root; a URI of
    another store is refused because the table lives on the local filesystem. A data file
    never lives in ``_delta_log``. Without this a commit could make VACUUM, a DELETE or a
    reader act on ``../x`` or ``/etc/passwd``.

    Raises:
        InvalidArgumentError: The path escapes the root; the message names it.
    """
    if _plain(path):
        return
    decoded = unquote(path)
    bad = f"{what} {path!r}"
    if not decoded or "\x00" in decoded:
        raise InvalidArgumentError(f"{bad}: a data file path must be a non-empty file name")
    scheme = scheme_of(decoded)
    if scheme is not None and scheme != "file":
        raise InvalidArgumentError(
            f"{bad}: only relative paths or file: URIs under the table root {root} are allowed"
        )
    try:
        location = resolve(path, root=root)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{bad}: {exc}") from None
    relative = relative_to(location, root=root)
    if relative is None:
        if scheme is None and not decoded.startswith("/"):
            raise InvalidArgumentError(
                f"{bad}: the path escapes the table root {root} (it resolves to {location!r})"
            )
        raise InvalidArgumentError(f"{bad}: the path is outside the table root {root}")
    if relative.split("/", 1)[0] == LOG_DIR:
        raise InvalidArgumentError(f"{bad}: a data file cannot live in {LOG_DIR}")


def check_deletion_vector(add: AddFile, *, root: str) -> None:
    """Refuses an invalid deletion vector descriptor on an add being committed.

    Raises:
        InvalidArgumentError: The descriptor is malformed or its file is outside the root.
    """
    dv = add.deletion_vector
    if dv is None:
        return
    where = f"add {add.path!r}"
    check_descriptor(dv, where, error=InvalidArgumentError)
    if dv.storage_type == "u":
        try:
            relative = dv_relative_path(dv.path_or_inline_dv)
        except (InvalidTableError, ValueError) as exc:
            raise InvalidArgumentError(
                f"{where}: deletion vector is not a valid descriptor: {exc}"
            ) from None
        check_data_path(relative, root=root, what=f"{where}: deletion vector file")
    elif dv.storage_type == "p":
        check_data_path(dv.path_or_inline_dv, root=root, what=f"{where}: deletion vector file")


def _check_column_mapping(configuration: TableConfiguration) -> None:
    mode = configuration.column_mapping_mode
    if not isinstance(mode, ColumnMappingMode):
        raise UnsupportedFeatureError(
            f"the table sets {MODE_KEY}={mode!r}; deltatx knows the modes "
            f"{', '.join(m.value for m in ColumnMappingMode)} and cannot write this table",
            feature=COLUMN_MAPPING,
        )
    if not configuration.column_mapping:
        return
    if COLUMN_MAPPING not in configuration.writer_features:
        raise InvalidArgumentError(
            f"the table sets {MODE_KEY}={mode.value!r}, but its protocol does not name the "
            f"'{COLUMN_MAPPING}' feature (reader version 2 and writer version 5, or the feature "
            "by name); other engines would read physical names as columns"
        )
    check_mapping(configuration.schema, configuration.metadata.configuration)
