"""A small, over-approximating data-flow pass: the stdlib objects each expression may hold.

Rule zero cannot be checked by name alone: `D = datetime.datetime; D.now()`,
`from time import *; time()`, `class T(datetime.datetime)` then `T.now()`, `cls.now()` or
`super().now()`, a clock kept in a dict or returned by a helper all read the wall clock without
spelling it. This pass gives every expression the set of dotted names it may denote ("time",
"datetime.datetime", "time.time", ...) by propagating bindings to a fixpoint over the whole
audited tree:

- names bound by imports (plain, relative, star), assignments (chains, tuples, augmented, walrus,
  `for`, `with ... as`), parameters (defaults; a method's first parameter is its class) and
  `global` / `nonlocal`, each in its Python scope, flow-insensitively (every binding of a name in
  a scope counts everywhere in that scope);
- attributes stored anywhere (`obj.clock = time.time`, class bodies) are pooled by attribute name;
- a class is what its bases resolve to, and an instance is treated as its class, so
  `type(x)`, `x.__class__`, `self`, `cls` and `super()` inside a datetime subclass are datetime;
- containers (`[...]`, `{...}`, `.append`, `d[k] = v`) hold their elements, read back by
  subscripts, iteration, `next`, `.get` / `.pop`; `vars(m)` / `m.__dict__` hold `m`'s attributes;
- `functools.partial`, `staticmethod`, `classmethod`, `type`, `typing.cast`, `getattr`, module
  loaders and `sys.modules[...]` pass their target through; local functions and lambdas return
  what their `return` statements return;
- module-level names are exported, so `from ._base import Stamp` in one module sees the
  datetime subclass defined in another.

Only names on the clock checker's vocabulary (and the tree's own modules) are kept, which makes
the value space finite and the fixpoint certain to end.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING, Final

from ._scopes import CLASS, MODULE, parameters

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._scopes import ModuleScopes, Scope

CONTAINER: Final = "[]"  # "[]x": a container whose elements may be x
NAMESPACE: Final = "{}"  # "{}x": x's attribute dictionary (vars(x), x.__dict__)
_FUNCTION: Final = "fn:"
_MAX_NESTING: Final = 2

# Callables whose result is (or calls) their first argument, for this pass's purpose.
_FIRST_ARGUMENT: Final = frozenset(
    {
        "functools.partial",
        "functools.partialmethod",
        "functools.cache",
        "functools.lru_cache",
        "staticmethod",
        "classmethod",
        "type",
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
# Builtins the pass follows when a module reads them without shadowing them.
_BUILTINS: Final = frozenset(
    {"getattr", "vars", "next", "dict", "super", "type", "__import__"}
    | {name for name in _FIRST_ARGUMENT if "." not in name}
)
# Attributes that are the object itself again (a bound method's function, a class's class...).
_SAME_OBJECT: Final = frozenset({"__class__", "__call__", "__func__", "__wrapped__"})
_CONTAINER_OF_SELF: Final = frozenset({"__bases__", "__mro__"})
# Container methods that hand back an element, or the container (view) itself.
_ELEMENT_METHODS: Final = frozenset({"get", "pop", "popitem", "popleft", "setdefault"})
_VIEW_METHODS: Final = frozenset({"values", "items", "keys", "copy"})
# Container methods that put their (last) argument, or every element of it, into the receiver.
_ADD_ONE: Final = frozenset({"append", "appendleft", "add", "insert", "setdefault"})
_ADD_ALL: Final = frozenset({"extend", "extendleft", "update"})
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
HELPERS: Final = frozenset(
    {
        *_FIRST_ARGUMENT,
        *_MODULE_LOADERS,
        "getattr",
        "vars",
        "next",
        "dict",
        "super",
        "typing.cast",
        "sys.modules",
        *(f"{cls}.{name}" for cls in DATETIME_CLASSES for name in _CONSTRUCTORS),
    }
)


def string(node: ast.expr | None) -> str | None:
    """Return the value of a string literal, None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _marked(value: str) -> bool:
    return value.startswith((CONTAINER, NAMESPACE, _FUNCTION))


def elements(values: Iterable[str]) -> set[str]:
    """Return what iterating or indexing containers holding `values` may produce."""
    return {value[len(CONTAINER) :] for value in values if value.startswith(CONTAINER)}


