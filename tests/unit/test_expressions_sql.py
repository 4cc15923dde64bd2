"""Spark SQL conditions -> predicate IR (spark/expressions.py), without a JVM."""

from __future__ import annotations

import ast
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from deltatx.errors import InvalidConditionError
from deltatx.kernel.expressions import (
    TRUE,
    And,
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
    Or,
)
from deltatx.kernel.schema import ArrayType, PrimitiveType, StructField, StructType
from deltatx.spark.expressions import (
    column_sql_text,
    merge_equi_keys,
    merge_key_pairs,
    merge_target_predicate,
    parse_condition,
    parse_spark_sql,
)

SCHEMA = StructType(
    (
        StructField("id", PrimitiveType("long")),
        StructField("user_id", PrimitiveType("long")),
        StructField("date", PrimitiveType("string")),
        StructField("country", PrimitiveType("string")),
        StructField("ts", PrimitiveType("timestamp")),
        StructField("v", PrimitiveType("double")),
        StructField("tags", ArrayType(PrimitiveType("string"))),
        StructField("info", StructType((StructField("a", PrimitiveType("integer")),))),
    )
)


def parse(sql: str, aliases: tuple[str, ...] = ("t",)) -> Expression:
    return parse_condition(sql, schema=SCHEMA, aliases=aliases)


def c(op: str, col: str, value: object) -> Comparison:
    return Comparison(ComparisonOp(op), Column(col), Literal(value))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("id = 1", c("=", "id", 1)),
        ("id != 1", c("!=", "id", 1)),
        ("id <> 1", c("!=", "id", 1)),
        ("id < 1", c("<", "id", 1)),
        ("id <= 1", c("<=", "id", 1)),
        ("id > -1", c(">", "id", -1)),
        ("id >= 1.5", c(">=", "id", Decimal("1.5"))),
        ("v = 1e3", c("=", "v", 1000.0)),
        ("id <=> NULL", c("<=>", "id", None)),
        ("ID = 1", c("=", "id", 1)),  # case-insensitive, schema spelling kept
        ("`date` = '2024-01-01'", c("=", "date", "2024-01-01")),
        ("t.date = '2024-01-01'", c("=", "date", "2024-01-01")),
        ("T.date = '2024-01-01'", c("=", "date", "2024-01-01")),
        ("date = DATE '2024-01-01'", c("=", "date", date(2024, 1, 1))),
        ("ts > TIMESTAMP '2024-01-01 10:00:00'", c(">", "ts", datetime(2024, 1, 1, 10))),
        ("id = CAST('7' AS BIGINT)", c("=", "id", 7)),
        ("date = CAST('2024-01-01' AS DATE)", c("=", "date", date(2024, 1, 1))),
        ("id IN (1, 2)", In(Column("id"), (Literal(1), Literal(2)))),
        ("id NOT IN (1)", Not(In(Column("id"), (Literal(1),)))),
        ("id IS NULL", IsNull(Column("id"))),
        ("id IS NOT NULL", IsNotNull(Column("id"))),
        ("id IS TRUE", Comparison(ComparisonOp.NULL_SAFE_EQ, Column("id"), Literal(True))),
        ("id BETWEEN 1 AND 3", And((c(">=", "id", 1), c("<=", "id", 3)))),
        ("id NOT BETWEEN 1 AND 3", Not(And((c(">=", "id", 1), c("<=", "id", 3))))),
        (
            "id = 1 AND (date = 'a' OR NOT country = 'b')",
            And((c("=", "id", 1), Or((c("=", "date", "a"), Not(c("=", "country", "b")))))),
        ),
        ("TRUE", Literal(True)),
        ("NULL", Literal(None)),
    ],
)
def test_translation(sql: str, expected: Expression) -> None:
    assert parse(sql) == expected


