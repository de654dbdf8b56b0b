"""A custom operator without a fake kernel (``There was no fake impl registered for
<CustomOpDef(mylib::scale)>``, at the line that calls it) -> a fake kernel right
after the operator's definition::

    @scale.register_fake
    def _(x: torch.Tensor, s: float) -> torch.Tensor:
        return torch.empty_like(x)

The operator is found by its name: the one top-level function, in the diagnostic's
own file, the declaring file or a local module the export read (through ``read``),
decorated by nothing but ``torch.library.custom_op("mylib::scale", ...)`` (also as
``library.custom_op`` after ``from torch import library``, or ``custom_op`` after
``from torch.library import custom_op``). The fake kernel takes the operator's
parameters as written (names, annotations, defaults); its output is made like an
input's, one candidate fix per parameter annotated ``torch.Tensor`` (or ``Tensor``
imported from torch): ``torch.empty_like(x)`` for a ``torch.Tensor`` return, a tuple
of them for ``tuple[torch.Tensor, ...]`` with its elements written out (each shaped
like that one parameter, and, when there are as many tensor parameters as outputs,
one more candidate pairing them in order). The first tensor parameter's candidate is
preferred, the others not: which input the output follows is the operator's to say,
and a re-export comparing the outputs with eager decides. ``import torch`` is added
when the file has none before the operator.

Nothing when the operator is not found (or found more than once), is not at the top
level, has ``*args``/``**kwargs`` or another decorator, already has a fake kernel
registered in its file, has no tensor parameter, or returns something else (a list of
tensors has no known length; ``None``; a number). Checked with torch 2.13 by exporting
the edited model (the operator in the declaring file, as ``torch.library.custom_op``
and as ``custom_op``, and in a local module; a tensor output and a tuple of two): it
exports and runs.
"""

from __future__ import annotations

import ast
import re

from exportlens.core.fixes.model import Fix, segment
from exportlens.core.fixes.pytrees import (
    Read,
    UserFile,
    imported_names,
    insert_after,
    module_names,
    top_level_definition,
    user_files,
    where,
    with_torch,
)
from exportlens.core.model.results import Diagnostic, FileResult

_NO_FAKE = re.compile(r"There was no fake impl registered for <CustomOpDef\(([A-Za-z_]\w*::[A-Za-z_]\w*)\)>")
_USE = re.compile(r"Please use `(\w+)\.register_fake`")


def _torch_names(tree: ast.Module) -> set[str]:
    """The top-level names bound to the ``torch`` module."""
    return {
        a.asname or "torch"
        for n in tree.body
        if isinstance(n, ast.Import)
        for a in n.names
        if a.name == "torch" or (a.name.startswith("torch.") and a.asname is None)
    }


def _is_custom_op(func: ast.expr, tree: ast.Module) -> bool:
    if isinstance(func, ast.Name):
        return func.id in imported_names(tree, "torch.library", "custom_op")
    if not (isinstance(func, ast.Attribute) and func.attr == "custom_op"):
        return False
    owner = func.value
    if isinstance(owner, ast.Name):  # library.custom_op
        return owner.id in imported_names(tree, "torch", "library") | module_names(tree, "torch.library")
    return (  # torch.library.custom_op
        isinstance(owner, ast.Attribute)
        and owner.attr == "library"
        and isinstance(owner.value, ast.Name)
        and owner.value.id in _torch_names(tree)
    )


def _defines(fn: ast.stmt, tree: ast.Module, op: str) -> bool:
    """Whether ``fn`` is a function decorated by nothing but ``custom_op(op, ...)``."""
    if not isinstance(fn, ast.FunctionDef) or len(fn.decorator_list) != 1:
        return False
    call = fn.decorator_list[0]
    if not isinstance(call, ast.Call) or not _is_custom_op(call.func, tree):
        return False
    name = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"), None)
    return isinstance(name, ast.Constant) and name.value == op


def _find(files: list[UserFile], op: str) -> tuple[UserFile, ast.FunctionDef] | None:
    found = [(f, fn) for f in files for fn in f.tree.body if isinstance(fn, ast.FunctionDef) and _defines(fn, f.tree, op)]
    if len(found) != 1:
        return None
    file, fn = found[0]
    return (file, fn) if top_level_definition(file.tree, fn.name, ast.FunctionDef) is fn else None


