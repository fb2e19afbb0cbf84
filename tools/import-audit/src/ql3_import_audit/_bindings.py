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

from ._binding_calls import CallBindings, decorated
from ._findings import AuditToolError
from ._scopes import CLASS
from ._values import CLASS_VALUE, DATETIME_CLASSES, INSTANCE, elements, marked

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._flow import ModuleFlow
    from ._scopes import Scope
    from ._values import Shared

_CAPTURES = (ast.MatchAs, ast.MatchStar)
# Decorators whose method is read as an attribute, and methods whose first parameter is the class.
_PROPERTIES = frozenset({"property", "cached_property"})
_CLASS_RECEIVERS = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})


class Binder(CallBindings):
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
            if decorated(node, _PROPERTIES):  # `obj.name` is what the method returns
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
            if not (decorated(node, {"classmethod"}) or node.name in _CLASS_RECEIVERS):
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


def _instance(value: str) -> str:
    """Return the instance form of a datetime class (other values stand for themselves)."""
    return value + INSTANCE if value in DATETIME_CLASSES else value


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
