"""The values of the clock data-flow pass and the tables that carry them between modules.

A value is a dotted stdlib name ("time", "datetime.datetime", "time.time") or one of the marked
forms below: a container of values, an attribute dictionary, an `operator.attrgetter`, a function
or class of the audited tree, a datetime instance. `Shared` holds what flows between modules and
functions (module exports, attributes pooled by name, function results, methods by name) and keeps
only the values that can matter to the clock checker, so the value space stays finite. `_flow`
computes the value of an expression from these tables; `_bindings` grows them.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._scopes import Scope


CONTAINER: Final = "[]"  # "[]x": a container whose elements may be x
NAMESPACE: Final = "{}"  # "{}x": x's attribute dictionary (vars(x), x.__dict__, globals())
GETTER: Final = "get:"  # "get:now": operator.attrgetter("now") / methodcaller("now")
FUNCTION_VALUE: Final = "fn:"  # "fn:<file>:<line>:<col>": a function or lambda of the tree
CLASS_VALUE: Final = "class:"  # "class:<file>:<line>:<col>": a class of the tree (or an instance)
INSTANCE: Final = "()"  # "datetime.datetime()": an instance; its class methods are the class's
_MAX_NESTING: Final = 2

# Callables whose result is (or calls) their first argument, for this pass's purpose.
FIRST_ARGUMENT: Final = frozenset(
    {
        "functools.partial",
        "functools.partialmethod",
        "functools.cache",
        "functools.lru_cache",
        "functools.cached_property",
        "staticmethod",
        "classmethod",
        "property",
        "iter",
        "list",
        "tuple",
        "set",
        "frozenset",
        "sorted",
        "reversed",
        "copy.copy",
        "copy.deepcopy",
    }
)
MODULE_LOADERS: Final = frozenset({"importlib.import_module", "__import__"})
GETTERS: Final = frozenset({"operator.attrgetter", "operator.methodcaller"})
# Builtins the pass follows when a module reads them without shadowing them.
BUILTINS: Final = frozenset(
    {"getattr", "setattr", "vars", "globals", "next", "dict", "super", "type", "object"}
    | {"__import__"}
    | {name for name in FIRST_ARGUMENT if "." not in name}
)
# `getattr` under other names: all take (object, name).
GETATTR: Final = frozenset({"getattr", "object.__getattribute__", "type.__getattribute__"})
# Attributes that are the object itself again (a bound method's function, a class's class...).
SAME_OBJECT: Final = frozenset({"__class__", "__call__", "__func__", "__wrapped__", "__self__"})
CONTAINER_OF_SELF: Final = frozenset({"__bases__", "__mro__"})
# Container methods that hand back an element, or the container (view) itself.
ELEMENT_METHODS: Final = frozenset({"get", "get_nowait", "pop", "popitem", "popleft", "setdefault"})
VIEW_METHODS: Final = frozenset({"values", "items", "keys", "copy"})
# Bound-method spellings of getattr: `time.__getattribute__("time")`.
GETATTR_METHODS: Final = frozenset({"__getattribute__", "__getattr__"})
# datetime classes and the class methods / instance methods that return an instance of them.
DATETIME_CLASSES: Final = frozenset({"datetime.datetime", "datetime.date"})
_CONSTRUCTORS: Final = frozenset(
    {
        "fromtimestamp",
        "utcfromtimestamp",
        "fromisoformat",
        "fromordinal",
        "fromisocalendar",
        "strptime",
        "combine",
        "now",
        "utcnow",
        "today",
        "replace",
        "astimezone",
    }
)
_HELPERS: Final = frozenset(
    {
        *FIRST_ARGUMENT,
        *MODULE_LOADERS,
        *GETTERS,
        *BUILTINS,
        *GETATTR,
        *(f"builtins.{name}" for name in BUILTINS),
        "typing.cast",
        "sys.modules",
        *(f"{cls}.{name}" for cls in DATETIME_CLASSES for name in _CONSTRUCTORS),
    }
)


def string(node: ast.AST | None) -> str | None:
    """Return the value of a string literal, None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def marked(value: str) -> bool:
    """Return True for a container, namespace, getter, function or class value."""
    return value.startswith((CONTAINER, NAMESPACE, GETTER, FUNCTION_VALUE, CLASS_VALUE))


