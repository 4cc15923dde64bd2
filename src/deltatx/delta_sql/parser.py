"""Delta SQL text into :mod:`deltatx.delta_sql.statements` values; no Spark needed.

CREATE, INSERT, UPDATE, DELETE, MERGE and queries are parsed by sqlglot (Databricks dialect);
the Delta-only heads (OPTIMIZE, REORG, VACUUM, RESTORE, DESCRIBE HISTORY/DETAIL, ALTER TABLE
actions) by :mod:`deltatx.delta_sql.grammar`. Every other statement is Spark's, passed through.
"""

from __future__ import annotations

from typing import cast

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.errors import ParseError, TokenError

from deltatx.delta_sql.grammar import DIALECT, Cursor, Token, position, tokenize
from deltatx.delta_sql.statements import (
    AddColumns,
    AddConstraint,
    DescribeDetail,
    DescribeHistory,
    DropColumns,
    DropConstraint,
    DropFeature,
    DropTable,
    Optimize,
    Passthrough,
    Query,
    RenameColumn,
    ReorgPurge,
    Restore,
    SetProperties,
    Statement,
    UnsetProperties,
    Unsupported,
    Vacuum,
)
from deltatx.delta_sql.translation import DELTA_PROVIDERS, from_sqlglot, table_from_node
from deltatx.errors import SqlError

_QUERY_HEADS = frozenset({"SELECT", "WITH", "VALUES", "FROM", "TABLE"})


def parse_statement(text: str) -> Statement:
    """Parses one statement (a trailing semicolon is allowed).

    Raises:
        SqlError: The statement is empty, holds several statements, or does not parse.
        UnsupportedStatementError: A Delta statement uses a construct deltatx does not run.
    """
    tokens = tokenize(text)
    while tokens and tokens[-1].kind is TokenType.SEMICOLON:
        tokens.pop()
    if not tokens:
        raise SqlError("the statement is empty")
    for tok in tokens:
        if tok.kind is TokenType.SEMICOLON:
            pos = position(text, tok.start)
            raise SqlError(
                "send one statement at a time; a ';' ends this one",
                line=pos.line,
                column=pos.column,
            )
    body = text[: tokens[-1].end + 1]
    cur = Cursor(body, tokens)
    head = [t.word for t in tokens[:2]] + [None, None]
    first, second = head[0], head[1]
    if first == "OPTIMIZE":
        return _optimize(cur)
    if first == "REORG":
        return _reorg(cur)
    if first == "VACUUM":
        return _vacuum(cur)
    if first == "RESTORE":
        return _restore(cur)
    if first in ("DESCRIBE", "DESC") and second in ("HISTORY", "DETAIL"):
        return _describe(cur)
    if first == "ALTER" and second == "TABLE":
        return _alter(cur)
    if first == "DROP" and second == "TABLE":
        return _drop(cur)
    if first == "REPLACE" and second == "TABLE":
        cur.next()
        cur.next()
        table = cur.table("REPLACE TABLE")
        return Unsupported(
            table, "REPLACE TABLE (use CREATE OR REPLACE TABLE)", cur.where(tokens[0])
        )
    if first in ("CREATE", "INSERT", "UPDATE", "DELETE", "MERGE"):
        return from_sqlglot(body, first, tokens)
    if first in _QUERY_HEADS or tokens[0].kind is TokenType.L_PAREN:
        try:
            tree = sqlglot.parse_one(body, read=DIALECT)
        except (ParseError, TokenError):
            return Passthrough(body)
        if isinstance(tree, exp.Query):
            return Query(cast(exp.Expression, tree))
    return Passthrough(body)


# --- Delta-only heads, read by the small grammar ------------------------------------------


def _drop(cur: Cursor) -> DropTable:
    cur.expect("DROP", "TABLE", context="DROP TABLE")
    if_exists = cur.accept("IF", "EXISTS")
    table = cur.table("DROP TABLE")
    cur.accept("PURGE")
    cur.finish("DROP TABLE")
    return DropTable(table, if_exists)


def _optimize(cur: Cursor) -> Optimize:
    cur.expect("OPTIMIZE", context="OPTIMIZE")
    table = cur.table("OPTIMIZE")
    where = cur.condition("ZORDER") if cur.accept("WHERE") else None
    columns: tuple[str, ...] = ()
    if cur.accept("ZORDER", "BY"):
        columns = _column_list(cur, "ZORDER BY")
    cur.finish("OPTIMIZE")
    return Optimize(table, where, columns)


def _column_list(cur: Cursor, context: str) -> tuple[str, ...]:
    tok = cur.peek()
    if tok is not None and tok.kind is TokenType.L_PAREN:
        items = cur.parenthesized(context)
        return tuple(_column_name(cur, item, context) for item in items)
    names = [".".join(p for p, _ in cur.dotted_name(context))]
    while cur.accept_kind(TokenType.COMMA):
        names.append(".".join(p for p, _ in cur.dotted_name(context)))
    return tuple(names)


