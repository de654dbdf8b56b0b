"""``unsupported-type`` for a class of the user's that export cannot flatten (an input
``Unsupported input type <class 'dc.Batch'>``, an output ``Found <class 'outcls.Out'>
in output``) -> register the class as a pytree right after its definition.

The class is found by the module torch names it in (``<class 'pkg.mod.Name'>``): the
diagnostic's own file, the declaring file, or one of the local modules the export
read (``FileResult.local_imports``, through ``read``), the module's path taken from a
folder at or above the declaring file's (where exportlens puts the local modules'
root). Its edits are in that file (``TextEdit.path`` set when it is not the
diagnostic's own). Offered for two shapes of class, defined once at the module's top
level and registered nowhere yet:

- a ``@dataclass`` (``dataclasses.dataclass``, with or without arguments, not
  ``init=False``, no other decorator) -> ``torch.export.register_dataclass(Batch,
  serialized_type_name="dc.Batch")`` on the line after the class body;
- a plain class (no base, no decorator) whose ``__init__`` only assigns each of its
  parameters to the attribute of the same name (``self.a = a``; no ``*args``,
  ``**kwargs`` or positional-only parameter), so that ``Out(**fields)`` rebuilds it
  exactly -> ``torch.utils._pytree.register_dataclass(Out, field_names=["a", "b"],
  serialized_type_name="outcls.Out")``, which flattens it by those attributes, with
  their names as keys.

``import torch`` is added before the file's first statement when no top-level
``import torch`` comes before the class. Nothing for a class of a library (no user
file is that module), one defined in a function, twice, or of another shape (an
``__init__`` that computes an attribute cannot be rebuilt from the attributes), nor
for the Hugging Face cache (``hf_cache``). Preferred: the program returns and takes
the same objects. Checked with torch 2.13 by exporting the edited model (a dataclass
input, a plain class output, each in the declaring file and in a local module): it
exports and runs. What torch 2.13 needs there: a plain class needs keys to be an
input (``register_pytree_node`` without ``flatten_with_keys_fn`` fails to export
with ``Did not find a flatten_with_keys_fn``; ``register_dataclass`` with
``field_names`` gives them), and ``serialized_type_name`` is what lets
``torch.export.save`` write the program (it refuses the type without one).

The helpers that find a user's file and insert a statement after a definition are
shared with ``fake_kernel``.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, TextEdit, apply, insert_at, parses
from exportlens.core.model.results import Diagnostic, FileResult

Read = Callable[[str], "str | None"]

_INPUT = re.compile(r"^Unsupported input type <class '([\w.]+)'>")
_OUTPUT = re.compile(r"^Found <class '([\w.]+)'> in output")
_REGISTERS = {"register_dataclass", "register_pytree_node", "_register_pytree_node", "register_constant"}


# ---------------------------------------------------------------- the user's files


@dataclass(frozen=True)
class UserFile:
    """A user file's text and syntax tree; ``path`` is what its edits carry: None for
    the diagnostic's own file, else the path the result names it by."""

    path: str | None
    text: str
    tree: ast.Module


def _key(path: str) -> str:
    return os.path.normcase(os.path.normpath(os.path.abspath(path)))


def _candidates(diagnostic: Diagnostic, result: FileResult) -> list[str]:
    """The diagnostic's own file first, then the declaring file and the local modules
    the export read, each once."""
    out: list[str] = []
    seen: set[str] = set()
    for path in (diagnostic.path or result.path, result.path, *result.local_imports):
        if _key(path) not in seen:
            seen.add(_key(path))
            out.append(path)
    return out


def _open(path: str, own: bool, source: str, read: Read | None) -> UserFile | None:
    text = source if own else read(path) if read is not None else None
    tree = nodes.parse(text) if text is not None else None
    if text is None or tree is None:
        return None
    return UserFile(None if own else path, text, tree)


def user_files(source: str, diagnostic: Diagnostic, result: FileResult, read: Read | None) -> Iterator[UserFile]:
    """Every user file the export read that parses, the diagnostic's own first (its
    text is ``source``), the others through ``read``."""
    for i, path in enumerate(_candidates(diagnostic, result)):
        found = _open(path, i == 0, source, read)
        if found is not None:
            yield found


def _is_module(path: str, module: str, declaring: str) -> bool:
    """Whether ``path`` is the file of ``module`` (``pkg/mod.py``, ``pkg/mod/__init__.py``)
    under a root at or above the declaring file's folder (where exportlens imports
    local modules from)."""
    full, folder = _key(path), os.path.dirname(_key(declaring))
    parts = module.split(".")
    for rel in (os.path.join(*parts) + ".py", os.path.join(*parts, "__init__.py")):
        rel = os.path.normcase(rel)
        if full.endswith(os.sep + rel):
            root = full[: -len(rel) - 1] or os.sep
            if os.path.commonpath([root, folder]) == root:
                return True
    return False