def _prefixes(names: Iterable[str]) -> frozenset[str]:
    """Return every dotted prefix of `names` ("a.b.c" gives "a", "a.b", "a.b.c")."""
    parts = [name.split(".") for name in names]
    return frozenset(".".join(part[:end]) for part in parts for end in range(1, len(part) + 1))


def elements(values: Iterable[str]) -> set[str]:
    """Return what iterating or indexing containers holding `values` may produce."""
    return {value[len(CONTAINER) :] for value in values if value.startswith(CONTAINER)}


def constructed(callee: str) -> set[str]:
    """Return the instance that calling a class (or a datetime constructor) creates."""
    if callee.startswith(CLASS_VALUE):
        return {callee}  # an instance of a tree class is tracked as the class
    owner, _, method = callee.rpartition(".")
    if owner in DATETIME_CLASSES and method in _CONSTRUCTORS:
        return {owner + INSTANCE}
    return {callee + INSTANCE} if callee in DATETIME_CLASSES else set()


@dataclasses.dataclass
class Shared:
    """What flows between modules and functions: grown by every module until nothing changes."""

    prefixes: frozenset[str]
    local_modules: frozenset[str]
    # Helpers the pass follows as callees only (`list`, `functools.partial`, `getattr`...).
    helpers_only: frozenset[str]
    exports: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    attributes: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    returns: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    # Methods by name (the "fn:" values of every class-body `def name`), for calls `obj.name(...)`.
    methods: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    # Function and class scopes by their "fn:" / "class:" value, to bind arguments at calls.
    scopes: dict[str, Scope] = dataclasses.field(default_factory=dict)
    changed: bool = False

    @classmethod
    def over(cls, vocabulary: Iterable[str], local_modules: Iterable[str]) -> Shared:
        """Start empty tables for a tree whose own modules are `local_modules`."""
        clocks, helpers = _prefixes(vocabulary), _prefixes(_HELPERS)
        return cls(clocks | helpers, frozenset(local_modules), helpers - clocks)

    def portable(self, values: Iterable[str]) -> set[str]:
        """Return `values` without the tree's functions, classes and modules and the helpers.

        Why: those travel only through names (scopes, imports, exports), never through
        attributes, parameters, containers or returns. Letting them flow everywhere made every
        value set hold every method of the tree and every `(list, tuple)` of an isinstance check
        (minutes per run); the stdlib clock holders still flow through all of these, and calls
        reach methods through `methods` instead.
        """
        return {value for value in values if not self._callable_only(value)}

    def _callable_only(self, value: str) -> bool:
        core = value.lstrip(CONTAINER + NAMESPACE)
        if core.startswith((FUNCTION_VALUE, CLASS_VALUE)):
            return True
        return core in self.helpers_only or core in self.local_modules

    def keep(self, value: str) -> bool:
        """Return True if `value` can matter: a vocabulary prefix or one of the tree's modules."""
        core, depth = value, 0
        while core.startswith((CONTAINER, NAMESPACE)):
            core, depth = core[len(CONTAINER) :], depth + 1
        if depth > _MAX_NESTING:
            return False
        if core.startswith((FUNCTION_VALUE, CLASS_VALUE)) or core in self.prefixes:
            return True
        if core.endswith(INSTANCE):
            return core.removesuffix(INSTANCE) in DATETIME_CLASSES
        if core.startswith(GETTER):
            return any(prefix.endswith(f".{core[len(GETTER) :]}") for prefix in self.prefixes)
        # A tree module is kept; a name in it only through what it holds (`expand`), or every
        # imported helper would become a value that flows everywhere.
        return core in self.local_modules

    def add(self, table: dict[str, set[str]], key: str, values: Iterable[str]) -> None:
        """Union `values` into `table[key]`, noting whether anything grew."""
        new = {value for value in values if self.keep(value)}
        old = table.setdefault(key, set())
        if not new <= old:
            old |= new
            self.changed = True

    def expand(self, name: str) -> set[str]:
        """Return `name` and, if it is a module-level name of the tree, what it holds."""
        return {name, *self.exports.get(name, ())}

    def star_names(self, module: str) -> dict[str, str]:
        """Return the names `from module import *` may bind that this pass cares about."""
        bound: dict[str, str] = {}
        for name in (*self.prefixes, *self.exports):
            if name.startswith(f"{module}."):
                first = name[len(module) + 1 :].split(".")[0]
                if not first.startswith("_"):
                    bound[first] = f"{module}.{first}"
        return bound
