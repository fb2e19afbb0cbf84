"""Python's name scopes for one module, as the clock data-flow pass (`_flow`) needs them.

Which scope a name is read from decides whether `t` in `t.time()` is the module's
`import time as t` or a function's own unrelated local `t`; following Python's rules here (locals,
`global`, `nonlocal`, class bodies that methods do not see, comprehension scopes) is what keeps the
over-approximating pass free of false positives on ordinary code.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Final

MODULE: Final = "module"
FUNCTION: Final = "function"
CLASS: Final = "class"
COMPREHENSION: Final = "comprehension"

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclasses.dataclass(eq=False)
class Scope:
    """One namespace: the names bound in it and, per name, every value the pass saw bound."""

    kind: str
    parent: Scope | None
    # The function, lambda, class or comprehension node that opens the scope (None for modules).
    node: ast.AST | None = None
    # For function, lambda and class scopes: the value naming it ("fn:..." / "class:...").
    ident: str | None = None
    local: set[str] = dataclasses.field(default_factory=set)
    declared_global: set[str] = dataclasses.field(default_factory=set)
    declared_nonlocal: set[str] = dataclasses.field(default_factory=set)
    table: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    # For class scopes: what the bases resolve to (a subclass of datetime is datetime to us),
    # and the tree's own classes among them (whose initialisers a constructor call may run).
    class_value: set[str] = dataclasses.field(default_factory=set)
    base_classes: set[str] = dataclasses.field(default_factory=set)

    @property
    def lookup_parent(self) -> Scope | None:
        """Return the scope a free name is looked up in next (class bodies are skipped)."""
        scope = self.parent
        while scope is not None and scope.kind == CLASS:
            scope = scope.parent
        return scope

    @property
    def module(self) -> Scope:
        """Return the module scope at the root of this scope's chain."""
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def store_scope(self, name: str) -> Scope:
        """Return the scope a binding of `name` made here lands in (`global` / `nonlocal`)."""
        if name in self.declared_global:
            return self.module
        if name in self.declared_nonlocal:
            scope = self.lookup_parent
            while scope is not None and scope.kind != MODULE:
                if name in scope.local:
                    return scope
                scope = scope.lookup_parent
        return self

    def walrus_scope(self) -> Scope:
        """Return where `(name := ...)` binds: comprehensions bind in their enclosing scope."""
        scope = self
        while scope.kind == COMPREHENSION and scope.parent is not None:
            scope = scope.parent
        return scope

    def enclosing_class(self) -> Scope | None:
        """Return the class whose body (directly or through nested functions) holds this scope."""
        scope = self.parent
        while scope is not None and scope.kind != CLASS:
            scope = scope.parent
        return scope


@dataclasses.dataclass
class ModuleScopes:
    """Every node of a module paired with the scope it is evaluated in."""

    module: Scope
    inner: dict[ast.AST, Scope]
    pairs: list[tuple[ast.AST, Scope]]


def parameters(arguments: ast.arguments) -> list[ast.arg]:
    """Return every parameter in declaration order (positional first, then *args, kw, **kw)."""
    params = [*arguments.posonlyargs, *arguments.args]
    if arguments.vararg:
        params.append(arguments.vararg)
    params += arguments.kwonlyargs
    if arguments.kwarg:
        params.append(arguments.kwarg)
    return params


class _Builder:
    """Walk a module once, creating scopes, collecting local names and pairing nodes to scopes."""

    def __init__(self, key: str, tree: ast.Module) -> None:
        self._key = key
        self.module = Scope(MODULE, None)
        self.inner: dict[ast.AST, Scope] = {}
        self.pairs: list[tuple[ast.AST, Scope]] = []
        self._visit(tree, self.module)

    def _new(self, kind: str, node: ast.AST, parent: Scope) -> Scope:
        ident = None
        if isinstance(node, (*_FUNCTIONS, ast.Lambda, ast.ClassDef)):
            prefix = "class" if isinstance(node, ast.ClassDef) else "fn"
            ident = f"{prefix}:{self._key}:{node.lineno}:{node.col_offset}"
        scope = Scope(kind, parent, node, ident)
        self.inner[node] = scope
        return scope

    def _visit(self, node: ast.AST, scope: Scope) -> None:
        self.pairs.append((node, scope))
        self._declare(node, scope)
        if isinstance(node, _FUNCTIONS):
            self._function(node, scope)
        elif isinstance(node, ast.Lambda):
            inner = self._new(FUNCTION, node, scope)
            self._arguments(node.args, scope, inner)
            self._visit(node.body, inner)
        elif isinstance(node, ast.ClassDef):
            inner = self._new(CLASS, node, scope)
            for outside in (*node.decorator_list, *node.bases, *node.keywords):
                self._visit(outside, scope)
            for statement in node.body:
                self._visit(statement, inner)
        elif isinstance(node, _COMPREHENSIONS):
            # The first iterable is really evaluated outside; looking it up inside differs only
            # when a comprehension variable shadows a name it reads, which the pass tolerates.
            inner = self._new(COMPREHENSION, node, scope)
            for child in ast.iter_child_nodes(node):
                self._visit(child, inner)
        elif isinstance(node, ast.NamedExpr):
            scope.walrus_scope().local.add(node.target.id)
            self.pairs.append((node.target, scope))
            self._visit(node.value, scope)
        else:
            for child in ast.iter_child_nodes(node):
                self._visit(child, scope)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> None:
        inner = self._new(FUNCTION, node, scope)
        for decorator in node.decorator_list:
            self._visit(decorator, scope)
        if node.returns:
            self._visit(node.returns, scope)
        self._arguments(node.args, scope, inner)
        for statement in node.body:
            self._visit(statement, inner)

    def _arguments(self, arguments: ast.arguments, outer: Scope, inner: Scope) -> None:
        """Defaults and annotations are evaluated outside; the parameters are inner locals."""
        for default in (*arguments.defaults, *arguments.kw_defaults):
            if default is not None:
                self._visit(default, outer)
        for param in parameters(arguments):
            inner.local.add(param.arg)
            if param.annotation is not None:
                self._visit(param.annotation, outer)

    @staticmethod
    def _declare(node: ast.AST, scope: Scope) -> None:
        """Record the names `node` binds in `scope` (what makes a name local there)."""
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            scope.local.add(node.id)
        elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            scope.local.add(node.name)
        elif isinstance(node, ast.Import):
            scope.local |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            scope.local |= {alias.asname or alias.name for alias in node.names} - {"*"}
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            scope.local.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            scope.local.add(node.rest)
        elif isinstance(node, ast.Global):
            scope.declared_global |= set(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.declared_nonlocal |= set(node.names)


def module_scopes(key: str, tree: ast.Module) -> ModuleScopes:
    """Return the scopes of `tree`; `key` (the file) makes function ids unique in the tree."""
    builder = _Builder(key, tree)
    for scope in {id(s): s for s in (builder.module, *builder.inner.values())}.values():
        scope.local -= scope.declared_global | scope.declared_nonlocal
    return ModuleScopes(builder.module, builder.inner, builder.pairs)
