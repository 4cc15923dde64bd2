"""CREATE, INSERT, UPDATE, DELETE and MERGE as sqlglot parses them, into statement values.

sqlglot (Databricks dialect) parses these statements; this module reads its trees into
:mod:`deltatx.delta_sql.statements` values, refusing by name what deltatx does not run.
"""

from __future__ import annotations

from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from deltatx.delta_sql.grammar import DIALECT, Token, position, table_ref
from deltatx.delta_sql.statements import (
    CreateTable,
    Delete,
    Insert,
    Merge,
    MergeAction,
    MergeWhen,
    Passthrough,
    Position,
    Statement,
    TableRef,
    Unsupported,
    Update,
)
from deltatx.errors import SqlError, UnsupportedStatementError

DELTA_PROVIDERS = frozenset({"delta", "deltatx"})


def from_sqlglot(body: str, head: str, tokens: list[Token]) -> Statement:
    """One CREATE/INSERT/UPDATE/DELETE/MERGE statement (``body``, already tokenized).

    Raises:
        SqlError: sqlglot cannot parse it; the message says where, in the user's words.
        UnsupportedStatementError: A construct deltatx does not run on a Delta table.
    """
    first = tokens[0]
    try:
        tree = sqlglot.parse_one(body, read=DIALECT)
    except ParseError as exc:
        err = exc.errors[0] if exc.errors else {}
        near = str(err.get("highlight") or "").strip()
        line = err.get("line")
        col = err.get("col")
        if isinstance(col, int) and near:
            col = max(1, col - len(near) + 1)
        near_text = f" near '{near}'" if near else ""
        raise SqlError(
            f"cannot parse the {head} statement{near_text}",
            line=line if isinstance(line, int) else None,
            column=col if isinstance(col, int) else None,
        ) from None
    except TokenError:
        raise SqlError(f"cannot read the {head} statement") from None
    if isinstance(tree, exp.Create):
        return _create(body, tree, first)
    if isinstance(tree, exp.Insert):
        return _insert(body, tree, first)
    if isinstance(tree, exp.Update):
        return _update(body, tree, first)
    if isinstance(tree, exp.Delete):
        return _delete(body, tree, first)
    if isinstance(tree, exp.Merge):
        return _merge(body, tree, first, [t for t in tokens if t.word == "WHEN"])
    return Passthrough(body)


def _node_position(body: str, node: exp.Expression, fallback: Token) -> Position:
    for sub in node.walk():
        start = sub.meta.get("start") if sub.meta else None
        if isinstance(start, int):
            return position(body, start)
    return position(body, fallback.start)


def _unsupported(
    body: str, node: exp.Expression, first: Token, context: str
) -> UnsupportedStatementError:
    shown = node.sql(dialect=DIALECT)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    pos = _node_position(body, node, first)
    return UnsupportedStatementError(
        f"deltatx does not run '{shown}' in {context}",
        construct=f"{context} ... {shown.split(' ')[0]}",
        line=pos.line,
        column=pos.column,
    )


def table_from_node(node: exp.Expression) -> TableRef | None:
    """The table a sqlglot Table node names, or None when it is not a plain table."""
    if not isinstance(node, exp.Table):
        return None
    parts: list[tuple[str, bool]] = []
    for key in ("catalog", "db", "this"):
        part = node.args.get(key)
        if isinstance(part, exp.Identifier):
            parts.append((part.this, bool(part.args.get("quoted"))))
        elif part is not None:
            return None
    alias = node.alias or None
    ref = table_ref(parts, alias=alias)
    version = node.args.get("version")
    if isinstance(version, exp.Version):
        value = version.expression
        kind = str(version.this).upper()
        if kind == "VERSION" and isinstance(value, exp.Literal) and not value.is_string:
            return TableRef(ref.path, ref.name, alias, version=int(value.this))
        if kind == "TIMESTAMP" and isinstance(value, exp.Literal) and value.is_string:
            return TableRef(ref.path, ref.name, alias, timestamp=value.this)
        return None
    return ref


