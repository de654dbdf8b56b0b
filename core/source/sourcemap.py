"""A torch-free index of one Python file's AST: where things are defined.

Diagnostics and signature specs point at the user's own lines: the class of a
target, the ``forward`` argument behind a ``USER_INPUT``, the ``nn.Parameter`` or
``register_buffer`` line behind a ``PARAMETER``/``BUFFER``, the ``return`` behind a
``USER_OUTPUT``, the ``Dim(...)`` behind a constraint violation. Built once per file
from its text; never imports or runs it.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from exportlens.core.model.signature import SourceLine
from exportlens.core.source.spans import head, span

_ATTR_REGISTER_CALLS = {"register_buffer", "register_parameter", "add_module", "register_module"}


@dataclass
class ClassInfo:
    qualname: str
    where: SourceLine  # the `class` line (after decorators)
    # attribute -> where it is defined: `self.x = ...`, register_buffer("x"), ...
    attributes: dict[str, SourceLine] = field(default_factory=dict)
    # attribute -> `self.x = ...` lines outside __init__ (assignments in forward etc.)
    late_assignments: dict[str, list[SourceLine]] = field(default_factory=dict)
    methods: dict[str, "FunctionInfo"] = field(default_factory=dict)
    # The extent of the class statement, decorators included (which lines a spec
    # pointing "into" the class can have; hover decides ownership by it).
    first_line: int = 0
    last_line: int = 0
    # attribute -> every `self.x` expression in the class's methods (whole span).
    self_uses: dict[str, list[SourceLine]] = field(default_factory=dict)
    # attribute -> the string literal naming it in `self.register_buffer("x", ...)`.
    registered_names: dict[str, list[SourceLine]] = field(default_factory=dict)


@dataclass
class FunctionInfo:
    qualname: str
    where: SourceLine  # the `def` line (after decorators)
    params: dict[str, SourceLine] = field(default_factory=dict)  # in order; includes self
    returns: list[SourceLine] = field(default_factory=list)
    first_line: int = 0
    last_line: int = 0
    # name -> reads of a local/parameter in this function's own body (nested defs
    # and lambdas count; nested `def`s have their own entry). `x += 1` counts as a
    # read: on a tensor it is an in-place update of the same object.
    name_uses: dict[str, list[SourceLine]] = field(default_factory=dict)
    # name -> (line, 1-based column) where the first rebinding (`x = ...`, `for x in`,
    # `with ... as x`) takes effect: the end of an assignment statement, else the end
    # of the bound name. Reads at or after it no longer see the parameter's value.
    rebound_at: dict[str, tuple[int, int]] = field(default_factory=dict)


def param_for_placeholder(placeholder: str, params: Iterable[str]) -> str | None:
    """The parameter torch named a placeholder after: ``x_0_1`` -> ``x``.

    A user input's placeholder is the ``forward`` parameter it was bound to, with
    ``_<key>`` suffixes for the leaves of a nested input: the longest parameter that
    is the name, or prefixes it before a ``_``, is the one.
    """
    best: str | None = None
    for p in params:
        if (placeholder == p or placeholder.startswith(p + "_")) and (best is None or len(p) > len(best)):
            best = p
    return best


@dataclass
class SourceIndex:
    path: str
    text: str
    classes: dict[str, ClassInfo] = field(default_factory=dict)  # by qualname
    functions: dict[str, FunctionInfo] = field(default_factory=dict)  # module-level and nested
    global_assignments: dict[str, SourceLine] = field(default_factory=dict)
    dims: dict[str, SourceLine] = field(default_factory=dict)  # Dim name -> declaration
    # Dim name -> every declaration: two targets in one file may each declare Dim("seq").
    dim_all: dict[str, list[SourceLine]] = field(default_factory=dict)
    dim_variables: dict[str, str] = field(default_factory=dict)  # variable -> Dim name
    inplace_calls: dict[int, list[tuple[str, SourceLine]]] = field(default_factory=dict)
    # Why the index is empty or partial: the file nests deeper than Python's recursion
    # allows (a generated 100k-term expression), e.g. "RecursionError". None: complete.
    incomplete: str | None = None
    # Set for a local module other than the declaring file: every line of the index
    # carries it as ``SourceLine.path``, so a result names the file each line is in.
    origin: str | None = None

    @classmethod
    def build(cls, text: str, path: str = "<model>", origin: str | None = None) -> SourceIndex:
        """Never raises: text Python cannot parse gives an empty index, text too deep
        to parse or walk an empty or partial one with ``incomplete`` set."""
        index = cls(path=path, text=text, origin=origin)
        built = cls._walk(index, text, path)
        if origin is not None:
            _stamp(built, origin)
        return built

    @classmethod
    def _walk(cls, index: SourceIndex, text: str, path: str) -> SourceIndex:
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError):
            return index
        except (RecursionError, MemoryError) as e:  # the parser's own depth limits
            index.incomplete = type(e).__name__
            return index
        try:
            _Visitor(index).visit(tree)
        except RecursionError:  # what the walk found so far stands
            index.incomplete = "RecursionError"
        return index

    # -- queries ---------------------------------------------------------------

    def lines(self) -> list[str]:
        return self.text.splitlines()

    def line_text(self, line: int) -> str:
        lines = self.lines()
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def class_by_name(self, name: str) -> ClassInfo | None:
        """A class by qualname, or by its last component when that is unique."""
        if name in self.classes:
            return self.classes[name]
        matches = [c for q, c in self.classes.items() if q.rsplit(".", 1)[-1] == name]
        return matches[0] if len(matches) == 1 else None

    def function_by_name(self, name: str) -> FunctionInfo | None:
        if name in self.functions:
            return self.functions[name]
        matches = [f for q, f in self.functions.items() if q.rsplit(".", 1)[-1] == name]
        return matches[0] if len(matches) == 1 else None

    def enclosing_function(self, line: int) -> FunctionInfo | None:
        best: FunctionInfo | None = None
        for f in self.all_functions():
            if f.first_line <= line <= f.last_line:
                if best is None or f.first_line >= best.first_line:
                    best = f
        return best

    def all_functions(self) -> Iterable[FunctionInfo]:
        """Module-level and nested functions, then every class's methods."""
        yield from self.functions.values()
        for c in self.classes.values():
            yield from c.methods.values()

    def attribute_assignments(self, attr: str) -> list[SourceLine]:
        """``self.<attr> = ...`` outside ``__init__``, in any class of the file."""
        found: list[SourceLine] = []
        for c in self.classes.values():
            found.extend(c.late_assignments.get(attr, []))
        return sorted(found, key=lambda s: (s.line, s.column))

    def dim_declaration(self, name: str, within: tuple[int, int] | None = None) -> SourceLine | None:
        """Where ``Dim("name")`` is declared, or the variable of that name; with
        ``within`` (a target's lines, decorators included), its own declaration there
        first."""
        if within is not None:
            mine = [d for d in self.dim_all.get(name, []) if within[0] <= d.line <= within[1]]
            if mine:
                return mine[0]
        if name in self.dims:
            return self.dims[name]
        for variable, dim_name in self.dim_variables.items():
            if variable == name:
                return self.dims.get(dim_name)
        return None

    def inplace_call_at(self, line: int, method: str | None = None) -> SourceLine | None:
        for name, where in self.inplace_calls.get(line, []):
            if method is None or name == method:
                return where
        return None