@pytest.mark.parametrize(
    ("sql", "deterministic", "complex_type"),
    [
        ("rand() < 0.5", False, False),
        ("uuid() = 'x'", False, False),
        ("upper(country) = 'US'", True, False),
        ("id + rand() = 2", False, False),
        ("id / 2 = 1", True, False),
        ("size(tags) > 1", True, True),
        ("info.a = 1", True, True),
        ("array_contains(tags, 'x')", True, True),
        ("id IN (SELECT id FROM other)", False, False),
    ],
)
def test_opaque(sql: str, deterministic: bool, complex_type: bool) -> None:
    e = parse(sql)
    opaques = [n for n in _walk(e) if isinstance(n, Opaque)]
    assert opaques, e
    assert all(o.deterministic is deterministic for o in opaques) or not deterministic
    assert any(o.deterministic is deterministic for o in opaques)
    assert any(o.complex_type is complex_type for o in opaques)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "id % 100 = 0",
            Comparison(
                ComparisonOp.EQ,
                Arithmetic(ArithmeticOp.REMAINDER, Column("id"), Literal(100)),
                Literal(0),
            ),
        ),
        (
            "(id - 1) * 2 + -3 > id",
            Comparison(
                ComparisonOp.GT,
                Arithmetic(
                    ArithmeticOp.ADD,
                    Arithmetic(
                        ArithmeticOp.MULTIPLY,
                        Arithmetic(ArithmeticOp.SUBTRACT, Column("id"), Literal(1)),
                        Literal(2),
                    ),
                    Literal(-3),
                ),
                Column("id"),
            ),
        ),
    ],
)
def test_integer_arithmetic_is_translated(sql: str, expected: Expression) -> None:
    assert parse(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        # Past the cast's type: Spark fails (ANSI) or wraps, so the value is not 300.
        "id = CAST(300 AS TINYINT)",
        "id = CAST(40000 AS SMALLINT)",
        "id = CAST(2147483648 AS INT)",
        "id = CAST(1.5 AS INT)",
    ],
)
def test_integral_casts_out_of_range_stay_opaque(sql: str) -> None:
    assert any(isinstance(n, Opaque) for n in _walk(parse(sql)))


def test_integral_casts_in_range_fold() -> None:
    assert parse("id = CAST(-128 AS TINYINT)") == Comparison(
        ComparisonOp.EQ, Column("id"), Literal(-128)
    )
    assert parse("id = CAST(' 7 ' AS BIGINT)") == Comparison(
        ComparisonOp.EQ, Column("id"), Literal(7)
    )


def _walk(e: Expression) -> list[Expression]:
    out = [e]
    for attr in ("left", "right", "child", "value"):
        if hasattr(e, attr) and not isinstance(e, Literal):
            out += _walk(getattr(e, attr))
    for attr in ("children", "options"):
        for child in getattr(e, attr, ()):
            out += _walk(child)
    return out


def test_source_columns_stay_opaque() -> None:
    e = parse("t.id = s.id")
    assert e == Comparison(ComparisonOp.EQ, Column("id"), Opaque("s.id"))


def test_unknown_column_names_it_and_lists_columns() -> None:
    with pytest.raises(InvalidConditionError) as info:
        parse("nope = 1")
    msg = str(info.value)
    assert "'nope'" in msg
    assert "id, user_id, date, country, ts, v, tags, info" in msg


def test_unknown_alias_qualified_column() -> None:
    with pytest.raises(InvalidConditionError, match=r"'t\.nope'"):
        parse("t.nope = 1")


def test_unknown_column_inside_a_function() -> None:
    with pytest.raises(InvalidConditionError, match="'missing'"):
        parse("upper(missing) = 'x'")


@pytest.mark.parametrize("sql", ["id = ", "id = 'unterminated", "((id = 1)", "SELECT 1", "   "])
def test_unparsable_condition_is_quoted(sql: str) -> None:
    with pytest.raises(InvalidConditionError) as info:
        parse(sql)
    if sql.strip():
        assert sql in str(info.value)


def test_column_text() -> None:
    assert column_sql_text("Column<'(id = 1)'>") == "(id = 1)"
    assert column_sql_text("id = 1") == "id = 1"


def test_merge_target_predicate_seed_000_example() -> None:
    """Seed 000: add t.date and t.country to the merge condition to make separation explicit."""
    on = (
        "s.user_id = t.user_id AND s.date = t.date AND s.country = t.country "
        "AND t.date = '2024-01-01' AND t.country = 'US'"
    )
    e = merge_target_predicate(on, schema=SCHEMA, target_alias="t", source_alias="s")
    assert e == And((c("=", "date", "2024-01-01"), c("=", "country", "US")))


def test_merge_target_predicate_without_target_filter_reads_everything() -> None:
    """Seed 000: the implicit condition can scan the whole table."""
    on = "s.user_id = t.user_id AND s.date = t.date AND s.country = t.country"
    assert merge_target_predicate(on, schema=SCHEMA, target_alias="t", source_alias="s") == TRUE


def test_merge_target_predicate_drops_mixed_and_non_deterministic() -> None:
    on = "t.id = s.id AND (t.date = 'a' OR s.date = 'b') AND rand() < 0.1 AND id > 5"
    e = merge_target_predicate(on, schema=SCHEMA, target_alias="t", source_alias="s")
    assert e == c(">", "id", 5)


def test_merge_target_predicate_rejects_unknown_target_column() -> None:
    with pytest.raises(InvalidConditionError, match=r"t\.nope"):
        merge_target_predicate("t.nope = s.id", schema=SCHEMA, target_alias="t", source_alias="s")


