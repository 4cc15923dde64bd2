"""A small grammar over sqlglot's tokens for the Delta statement heads sqlglot cannot parse.

OPTIMIZE, REORG, VACUUM, RESTORE, DESCRIBE HISTORY/DETAIL and the ALTER TABLE actions are read
token by token here; the conditions inside them are handed back to sqlglot as expressions.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError

from deltatx.delta_sql.statements import Position, TableRef
from deltatx.errors import SqlError, UnsupportedStatementError

DIALECT = "databricks"
_QUOTED = {TokenType.STRING, TokenType.IDENTIFIER}


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind, its text (without quotes) and where it starts and ends."""

    kind: TokenType
    text: str
    start: int
    end: int

    @property
    def word(self) -> str | None:
        """The upper-cased keyword or name, or None for strings, quoted names and symbols."""
        if self.kind in _QUOTED or not (self.text[:1].isalpha() or self.text[:1] == "_"):
            return None
        return self.text.upper()


def position(text: str, offset: int) -> Position:
    """The 1-based line and column of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Position(line, column)


def tokenize(text: str, offset: int = 0) -> list[Token]:
    """The statement's tokens (comments dropped).

    sqlglot reads a statement it has no grammar for (OPTIMIZE, VACUUM, ...) as one command
    word followed by the rest as a single string; that rest is tokenized again here.

    Raises:
        SqlError: The text has an unterminated string, quoted name or comment.
    """
    try:
        raw = Dialect.get_or_raise(DIALECT).tokenize(text)
    except TokenError:
        raise SqlError(
            "the statement has an unterminated string, quoted name or comment",
            line=position(text, 0).line,
            column=1,
        ) from None
    out: list[Token] = []
    i = 0
    while i < len(raw):
        tok = raw[i]
        out.append(Token(tok.token_type, tok.text, offset + tok.start, offset + tok.end))
        if tok.token_type is TokenType.COMMAND and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt.token_type is TokenType.STRING:
                stop = raw[i + 2].start if i + 2 < len(raw) else len(text)
                begin = tok.end + 1
                out.extend(tokenize(text[begin:stop], offset + begin))
                i += 2
                continue
        i += 1
    return out


class Cursor:
    """Reads tokens left to right, raising errors that say where."""

    def __init__(self, text: str, tokens: list[Token]) -> None:
        """``text`` is the whole statement; ``tokens`` its tokens."""
        self.text = text
        self.tokens = tokens
        self.index = 0

    def peek(self, ahead: int = 0) -> Token | None:
        """The token ``ahead`` places on, or None past the end."""
        i = self.index + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def at_end(self) -> bool:
        """Whether every token has been read."""
        return self.index >= len(self.tokens)

    def where(self, tok: Token | None = None) -> Position:
        """The position of ``tok`` (default: the next token, or the end of the text)."""
        tok = tok or self.peek()
        return position(self.text, tok.start if tok else len(self.text.rstrip()))

    def error(self, message: str, tok: Token | None = None) -> SqlError:
        """A SqlError at ``tok`` (default: the next token)."""
        pos = self.where(tok)
        return SqlError(message, line=pos.line, column=pos.column)

    def unsupported(self, message: str, construct: str, tok: Token | None = None) -> SqlError:
        """An UnsupportedStatementError at ``tok`` (default: the next token)."""
        pos = self.where(tok)
        return UnsupportedStatementError(
            message, construct=construct, line=pos.line, column=pos.column
        )

    def next(self) -> Token:
        """Consumes and returns the next token."""
        tok = self.peek()
        if tok is None:
            raise self.error("the statement ends too early")
        self.index += 1
        return tok

    def accept(self, *words: str) -> bool:
        """Consumes ``words`` if the next tokens are exactly these keywords."""
        for k, word in enumerate(words):
            tok = self.peek(k)
            if tok is None or tok.word != word:
                return False
        self.index += len(words)
        return True

    def accept_kind(self, kind: TokenType) -> Token | None:
        """Consumes the next token if it is of ``kind``."""
        tok = self.peek()
        if tok is not None and tok.kind is kind:
            self.index += 1
            return tok
        return None

    def expect(self, *words: str, context: str) -> None:
        """Consumes ``words`` or raises a SqlError naming what was expected."""
        if not self.accept(*words):
            found = self.peek()
            what = f"'{found.text}'" if found else "the end of the statement"
            raise self.error(f"expected {' '.join(words)} in {context}, found {what}")

    def expect_kind(self, kind: TokenType, symbol: str, context: str) -> Token:
        """Consumes a token of ``kind`` (shown to the user as ``symbol``) or raises."""
        tok = self.accept_kind(kind)
        if tok is None:
            found = self.peek()
            what = f"'{found.text}'" if found else "the end of the statement"
            raise self.error(f"expected '{symbol}' in {context}, found {what}")
        return tok

    def finish(self, context: str) -> None:
        """Raises if tokens are left: deltatx does not run what follows."""
        tok = self.peek()
        if tok is not None:
            rest = self.text[tok.start :].strip()
            shown = rest if len(rest) <= 40 else rest[:37] + "..."
            raise self.unsupported(
                f"deltatx does not run '{shown}' in {context}", f"{context} ... {tok.text}"
            )

    def name_part(self, context: str) -> tuple[str, bool]:
        """One part of a name: (text, whether it was quoted)."""
        tok = self.peek()
        if tok is not None and tok.kind is TokenType.IDENTIFIER:
            self.index += 1
            return tok.text, True
        if tok is not None and tok.word is not None:
            self.index += 1
            return tok.text, False
        found = f"'{tok.text}'" if tok else "the end of the statement"
        raise self.error(f"expected a name in {context}, found {found}")

    def dotted_name(self, context: str) -> list[tuple[str, bool]]:
        """``a.b.c`` as its parts."""
        parts = [self.name_part(context)]
        while self.accept_kind(TokenType.DOT):
            parts.append(self.name_part(context))
        return parts

    def table(self, context: str) -> TableRef:
        """A table: ``delta.`/path` ``, a quoted path, or a (qualified) name."""
        tok = self.peek()
        if tok is not None and tok.kind is TokenType.STRING:
            self.index += 1
            return TableRef(path=tok.text)
        return table_ref(self.dotted_name(context))

    def span_until(self, *stops: str) -> tuple[str, Token]:
        """The source text from here to the first stop keyword at bracket depth 0 (or the end)."""
        first = self.peek()
        if first is None or first.word in stops:
            raise self.error("expected an expression")
        depth = 0
        last = first
        while (tok := self.peek()) is not None:
            if depth == 0 and tok.word in stops:
                break
            if tok.kind is TokenType.L_PAREN:
                depth += 1
            elif tok.kind is TokenType.R_PAREN:
                depth -= 1
            last = tok
            self.index += 1
        return self.text[first.start : last.end + 1], first

    def condition(self, *stops: str) -> str:
        """A condition up to a stop keyword, checked and regenerated by sqlglot."""
        span, first = self.span_until(*stops)
        return expression_sql(span, self.where(first))

    def parenthesized(self, context: str) -> list[list[Token]]:
        """``( item, item, ... )`` as the tokens of each item."""
        self.expect_kind(TokenType.L_PAREN, "(", context)
        items: list[list[Token]] = [[]]
        depth = 0
        while True:
            tok = self.next()
            if tok.kind is TokenType.R_PAREN and depth == 0:
                break
            if tok.kind is TokenType.COMMA and depth == 0:
                items.append([])
                continue
            if tok.kind is TokenType.L_PAREN:
                depth += 1
            elif tok.kind is TokenType.R_PAREN:
                depth -= 1
            items[-1].append(tok)
        if not items[-1]:
            raise self.error(f"an empty item in {context}")
        return items

    def source(self, tokens: list[Token]) -> str:
        """The source text that ``tokens`` cover."""
        return self.text[tokens[0].start : tokens[-1].end + 1]


def table_ref(parts: list[tuple[str, bool]], *, alias: str | None = None) -> TableRef:
    """A table reference from the parts of its name.

    ``delta.`/path` `` names a table by its root when the quoted part is an absolute path
    or URI; a leading ``spark_catalog`` is Spark's default catalog and is dropped.
    """
    if len(parts) == 2 and parts[0][0].lower() == "delta" and parts[1][1]:
        candidate = parts[1][0]
        if candidate.startswith("/") or ":" in candidate.split("/")[0]:
            return TableRef(path=candidate, alias=alias)
    names = [p for p, _ in parts]
    if len(names) == 3 and names[0].lower() == "spark_catalog":
        names = names[1:]
    return TableRef(name=".".join(names), alias=alias)


def expression_sql(text: str, where: Position) -> str:
    """A SQL expression checked by sqlglot and written back in Spark's dialect.

    Raises:
        SqlError: The expression does not parse (at ``where``, the expression's start).
    """
    try:
        node = sqlglot.parse_one(text, read=DIALECT)
    except (ParseError, TokenError):
        node = None
    if node is None or isinstance(node, exp.Command | exp.Query):
        raise SqlError(
            f"cannot parse the expression '{text.strip()}'", line=where.line, column=where.column
        )
    return node.sql(dialect="spark")