def _stamp(obj: Any, origin: str) -> Any:
    """Every ``SourceLine`` reachable from ``obj`` (dataclasses, dicts, lists) with
    ``path=origin``, in place: one walk after building, instead of threading the path
    through every span the visitor makes."""
    if isinstance(obj, SourceLine):
        return replace(obj, path=origin)
    if isinstance(obj, dict):
        for k, v in obj.items():
            obj[k] = _stamp(v, origin)
    elif isinstance(obj, list):
        obj[:] = [_stamp(v, origin) for v in obj]
    elif isinstance(obj, tuple):
        return tuple(_stamp(v, origin) for v in obj)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, (SourceLine, dict, list, tuple)) or dataclasses.is_dataclass(value):
                setattr(obj, f.name, _stamp(value, origin))
    return obj


def _is_self_attr(node: ast.AST, self_name: str) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self_name:
        return node.attr
    return None


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self, index: SourceIndex) -> None:
        self.index = index
        self.scope: list[str] = []
        self.class_stack: list[ClassInfo] = []
        self.function_stack: list[FunctionInfo] = []
        self.stmt_stack: list[ast.stmt] = []
        self.comprehension_depth = 0
        # len(function_stack) when each class of class_stack was entered.
        self.class_depths: list[int] = []

    def _qualname(self, name: str) -> str:
        return ".".join(self.scope + [name])

    def visit(self, node: ast.AST) -> None:
        # The statement being visited: a name's rebinding takes effect at its end.
        if isinstance(node, ast.stmt):
            self.stmt_stack.append(node)
            super().visit(node)
            self.stmt_stack.pop()
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # Comprehension targets live in their own scope: not a rebinding.
            self.comprehension_depth += 1
            super().visit(node)
            self.comprehension_depth -= 1
        else:
            super().visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        info = ClassInfo(
            self._qualname(node.name),
            head(node),
            first_line=min([node.lineno] + [d.lineno for d in node.decorator_list]),
            last_line=getattr(node, "end_lineno", node.lineno) or node.lineno,
        )
        self.index.classes[info.qualname] = info
        self.scope.append(node.name)
        self.class_stack.append(info)
        self.class_depths.append(len(self.function_stack))
        self.generic_visit(node)
        self.class_depths.pop()
        self.class_stack.pop()
        self.scope.pop()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        info = FunctionInfo(
            self._qualname(node.name),
            head(node),
            first_line=min([node.lineno] + [d.lineno for d in node.decorator_list]),
            last_line=getattr(node, "end_lineno", node.lineno) or node.lineno,
        )
        a = node.args
        for arg in [*a.posonlyargs, *a.args]:
            info.params[arg.arg] = span(arg)
        if a.vararg:
            info.params[a.vararg.arg] = span(a.vararg)
        for arg in a.kwonlyargs:
            info.params[arg.arg] = span(arg)
        if a.kwarg:
            info.params[a.kwarg.arg] = span(a.kwarg)
        in_class = bool(self.class_stack) and self.scope and self.scope[-1] == self.class_stack[-1].qualname.rsplit(".", 1)[-1]
        if in_class:
            self.class_stack[-1].methods[node.name] = info
        else:
            self.index.functions[info.qualname] = info
        self.scope.append(node.name)
        self.function_stack.append(info)
        self.generic_visit(node)
        self.function_stack.pop()
        self.scope.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def visit_Return(self, node: ast.Return) -> None:
        if self.function_stack:
            self.function_stack[-1].returns.append(span(node))
        self.generic_visit(node)

    def _method_context(self) -> tuple[ClassInfo, str, str] | None:
        """The class, the method's `self` name and the method's name when inside a method.

        The method is the function entered right after the class (so a class defined
        inside a factory function still finds its methods, and closures inside a
        method still see its `self`).
        """
        if not self.class_stack or not self.class_depths:
            return None
        depth = self.class_depths[-1]
        if len(self.function_stack) <= depth:
            return None
        cls = self.class_stack[-1]
        method = self.function_stack[depth]
        if not any(m is method for m in cls.methods.values()):
            return None
        params = list(method.params)
        if not params:
            return None
        return cls, params[0], method.qualname.rsplit(".", 1)[-1]

    def _record_target(self, target: ast.AST, value: ast.AST | None, stmt: ast.stmt) -> None:
        ctx = self._method_context()
        if ctx is not None:
            cls, self_name, method_name = ctx
            for t in _flatten_targets(target):
                attr = _is_self_attr(t, self_name)
                if attr is None:
                    continue
                where = span(stmt)
                if method_name == "__init__" or attr not in cls.attributes:
                    cls.attributes.setdefault(attr, where)
                if method_name != "__init__":
                    cls.late_assignments.setdefault(attr, []).append(where)
        elif not self.function_stack and not self.class_stack:
            for t in _flatten_targets(target):
                if isinstance(t, ast.Name):
                    self.index.global_assignments.setdefault(t.id, head(stmt))
                    if isinstance(value, ast.Call) and _call_name(value) == "Dim":
                        name = _dim_name(value)
                        if name:
                            self.index.dim_variables[t.id] = name

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._record_target(t, node.value, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._record_target(node.target, node.value, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        ctx = self._method_context()
        if ctx is not None:
            cls, self_name, method_name = ctx
            attr = _is_self_attr(node.target, self_name)
            if attr is not None and method_name != "__init__":
                cls.late_assignments.setdefault(attr, []).append(span(node))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        if name == "Dim":
            dim = _dim_name(node)
            if dim:
                self.index.dims.setdefault(dim, span(node))
                self.index.dim_all.setdefault(dim, []).append(span(node))
        elif name == "dims":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    self.index.dims.setdefault(a.value, span(node))
                    self.index.dim_all.setdefault(a.value, []).append(span(node))
        elif name in _ATTR_REGISTER_CALLS and node.args:
            first = node.args[0]
            ctx = self._method_context()
            if ctx is not None and isinstance(first, ast.Constant) and isinstance(first.value, str):
                cls, self_name, _ = ctx
                f = node.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == self_name:
                    cls.attributes.setdefault(first.value, span(node))
                    cls.registered_names.setdefault(first.value, []).append(span(first))
        if name and name.endswith("_") and not name.endswith("__") and isinstance(node.func, ast.Attribute):
            self.index.inplace_calls.setdefault(node.lineno, []).append((name, span(node)))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        ctx = self._method_context()
        if ctx is not None:
            cls, self_name, _ = ctx
            attr = _is_self_attr(node, self_name)
            if attr is not None:
                cls.self_uses.setdefault(attr, []).append(span(node))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not self.function_stack:
            return
        function = self.function_stack[-1]
        stmt = self.stmt_stack[-1] if self.stmt_stack else None
        if isinstance(node.ctx, ast.Load) or (isinstance(stmt, ast.AugAssign) and stmt.target is node):
            function.name_uses.setdefault(node.id, []).append(span(node))
        elif isinstance(node.ctx, ast.Store) and not self.comprehension_depth and node.id not in function.rebound_at:
            where: ast.AST = stmt if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else node
            end_line = getattr(where, "end_lineno", None) or node.lineno
            end_col = getattr(where, "end_col_offset", None)
            function.rebound_at[node.id] = (end_line, (end_col if end_col is not None else node.col_offset) + 1)


def _dim_name(call: ast.Call) -> str | None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    for kw in call.keywords:
        if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    return None


def _flatten_targets(t: ast.AST) -> list[ast.AST]:
    if isinstance(t, (ast.Tuple, ast.List)):
        out: list[ast.AST] = []
        for e in t.elts:
            out.extend(_flatten_targets(e))
        return out
    if isinstance(t, ast.Starred):
        return _flatten_targets(t.value)
    return [t]

