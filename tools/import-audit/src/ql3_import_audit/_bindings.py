"""The binding rules of the clock data-flow pass, applied to every module until nothing grows.

Each rule adds the values of a right-hand side (see `_flow`) to what a name, an attribute or a
function may hold; nothing is ever removed, so one more round is only needed while some table
grew. What binds:

- imports (plain, `as`, relative, star; module-level names of another audited module included);
- assignments (chains, tuples and lists pairwise or element-wise, `*rest`, augmented, annotated,
  walrus), `for` and comprehension targets, `with ... as`, `match` captures, `global` and
  `nonlocal`;
- `obj.attr = v` and `setattr(obj, "attr", v)` (pooled by attribute name), class-body names
  (class attributes, and methods, whose results also count as properties);
- `d[k] = v`, `.append`, `.add`, `.insert`, `.extend`, `.update`, `.setdefault` into containers;
- parameters: defaults, the class for a method's first parameter, the arguments of every call of
  a function or class of the tree (positional, keyword, `*args`), and for a function passed as an
  argument (`map(f, xs)`, `Thread(target=f, args=...)`) every other argument;
- `return` and `yield` of functions and lambdas, and class bases (a subclass is its bases).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ._findings import AuditToolError
from ._flow import (
    CLASS_VALUE,
    DATETIME_CLASSES,
    FUNCTION_VALUE,
    INSTANCE,
    elements,
    marked,
    string,
)
from ._scopes import CLASS, parameters

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._flow import ModuleFlow, Shared
    from ._scopes import Scope

_ADD_ONE = frozenset({"append", "appendleft", "add", "insert", "setdefault", "put", "put_nowait"})
_ADD_ALL = frozenset({"extend", "extendleft", "update"})
# Methods that a class call runs with its arguments (dataclass and pydantic fields bind by name).
_INITIALISERS = ("__init__", "__new__", "__post_init__")
_CAPTURES = (ast.MatchAs, ast.MatchStar)
# Decorators whose method is read as an attribute, and methods whose first parameter is the class.
_PROPERTIES = frozenset({"property", "cached_property"})
_CLASS_RECEIVERS = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})


class Binder:
    """Apply the binding rules of one module with the current values."""

    def __init__(self, flow: ModuleFlow, *, is_package: bool) -> None:
        self._flow = flow
        self._shared: Shared = flow.shared
        self._package = flow.name if is_package else flow.name.rpartition(".")[0]
        self._sites = [(node, scope) for node, scope in flow.scopes.pairs if _binds(node)]

    def round(self) -> None:
        """Apply every binding of the module once, then export its module-level names."""
        self._flow.forget()
        for node, scope in self._sites:
            self._site(node, scope)
        for name, values in self._flow.scopes.module.table.items():
            self._shared.add(self._shared.exports, f"{self._flow.name}.{name}", values)

    def _site(self, node: ast.AST, scope: Scope) -> None:  # noqa: C901, PLR0912
        value = self._flow.value
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._assign(target, node.value, value(node.value, scope), scope)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
            self._assign(node.target, node.value, value(node.value, scope), scope)
        elif isinstance(node, ast.NamedExpr):
            self._bind(node.target.id, value(node.value, scope), scope.walrus_scope())
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            self._assign(node.target, None, elements(value(node.iter, scope)), scope)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self._assign(node.optional_vars, None, value(node.context_expr, scope), scope)
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
            self._class(node, scope)
        elif isinstance(node, ast.Return | ast.Yield | ast.YieldFrom):
            self._returned(node, scope)
        elif isinstance(node, ast.Match):
            self._match(node, scope)
        elif isinstance(node, ast.Call):
            self._call(node, scope)

    # -- names, attributes, containers ---------------------------------------------------------

    def _bind(self, name: str, values: Iterable[str], scope: Scope) -> None:
        target = scope.store_scope(name)
        self._shared.add(target.table, name, values)
        if target.kind == CLASS:  # a class attribute, readable as `Class.name` or `self.name`
            self._store_attribute(name, values)

    def _store_attribute(self, name: str, values: Iterable[str]) -> None:
        self._shared.add(self._shared.attributes, name, self._shared.portable(values))

    def _assign(
        self, target: ast.expr, source: ast.expr | None, values: set[str], scope: Scope
    ) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, values, scope)
        elif isinstance(target, ast.Attribute):
            self._store_attribute(target.attr, values)
        elif isinstance(target, ast.Subscript):
            self._store_into(target.value, self._flow.contain(values), scope)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, None, values, scope)
        elif isinstance(target, ast.Tuple | ast.List):
            self._unpack(target, source, values, scope)

    def _unpack(
        self, target: ast.Tuple | ast.List, source: ast.expr | None, values: set[str], scope: Scope
    ) -> None:
        if (
            isinstance(source, ast.Tuple | ast.List)
            and len(source.elts) == len(target.elts)
            and not any(isinstance(e, ast.Starred) for e in (*source.elts, *target.elts))
        ):
            for item, item_source in zip(target.elts, source.elts, strict=True):
                self._assign(item, item_source, self._flow.value(item_source, scope), scope)
            return
        # Unpacking something else: every target may get any element (or the value itself).
        spread = elements(values) | {value for value in values if not marked(value)}
        for item in target.elts:
            self._assign(item, None, spread, scope)

    def _store_into(self, holder: ast.expr, values: set[str], scope: Scope) -> None:
        """Record that the container `holder` now also holds `values` (already wrapped)."""
        if isinstance(holder, ast.Name):
            self._bind(holder.id, values, scope)
        elif isinstance(holder, ast.Attribute):
            self._store_attribute(holder.attr, values)
        elif isinstance(holder, ast.Subscript):
            self._store_into(holder.value, self._flow.contain(values), scope)

    def _match(self, node: ast.Match, scope: Scope) -> None:
        """Every capture of every `case` may hold the subject or any element of it."""
        subject = self._flow.value(node.subject, scope)
        for case in node.cases:
            for capture in ast.walk(case.pattern):
                if isinstance(capture, _CAPTURES) and capture.name:
                    self._bind(capture.name, subject | elements(subject), scope)

    # -- imports --------------------------------------------------------------------------------

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

    # -- functions and classes ------------------------------------------------------------------

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, scope: Scope
    ) -> None:
        inner = self._flow.scopes.inner[node]
        ident = inner.ident or ""
        if isinstance(node, ast.Lambda):
            returned = self._shared.portable(self._flow.value(node.body, inner))
            self._shared.add(self._shared.returns, ident, returned)
        else:
            self._bind(node.name, {ident}, scope)
        if scope.kind == CLASS and not isinstance(node, ast.Lambda):
            self._shared.add(self._shared.methods, node.name, {ident})
            if _decorated(node, _PROPERTIES):  # `obj.name` is what the method returns
                self._store_attribute(node.name, self._shared.returns.get(ident, set()))
        arguments = node.args
        positional = [*arguments.posonlyargs, *arguments.args]
        defaults = dict(zip(reversed(positional), reversed(arguments.defaults), strict=False))
        defaults |= {
            param: default
            for param, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
            if default is not None
        }
        for param, default in defaults.items():
            self._bind(param.arg, self._shared.portable(self._flow.value(default, scope)), inner)
        if scope.kind == CLASS and positional and not isinstance(node, ast.Lambda):
            # `cls` is the class, `self` an instance of it (with the same class methods).
            receiver = scope.class_value
            if not (_decorated(node, {"classmethod"}) or node.name in _CLASS_RECEIVERS):
                receiver = {_instance(value) for value in receiver}
            self._bind(positional[0].arg, receiver, inner)

    def _class(self, node: ast.ClassDef, scope: Scope) -> None:
        inner = self._flow.scopes.inner[node]
        bases = self._flow.union(node.bases, scope)
        classes = {base for base in bases if base.startswith(CLASS_VALUE)}
        if not (
            self._shared.portable(bases) <= inner.class_value and classes <= inner.base_classes
        ):
            inner.class_value |= self._shared.portable(bases)
            inner.base_classes |= classes
            self._shared.changed = True
        self._bind(node.name, {*bases, inner.ident or ""}, scope)

    def _returned(self, node: ast.Return | ast.Yield | ast.YieldFrom, scope: Scope) -> None:
        """Record what the function (the scope of a `return` / `yield`) hands its caller."""
        if node.value is None or scope.ident is None:
            return
        values = self._shared.portable(self._flow.value(node.value, scope))
        if isinstance(node, ast.Yield):  # calling a generator function gives a container
            values = self._flow.contain(values)
        self._shared.add(self._shared.returns, scope.ident, values)

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
        offset = _receivers(inner) if bound else 0
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
                for param in parameters(inner.node.args)[_receivers(inner) :]:
                    self._bind(param.arg, offered, inner)


def _receivers(inner: Scope) -> int:
    """Return 1 for a method (its first parameter is the receiver), 0 for a static or plain one."""
    node = inner.node
    if inner.parent is None or inner.parent.kind != CLASS:
        return 0
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return 0
    return 0 if _decorated(node, {"staticmethod"}) else 1


def _decorated(node: ast.FunctionDef | ast.AsyncFunctionDef, names: Iterable[str]) -> bool:
    """Return True if a decorator of `node` is spelled `name` or `something.name`."""
    spelled = set(names)
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id in spelled:
            return True
        if isinstance(target, ast.Attribute) and target.attr in spelled:
            return True
    return False


def _instance(value: str) -> str:
    """Return the instance form of a datetime class (other values stand for themselves)."""
    return value + INSTANCE if value in DATETIME_CLASSES else value


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
    ast.Yield,
    ast.YieldFrom,
    ast.Match,
    ast.Call,
)


def _binds(node: ast.AST) -> bool:
    return isinstance(node, _BINDING_NODES)


def settle(binders: Iterable[Binder], shared: Shared, max_rounds: int = 200) -> None:
    """Apply every module's bindings until no table grows (the value space is finite).

    Raises AuditToolError if that takes more than `max_rounds` rounds: stopping early would
    under-approximate, and a missed finding must never look like a clean tree.
    """
    modules = list(binders)
    for _ in range(max_rounds):
        shared.changed = False
        for binder in modules:
            binder.round()
        if not shared.changed:
            return
    raise AuditToolError(f"the clock data flow did not settle in {max_rounds} rounds")