def test_module_does_not_import_pyspark_at_import_time() -> None:
    """Only the Column branch imports pyspark (lazily); the string path needs no JVM."""
    import deltatx.spark.expressions as module

    tree = ast.parse(Path(module.__file__ or "").read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if n.startswith("pyspark")]


@pytest.mark.parametrize(
    "sql",
    [
        "uniform(0, 1) < 2",
        "uniform(0, 10, 42) < 20",  # seeded, still one of Spark's Nondeterministic expressions
        "randstr(5) = 'a'",
        "rand() < 2",
        "random() < 2",
        "randn(3) > 0",
        "uuid() = 'x'",
        "shuffle(array(1, 2))[0] = 1",
        "reflect('java.util.UUID', 'randomUUID') = 'x'",
        "java_method('java.util.UUID', 'randomUUID') = 'x'",
        "monotonically_increasing_id() > 3",
        "spark_partition_id() = 0",
        "input_file_name() = 'x'",
        "id = 1 AND UNIFORM(0, 1) < 2",
    ],
)
def test_non_deterministic_conditions_get_no_row_level_concurrency(sql: str) -> None:
    """Seed 000: non-deterministic conditions fall back to file-level conflict detection."""
    from deltatx.kernel.row_level.limitations import row_level_limitation
    from deltatx.spark.expressions import is_deterministic

    assert not is_deterministic(sql)
    predicate = parse_condition(sql, schema=SCHEMA)
    assert row_level_limitation(predicate, SCHEMA, condition_text=sql) == (
        "the condition is non-deterministic"
    )


@pytest.mark.parametrize("sql", ["id = 1", "id < 5 AND date = 'a'", "ts < current_timestamp()"])
def test_deterministic_conditions_keep_row_level_concurrency(sql: str) -> None:
    from deltatx.kernel.row_level.limitations import row_level_limitation
    from deltatx.spark.expressions import is_deterministic

    assert is_deterministic(sql)
    assert (
        row_level_limitation(parse_condition(sql, schema=SCHEMA), SCHEMA, condition_text=sql)
        is None
    )


@pytest.mark.parametrize(
    ("on", "expected"),
    [
        ("t.id = s.id", [("id", "s.id")]),
        ("s.user_id = t.USER_ID AND t.date = '2024-01-01'", [("user_id", "s.user_id")]),
        ("t.id = s.id AND s.date = t.date", [("id", "s.id"), ("date", "s.date")]),
        # Not a key equality: an expression, an inequality, an OR, a struct field, the target.
        ("t.id = s.id + 1", []),
        ("t.id < s.id", []),
        ("t.id = s.id OR t.v = s.v", []),
        ("t.id = info.a", []),
        ("t.id = t.user_id", []),
    ],
)
def test_merge_key_pairs(on: str, expected: list[tuple[str, str]]) -> None:
    """The key equalities whose source range can bound the target rows a MERGE touches."""
    assert merge_key_pairs(on, schema=SCHEMA, target_alias="t") == expected


@pytest.mark.parametrize(
    ("on", "expected"),
    [
        ("t.id = s.id", [("id", "s", "id")]),
        (
            "(s.user_id = t.USER_ID) AND t.date = src.d",
            [("user_id", "s", "user_id"), ("date", "src", "d")],
        ),
        # Any other conjunct, even on the target alone, leaves the MERGE to Spark.
        ("t.id = s.id AND t.date = '2024-01-01'", None),
        ("t.id = s.id + 1", None),
        ("t.id = s.id OR t.v = s.v", None),
        ("t.id = info.a", None),
        ("t.id <=> s.id", None),
    ],
)
def test_merge_equi_keys(on: str, expected: list[tuple[str, str, str]] | None) -> None:
    """An ON condition made of key equalities alone, as (target, source alias, source column)."""
    assert merge_equi_keys(on, schema=SCHEMA, target_alias="t") == expected


@pytest.mark.parametrize(
    "sql",
    [
        "id >= 5 AND id < 10 OR user_id IN (1, 2)",
        "NOT (id = 3) AND user_id IS NOT NULL",
        "t.id = s.id AND t.user_id > 4",
    ],
)
def test_a_condition_is_parsed_once_and_its_tree_never_changes(sql: str) -> None:
    # Statements share parsed trees (one parse per text), so no reader may alter one.
    trees = parse_spark_sql(sql)
    before = [t.sql(dialect="spark") for t in trees]
    first = parse_condition(sql, schema=SCHEMA, aliases=("t",))
    merge_target_predicate(sql, schema=SCHEMA, target_alias="t", source_alias="s")
    merge_key_pairs(sql, schema=SCHEMA, target_alias="t")
    assert parse_spark_sql(sql) is trees
    assert [t.sql(dialect="spark") for t in trees] == before
    assert parse_condition(sql, schema=SCHEMA, aliases=("t",)) == first
