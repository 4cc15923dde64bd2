"""Spark SQL conditions (strings or Columns) translated into the predicate IR with sqlglot.

What the IR can express (comparisons, IN, IS [NOT] NULL, BETWEEN, AND/OR/NOT, literals,
column references and ``+``, ``-``, ``*``, ``%`` over them) is translated exactly; anything
else (functions, division, subqueries, ``rand()``) becomes
:class:`~deltatx.kernel.expressions.Opaque`, which every evaluator treats as "may be true".
pyspark is imported only when a Column is passed.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from deltatx.errors import InvalidConditionError
from deltatx.kernel.expressions import (
    Arithmetic,
    ArithmeticOp,
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Not,
    Opaque,
    and_,
    or_,
)
from deltatx.kernel.schema import StructType, is_complex
from deltatx.spark.condition_syntax import syntax_error

if TYPE_CHECKING:
    import pyspark.sql

_COMPARISONS: dict[type[exp.Expression], ComparisonOp] = {
    exp.EQ: ComparisonOp.EQ,
    exp.NEQ: ComparisonOp.NE,
    exp.LT: ComparisonOp.LT,
    exp.LTE: ComparisonOp.LE,
    exp.GT: ComparisonOp.GT,
    exp.GTE: ComparisonOp.GE,
    exp.NullSafeEQ: ComparisonOp.NULL_SAFE_EQ,
}
ARITHMETIC_OPERATORS: dict[type[exp.Expression], ArithmeticOp] = {
    exp.Add: ArithmeticOp.ADD,
    exp.Sub: ArithmeticOp.SUBTRACT,
    exp.Mul: ArithmeticOp.MULTIPLY,
    exp.Mod: ArithmeticOp.REMAINDER,
}
"""sqlglot's node for each operator of :class:`~deltatx.kernel.expressions.Arithmetic`."""
# The one list of non-deterministic functions: Spark's ``Nondeterministic`` expressions (a
# value that differs between evaluations of the same row, with or without a seed argument).
# Delta Lake's isolation-level documentation lists conditions that use them among the
# limitations of row-level concurrency. ``current_timestamp()``/``now()`` are not in it: Spark
# folds them to one constant per query.
NON_DETERMINISTIC_FUNCTIONS = frozenset(
    {
        "rand",
        "randn",
        "random",
        "uniform",
        "randstr",
        "uuid",
        "shuffle",
        "reflect",
        "java_method",
        "try_reflect",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
    }
)
_COLUMN_TEXT = re.compile(r"^Column<'(.*)'>$", re.DOTALL)
_INT = re.compile(r"^[0-9]+$")
_STATEMENTS = (exp.Query, exp.DDL, exp.DML, exp.Command, exp.Alias)


@lru_cache(maxsize=512)
def parse_spark_sql(text: str) -> tuple[exp.Expression, ...]:
    """The statements of ``text`` as read by Spark's dialect; each text is parsed once.

    A DML statement reads its condition several times (file skipping, re-execution safety,
    row-level conflict tracking), and pipelines repeat statements: parsing costs more than
    the rest of the driver's planning, so trees are shared and callers never change them.

    Raises:
        ParseError: The text is not valid SQL.
        TokenError: The text does not tokenize.
    """
    # sqlglot 30 annotates parse with its base class Expr; the nodes are Expressions.
    trees = sqlglot.parse(text, read="spark")
    return tuple(cast(exp.Expression, t) for t in trees if t is not None)


def column_sql_text(text: str) -> str:
    """The SQL inside a PySpark Column's string form (``Column<'(id = 1)'>`` -> ``(id = 1)``)."""
    m = _COLUMN_TEXT.match(text.strip())
    return m.group(1) if m else text


