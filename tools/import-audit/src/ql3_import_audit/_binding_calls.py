"""The stores every binding rule ends in, and the rules for calls (arguments, callbacks, mutation).

A call binds in several ways: its arguments go to the parameters of every function or class of the
tree it may call (positional, keyword, `*args`, dataclass and pydantic fields by name), a function
passed as an argument gets every other argument (`map(f, xs)`, `Thread(target=f, args=...)`), and
`c.append(v)`, `c.update(...)` and the like put values into the container `c`. `_bindings.Binder`
adds the rules for names, imports, functions and classes on top of this class.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ._scopes import CLASS, parameters
from ._values import CLASS_VALUE, FUNCTION_VALUE, elements, string

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._flow import ModuleFlow
    from ._scopes import Scope
    from ._values import Shared

_ADD_ONE = frozenset({"append", "appendleft", "add", "insert", "setdefault", "put", "put_nowait"})
_ADD_ALL = frozenset({"extend", "extendleft", "update"})
# Methods that a class call runs with its arguments (dataclass and pydantic fields bind by name).
_INITIALISERS = ("__init__", "__new__", "__post_init__")


class CallBindings:
    """Store values under names, attributes and containers; bind what calls pass."""

    _flow: ModuleFlow
    _shared: Shared

    def _bind(self, name: str, values: Iterable[str], scope: Scope) -> None:
        target = scope.store_scope(name)
        self._shared.add(target.table, name, values)
        if target.kind == CLASS:  # a class attribute, readable as `Class.name` or `self.name`
            self._store_attribute(name, values)

    def _store_attribute(self, name: str, values: Iterable[str]) -> None:
        self._shared.add(self._shared.attributes, name, self._shared.portable(values))

    def _store_into(self, holder: ast.expr, values: set[str], scope: Scope) -> None:
        """Record that the container `holder` now also holds `values` (already wrapped)."""
        if isinstance(holder, ast.Name):
            self._bind(holder.id, values, scope)
        elif isinstance(holder, ast.Attribute):
            self._store_attribute(holder.attr, values)
        elif isinstance(holder, ast.Subscript):
            self._store_into(holder.value, self._flow.contain(values), scope)

    # -- calls ----------------------------------------------------------------------------------

    def _call(self, node: ast.Call, scope: Scope) -> None:
        value = self._flow.value
        self._mutation(node, scope)
        callees = self._flow.callees(node.func, scope)
        if "setattr" in callees and len(node.args) > 2:  # noqa: PLR2004 (object, name, value)
            name = string(node.args[1])
            if name is not None:
                self._store_attribute(name, value(node.args[2], scope))
        passed = [*node.args, *(keyword.value for keyword in node.keywords)]
        if not passed:
            return
        arguments = [self._shared.portable(value(arg, scope)) for arg in node.args]
        keywords: dict[str | None, set[str]] = {}
        for keyword in node.keywords:
            keywords.setdefault(keyword.arg, set()).update(
                self._shared.portable(value(keyword.value, scope))
            )
        functions = {v for arg in passed for v in self._flow.callees(arg, scope)}
        self._callbacks(functions, [*arguments, *keywords.values()])
        bound = isinstance(node.func, ast.Attribute)  # `obj.method(x)`: x is parameter two
        tree_callees = [c for c in callees if c.startswith((FUNCTION_VALUE, CLASS_VALUE))]
        for callee in tree_callees:
            if callee.startswith(FUNCTION_VALUE):
                self._arguments(callee, node, arguments, keywords, bound=bound)
            else:
                self._construct(callee, node, arguments, keywords)
        if not tree_callees:
            # Something outside the tree (SimpleNamespace, a library's pydantic or attrs
            # class...) may keep a keyword argument as the attribute of that name.
            for name, values in keywords.items():
                if name is not None:
                    self._store_attribute(name, values)

    def _mutation(self, node: ast.Call, scope: Scope) -> None:
        """Record what `c.append(v)`, `c.update(...)` and the like put into the container `c`."""
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _ADD_ONE and node.args:
            added = self._flow.contain(self._flow.value(node.args[-1], scope))
            self._store_into(func.value, added, scope)
        elif isinstance(func, ast.Attribute) and func.attr in _ADD_ALL:
            added = self._flow.union(node.args, scope)
            added |= self._flow.contain(self._flow.union([k.value for k in node.keywords], scope))
            self._store_into(func.value, added, scope)

    def _arguments(
        self,
        ident: str,
        node: ast.Call,
        arguments: list[set[str]],
        keywords: dict[str | None, set[str]],
        *,
        bound: bool,
    ) -> None:
        """Bind a call's arguments to the parameters of `ident` (`bound`: called as `obj.name`)."""
        inner = self._shared.scopes.get(ident)
        function = inner.node if inner is not None else None
        if inner is None or not isinstance(
            function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        ):
            return
        offset = receivers(inner) if bound else 0
        params = parameters(function.args)[offset:]
        for index, (arg, values) in enumerate(zip(node.args, arguments, strict=True)):
            if isinstance(arg, ast.Starred):  # `f(*xs)`: any parameter may get any element
                for param in params:
                    self._bind(param.arg, elements(values), inner)
            else:
                self._positional(function.args, inner, index + offset, values)
        for name, values in keywords.items():
            for param in params:
                if name is None or param.arg == name:
                    self._bind(param.arg, elements(values) if name is None else values, inner)

    def _positional(
        self, arguments: ast.arguments, inner: Scope, index: int, values: set[str]
    ) -> None:
        """Bind one positional argument to the parameter at `index` (or to `*args`)."""
        positional = [*arguments.posonlyargs, *arguments.args]
        if index < len(positional):
            self._bind(positional[index].arg, values, inner)
        elif arguments.vararg is not None:
            self._bind(arguments.vararg.arg, self._flow.contain(values), inner)

    def _construct(
        self,
        ident: str,
        node: ast.Call,
        arguments: list[set[str]],
        keywords: dict[str | None, set[str]],
    ) -> None:
        """Bind a class call's arguments to its initialisers and, by name, to its fields."""
        for body in self._lineage(ident):
            for initialiser in _INITIALISERS:
                for function in body.table.get(initialiser, set()):
                    self._arguments(function, node, arguments, keywords, bound=True)
            fields = _annotated(body)
            for values in arguments:  # positional dataclass / NamedTuple fields: any of them
                for field in fields:
                    self._store_attribute(field, values)
        for keyword, values in keywords.items():
            if keyword is not None:
                self._store_attribute(keyword, values)

    def _lineage(self, ident: str) -> list[Scope]:
        """Return the body of class `ident` and of each of its tree base classes."""
        bodies: list[Scope] = []
        pending = [ident]
        while pending:
            body = self._shared.scopes.get(pending.pop())
            if body is not None and body not in bodies:
                bodies.append(body)
                pending += body.base_classes
        return bodies

    def _callbacks(self, functions: set[str], passed: list[set[str]]) -> None:
        """Bind, for a function passed as an argument, every other argument to its parameters."""
        functions = {value for value in functions if value.startswith(FUNCTION_VALUE)}
        if not functions:
            return
        others = {value for values in passed for value in values}
        offered = others | elements(others) | elements(elements(others))
        for ident in functions:
            inner = self._shared.scopes.get(ident)
            if inner is not None and isinstance(
                inner.node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            ):
                # A method is passed bound (`self.method`): its receiver is not an argument.
                for param in parameters(inner.node.args)[receivers(inner) :]:
                    self._bind(param.arg, offered, inner)


def receivers(inner: Scope) -> int:
    """Return 1 for a method (its first parameter is the receiver), 0 for a static or plain one."""
    node = inner.node
    if inner.parent is None or inner.parent.kind != CLASS:
        return 0
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return 0
    return 0 if decorated(node, {"staticmethod"}) else 1


def decorated(node: ast.FunctionDef | ast.AsyncFunctionDef, names: Iterable[str]) -> bool:
    """Return True if a decorator of `node` is spelled `name` or `something.name`."""
    spelled = set(names)
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id in spelled:
            return True
        if isinstance(target, ast.Attribute) and target.attr in spelled:
            return True
    return False


def _annotated(body: Scope) -> list[str]:
    """Return the annotated names of a class body (dataclass / pydantic / NamedTuple fields)."""
    node = body.node
    if not isinstance(node, ast.ClassDef):
        return []
    return [
        statement.target.id
        for statement in node.body
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
    ]