def _sql(node: exp.Expression | None) -> str | None:
    return None if node is None else node.sql(dialect="spark")


def _plain(node: exp.Expression) -> str:
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    return node.sql(dialect=DIALECT)


def _create(body: str, tree: exp.Create, first: Token) -> Statement:
    if str(tree.args.get("kind") or "").upper() != "TABLE":
        return Passthrough(body)
    target = tree.this
    column_defs: list[exp.ColumnDef] = []
    if isinstance(target, exp.Schema):
        column_defs = [c for c in target.expressions if isinstance(c, exp.ColumnDef)]
        target = target.this
    table = table_from_node(target)
    if table is None:
        return Passthrough(body)
    provider: str | None = None
    partition_by: list[str] = []
    properties: dict[str, str] = {}
    location: str | None = None
    comment: str | None = None
    others: list[exp.Expression] = []
    props = tree.args.get("properties")
    for prop in props.expressions if isinstance(props, exp.Properties) else []:
        if isinstance(prop, exp.FileFormatProperty):
            provider = _plain(prop.this).lower()
        elif isinstance(prop, exp.PartitionedByProperty) and isinstance(prop.this, exp.Schema):
            for col in prop.this.expressions:
                if isinstance(col, exp.Identifier):
                    partition_by.append(col.this)
                else:
                    others.append(prop)
        elif isinstance(prop, exp.LocationProperty):
            location = _plain(prop.this)
        elif isinstance(prop, exp.SchemaCommentProperty):
            comment = _plain(prop.this)
        elif type(prop) is exp.Property:
            properties[_plain(prop.this)] = _plain(prop.args["value"])
        else:
            others.append(prop)
    if provider not in DELTA_PROVIDERS and not (provider is None and table.path is not None):
        if provider is None:
            return CreateTable(table, None, provider=None)
        return Passthrough(body)
    if others:
        raise _unsupported(body, others[0], first, "CREATE TABLE")
    generated: dict[str, str] = {}
    plain_defs = []
    for col in column_defs:
        kept = []
        for constraint in col.args.get("constraints") or []:
            kind = constraint.args.get("kind")
            if isinstance(kind, exp.ComputedColumnConstraint):
                generated[col.name] = kind.this.sql(dialect="spark")
                continue
            if not isinstance(kind, exp.NotNullColumnConstraint | exp.CommentColumnConstraint):
                raise _unsupported(body, constraint, first, "CREATE TABLE")
            kept.append(constraint)
        plain = col.copy()
        plain.set("constraints", kept)
        plain_defs.append(plain)
    columns = ", ".join(c.sql(dialect="spark") for c in plain_defs) or None
    query = (
        cast(exp.Expression, tree.expression) if isinstance(tree.expression, exp.Query) else None
    )
    return CreateTable(
        table,
        columns,
        partition_by=tuple(partition_by),
        properties=properties,
        location=location,
        comment=comment,
        query=query,
        generated_columns=generated,
        or_replace=bool(tree.args.get("replace")),
        if_not_exists=bool(tree.args.get("exists")),
        provider=provider,
    )


def _insert(body: str, tree: exp.Insert, first: Token) -> Statement:
    target = tree.this
    columns: tuple[str, ...] | None = None
    if isinstance(target, exp.Schema):
        columns = tuple(c.name for c in target.expressions)
        target = target.this
    table = table_from_node(target)
    if table is None:
        return Passthrough(body)
    for key in ("partition", "by_name", "ignore", "exists", "source"):
        value = tree.args.get(key) or (target.args.get(key) if key == "partition" else None)
        if value not in (None, False):
            construct = "PARTITION (...)" if key == "partition" else key.replace("_", " ").upper()
            pos = (
                _node_position(body, value, first)
                if isinstance(value, exp.Expression)
                else position(body, first.start)
            )
            return Unsupported(table, f"INSERT ... {construct}", pos)
    query = tree.expression
    if not isinstance(query, exp.Query | exp.Values):
        return Passthrough(body)
    where = tree.args.get("where")
    return Insert(
        table,
        cast(exp.Expression, query),
        columns=columns,
        overwrite=bool(tree.args.get("overwrite")),
        replace_where=_sql(where),
    )


