"""The SQL operator set: mutants of the shipped statements, generated from their tokens.

No mutation tool knows PostgreSQL, and the protocol lives in the statements (claim, commit,
resolve, skip, quarantine, attempts), so these operators are our own. Each works on the tokens
of `sql_tokens.py` (never inside a string, identifier, comment or placeholder) and yields edits
in file order, so ids and order are deterministic:

- `drop-conjunct`: drop one top-level `AND` term of a `WHERE` or `JOIN ... ON` condition (each
  in turn, when there are at least two; `BETWEEN x AND y` and `CASE ... END` stay whole).
- `flip-comparison`: `<` becomes `<=` and `>=`, `<=` becomes `<` and `>`, `>` becomes `>=` and
  `<=`, `>=` becomes `>` and `<` (the boundary and the negation), `=` becomes `<>` and `<>` (or
  `!=`) becomes `=`; `IS [NOT] NULL`, `IS [NOT] DISTINCT FROM` and `[NOT] EXISTS` are negated.
  An `=` that assigns in a `SET` list is not a comparison and is left alone.
- `constant`: an integer becomes itself +1 and -1, `true` and `false` swap, and a string literal
  naming a state becomes the next state of its set (`mutants.toml`, `[sql] states`).
- `drop-set-column`: drop one assignment of an `UPDATE ... SET` list (each in turn, when there
  are at least two).

The same operators reach the bodies of the worker's SECURITY DEFINER functions (`definer_bodies`,
migration files named in `[sql] functions`): there the attempt protocol lives in PL/pgSQL, and
a `IF ... THEN` condition is a condition like a `WHERE` (its conjuncts dropped in turn), while
the `:=` of an assignment is not a comparison. Each function is judged by the tests that send
the statement calling it (`sql/take_attempts.sql` calls `ql3.worker_take_attempts_v1`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from model import Edit
from sql_tokens import Kind, Token, tokenize

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

# Words that end a WHERE/ON condition at its own parenthesis depth.
_CONDITION_ENDS = frozenset(
    {
        "GROUP", "ORDER", "LIMIT", "OFFSET", "RETURNING", "FOR", "HAVING", "WINDOW", "UNION",
        "INTERSECT", "EXCEPT", "JOIN", "LEFT", "RIGHT", "INNER", "FULL", "CROSS", "WHERE", "ON",
        "DO", "WITH", "THEN", "LOOP",
    }
)  # fmt: skip
# Words that end a SET list.
_SET_ENDS = frozenset({"FROM", "WHERE", "RETURNING"})
_FLIPS: dict[str, tuple[str, ...]] = {
    "<": ("<=", ">="),
    "<=": ("<", ">"),
    ">": (">=", "<="),
    ">=": (">", "<"),
    "=": ("<>",),
    "<>": ("=",),
    "!=": ("=",),
}


@dataclass(frozen=True)
class Found:
    """One SQL mutation: operator name and edit."""

    operator: str
    edit: Edit


def generate(text: str, states: Sequence[Sequence[str]]) -> list[Found]:
    """Return every mutation of one statement file, in file order."""
    code = [token for token in tokenize(text) if token.code]
    depths = _depths(code)
    assignments = set(_set_assignments(code, depths))
    found = [
        *_drop_conjuncts(code, depths),
        *_flip_comparisons(code, assignments),
        *_constants(code, states),
        *_drop_set_columns(code, depths),
    ]
    return sorted(found, key=lambda item: (item.edit.start, item.operator, item.edit.replacement))


def _depths(code: list[Token]) -> list[int]:
    """Return each token's nesting depth: parentheses, and CASE ... END as one more level."""
    depths, depth = [], 0
    for token in code:
        if token.text == ")" or token.is_word("END"):
            depth -= 1
        depths.append(depth)
        if token.text == "(" or token.is_word("CASE"):
            depth += 1
    return depths


def _condition_starts(code: list[Token]) -> Iterator[int]:
    """Yield the index after each condition's opening word.

    WHERE, a join's ON (not ON CONFLICT / ON CONSTRAINT), PL/pgSQL's IF / ELSIF (not END IF).
    """
    for index, token in enumerate(code[:-1]):
        following = code[index + 1]
        previous = code[index - 1] if index else None
        if (
            token.is_word("WHERE", "ELSIF")
            or (token.is_word("ON") and not following.is_word("CONFLICT", "CONSTRAINT"))
            or (token.is_word("IF") and not (previous is not None and previous.is_word("END")))
        ):
            yield index + 1


def _terms(code: list[Token], depths: list[int], start: int) -> list[tuple[int, int]]:
    """Return the top-level AND terms of the condition starting at `start` as index ranges."""
    depth = depths[start]
    terms, first, between = [], start, False
    index = start
    while index < len(code):
        token = code[index]
        if depths[index] < depth or (depths[index] == depth and token.text in (",", ";")):
            break
        if depths[index] == depth and token.kind is Kind.WORD:
            if token.upper in _CONDITION_ENDS:
                break
            if token.upper == "BETWEEN":
                between = True
            elif token.upper == "AND" and between:
                between = False
            elif token.upper == "AND":
                terms.append((first, index))
                first = index + 1
        index += 1
    terms.append((first, index))
    return [(a, b) for a, b in terms if b > a]


def _drop_conjuncts(code: list[Token], depths: list[int]) -> Iterator[Found]:
    for start in _condition_starts(code):
        terms = _terms(code, depths, start)
        if len(terms) < 2:  # noqa: PLR2004 - a single term is not a conjunct
            continue
        for position, (first, last) in enumerate(terms):
            if position == 0:
                cut = Edit(code[first].start, code[terms[1][0]].start, "")
            else:
                cut = Edit(code[terms[position - 1][1] - 1].end, code[last - 1].end, "")
            yield Found("drop-conjunct", cut)