def _column_name(cur: Cursor, item: list[Token], context: str) -> str:
    parts = [t.text for t in item if t.kind is not TokenType.DOT]
    if any(
        t.kind is not TokenType.DOT and t.kind is not TokenType.IDENTIFIER and t.word is None
        for t in item
    ):
        raise cur.error(f"expected a column name in {context}", item[0])
    return ".".join(parts)


def _reorg(cur: Cursor) -> ReorgPurge:
    cur.expect("REORG", "TABLE", context="REORG TABLE")
    table = cur.table("REORG TABLE")
    where = cur.condition("APPLY") if cur.accept("WHERE") else None
    cur.expect("APPLY", context="REORG TABLE")
    start = cur.peek()
    items = cur.parenthesized("REORG TABLE ... APPLY")
    if len(items) != 1 or [t.word for t in items[0]] != ["PURGE"]:
        shown = cur.source(items[0])
        raise cur.unsupported(
            f"REORG TABLE ... APPLY ({shown}) is not supported: deltatx runs only "
            f"APPLY (PURGE); it does not write Iceberg metadata (UniForm)",
            f"REORG TABLE ... APPLY ({items[0][0].text})",
            start,
        )
    cur.finish("REORG TABLE")
    return ReorgPurge(table, where)


def _vacuum(cur: Cursor) -> Vacuum:
    cur.expect("VACUUM", context="VACUUM")
    table = cur.table("VACUUM")
    hours: float | None = None
    if cur.accept("RETAIN"):
        tok = cur.expect_kind(TokenType.NUMBER, "a number of hours", "VACUUM ... RETAIN")
        hours = float(tok.text)
        cur.expect("HOURS", context="VACUUM ... RETAIN")
    dry_run = cur.accept("DRY", "RUN")
    cur.finish("VACUUM")
    return Vacuum(table, hours, dry_run)


def _restore(cur: Cursor) -> Restore:
    cur.expect("RESTORE", context="RESTORE")
    cur.accept("TABLE")
    table = cur.table("RESTORE")
    cur.accept("TO")
    if cur.accept("VERSION", "AS", "OF"):
        tok = cur.expect_kind(TokenType.NUMBER, "a version number", "RESTORE")
        if not tok.text.isdigit():
            raise cur.error(f"a version is a whole number, not {tok.text}", tok)
        cur.finish("RESTORE")
        return Restore(table, version=int(tok.text))
    if cur.accept("TIMESTAMP", "AS", "OF"):
        tok = cur.expect_kind(TokenType.STRING, "a timestamp string", "RESTORE")
        cur.finish("RESTORE")
        return Restore(table, timestamp=tok.text)
    raise cur.error("expected VERSION AS OF or TIMESTAMP AS OF in RESTORE")


def _describe(cur: Cursor) -> DescribeHistory | DescribeDetail:
    cur.next()
    if cur.accept("DETAIL"):
        table = cur.table("DESCRIBE DETAIL")
        cur.finish("DESCRIBE DETAIL")
        return DescribeDetail(table)
    cur.expect("HISTORY", context="DESCRIBE HISTORY")
    table = cur.table("DESCRIBE HISTORY")
    limit: int | None = None
    if cur.accept("LIMIT"):
        tok = cur.expect_kind(TokenType.NUMBER, "a number of rows", "DESCRIBE HISTORY ... LIMIT")
        if not tok.text.isdigit():
            raise cur.error(f"LIMIT takes a whole number, not {tok.text}", tok)
        limit = int(tok.text)
    cur.finish("DESCRIBE HISTORY")
    return DescribeHistory(table, limit)