def parse_condition(
    condition: str | pyspark.sql.Column,
    *,
    schema: StructType,
    aliases: Collection[str] = (),
) -> Expression:
    """Translates a Spark SQL condition into the predicate IR.

    Args:
        condition: A SQL boolean expression, or a pyspark Column (its SQL text is parsed; a
            Column whose text cannot be translated becomes one Opaque node, i.e. a read of
            everything, because PySpark's rendering of literals is not always valid SQL).
        schema: The table schema; every unqualified column must be one of its fields.
        aliases: Names the table is known by in the condition (``t`` in ``t.date``); a column
            with another qualifier (a MERGE source column) is kept as Opaque.

    Returns:
        The predicate.

    Raises:
        InvalidConditionError: The condition does not parse, or names a column the table does
            not have (the message lists the table's columns).
    """
    if isinstance(condition, str):
        return _Translator(condition, schema, aliases).translate_all()
    from pyspark.sql import Column as SparkColumn  # only here: the kernel path stays Spark-free

    if not isinstance(condition, SparkColumn):
        raise InvalidConditionError(
            f"a condition must be a SQL string or a pyspark Column, not {type(condition).__name__}"
        )
    text = column_sql_text(str(condition))
    try:
        return _Translator(text, schema, aliases).translate_all()
    except InvalidConditionError:
        return Opaque(text)


def merge_target_predicate(
    condition: str, *, schema: StructType, target_alias: str, source_alias: str
) -> Expression:
    """The part of a MERGE ON condition that filters the target alone.

    The documents' MERGE example: in ``s.user_id = t.user_id AND s.date = t.date AND t.date =
    '2024-01-01'`` only ``t.date = '2024-01-01'`` restricts which target rows are read, so
    it is the predicate the MERGE records. Conjuncts that touch the source, are
    non-deterministic or hold a subquery are dropped, which only widens the read.

    Args:
        condition: The ON condition.
        schema: The target table's schema.
        target_alias: The target's alias (``t``).
        source_alias: The source's alias (``s``).

    Returns:
        The AND of the target-only conjuncts, or ``TRUE`` when there is none.

    Raises:
        InvalidConditionError: The condition does not parse, or a target-qualified column
            does not exist.
    """
    tr = _Translator(condition, schema, (target_alias,))
    tree = tr.parse()
    tr.validate(tree)
    target, source = target_alias.lower(), source_alias.lower()
    kept: list[Expression] = []
    for conj in _conjuncts(tree):
        if any(isinstance(n, exp.Query) for n in conj.walk()):
            continue
        if all(_is_target_column(c, schema, target, source) for c in _columns(conj)):
            translated = tr.translate(conj)
            if not _has_non_deterministic(conj):
                kept.append(translated)
    return and_(*kept)


def merge_key_pairs(
    condition: str, *, schema: StructType, target_alias: str
) -> list[tuple[str, str]]:
    """The ``target.column = source.column`` conjuncts of a MERGE ON condition.

    Only a matched source row's key can equal a target row's, so the range of the source's
    keys bounds which target rows the MERGE can touch.

    Returns:
        (target column as the schema spells it, source column as Spark SQL) per conjunct.

    Raises:
        InvalidConditionError: The condition does not parse.
    """
    tree = _Translator(condition, schema, (target_alias,)).parse()
    pairs: list[tuple[str, str]] = []
    for conj in _conjuncts(tree):
        found = _key_pair(conj, schema, target_alias.lower())
        if found is not None:
            pairs.append((found[0], found[1].sql(dialect="spark")))
    return pairs


def merge_equi_keys(
    condition: str, *, schema: StructType, target_alias: str
) -> list[tuple[str, str, str]] | None:
    """The key pairs of a MERGE ON condition made of ``target.column = source.column`` alone.

    Returns:
        (target column as the schema spells it, source qualifier, source column) per
        conjunct, or None when some conjunct is anything else (or a column is nested).

    Raises:
        InvalidConditionError: The condition does not parse.
    """
    tree = _Translator(condition, schema, (target_alias,)).parse()
    pairs: list[tuple[str, str, str]] = []
    for conj in _conjuncts(tree):
        found = _key_pair(conj, schema, target_alias.lower())
        if found is None:
            return None
        pairs.append((found[0], str(found[1].table), str(found[1].name)))
    return pairs