@dataclasses.dataclass
class Shared:
    """What flows between modules and functions: grown by every module until nothing changes."""

    prefixes: frozenset[str]
    local_modules: frozenset[str]
    exports: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    attributes: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    returns: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    changed: bool = False

    @classmethod
    def over(cls, vocabulary: Iterable[str], local_modules: Iterable[str]) -> Shared:
        """Start empty tables for a tree whose own modules are `local_modules`."""
        parts = [name.split(".") for name in {*vocabulary, *HELPERS}]
        prefixes = {".".join(part[:end]) for part in parts for end in range(1, len(part) + 1)}
        return cls(frozenset(prefixes), frozenset(local_modules))

    def keep(self, value: str) -> bool:
        """Return True if `value` can matter: a vocabulary prefix or one of the tree's modules."""
        core, depth = value, 0
        while core.startswith((CONTAINER, NAMESPACE)):
            core, depth = core[len(CONTAINER) :], depth + 1
        if depth > _MAX_NESTING:
            return False
        if core.startswith(_FUNCTION) or core in self.prefixes or core in self.local_modules:
            return True
        return core.rpartition(".")[0] in self.local_modules

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
        names = {*self.prefixes, *self.exports}
        bound: dict[str, str] = {}
        for name in names:
            if name.startswith(f"{module}."):
                first = name[len(module) + 1 :].split(".")[0]
                if not first.startswith("_"):
                    bound[first] = f"{module}.{first}"
        return bound