def _assignments(
    body: str, pairs: list[exp.Expression], target: TableRef, first: Token, context: str
) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        if not isinstance(pair, exp.EQ) or not isinstance(pair.this, exp.Column):
            raise _unsupported(body, pair, first, context)
        out[_target_column(pair.this, target)] = pair.expression.sql(dialect="spark")
    return out


def _target_column(col: exp.Column, target: TableRef) -> str:
    parts = [p.name for p in col.parts]
    names = {n.lower() for n in (target.alias, target.short_name) if n}
    if len(parts) > 1 and parts[0].lower() in names:
        parts = parts[1:]
    return ".".join(parts)


def _update(body: str, tree: exp.Update, first: Token) -> Statement:
    table = table_from_node(tree.this)
    if table is None:
        return Passthrough(body)
    for key in ("from_", "from", "joins", "order", "limit", "returning"):
        value = tree.args.get(key)
        if value:
            node = value if isinstance(value, exp.Expression) else value[0]
            return Unsupported(
                table,
                f"UPDATE ... {node.sql(dialect=DIALECT).split(' ')[0]}",
                _node_position(body, node, first),
            )
    if not tree.expressions:
        pos = position(body, first.start)
        raise SqlError("UPDATE needs SET column = value", line=pos.line, column=pos.column)
    where = tree.args.get("where")
    return Update(
        table,
        {
            k: _unqualified(v, table)
            for k, v in _assignments(
                body, list(tree.expressions), table, first, "UPDATE ... SET"
            ).items()
        },
        _unqualified(where.this, table) if isinstance(where, exp.Where) else None,
    )


def _delete(body: str, tree: exp.Delete, first: Token) -> Statement:
    target = tree.this
    tables = tree.args.get("tables") or []
    if not isinstance(target, exp.Table) and len(tables) == 1:
        # ``DELETE t WHERE ...`` (no FROM), as Delta Lake's isolation-level documentation writes it.
        target = tables[0]
    table = table_from_node(target)
    if table is None:
        return Passthrough(body)
    for key in ("using", "limit", "returning"):
        value = tree.args.get(key)
        if value:
            node = value if isinstance(value, exp.Expression) else value[0]
            return Unsupported(
                table, f"DELETE ... {key.upper()}", _node_position(body, node, first)
            )
    where = tree.args.get("where")
    return Delete(table, _unqualified(where.this, table) if isinstance(where, exp.Where) else None)


def _unqualified(node: exp.Expression | str, table: TableRef) -> str:
    """Spark SQL text with the target's own qualifier (``t.`` in ``t.a``) removed.

    UPDATE and DELETE conditions run against the table's rows, which carry no alias.
    """
    tree = sqlglot.parse_one(node, read="spark") if isinstance(node, str) else node.copy()
    names = {n.lower() for n in (table.alias, table.short_name) if n}

    def strip(sub: exp.Expression) -> exp.Expression:
        if isinstance(sub, exp.Column) and sub.table and sub.table.lower() in names:
            return exp.column(sub.name, quoted=sub.this.args.get("quoted"))
        return sub

    return tree.transform(strip).sql(dialect="spark")


