"""Syntax errors in a SQL condition, in the user's words: the construct, what it lacks, where.

sqlglot reports a parse error in its own terms (a node class and a missing argument); this
names the SQL construct and its missing operand, or the character where the text went wrong.
"""

from __future__ import annotations

import re

from sqlglot.errors import ParseError, TokenError

from deltatx.errors import ConditionSyntaxError

# How sqlglot's node classes read in SQL, to name the construct a syntax error stopped in.
_CONSTRUCTS = {
    "And": "AND",
    "Or": "OR",
    "Not": "NOT",
    "EQ": "=",
    "NEQ": "<>",
    "GT": ">",
    "GTE": ">=",
    "LT": "<",
    "LTE": "<=",
    "NullSafeEQ": "<=>",
    "Between": "BETWEEN",
    "In": "IN",
    "Is": "IS",
    "Like": "LIKE",
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "Div": "/",
}
_OPERANDS = {
    "this": "its left operand",
    "expression": "its right operand",
    "high": "its upper bound",
}
_MISSING = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")


def syntax_error(text: str, error: ParseError | TokenError) -> ConditionSyntaxError:
    """A syntax error in user words: the construct, what it lacks, and the position.

    Args:
        text: The condition as the user wrote it.
        error: What sqlglot raised while reading it.
    """
    if isinstance(error, TokenError):
        quote = "an unterminated string or quoted name" if ("'" in text or "`" in text) else None
        what = quote or "a character SQL does not allow"
        return ConditionSyntaxError(
            f"cannot parse the condition '{text}': it contains {what}",
            condition=text,
            construct="token",
            column=len(text),
        )
    details = error.errors[0] if getattr(error, "errors", None) else {}
    column = int(details.get("col") or len(text))
    token = str(details.get("highlight") or "").strip()
    description = str(details.get("description") or "")
    missing = _MISSING.search(description)
    if missing:
        construct = _CONSTRUCTS.get(missing.group(2), missing.group(2).upper())
        lacks = _OPERANDS.get(missing.group(1), f"its {missing.group(1)}")
        problem = f"{construct} is missing {lacks}"
    elif description.startswith("Expecting )"):
        construct = "("
        problem = "a parenthesis is not closed"
    else:
        construct = token or "end of text"
        problem = f"unexpected '{token}'" if token else "the condition ends too early"
    return ConditionSyntaxError(
        f"cannot parse the condition '{text}': {problem} (at character {column})",
        condition=text,
        construct=construct,
        column=column,
    )