def _set_lists(code: list[Token], depths: list[int]) -> Iterator[list[tuple[int, int]]]:
    """Yield each SET list as index ranges of its assignments."""
    for index, token in enumerate(code):
        if not token.is_word("SET"):
            continue
        depth, items, first = depths[index], [], index + 1
        end = index + 1
        while end < len(code):
            current = code[end]
            if depths[end] < depth or (depths[end] == depth and current.upper in _SET_ENDS):
                break
            if depths[end] == depth and current.text == ",":
                items.append((first, end))
                first = end + 1
            end += 1
        items.append((first, end))
        yield items


def _set_assignments(code: list[Token], depths: list[int]) -> Iterator[int]:
    """Yield the index of each assigning `=` of every SET list (the first `=` of an item)."""
    for items in _set_lists(code, depths):
        for first, last in items:
            for index in range(first, last):
                if code[index].text == "=" and depths[index] == depths[first]:
                    yield index
                    break


def _drop_set_columns(code: list[Token], depths: list[int]) -> Iterator[Found]:
    for items in _set_lists(code, depths):
        if len(items) < 2:  # noqa: PLR2004 - the only assignment cannot go
            continue
        for position, (first, last) in enumerate(items):
            if position + 1 < len(items):
                cut = Edit(code[first].start, code[items[position + 1][0]].start, "")
            else:
                cut = Edit(code[items[position - 1][1] - 1].end, code[last - 1].end, "")
            yield Found("drop-set-column", cut)


def _flip_comparisons(code: list[Token], assignments: set[int]) -> Iterator[Found]:
    for index, token in enumerate(code):
        if token.text == "=" and index and code[index - 1].text == ":":
            continue  # PL/pgSQL's `:=` assigns
        if token.kind is Kind.OP and token.text in _FLIPS and index not in assignments:
            for replacement in _FLIPS[token.text]:
                yield Found("flip-comparison", Edit(token.start, token.end, replacement))
        elif token.is_word("IS") and index + 1 < len(code):
            yield from _negate_after(code, index, ("NULL", "DISTINCT"))
        elif token.is_word("EXISTS"):
            previous = code[index - 1] if index else None
            if previous is not None and previous.is_word("NOT"):
                yield Found("flip-comparison", Edit(previous.start, token.start, ""))
            else:
                yield Found("flip-comparison", Edit(token.start, token.start, "NOT "))


def _negate_after(code: list[Token], index: int, words: tuple[str, ...]) -> Iterator[Found]:
    """Negate `IS [NOT] word`: drop the NOT, or insert one."""
    following = code[index + 1]
    if following.is_word("NOT") and index + 2 < len(code) and code[index + 2].is_word(*words):
        yield Found("flip-comparison", Edit(following.start, code[index + 2].start, ""))
    elif following.is_word(*words):
        yield Found("flip-comparison", Edit(following.start, following.start, "NOT "))


def _constants(code: list[Token], states: Sequence[Sequence[str]]) -> Iterator[Found]:
    next_state = {
        state: group[(position + 1) % len(group)]
        for group in states
        for position, state in enumerate(group)
    }
    for token in code:
        if token.kind is Kind.NUMBER and token.text.isdigit():
            value = int(token.text)
            for changed in (value + 1, value - 1):
                yield Found("constant", Edit(token.start, token.end, str(changed)))
        elif token.is_word("TRUE", "FALSE"):
            swapped = "false" if token.upper == "TRUE" else "true"
            yield Found("constant", Edit(token.start, token.end, swapped))
        elif token.kind is Kind.STRING and token.text[1:-1] in next_state:
            yield Found(
                "constant", Edit(token.start, token.end, f"'{next_state[token.text[1:-1]]}'")
            )


@dataclass(frozen=True)
class Body:
    """The body of one SECURITY DEFINER function of a migration: its name, text and offset."""

    function: str  # the schema-qualified name, e.g. ql3.worker_take_attempts_v1
    start: int
    text: str


def definer_bodies(text: str) -> list[Body]:
    """Return the `$tag$` bodies of the file's `CREATE [OR REPLACE] FUNCTION ... SECURITY DEFINER`.

    A definer function's body is where a worker's write is decided (the worker login may only
    call it), so it is mutated like a statement; the other functions (argument checks, the
    grace constant) are reached through these.
    """
    code = [token for token in tokenize(text) if token.code]
    bodies: list[Body] = []
    for index, token in enumerate(code):
        before = [previous.upper for previous in code[max(index - 3, 0) : index]]
        if not token.is_word("FUNCTION") or not (
            before[-1:] == ["CREATE"] or before == ["CREATE", "OR", "REPLACE"]
        ):
            continue
        name = ""
        cursor = index + 1
        while cursor < len(code) and code[cursor].text != "(":
            name += code[cursor].text
            cursor += 1
        words: set[str] = set()
        while cursor < len(code) and code[cursor].kind is not Kind.DOLLAR:
            words.add(code[cursor].upper)
            cursor += 1
        if cursor == len(code) or not {"SECURITY", "DEFINER"} <= words:
            continue
        body = code[cursor]
        tag = body.text[: body.text.index("$", 1) + 1]
        inner = body.text[len(tag) : -len(tag)]
        bodies.append(Body(name, body.start + len(tag), inner))
    return bodies
