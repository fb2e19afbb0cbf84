"""A small SQL tokenizer: enough of PostgreSQL's lexical rules to mutate QL3's statements safely.

The SQL operators (`sql_mutants.py`) must never cut inside a string literal, a quoted identifier,
a comment or a psycopg placeholder, so they work on tokens, not on text: a regular expression
over the raw file cannot know that `'a < b'` is a string or that `-- x = 1` is a comment. The
lexer follows PostgreSQL's rules for what QL3's files contain: `--` and nested `/* */` comments,
`'...'` strings with `''` escapes (and `E'...'` with backslash escapes), `"..."` identifiers,
`$tag$...$tag$` bodies, psycopg's `%(name)s` placeholders, numbers, words and operators. Tokens
keep their exact text and offsets, so joining them gives the file back byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """What a token is: only `WORD`, `NUMBER`, `STRING` and `OP` are ever mutated."""

    SPACE = "space"
    COMMENT = "comment"
    STRING = "string"
    IDENT = "ident"  # "quoted identifier"
    DOLLAR = "dollar"  # $tag$ ... $tag$ body
    PARAM = "param"  # %(name)s
    NUMBER = "number"
    WORD = "word"  # keyword or bare identifier
    OP = "op"  # operator or punctuation


@dataclass(frozen=True)
class Token:
    """One lexical token with its offsets in the source text."""

    kind: Kind
    text: str
    start: int

    @property
    def end(self) -> int:
        """Return the offset just past this token."""
        return self.start + len(self.text)

    @property
    def upper(self) -> str:
        """Return the text upper-cased (keywords compare case-insensitively)."""
        return self.text.upper()

    def is_word(self, *words: str) -> bool:
        """Return whether this is a bare word equal (case-insensitively) to one of `words`."""
        return self.kind is Kind.WORD and self.upper in words

    @property
    def code(self) -> bool:
        """Return whether the token is code (not whitespace or a comment)."""
        return self.kind not in (Kind.SPACE, Kind.COMMENT)


class SqlLexError(ValueError):
    """Raised when a statement file has an unterminated string, identifier or comment."""


# Longest first: a two-character operator must win over its one-character prefix.
_OPERATORS = ("<>", "<=", ">=", "!=", "::", "||", "->>", "->", "=>")
_OP_CHARS = "+-*/<>=~!@#%^&|`?()[],;.:"


def tokenize(text: str) -> list[Token]:
    """Split `text` into tokens that join back to exactly `text`."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        kind, end = _next(text, pos)
        tokens.append(Token(kind, text[pos:end], pos))
        pos = end
    return tokens


def _next(text: str, pos: int) -> tuple[Kind, int]:  # noqa: C901, PLR0911, PLR0912 - one branch per token kind
    char = text[pos]
    if char.isspace():
        end = pos
        while end < len(text) and text[end].isspace():
            end += 1
        return Kind.SPACE, end
    if text.startswith("--", pos):
        end = text.find("\n", pos)
        return Kind.COMMENT, len(text) if end < 0 else end
    if text.startswith("/*", pos):
        return Kind.COMMENT, _block_comment_end(text, pos)
    if char in "eE" and text.startswith("'", pos + 1):
        return Kind.STRING, _quoted_end(text, pos + 1, "'", backslash=True)
    if char == "'":
        return Kind.STRING, _quoted_end(text, pos, "'", backslash=False)
    if char == '"':
        return Kind.IDENT, _quoted_end(text, pos, '"', backslash=False)
    if char == "$":
        dollar = _dollar_end(text, pos)
        if dollar is not None:
            return Kind.DOLLAR, dollar
    if text.startswith("%(", pos):
        # psycopg's named placeholders: `%(name)s` (any format), `%(name)b` (binary), `%(name)t`.
        close = text.find(")", pos)
        if close < 0 or text[close + 1 : close + 2] not in {"s", "b", "t"}:
            raise SqlLexError(f"unterminated placeholder at offset {pos}")
        return Kind.PARAM, close + 2
    if char.isdigit() or (char == "." and text[pos + 1 : pos + 2].isdigit()):
        return Kind.NUMBER, _number_end(text, pos)
    if char.isalpha() or char == "_":
        end = pos
        while end < len(text) and (text[end].isalnum() or text[end] in "_$"):
            end += 1
        return Kind.WORD, end
    for operator in _OPERATORS:
        if text.startswith(operator, pos):
            return Kind.OP, pos + len(operator)
    if char in _OP_CHARS:
        return Kind.OP, pos + 1
    raise SqlLexError(f"unexpected character {char!r} at offset {pos}")


def _block_comment_end(text: str, pos: int) -> int:
    """Return the end of a (possibly nested) block comment starting at `pos`."""
    depth, end = 0, pos
    while end < len(text):
        if text.startswith("/*", end):
            depth, end = depth + 1, end + 2
        elif text.startswith("*/", end):
            depth, end = depth - 1, end + 2
            if depth == 0:
                return end
        else:
            end += 1
    raise SqlLexError(f"unterminated comment at offset {pos}")


def _quoted_end(text: str, pos: int, quote: str, *, backslash: bool) -> int:
    """Return the end of a quoted token opened at `pos` (a doubled quote is an escape)."""
    end = pos + 1
    while end < len(text):
        if backslash and text[end] == "\\":
            end += 2
            continue
        if text[end] == quote:
            if text.startswith(quote * 2, end):
                end += 2
                continue
            return end + 1
        end += 1
    raise SqlLexError(f"unterminated {quote} at offset {pos}")


def _dollar_end(text: str, pos: int) -> int | None:
    """Return the end of a `$tag$...$tag$` body at `pos`, or None if `$` starts none."""
    close = text.find("$", pos + 1)
    tag = text[pos : close + 1] if close > 0 else ""
    if not tag or not all(c.isalnum() or c == "_" for c in tag[1:-1]):
        return None
    body_end = text.find(tag, close + 1)
    if body_end < 0:
        raise SqlLexError(f"unterminated {tag} body at offset {pos}")
    return body_end + len(tag)


def _number_end(text: str, pos: int) -> int:
    end = pos
    while end < len(text) and (text[end].isdigit() or text[end] == "."):
        if text[end] == "." and text.startswith("..", end):
            break
        end += 1
    return end