def _key_pair(
    conj: exp.Expression, schema: StructType, target: str
) -> tuple[str, exp.Column] | None:
    """``target.column = source.column``: the target column's name and the source column."""
    if not isinstance(conj, exp.EQ):
        return None
    for t, s in ((conj.this, conj.expression), (conj.expression, conj.this)):
        if not (isinstance(t, exp.Column) and isinstance(s, exp.Column)):
            continue
        field = schema.get(t.name)
        if (
            field is not None
            and t.table.lower() == target
            and t.args.get("db") is None
            and s.table
            and s.table.lower() != target
            and s.args.get("db") is None
            and schema.get(s.table) is None
        ):
            return field.name, s
    return None


def condition_qualifiers(condition: str, *, schema: StructType) -> tuple[str, ...]:
    """The table aliases a condition qualifies columns with (``t`` in ``t.country = 'DE'``).

    A qualifier that names a struct column of ``schema`` is a field access, not an alias.

    Raises:
        InvalidConditionError: The condition does not parse.
    """
    tree = _Translator(condition, schema, ()).parse()
    found: dict[str, None] = {}
    for col in _columns(tree):
        qualifier = col.table
        if qualifier and col.args.get("db") is None and schema.get(qualifier) is None:
            found.setdefault(qualifier.lower())
    return tuple(found)


def _is_target_column(col: exp.Column, schema: StructType, target: str, source: str) -> bool:
    qualifier = col.table.lower()
    if col.args.get("db") is not None:
        return col.db.lower() == target
    if not qualifier:
        # Spark rejects a name that both sides have, so a bare name in the target's schema
        # that resolved at all belongs to the target.
        return schema.get(col.name) is not None
    if qualifier == target:
        return True
    return qualifier != source and schema.get(qualifier) is not None  # struct field access


