"""A small, over-approximating data-flow pass: the stdlib objects each expression may hold.

Rule zero cannot be checked by name alone: `D = datetime.datetime; D.now()`,
`from time import *; time()`, `class T(datetime.datetime)` then `T.now()`, `cls.now()` or
`super().now()`, a clock kept in a dict or returned by a helper all read the wall clock without
spelling it. This pass gives every expression the set of values it may denote: dotted names
("time", "datetime.datetime", "time.time"), containers of them, and the tree's own functions and
classes. `_bindings` grows the tables to a fixpoint over the whole audited tree; this module
answers "what may this expression be" from them:

- a name is looked up in its Python scope (each scope's bindings count flow-insensitively);
- attributes stored anywhere are pooled by attribute name (`obj.clock`, class attributes);
- a class is what its bases resolve to plus itself; a datetime instance ("datetime.datetime()")
  has its class's class methods; `type(x)`, `x.__class__`, and `self`, `cls` and `super()`
  inside a datetime subclass are the class;
- containers hold their elements, read back by subscripts, iteration, `next`, `.get`, `.pop`;
  `vars(m)`, `m.__dict__` and `globals()` hold attributes;
- `functools.partial`, `staticmethod`, `classmethod`, `typing.cast`, `getattr` (in its several
  spellings), `operator.attrgetter` / `methodcaller`, module loaders and `sys.modules[...]` pass
  their target through; calling a function of the tree (or a method, found by its name) gives
  what it returns or yields.

Only names on the clock checker's vocabulary (and the tree's own modules) are kept, which makes
the value space finite and the fixpoint certain to end.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING, Final

from ._scopes import MODULE

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._scopes import ModuleScopes, Scope

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
_MODULE_LOADERS: Final = frozenset({"importlib.import_module", "__import__"})
_GETTERS: Final = frozenset({"operator.attrgetter", "operator.methodcaller"})
# Builtins the pass follows when a module reads them without shadowing them.
_BUILTINS: Final = frozenset(
    {"getattr", "setattr", "vars", "globals", "next", "dict", "super", "type", "object"}
    | {"__import__"}
    | {name for name in FIRST_ARGUMENT if "." not in name}
)
# `getattr` under other names: all take (object, name).
GETATTR: Final = frozenset({"getattr", "object.__getattribute__", "type.__getattribute__"})
# Attributes that are the object itself again (a bound method's function, a class's class...).
_SAME_OBJECT: Final = frozenset({"__class__", "__call__", "__func__", "__wrapped__", "__self__"})
_CONTAINER_OF_SELF: Final = frozenset({"__bases__", "__mro__"})
# Container methods that hand back an element, or the container (view) itself.
_ELEMENT_METHODS: Final = frozenset(
    {"get", "get_nowait", "pop", "popitem", "popleft", "setdefault"}
)
_VIEW_METHODS: Final = frozenset({"values", "items", "keys", "copy"})
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
        *_MODULE_LOADERS,
        *_GETTERS,
        *_BUILTINS,
        *GETATTR,
        *(f"builtins.{name}" for name in _BUILTINS),
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


def _constructed(callee: str) -> set[str]:
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


class ModuleFlow:
    """One module of the tree: its scopes, and the value of any of its expressions."""

    def __init__(self, name: str, scopes: ModuleScopes, shared: Shared) -> None:
        self.name = name
        self.scopes = scopes
        self.shared = shared
        self._cache: dict[ast.AST, set[str]] = {}
        for scope in scopes.inner.values():
            if scope.ident is not None:
                shared.scopes[scope.ident] = scope

    def value(self, node: ast.AST, scope: Scope) -> set[str]:
        """Return every value (see the module docstring) `node` may evaluate to."""
        cached = self._cache.get(node)
        if cached is None:
            found = self._value(node, scope)
            cached = self._cache[node] = {value for value in found if self.shared.keep(value)}
        return set(cached)

    def forget(self) -> None:
        """Drop the values remembered since the last call (the tables have grown since).

        Why: a node's value is asked for by every enclosing expression and binding; remembering it
        for one round halves the work, and a value that went stale within the round is recomputed
        in the next one, which `Shared.changed` guarantees.
        """
        self._cache.clear()

    def _value(self, node: ast.AST, scope: Scope) -> set[str]:  # noqa: C901, PLR0911
        if isinstance(node, ast.Name):
            return self._lookup(node.id, scope)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.value(node.value, scope), node.attr)
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        if isinstance(node, ast.Subscript):
            return self._keyed(self.value(node.value, scope), string(node.slice))
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return self.contain(self.union(node.elts, scope))
        if isinstance(node, ast.Dict):
            spread = [v for k, v in zip(node.keys, node.values, strict=True) if k is None]
            held = [v for k, v in zip(node.keys, node.values, strict=True) if k is not None]
            return self.union(spread, scope) | self.contain(self.union(held, scope))
        if isinstance(node, ast.Starred | ast.Await | ast.NamedExpr):
            return self.value(node.value, scope)
        if isinstance(node, ast.IfExp):
            return self.union([node.body, node.orelse], scope)
        if isinstance(node, ast.BoolOp):
            return self.union(node.values, scope)
        if isinstance(node, ast.BinOp):
            return self.union([node.left, node.right], scope)
        if isinstance(node, ast.Lambda):
            return {self.scopes.inner[node].ident or ""}
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            item = node.value if isinstance(node, ast.DictComp) else node.elt
            return self.contain(self.value(item, self.scopes.inner[node]))
        return set()

    def union(self, nodes: Iterable[ast.AST], scope: Scope) -> set[str]:
        """Return the union of the values of `nodes`."""
        return {value for node in nodes for value in self.value(node, scope)}

    def contain(self, values: Iterable[str]) -> set[str]:
        """Return the values of a container holding `values` (functions and classes left out)."""
        wrapped = (CONTAINER + value for value in self.shared.portable(values))
        return {value for value in wrapped if self.shared.keep(value)}

    def _lookup(self, name: str, scope: Scope) -> set[str]:
        current: Scope | None = scope.module if name in scope.declared_global else scope
        while current is not None:
            if current.kind == MODULE:
                # Star imports bind names the scope builder could not list as locals.
                if name in current.local or name in current.table:
                    return set(current.table.get(name, ()))
                break
            if name in current.local:
                return set(current.table.get(name, ()))
            current = current.lookup_parent
        return {name} if name in _BUILTINS else set()

    def attribute(self, bases: Iterable[str], attr: str) -> set[str]:
        """Return `base.attr` for every base, plus whatever was stored under `.attr` anywhere."""
        found = set(self.shared.attributes.get(attr, ()))
        for base in bases:
            if attr == "__class__":
                found.add(base.removesuffix(INSTANCE))
            elif attr in _SAME_OBJECT:
                found.add(base)
            elif marked(base):
                continue
            elif base == "builtins" and attr in _BUILTINS:
                found.add(attr)
            elif attr == "__dict__":
                found.add(NAMESPACE + base)
            elif attr in _CONTAINER_OF_SELF:
                found.add(CONTAINER + base)
            else:
                found |= self.shared.expand(f"{base.removesuffix(INSTANCE)}.{attr}")
        return {value for value in found if self.shared.keep(value)}

    def _keyed(self, bases: set[str], key: str | None) -> set[str]:
        """Return `bases[key]`: container elements, a namespace's attribute, a loaded module."""
        found = elements(bases)
        if key is not None:
            for base in bases:
                if base.startswith(NAMESPACE):
                    found |= self.attribute([base[len(NAMESPACE) :]], key)
                elif base == "sys.modules":
                    found |= self.shared.expand(key)
        return found

    def callees(self, func: ast.expr, scope: Scope) -> set[str]:
        """Return what a call's function may be, including methods reached as `obj.name`."""
        found = self.value(func, scope)
        if isinstance(func, ast.Attribute):
            found |= self.shared.methods.get(func.attr, set())
        return found

    def _call(self, node: ast.Call, scope: Scope) -> set[str]:
        found = self._method_result(node, scope)
        first = self.value(node.args[0], scope) if node.args else set()
        if node.args and isinstance(node.args[0], ast.Starred):
            first = elements(first)
        for callee in self.callees(node.func, scope):
            found |= self._result(callee, node, first, scope)
        return found

    def _method_result(self, node: ast.Call, scope: Scope) -> set[str]:
        """Return what a container method call (`d.get(k)`, `d.values()`) hands back."""
        func = node.func
        if not isinstance(func, ast.Attribute):
            return set()
        if func.attr in GETATTR_METHODS:
            key = string(node.args[0]) if node.args else None
            return self.attribute(self.value(func.value, scope), key) if key else set()
        if func.attr in _ELEMENT_METHODS:
            key = string(node.args[0]) if node.args else None
            return self._keyed(self.value(func.value, scope), key)
        if func.attr in _VIEW_METHODS:
            return {v for v in self.value(func.value, scope) if v.startswith(CONTAINER)}
        return set()

    def _result(self, callee: str, node: ast.Call, first: set[str], scope: Scope) -> set[str]:
        """Return what calling `callee` (one value of the call's function) may produce."""
        special = self._builtin_result(callee, node, first, scope)
        if special is not None:
            return special
        if callee in FIRST_ARGUMENT:
            return first
        if callee.startswith(FUNCTION_VALUE):
            return set(self.shared.returns.get(callee, ()))
        if callee.startswith(GETTER):  # attrgetter("now")(cls): treated as reading cls.now
            return self.attribute(first, callee[len(GETTER) :])
        return _constructed(callee)

    def _builtin_result(  # noqa: C901, PLR0911 (one return per builtin)
        self, callee: str, node: ast.Call, first: set[str], scope: Scope
    ) -> set[str] | None:
        """Return what a builtin or helper whose result depends on its arguments produces."""
        args = node.args
        key = string(args[1]) if len(args) > 1 else None
        if callee == "type" and len(args) == 3:  # noqa: PLR2004 (name, bases, namespace)
            return elements(self.value(args[1], scope))
        if callee == "type":  # type(x): the class of an instance (a class stays itself)
            return {value.removesuffix(INSTANCE) for value in first}
        if callee == "next":
            return elements(first)
        if callee == "typing.cast":
            return self.value(args[1], scope) if len(args) > 1 else set()
        if callee in GETATTR:
            return self.attribute(first, key) if key else set()
        if callee == "vars":
            return {NAMESPACE + value for value in first if not marked(value)}
        if callee == "globals":
            return {NAMESPACE + self.name}
        if callee in _MODULE_LOADERS:
            name = string(args[0]) if args else None
            return self.shared.expand(name) if name else set()
        if callee in _GETTERS:
            name = string(args[0]) if args else None
            return {GETTER + name} if name else set()
        if callee == "super":
            cls = scope.enclosing_class()
            return set(cls.class_value) if cls is not None and not args else first
        if callee == "dict":
            kwargs = self.union([keyword.value for keyword in node.keywords], scope)
            return self.contain(kwargs) | {v for v in first if v.startswith(CONTAINER)}
        return None