def module_file(module: str, source: str, diagnostic: Diagnostic, result: FileResult, read: Read | None) -> UserFile | None:
    """The one user file that is ``module``; None when none is, or more than one."""
    candidates = _candidates(diagnostic, result)
    # ``local_imports`` also names the files an import looked for and did not find
    # (``pkg/mod/__init__.py`` beside ``pkg/mod.py``): only the ones there count.
    found = [f for i, path in enumerate(candidates) if _is_module(path, module, result.path) for f in [_open(path, i == 0, source, read)] if f is not None]
    return found[0] if len(found) == 1 else None


# ---------------------------------------------------------------- edits


def first_line(node: ast.stmt) -> int:
    """The first line of a statement, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _top_level_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes that run at import, not looking into functions' or classes' bodies."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend([*node.decorator_list, *getattr(node, "bases", []), *getattr(node, "keywords", [])])
        elif not isinstance(node, ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def bindings(tree: ast.Module, name: str) -> list[ast.AST]:
    """The module-level statements (nested blocks included) that bind ``name``."""
    out: list[ast.AST] = []
    for node in _top_level_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            out.append(node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            out.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name.split(".")[0]) == name for a in node.names):
            out.append(node)
    return out


def top_level_definition(tree: ast.Module, name: str, kind: type[ast.stmt]) -> ast.stmt | None:
    """The top-level ``class``/``def`` of ``name`` when it is the module's only binding
    of that name."""
    found = bindings(tree, name)
    if len(found) == 1 and isinstance(found[0], kind) and found[0] in tree.body:
        return found[0]  # type: ignore[return-value]
    return None


def imported_names(tree: ast.Module, module: str, name: str) -> set[str]:
    """The top-level names ``from module import name [as x]`` binds."""
    return {
        a.asname or a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module == module and n.level == 0
        for a in n.names
        if a.name == name
    }


def module_names(tree: ast.Module, module: str) -> set[str]:
    """The top-level names ``import module [as x]`` binds to ``module`` itself."""
    return {
        a.asname or a.name
        for n in tree.body
        if isinstance(n, ast.Import)
        for a in n.names
        if a.name == module and (a.asname or "." not in module)
    }


def torch_bound_before(tree: ast.Module, line: int) -> bool:
    """Whether a top-level ``import torch`` (or ``import torch.x``) binds ``torch``
    before ``line``."""
    return any(
        isinstance(n, ast.Import) and n.lineno < line and any(a.asname is None and (a.name == "torch" or a.name.startswith("torch.")) for a in n.names)
        for n in tree.body
    )


def _newline(lines: list[str], line: int) -> str:
    return "\r\n" if line <= len(lines) and lines[line - 1].endswith("\r") else "\n"


def import_torch(text: str, tree: ast.Module) -> TextEdit | None:
    """``import torch`` before the module's first statement after its docstring and
    ``from __future__`` imports (None when there is none)."""
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    if not body:
        return None
    line = first_line(body[0])
    return insert_at(line, 1, "import torch" + _newline(text.split("\n"), line))


def insert_after(text: str, node: ast.stmt, statement: str) -> TextEdit:
    """``statement`` (one or more lines) as the next top-level statement after
    ``node``, separated from it by as many blank lines as follow it (else precede
    it): one or two."""
    lines = text.split("\n")
    last = node.end_lineno or node.lineno
    after = 0
    for following in lines[last:]:
        if following.strip():
            break
        after += 1
    else:  # the end of the file: as many as before the definition
        after = 0
        for preceding in reversed(lines[: first_line(node) - 1]):
            if preceding.strip():
                break
            after += 1
    blank = min(max(after, 1), 2)
    nl = _newline(lines, last)
    end = lines[last - 1]
    column = len((end[:-1] if end.endswith("\r") else end).encode("utf-8")) + 1
    return insert_at(last, column, nl * (blank + 1) + statement.replace("\n", nl))


def with_torch(file: UserFile, edit: TextEdit, before: int) -> tuple[TextEdit, ...] | None:
    """``edit`` (and ``import torch`` when ``torch`` is not bound before line
    ``before``), each carrying the file's path; None when the edited file would not
    parse."""
    edits = [edit]
    if not torch_bound_before(file.tree, before):
        imported = import_torch(file.text, file.tree)
        if imported is None:
            return None
        edits.insert(0, imported)
    if not parses(apply(file.text, edits)):
        return None
    return tuple(TextEdit(e.line, e.column, e.end_line, e.end_column, e.new_text, file.path) for e in edits)


def where(file: UserFile) -> str:
    """`` in `mod.py` `` for a file other than the diagnostic's own, else nothing."""
    return f" in `{os.path.basename(file.path)}`" if file.path is not None else ""


