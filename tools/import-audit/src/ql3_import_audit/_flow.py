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
from typing import TYPE_CHECKING

from ._scopes import MODULE
from ._values import (
    BUILTINS,
    CONTAINER,
    CONTAINER_OF_SELF,
    ELEMENT_METHODS,
    FIRST_ARGUMENT,
    FUNCTION_VALUE,
    GETATTR,
    GETATTR_METHODS,
    GETTER,
    GETTERS,
    INSTANCE,
    MODULE_LOADERS,
    NAMESPACE,
    SAME_OBJECT,
    VIEW_METHODS,
    constructed,
    elements,
    marked,
    string,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._scopes import ModuleScopes, Scope
    from ._values import Shared


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
        return {name} if name in BUILTINS else set()

    def attribute(self, bases: Iterable[str], attr: str) -> set[str]:
        """Return `base.attr` for every base, plus whatever was stored under `.attr` anywhere."""
        found = set(self.shared.attributes.get(attr, ()))
        for base in bases:
            if attr == "__class__":
                found.add(base.removesuffix(INSTANCE))
            elif attr in SAME_OBJECT:
                found.add(base)
            elif marked(base):
                continue
            elif base == "builtins" and attr in BUILTINS:
                found.add(attr)
            elif attr == "__dict__":
                found.add(NAMESPACE + base)
            elif attr in CONTAINER_OF_SELF:
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
        if func.attr in ELEMENT_METHODS:
            key = string(node.args[0]) if node.args else None
            return self._keyed(self.value(func.value, scope), key)
        if func.attr in VIEW_METHODS:
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
        return constructed(callee)

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
        if callee in MODULE_LOADERS:
            name = string(args[0]) if args else None
            return self.shared.expand(name) if name else set()
        if callee in GETTERS:
            name = string(args[0]) if args else None
            return {GETTER + name} if name else set()
        if callee == "super":
            cls = scope.enclosing_class()
            return set(cls.class_value) if cls is not None and not args else first
        if callee == "dict":
            kwargs = self.union([keyword.value for keyword in node.keywords], scope)
            return self.contain(kwargs) | {v for v in first if v.startswith(CONTAINER)}
        return None
