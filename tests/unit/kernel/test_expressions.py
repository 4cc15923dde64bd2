"""The predicate IR: simplifying constructors, referenced columns, Opaque parts, SQL text."""

from __future__ import annotations

from deltatx.kernel.expressions import (
    FALSE,
    TRUE,
    And,
    Arithmetic,
    ArithmeticOp,
    Column,
    Comparison,
    ComparisonOp,
    In,
    IsNotNull,
    Literal,
    Not,
    Opaque,
    Or,
    and_,
    columns_of,
    has_opaque,
    or_,
    to_sql,
)

A = Comparison(ComparisonOp.EQ, Column("A"), Literal(1))
B = Comparison(ComparisonOp.LT, Column("b"), Literal("x'y"))


def test_and_flattens_and_absorbs() -> None:
    assert and_() == TRUE
    assert and_(A, TRUE) == A
    assert and_(A, FALSE, B) == FALSE
    assert and_(and_(A, B), A) == And((A, B, A))


def test_or_flattens_and_absorbs() -> None:
    assert or_() == FALSE
    assert or_(A, FALSE) == A
    assert or_(A, TRUE) == TRUE
    assert or_(or_(A, B), B) == Or((A, B, B))


def test_columns_are_lower_cased_and_collected_everywhere() -> None:
    expr = Or((A, Not(IsNotNull(Column("C"))), In(Column("d"), (Column("E"), Literal(2)))))
    assert columns_of(expr) == {"a", "c", "d", "e"}
    assert columns_of(Opaque("f(x)")) == frozenset()


def test_opaque_parts_are_found_at_any_depth() -> None:
    assert not has_opaque(and_(A, B))
    assert has_opaque(And((A, Not(Opaque("rand() > 0.5", deterministic=False)))))


REMAINDER = Arithmetic(
    ArithmeticOp.REMAINDER, Arithmetic(ArithmeticOp.SUBTRACT, Column("Id"), Column("n")), Literal(3)
)


def test_arithmetic_reads_its_columns_and_counts_as_opaque_on_metadata() -> None:
    assert columns_of(Comparison(ComparisonOp.EQ, REMAINDER, Literal(0))) == {"id", "n"}
    assert has_opaque(Not(Comparison(ComparisonOp.EQ, REMAINDER, Literal(0))))
    assert has_opaque(In(REMAINDER, (Literal(1),)))


def test_arithmetic_renders_with_its_parentheses() -> None:
    assert to_sql(Comparison(ComparisonOp.EQ, REMAINDER, Literal(-1))) == "((Id - n) % 3) = -1"


def test_sql_rendering_quotes_strings_and_names_nulls() -> None:
    assert to_sql(and_(A, B)) == "(A = 1) AND (b < 'x''y')"
    assert to_sql(In(Column("c"), (Literal(None), Literal(True)))) == "c IN (NULL, TRUE)"