class ModuleFlow:
    """The bindings of one module and the value of any of its expressions."""

    def __init__(self, name: str, is_package: bool, scopes: ModuleScopes, shared: Shared) -> None:  # noqa: FBT001
        self.name = name
        self._package = name if is_package else name.rpartition(".")[0]
        self.scopes = scopes
        self._shared = shared
        self._sites = [(node, scope) for node, scope in scopes.pairs if _binds(node)]

    # -- values -------------------------------------------------------------------------------

    def value(self, node: ast.AST, scope: Scope) -> set[str]:  # noqa: C901, PLR0911
        """Return every dotted name (or marked container/function) `node` may evaluate to."""
        if isinstance(node, ast.Name):
            return self._lookup(node.id, scope)
        if isinstance(node, ast.Attribute):
            return self._attribute(self.value(node.value, scope), node.attr)
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, scope)
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return self._contain(self._union(node.elts, scope))
        if isinstance(node, ast.Dict):
            spread = [v for k, v in zip(node.keys, node.values, strict=True) if k is None]
            held = [v for k, v in zip(node.keys, node.values, strict=True) if k is not None]
            return self._union(spread, scope) | self._contain(self._union(held, scope))
        if isinstance(node, ast.Starred | ast.Await | ast.NamedExpr):
            return self.value(node.value, scope)
        if isinstance(node, ast.IfExp):
            return self._union([node.body, node.orelse], scope)
        if isinstance(node, ast.BoolOp):
            return self._union(node.values, scope)
        if isinstance(node, ast.BinOp):
            return self._union([node.left, node.right], scope)
        if isinstance(node, ast.Lambda):
            return {self.scopes.inner[node].function_id or ""}
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            item = node.value if isinstance(node, ast.DictComp) else node.elt
            return self._contain(self.value(item, self.scopes.inner[node]))
        return set()

    def _union(self, nodes: Iterable[ast.AST], scope: Scope) -> set[str]:
        return {value for node in nodes for value in self.value(node, scope)}

    def _contain(self, values: Iterable[str]) -> set[str]:
        return {CONTAINER + value for value in values if self._shared.keep(CONTAINER + value)}

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

    def _attribute(self, bases: Iterable[str], attr: str) -> set[str]:
        shared = self._shared
        found = set(shared.attributes.get(attr, ()))
        for base in bases:
            if attr in _SAME_OBJECT:
                found.add(base)
            elif base.startswith((CONTAINER, NAMESPACE, _FUNCTION)):
                continue
            elif attr == "__dict__":
                found.add(NAMESPACE + base)
            elif attr in _CONTAINER_OF_SELF:
                found.add(CONTAINER + base)
            else:
                found |= shared.expand(f"{base}.{attr}")
        return {value for value in found if shared.keep(value)}

    def _keyed(self, bases: Iterable[str], key: str | None) -> set[str]:
        """Return `bases[key]`: container elements, a namespace's attribute, a loaded module."""
        found = elements(bases)
        if key is not None:
            for base in bases:
                if base.startswith(NAMESPACE):
                    found |= self._attribute([base[len(NAMESPACE) :]], key)
                elif base == "sys.modules":
                    found |= self._shared.expand(key)
        return found

    def _subscript(self, node: ast.Subscript, scope: Scope) -> set[str]:
        return self._keyed(self.value(node.value, scope), string(node.slice))

    def _call(self, node: ast.Call, scope: Scope) -> set[str]:
        found = self._method_result(node, scope)
        args = node.args
        first = self.value(args[0], scope) if args else set()
        if args and isinstance(args[0], ast.Starred):
            first = elements(first)
        for callee in self.value(node.func, scope):
            found |= self._result(callee, node, first, scope)
        return {value for value in found if self._shared.keep(value)}

    def _method_result(self, node: ast.Call, scope: Scope) -> set[str]:
        """Return what a container method call (`d.get(k)`, `d.values()`) hands back."""
        func = node.func
        if not isinstance(func, ast.Attribute):
            return set()
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
        if callee in _FIRST_ARGUMENT:
            return first
        if callee in DATETIME_CLASSES:
            return {callee}  # an instance; its class methods are the class's
        owner, _, method = callee.rpartition(".")
        if owner in DATETIME_CLASSES and method in _CONSTRUCTORS:
            return {owner}
        if callee.startswith(_FUNCTION):
            return set(self._shared.returns.get(callee, ()))
        return set()

    def _builtin_result(  # noqa: PLR0911 (one return per builtin)
        self, callee: str, node: ast.Call, first: set[str], scope: Scope
    ) -> set[str] | None:
        """Return what a builtin or helper whose result depends on its arguments produces."""
        args = node.args
        if callee == "type" and len(args) == 3:  # noqa: PLR2004 (name, bases, namespace)
            return elements(self.value(args[1], scope))
        if callee == "next":
            return elements(first)
        if callee == "typing.cast":
            return self.value(args[1], scope) if len(args) > 1 else set()
        if callee == "getattr":
            key = string(args[1]) if len(args) > 1 else None
            return self._attribute(first, key) if key else set()
        if callee == "vars":
            return {NAMESPACE + value for value in first if not _marked(value)}
        if callee in _MODULE_LOADERS:
            key = string(args[0]) if args else None
            return self._shared.expand(key) if key else set()
        if callee == "super":
            cls = scope.enclosing_class()
            return set(cls.class_value) if cls is not None and not args else first
        if callee == "dict":
            kwargs = self._union([keyword.value for keyword in node.keywords], scope)
            return self._contain(kwargs) | {v for v in first if v.startswith(CONTAINER)}
        return None

    # -- bindings -----------------------------------------------------------------------------

    def bind_round(self) -> None:
        """Apply every binding of the module once with the current values, then export."""
        for node, scope in self._sites:
            self._bind_site(node, scope)
        for name, values in self.scopes.module.table.items():
            self._shared.add(self._shared.exports, f"{self.name}.{name}", values)

    def _bind_site(self, node: ast.AST, scope: Scope) -> None:  # noqa: C901, PLR0912
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._assign(target, node.value, self.value(node.value, scope), scope)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
            self._assign(node.target, node.value, self.value(node.value, scope), scope)
        elif isinstance(node, ast.NamedExpr):
            self._bind(node.target.id, self.value(node.value, scope), scope.walrus_scope())
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            self._assign(node.target, None, elements(self.value(node.iter, scope)), scope)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            values = self.value(node.context_expr, scope)
            self._assign(node.optional_vars, None, values, scope)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound = self._shared.expand(alias.name) if alias.asname else {top}
                self._bind(alias.asname or top, bound, scope)
        elif isinstance(node, ast.ImportFrom):
            self._import_from(node, scope)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            self._function(node, scope)
        elif isinstance(node, ast.ClassDef):
            inner = self.scopes.inner[node]
            bases = self._union(node.bases, scope)
            if not bases <= inner.class_value:
                inner.class_value |= bases
                self._shared.changed = True
            self._bind(node.name, bases, scope)
        elif isinstance(node, ast.Return) and node.value is not None and scope.function_id:
            self._shared.add(self._shared.returns, scope.function_id, self.value(node.value, scope))
        elif isinstance(node, ast.Call):
            self._mutation(node, scope)

    def _bind(self, name: str, values: Iterable[str], scope: Scope) -> None:
        target = scope.store_scope(name)
        self._shared.add(target.table, name, values)
        if target.kind == CLASS:  # a class attribute, readable as `Class.name` or `self.name`
            self._shared.add(self._shared.attributes, name, values)

    def _assign(
        self, target: ast.expr, source: ast.expr | None, values: set[str], scope: Scope
    ) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, values, scope)
        elif isinstance(target, ast.Attribute):
            self._shared.add(self._shared.attributes, target.attr, values)
        elif isinstance(target, ast.Subscript):
            self._store_into(target.value, self._contain(values), scope)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, None, values, scope)
        elif isinstance(target, ast.Tuple | ast.List):
            pairwise = (
                isinstance(source, ast.Tuple | ast.List)
                and len(source.elts) == len(target.elts)
                and not any(isinstance(e, ast.Starred) for e in (*source.elts, *target.elts))
            )
            if pairwise and isinstance(source, ast.Tuple | ast.List):
                for item, item_source in zip(target.elts, source.elts, strict=True):
                    self._assign(item, item_source, self.value(item_source, scope), scope)
                return
            # Unpacking something unknown: every target may get any element (or the value).
            spread = elements(values) | {value for value in values if not _marked(value)}
            for item in target.elts:
                self._assign(item, None, spread, scope)

    def _store_into(self, holder: ast.expr, values: set[str], scope: Scope) -> None:
        """Record that the container `holder` now also holds `values` (already wrapped)."""
        if isinstance(holder, ast.Name):
            self._bind(holder.id, values, scope)
        elif isinstance(holder, ast.Attribute):
            self._shared.add(self._shared.attributes, holder.attr, values)
        elif isinstance(holder, ast.Subscript):
            self._store_into(holder.value, self._contain(values), scope)

    def _mutation(self, node: ast.Call, scope: Scope) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute):
            return
        if func.attr in _ADD_ONE and node.args:
            self._store_into(func.value, self._contain(self.value(node.args[-1], scope)), scope)
        elif func.attr in _ADD_ALL:
            added = self._union(node.args, scope)
            added |= self._contain(self._union([k.value for k in node.keywords], scope))
            self._store_into(func.value, added, scope)

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, scope: Scope
    ) -> None:
        inner = self.scopes.inner[node]
        if not isinstance(node, ast.Lambda):
            self._bind(node.name, {inner.function_id or ""}, scope)
        else:
            returned = self.value(node.body, inner)
            self._shared.add(self._shared.returns, inner.function_id or "", returned)
        params = parameters(node.args)
        positional = [*node.args.posonlyargs, *node.args.args]
        defaults = dict(zip(reversed(positional), reversed(node.args.defaults), strict=False))
        defaults |= {
            param: default
            for param, default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
            if default is not None
        }
        for param in params:
            if param in defaults:
                self._bind(param.arg, self.value(defaults[param], scope), inner)
        owner = scope if scope.kind == CLASS else None
        if owner is not None and positional:
            # `self` / `cls`: the class (an instance counts as its class in this pass).
            self._bind(positional[0].arg, owner.class_value, inner)

    def _import_from(self, node: ast.ImportFrom, scope: Scope) -> None:
        module = self._absolute(node)
        if module is None:
            return
        for alias in node.names:
            if alias.name == "*":
                for name, full in self._shared.star_names(module).items():
                    self._bind(name, self._shared.expand(full), scope)
            else:
                bound = self._shared.expand(f"{module}.{alias.name}")
                self._bind(alias.asname or alias.name, bound, scope)

    def _absolute(self, node: ast.ImportFrom) -> str | None:
        """Return the absolute module a (possibly relative) `from` import reads."""
        if node.level == 0:
            return node.module
        parts = self._package.split(".") if self._package else []
        if node.level - 1 > len(parts):
            return None
        base = parts[: len(parts) - (node.level - 1)]
        return ".".join([*base, node.module] if node.module else base) or None


_BINDING_NODES = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.NamedExpr,
    ast.For,
    ast.AsyncFor,
    ast.comprehension,
    ast.withitem,
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.Return,
)


def _binds(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        return isinstance(func, ast.Attribute) and func.attr in _ADD_ONE | _ADD_ALL
    return isinstance(node, _BINDING_NODES)


def settle(flows: Iterable[ModuleFlow], shared: Shared, max_rounds: int = 64) -> None:
    """Apply every module's bindings until no table grows (the value space is finite)."""
    modules = list(flows)
    for _ in range(max_rounds):
        shared.changed = False
        for flow in modules:
            flow.bind_round()
        if not shared.changed:
            return