def _merge(body: str, tree: exp.Merge, first: Token, when_tokens: list[Token]) -> Statement:
    target = table_from_node(tree.this)
    if target is None:
        return Passthrough(body)
    using = tree.args.get("using")
    source_table: TableRef | None = None
    source_query: exp.Expression | None = None
    if isinstance(using, exp.Subquery):
        source_query = using.this
        source_alias: str | None = using.alias or None
    elif isinstance(using, exp.Table):
        source_table = table_from_node(using)
        if source_table is None:
            raise _unsupported(body, using, first, "MERGE ... USING")
        source_alias = source_table.short_name
    else:
        raise SqlError("MERGE needs USING <table or (subquery)>")
    on = tree.args.get("on")
    if on is None:
        raise SqlError("MERGE needs an ON condition")
    whens = tree.args.get("whens")
    clauses = tuple(
        _merge_when(body, w, target, when_tokens[i] if i < len(when_tokens) else first)
        for i, w in enumerate(whens.expressions if isinstance(whens, exp.Whens) else [])
    )
    if not clauses:
        raise SqlError("MERGE needs at least one WHEN clause")
    return Merge(
        target,
        on.sql(dialect="spark"),
        clauses,
        source_table=source_table,
        source_query=source_query,
        source_alias=source_alias,
    )


def _merge_when(body: str, when: exp.Expression, target: TableRef, first: Token) -> MergeWhen:
    matched = bool(when.args.get("matched"))
    by_source = bool(when.args.get("source"))
    then = when.args.get("then")
    condition = _sql(when.args.get("condition"))
    is_delete = isinstance(then, exp.Var) and str(then.this).upper() == "DELETE"
    if matched or by_source:
        kinds = (
            (MergeAction.MATCHED_UPDATE, MergeAction.MATCHED_DELETE)
            if matched
            else (
                MergeAction.NOT_MATCHED_BY_SOURCE_UPDATE,
                MergeAction.NOT_MATCHED_BY_SOURCE_DELETE,
            )
        )
        if is_delete:
            return MergeWhen(kinds[1], condition, None)
        if isinstance(then, exp.Update):
            if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
                if by_source:
                    pos = position(body, first.start)
                    raise UnsupportedStatementError(
                        "WHEN NOT MATCHED BY SOURCE ... UPDATE SET * is not allowed: there is no "
                        "source row to take the values from",
                        construct="WHEN NOT MATCHED BY SOURCE ... UPDATE SET *",
                        line=pos.line,
                        column=pos.column,
                    )
                return MergeWhen(kinds[0], condition, None)
            sets = _assignments(body, list(then.expressions), target, first, "MERGE ... UPDATE SET")
            return MergeWhen(kinds[0], condition, sets)
    elif isinstance(then, exp.Insert):
        if isinstance(then.this, exp.Star):
            return MergeWhen(MergeAction.NOT_MATCHED_INSERT, condition, None)
        cols = then.this.expressions if isinstance(then.this, exp.Tuple) else []
        values = then.expression.expressions if isinstance(then.expression, exp.Tuple) else []
        if not cols or len(cols) != len(values):
            raise SqlError(
                "MERGE ... INSERT needs as many VALUES as columns",
                line=_node_position(body, then, first).line,
                column=_node_position(body, then, first).column,
            )
        return MergeWhen(
            MergeAction.NOT_MATCHED_INSERT,
            condition,
            {
                _target_column(c, target) if isinstance(c, exp.Column) else c.name: v.sql(
                    dialect="spark"
                )
                for c, v in zip(cols, values, strict=True)
            },
        )
    context = (
        "WHEN MATCHED"
        if matched
        else ("WHEN NOT MATCHED BY SOURCE" if by_source else "WHEN NOT MATCHED")
    )
    kind = "DELETE" if is_delete else type(then).__name__.upper()
    construct = f"{context} ... THEN {kind}"
    pos = position(body, first.start)
    raise UnsupportedStatementError(
        f"MERGE does not allow {construct}: matched rows may be updated or deleted, rows "
        f"only in the source inserted, rows only in the target updated or deleted",
        construct=construct,
        line=pos.line,
        column=pos.column,
    )


__all__ = ["DELTA_PROVIDERS", "from_sqlglot", "table_from_node"]