def _has_fake(tree: ast.Module, fn: str, op: str) -> bool:
    """A fake kernel registered in the file already (``scale.register_fake``,
    ``torch.library.register_fake("mylib::scale")``)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in {"register_fake", "register_abstract"} and isinstance(n.value, ast.Name) and n.value.id == fn:
            return True
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value == op:
            callee = n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id if isinstance(n.func, ast.Name) else ""
            if callee in {"register_fake", "impl_abstract"}:
                return True
    return False


def _is_tensor(annotation: ast.expr | None, tree: ast.Module) -> bool:
    if isinstance(annotation, ast.Name):
        return annotation.id in imported_names(tree, "torch", "Tensor")
    return (
        isinstance(annotation, ast.Attribute)
        and annotation.attr == "Tensor"
        and isinstance(annotation.value, ast.Name)
        and annotation.value.id in _torch_names(tree)
    )


def _outputs(returns: ast.expr | None, tree: ast.Module) -> int | None:
    """0 for a tensor, n for a tuple of n tensors; None for anything else."""
    if _is_tensor(returns, tree):
        return 0
    if not isinstance(returns, ast.Subscript):
        return None
    container = returns.value
    is_tuple = (isinstance(container, ast.Name) and (container.id == "tuple" or container.id in imported_names(tree, "typing", "Tuple"))) or (
        isinstance(container, ast.Attribute) and container.attr == "Tuple" and isinstance(container.value, ast.Name) and container.value.id in module_names(tree, "typing")
    )
    elements = returns.slice.elts if isinstance(returns.slice, ast.Tuple) else [returns.slice]
    if not is_tuple or not elements or not all(_is_tensor(e, tree) for e in elements):
        return None
    return len(elements)


def _parameters(fn: ast.FunctionDef, lines: list[str]) -> str:
    """The function's parameter list as written: names, annotations, defaults."""
    a = fn.args

    def one(arg: ast.arg, default: ast.expr | None) -> str:
        text = arg.arg
        if arg.annotation is not None:
            text += ": " + segment(lines, arg.annotation)
        if default is not None:
            text += (" = " if arg.annotation is not None else "=") + segment(lines, default)
        return text

    positional = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [one(arg, d) for arg, d in zip(positional, defaults, strict=True)]
    if a.posonlyargs:
        out.insert(len(a.posonlyargs), "/")
    if a.kwonlyargs:
        out.append("*")
        out += [one(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    return ", ".join(out)


def _indent(fn: ast.FunctionDef, lines: list[str]) -> str:
    first = fn.body[0]
    text = lines[first.lineno - 1]
    leading = text[: len(text) - len(text.lstrip())]
    return leading if first.lineno > fn.lineno and leading else "    "


def _loads_underscore(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "_" and isinstance(n.ctx, ast.Load) for n in ast.walk(tree))


def fixes(source: str, diagnostic: Diagnostic, result: FileResult, read: Read | None = None) -> list[Fix]:
    m = _NO_FAKE.search(diagnostic.message)
    if m is None:
        return []
    op = m.group(1)
    found = _find(list(user_files(source, diagnostic, result, read)), op)
    if found is None:
        return []
    file, fn = found
    named = _USE.search(diagnostic.message)
    if (named is not None and named.group(1) != fn.name) or fn.args.vararg or fn.args.kwarg or _has_fake(file.tree, fn.name, op):
        return []
    outputs = _outputs(fn.returns, file.tree)
    tensors = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs) if _is_tensor(p.annotation, file.tree)]
    if outputs is None or not tensors:
        return []
    lines = file.text.split("\n")
    returns = f" -> {segment(lines, fn.returns)}" if fn.returns is not None else ""
    head = f"@{fn.name}.register_fake\ndef {'_fake_' + fn.name if _loads_underscore(file.tree) else '_'}({_parameters(fn, lines)}){returns}:\n"
    shapes: list[list[str]] = [[p] * max(outputs, 1) for p in tensors]
    if outputs > 1 and len(tensors) == outputs:
        shapes.append(list(tensors))  # output i shaped like tensor parameter i
    out: list[Fix] = []
    for i, like in enumerate(shapes):
        made = [f"torch.empty_like({p})" for p in like]
        value = made[0] if outputs == 0 else f"{made[0]}," if outputs == 1 else ", ".join(made)
        edits = with_torch(file, insert_after(file.text, fn, f"{head}{_indent(fn, lines)}return {value}"), fn.lineno)
        if edits is None:
            return []
        if outputs == 0:
            what = f"whose output is shaped like `{like[0]}` (`{made[0]}`)"
        elif len(set(like)) == 1:
            what = f"whose outputs are each shaped like `{like[0]}` (`return {value}`)"
        else:
            what = "whose outputs are shaped like " + ", ".join(f"`{p}`" for p in like) + f" in order (`return {value}`)"
        out.append(Fix(f"add a fake kernel for `{op}`{where(file)} {what}", diagnostic, edits, preferred=i == 0))
    return out
