"""Integer and ctid arrays as PostgreSQL array literals: the cheap way to bind a whole batch.

psycopg dumps a Python list element by element in Python: about 1.2 us an element in binary,
twice that in text, where each element is also checked for quoting. The fenced commit of one
128-claim round binds a dozen such arrays, which cost a replica as much CPU as deciding the
round. An integer's text is a sign and digits, and a ctid's text is `(block,offset)`: neither
needs escaping (a ctid only the double quotes every array element containing a comma takes), so
the literal is one C-speed join, and the statement casts it (`%(name)s::bigint[]`,
`::tid[]`), which parses it and refuses anything that is not one. Free text (owner ids, states,
policies) is never rendered here: psycopg binds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["bigint_array", "tid_array"]


def bigint_array(values: Sequence[int | None]) -> str:
    """Return `values` as a `bigint[]` literal, None as NULL: `{1,-2,NULL}`."""
    if None in values:
        return "{" + ",".join("NULL" if value is None else str(value) for value in values) + "}"
    return "{" + ",".join(map(str, values)) + "}"


def tid_array(ctids: Sequence[str]) -> str:
    """Return ctids as read from the database (`(0,1)`) as a `tid[]` literal."""
    return '{"' + '","'.join(ctids) + '"}' if ctids else "{}"