def _conjuncts(node: exp.Expression) -> Iterator[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


def _columns(node: exp.Expression) -> Iterator[exp.Column]:
    """Column references outside subqueries (a subquery's columns belong to its own tables)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Column):
            yield n
            continue
        if isinstance(n, exp.Query):
            continue
        stack.extend(n.iter_expressions())


def is_deterministic(expression: str | pyspark.sql.Column) -> bool:
    """Whether evaluating ``expression`` again on the same rows gives the same values.

    Any SQL expression (a condition or a value such as ``counter + 1``); a Column is judged by
    its SQL text. False when it calls a non-deterministic function (``rand()``, ``uuid()``,
    ...) or holds a subquery (whose table may change between evaluations), and when it does
    not parse, since then it cannot be checked.
    """
    text = expression if isinstance(expression, str) else column_sql_text(str(expression))
    try:
        trees = parse_spark_sql(text)
    except (ParseError, TokenError):
        return False
    if len(trees) != 1:
        return False
    return not _has_non_deterministic(trees[0])


def _has_non_deterministic(node: exp.Expression) -> bool:
    """Whether ``node`` calls a non-deterministic function or holds a subquery."""
    for n in node.walk():
        if isinstance(n, exp.Query):
            return True
        if isinstance(n, exp.Func):
            name = n.name if isinstance(n, exp.Anonymous) else n.sql_name()
            if name.lower() in NON_DETERMINISTIC_FUNCTIONS:
                return True
    return False


class _Translator:
    """One condition's translation: parsing, column checks, and the node mapping."""

    def __init__(self, text: str, schema: StructType, aliases: Collection[str]) -> None:
        self.text = text
        self.schema = schema
        self.aliases = {a.lower() for a in aliases}

    def translate_all(self) -> Expression:
        tree = self.parse()
        self.validate(tree)
        return self.translate(tree)

    def parse(self) -> exp.Expression:
        if not self.text.strip():
            raise InvalidConditionError("the condition is empty")
        try:
            statements = parse_spark_sql(self.text)
            if len(statements) != 1:
                raise InvalidConditionError(
                    f"the condition '{self.text}' must be one expression, not "
                    f"{len(statements)} statements"
                )
            tree = statements[0]
        except (ParseError, TokenError) as e:
            raise syntax_error(self.text, e) from None
        if isinstance(tree, _STATEMENTS):
            raise InvalidConditionError(f"the condition '{self.text}' is not a boolean expression")
        return tree

    def _unknown(self, name: str) -> InvalidConditionError:
        cols = ", ".join(self.schema.field_names()) or "(none)"
        return InvalidConditionError(
            f"unknown column '{name}' in the condition '{self.text}'; "
            f"the table's columns are: {cols}"
        )

    def validate(self, tree: exp.Expression) -> None:
        for col in _columns(tree):
            qualifier = col.table.lower()
            if col.args.get("db") is not None:
                continue  # alias.struct.field or catalog paths: checked when translated
            if not qualifier:
                if self.schema.get(col.name) is None:
                    raise self._unknown(col.name)
            elif qualifier in self.aliases and self.schema.get(col.name) is None:
                raise self._unknown(f"{col.table}.{col.name}")

    def translate(self, node: exp.Expression) -> Expression:
        match node:
            case exp.Paren():
                return self.translate(node.this)
            case exp.And():
                return and_(self.translate(node.this), self.translate(node.expression))
            case exp.Or():
                return or_(self.translate(node.this), self.translate(node.expression))
            case exp.Not():
                inner = node.this
                while isinstance(inner, exp.Paren):
                    inner = inner.this
                if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
                    return IsNotNull(self.translate(inner.this))
                return Not(self.translate(inner))
            case exp.Is():
                return self._is(node)
            case exp.In():
                if node.args.get("query") is not None or node.args.get("unnest") is not None:
                    return self._opaque(node)
                return In(
                    self.translate(node.this),
                    tuple(self.translate(o) for o in node.expressions),
                )
            case exp.Between():
                v = self.translate(node.this)
                low, high = self.translate(node.args["low"]), self.translate(node.args["high"])
                return and_(
                    Comparison(ComparisonOp.GE, v, low), Comparison(ComparisonOp.LE, v, high)
                )
            case exp.Column():
                return self._column(node)
            case exp.Boolean():
                return Literal(bool(node.this))
            case exp.Null():
                return Literal(None)
            case exp.Literal() | exp.Neg() | exp.Cast():
                ok, value = _literal_value(node)
                return Literal(value) if ok else self._opaque(node)
        op = _COMPARISONS.get(type(node))
        if op is not None:
            return Comparison(op, self.translate(node.this), self.translate(node.expression))
        arithmetic = ARITHMETIC_OPERATORS.get(type(node))
        if arithmetic is not None:
            left, right = self.translate(node.this), self.translate(node.expression)
            if isinstance(left, _OPERANDS) and isinstance(right, _OPERANDS):
                return Arithmetic(arithmetic, left, right)
        return self._opaque(node)

    def _is(self, node: exp.Is) -> Expression:
        target = node.expression
        if isinstance(target, exp.Null):
            return IsNull(self.translate(node.this))
        if isinstance(target, exp.Boolean):
            # x IS TRUE is never NULL: exactly x <=> TRUE.
            return Comparison(
                ComparisonOp.NULL_SAFE_EQ, self.translate(node.this), Literal(bool(target.this))
            )
        return self._opaque(node)

    def _column(self, node: exp.Column) -> Expression:
        qualifier = node.table.lower()
        if node.args.get("db") is not None:
            # a.b.c: a field of a struct column (complex), or a source column path.
            return self._opaque(node)
        if not qualifier:
            f = self.schema.get(node.name)
            if f is None:
                raise self._unknown(node.name)
            return Column(f.name) if not is_complex(f.type) else self._opaque(node)
        if qualifier in self.aliases:
            f = self.schema.get(node.name)
            if f is None:
                raise self._unknown(f"{node.table}.{node.name}")
            return Column(f.name) if not is_complex(f.type) else self._opaque(node)
        return self._opaque(node)  # another relation's column (MERGE source) or a struct field

    def _opaque(self, node: exp.Expression) -> Opaque:
        complex_type = any(isinstance(n, exp.Dot | exp.Bracket) for n in node.walk())
        for col in _columns(node):
            if col.args.get("db") is not None:
                complex_type = True
                continue
            qualifier = col.table.lower()
            if qualifier and qualifier not in self.aliases:
                f = self.schema.get(qualifier)  # struct.field access on a table column
                if f is not None and is_complex(f.type):
                    complex_type = True
                continue
            f = self.schema.get(col.name)
            if f is not None and is_complex(f.type):
                complex_type = True
        return Opaque(
            node.sql(dialect="spark"),
            deterministic=not _has_non_deterministic(node),
            complex_type=complex_type,
        )


def _literal_value(node: exp.Expression) -> tuple[bool, Any]:
    """(True, value) for a constant the IR can hold, else (False, None)."""
    match node:
        case exp.Literal():
            if node.is_string:
                return True, node.this
            return _number(str(node.this))
        case exp.Neg():
            ok, v = _literal_value(node.this)
            if ok and isinstance(v, int | float | Decimal) and not isinstance(v, bool):
                return True, -v
            return False, None
        case exp.Null():
            return True, None
        case exp.Boolean():
            return True, bool(node.this)
        case exp.Cast():
            ok, v = _literal_value(node.this)
            if not ok:
                return False, None
            return _cast(v, node.to)
    return False, None


def _number(text: str) -> tuple[bool, Any]:
    try:
        if _INT.match(text):
            return True, int(text)
        if "e" in text.lower():
            return True, float(text)
        return True, Decimal(text)
    except (ValueError, InvalidOperation):
        return False, None


# What an arithmetic operand may be; anything else makes the whole operation Opaque.
_OPERANDS = (Column, Literal, Arithmetic)
_T = exp.DataType.Type
# Each integral type's bits: a literal cast past its type's range stays Opaque (Spark fails
# or wraps it).
_INTEGRAL = {_T.TINYINT: 8, _T.SMALLINT: 16, _T.INT: 32, _T.BIGINT: 64}
_FRACTIONAL = {_T.FLOAT, _T.DOUBLE}
_STRINGS = {_T.VARCHAR, _T.CHAR, _T.TEXT, _T.NVARCHAR, _T.NCHAR}
_TIMESTAMPS = {_T.TIMESTAMP, _T.TIMESTAMPTZ, _T.TIMESTAMPLTZ, _T.TIMESTAMPNTZ, _T.DATETIME}


def _cast(value: Any, to: exp.DataType) -> tuple[bool, Any]:
    """CAST(literal AS type) folded to a Python value; an impossible cast stays Opaque."""
    if value is None:
        return True, None
    t = to.this
    try:
        if t == _T.DATE:
            if isinstance(value, str):
                return True, date.fromisoformat(value.strip())
            return (True, value) if isinstance(value, date) else (False, None)
        if t in _TIMESTAMPS:
            if isinstance(value, str):
                return True, datetime.fromisoformat(value.strip())
            return (True, value) if isinstance(value, datetime) else (False, None)
        if t in _INTEGRAL:
            if isinstance(value, bool):
                return False, None
            number = int(value.strip()) if isinstance(value, str) else int(value)
            whole = isinstance(value, str) or number == value
            bound = 1 << (_INTEGRAL[t] - 1)
            return (True, number) if whole and -bound <= number < bound else (False, None)
        if t in _FRACTIONAL:
            return (False, None) if isinstance(value, bool) else (True, float(value))
        if t == _T.DECIMAL:
            return (False, None) if isinstance(value, bool) else (True, Decimal(str(value)))
        if t in _STRINGS:
            return (True, value) if isinstance(value, str) else (False, None)
        if t == _T.BOOLEAN:
            if isinstance(value, bool):
                return True, value
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return True, value.strip().lower() == "true"
    except (ValueError, InvalidOperation, TypeError, OverflowError):
        return False, None
    return False, None


__all__ = ["column_sql_text", "is_deterministic", "merge_target_predicate", "parse_condition"]