# ---------------------------------------------------------------- the class's shape


def _is_dataclass(decorator: ast.expr, tree: ast.Module) -> bool:
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(decorator, ast.Call):
        if decorator.args or any(k.arg is None or (k.arg == "init" and not (isinstance(k.value, ast.Constant) and k.value.value is True)) for k in decorator.keywords):
            return False  # init=False (or not a literal): the class cannot be rebuilt from its fields
    if isinstance(func, ast.Name):
        return func.id in imported_names(tree, "dataclasses", "dataclass")
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "dataclass"
        and isinstance(func.value, ast.Name)
        and func.value.id in module_names(tree, "dataclasses")
    )


def _fields(cls: ast.ClassDef) -> list[str] | None:
    """The parameters of a plain class's ``__init__`` when it does nothing but
    assign each to the attribute of the same name, once; else None."""
    inits = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__init__"]
    if len(inits) != 1 or not isinstance(inits[0], ast.FunctionDef) or inits[0].decorator_list:
        return None
    init = inits[0]
    a = init.args
    if a.posonlyargs or a.vararg or a.kwarg or not a.args:
        return None
    me = a.args[0].arg
    params = [p.arg for p in (*a.args[1:], *a.kwonlyargs)]
    body = init.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    assigned: list[str] = []
    for stmt in body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else stmt.target if isinstance(stmt, ast.AnnAssign) else None
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        attr = nodes.self_attribute(target, me) if target is not None else None
        if attr is None or not isinstance(value, ast.Name) or value.id != attr:
            return None
        assigned.append(attr)
    if not params or sorted(assigned) != sorted(params):
        return None
    # The class body must not define a field's name (a property, a method, a value).
    for n in cls.body:
        defined = (
            [n.name]
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            else [t.id for t in n.targets if isinstance(t, ast.Name)]
            if isinstance(n, ast.Assign)
            else [n.target.id]
            if isinstance(n, ast.AnnAssign) and n.value is not None and isinstance(n.target, ast.Name)
            else []
        )
        if set(defined) & set(params) or "__new__" in defined:
            return None
    return params


def _registered(tree: ast.Module, name: str) -> bool:
    """Whether the file registers ``name`` with pytree already (something else is
    going on: no fix)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == name:
            func = n.func
            if (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "") in _REGISTERS:
                return True
    return False


def _registration(cls: ast.ClassDef, tree: ast.Module, qualified: str) -> tuple[str, str] | None:
    """``(statement, how)`` registering the class, or None for a shape left alone."""
    serialized = f'serialized_type_name="{qualified}"'
    if cls.decorator_list:
        if len(cls.decorator_list) != 1 or not _is_dataclass(cls.decorator_list[0], tree):
            return None
        return f"torch.export.register_dataclass({cls.name}, {serialized})", "`torch.export.register_dataclass`"
    if cls.keywords or any(not (isinstance(b, ast.Name) and b.id == "object") for b in cls.bases):
        return None
    fields = _fields(cls)
    if fields is None:
        return None
    names = ", ".join(f'"{f}"' for f in fields)
    how = "`torch.utils._pytree.register_dataclass` with its fields " + ", ".join(f"`{f}`" for f in fields)
    return f"torch.utils._pytree.register_dataclass({cls.name}, field_names=[{names}], {serialized})", how


def fixes(source: str, diagnostic: Diagnostic, result: FileResult, read: Read | None = None) -> list[Fix]:
    if diagnostic.message.startswith("the model returns its key/value cache"):
        return []  # hf_cache's
    m = _INPUT.match(diagnostic.message) or _OUTPUT.match(diagnostic.message)
    if m is None or "." not in m.group(1):
        return []
    qualified = m.group(1)
    module, name = qualified.rsplit(".", 1)
    file = module_file(module, source, diagnostic, result, read)
    if file is None:
        return []
    cls = top_level_definition(file.tree, name, ast.ClassDef)
    if not isinstance(cls, ast.ClassDef) or _registered(file.tree, name):
        return []
    registration = _registration(cls, file.tree, qualified)
    if registration is None:
        return []
    statement, how = registration
    edits = with_torch(file, insert_after(file.text, cls, statement), cls.lineno)
    if edits is None:
        return []
    role = "input" if _INPUT.match(diagnostic.message) else "output"
    title = f"register `{name}` as a pytree{where(file)} ({how}), so export can take it apart as an {role}"
    return [Fix(title, diagnostic, edits, preferred=True)]