def _alter(
    cur: Cursor,
) -> (
    SetProperties
    | UnsetProperties
    | AddColumns
    | RenameColumn
    | DropColumns
    | AddConstraint
    | DropConstraint
    | DropFeature
    | Unsupported
):
    cur.expect("ALTER", "TABLE", context="ALTER TABLE")
    table = cur.table("ALTER TABLE")
    action = cur.peek()
    if cur.accept("SET", "TBLPROPERTIES"):
        props = _properties(cur)
        cur.finish("ALTER TABLE ... SET TBLPROPERTIES")
        return SetProperties(table, props)
    if cur.accept("UNSET", "TBLPROPERTIES"):
        if_exists = cur.accept("IF", "EXISTS")
        keys = tuple(_property_key(cur, item) for item in cur.parenthesized("UNSET TBLPROPERTIES"))
        cur.finish("ALTER TABLE ... UNSET TBLPROPERTIES")
        return UnsetProperties(table, keys, if_exists)
    if cur.accept("ADD", "COLUMNS") or cur.accept("ADD", "COLUMN"):
        tok = cur.peek()
        if tok is not None and tok.kind is TokenType.L_PAREN:
            items = cur.parenthesized("ADD COLUMNS")
            ddl = ", ".join(cur.source(item) for item in items)
        elif tok is not None:
            ddl = cur.text[tok.start :].strip()
            cur.index = len(cur.tokens)
        else:
            raise cur.error("expected column definitions after ADD COLUMNS")
        cur.finish("ALTER TABLE ... ADD COLUMNS")
        return AddColumns(table, ddl)
    if cur.accept("RENAME", "COLUMN"):
        old = _top_level_column(cur, "RENAME COLUMN")
        cur.expect("TO", context="ALTER TABLE ... RENAME COLUMN")
        new = _top_level_column(cur, "RENAME COLUMN ... TO")
        cur.finish("ALTER TABLE ... RENAME COLUMN")
        return RenameColumn(table, old, new)
    if cur.accept("DROP", "COLUMNS") or cur.accept("DROP", "COLUMN"):
        if_exists = cur.accept("IF", "EXISTS")
        tok = cur.peek()
        if tok is not None and tok.kind is TokenType.L_PAREN:
            names = []
            for item in cur.parenthesized("DROP COLUMNS"):
                sub = Cursor(cur.text, item)
                names.append(_top_level_column(sub, "DROP COLUMNS"))
                sub.finish("DROP COLUMNS")
        else:
            names = [_top_level_column(cur, "DROP COLUMNS")]
            while cur.accept_kind(TokenType.COMMA):
                names.append(_top_level_column(cur, "DROP COLUMNS"))
        cur.finish("ALTER TABLE ... DROP COLUMNS")
        return DropColumns(table, tuple(names), if_exists)
    if cur.accept("ADD", "CONSTRAINT"):
        name, _ = cur.name_part("ALTER TABLE ... ADD CONSTRAINT")
        cur.expect("CHECK", context="ALTER TABLE ... ADD CONSTRAINT")
        items = cur.parenthesized("CHECK")
        if len(items) != 1 or not items[0]:
            raise cur.error("expected one boolean expression in CHECK (...)")
        expression = cur.source(items[0])
        cur.finish("ALTER TABLE ... ADD CONSTRAINT")
        return AddConstraint(table, name, expression)
    if cur.accept("DROP", "CONSTRAINT"):
        if_exists = cur.accept("IF", "EXISTS")
        name, _ = cur.name_part("ALTER TABLE ... DROP CONSTRAINT")
        cur.finish("ALTER TABLE ... DROP CONSTRAINT")
        return DropConstraint(table, name, if_exists)
    if cur.accept("DROP", "FEATURE"):
        tok = cur.next()
        if (
            tok.kind is not TokenType.STRING
            and tok.kind is not TokenType.IDENTIFIER
            and tok.word is None
        ):
            raise cur.error("expected a feature name after DROP FEATURE", tok)
        truncate = cur.accept("TRUNCATE", "HISTORY")
        cur.finish("ALTER TABLE ... DROP FEATURE")
        return DropFeature(table, tok.text, truncate)
    words = [t.text.upper() for t in cur.tokens[cur.index : cur.index + 2] if t.word]
    construct = "ALTER TABLE ... " + " ".join(words) if words else "ALTER TABLE"
    return Unsupported(table, construct, cur.where(action))


def _top_level_column(cur: Cursor, context: str) -> str:
    start = cur.peek()
    parts = cur.dotted_name(context)
    if len(parts) > 1:
        raise cur.unsupported(
            f"deltatx renames and drops top-level columns only, not nested field "
            f"'{'.'.join(p for p, _ in parts)}'",
            f"ALTER TABLE ... {context} <nested field>",
            start,
        )
    return parts[0][0]


def _properties(cur: Cursor) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in cur.parenthesized("TBLPROPERTIES"):
        eq = next((i for i, t in enumerate(item) if t.kind is TokenType.EQ), None)
        if eq is None:
            if len(item) == 2:
                eq_key, value_tokens = item[:1], item[1:]
            else:
                raise cur.error("expected 'key' = value in TBLPROPERTIES", item[0])
        else:
            eq_key, value_tokens = item[:eq], item[eq + 1 :]
        if not eq_key or not value_tokens:
            raise cur.error("expected 'key' = value in TBLPROPERTIES", item[0])
        key = _property_key(cur, eq_key)
        if len(value_tokens) == 1 and value_tokens[0].kind is TokenType.STRING:
            value = value_tokens[0].text
        else:
            value = cur.source(value_tokens)
            if value.lower() in ("true", "false"):
                value = value.lower()
            elif value_tokens[0].kind not in (TokenType.NUMBER, TokenType.DASH):
                raise cur.error(
                    f"a property value is a string, number or boolean, not {value}",
                    value_tokens[0],
                )
        out[key] = value
    return out


def _property_key(cur: Cursor, item: list[Token]) -> str:
    if len(item) == 1 and item[0].kind is TokenType.STRING:
        return item[0].text
    if all(
        t.kind is TokenType.DOT or t.word is not None or t.kind is TokenType.IDENTIFIER
        for t in item
    ):
        return "".join(t.text for t in item)
    raise cur.error("expected a property key", item[0])


__all__ = ["DELTA_PROVIDERS", "parse_statement", "table_from_node"]
