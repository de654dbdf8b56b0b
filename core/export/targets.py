"""Finding the targets a file declares, in the three forms of the contract.

1. ExportDB-style module globals: ``model`` + ``example_args`` (+ ``example_kwargs``,
   ``dynamic_shapes``, ``strict``).
2. ``@exportlens.target`` on an ``nn.Module`` subclass or a zero-argument factory.
3. ``[tool.exportlens] targets = ["pkg/models.py:make_model"]`` in pyproject.toml.

Discovery runs in the job process after the file ran; building a target (calling
the factory, constructing the class) may raise, which becomes ``target-error``.
"""

from __future__ import annotations

import os
import types
from dataclasses import dataclass
from typing import Any, Callable

from exportlens.core.model.lowering import parse_size
from exportlens.core.model.results import TargetDecl
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.sourcemap import SourceIndex


class TargetError(Exception):
    """A declared target is malformed; the message says how to fix it."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass
class Built:
    module: Any  # torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any] | None
    dynamic_shapes: Any
    strict: bool
    # Whether the module's parameters, buffers and tensor attributes hold values:
    # "real", or "fake" when large ones were built without (``core/export/weights``).
    weights: str = "real"
    weights_note: str = ""  # why values are not available where a step wanted them
    # The most memory its lowered program may need to run, bytes: the target's own
    # ``memory_budget`` (it wins over the project's); None: the project's, if any.
    memory_budget: int | None = None


@dataclass
class Candidate:
    decl: TargetDecl
    where: SourceLine
    build: Callable[[], Built]
    module_class: type | None = None


def _nn_module() -> type:
    import torch

    return torch.nn.Module


def _check_args(value: Any, what: str) -> tuple[Any, ...]:
    if callable(value) and not isinstance(value, tuple):
        value = value()
    if isinstance(value, list):
        raise TargetError(f"{what} is a list; it must be a tuple (write `({', '.join(['...'] * min(len(value), 2))},)`)")
    if not isinstance(value, tuple):
        raise TargetError(f"{what} must be a tuple of example inputs, not {type(value).__name__}")
    return value


def _check_kwargs(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TargetError(f"{what} must be a dict, not {type(value).__name__}")
    return value


def _check_module(value: Any, what: str) -> Any:
    if not isinstance(value, _nn_module()):
        raise TargetError(f"{what} is a {type(value).__name__}, not a torch.nn.Module instance")
    return value


def _class_where(cls: type, module: types.ModuleType, index: SourceIndex) -> SourceLine | None:
    if getattr(cls, "__module__", None) != module.__name__:
        return None
    info = index.classes.get(getattr(cls, "__qualname__", "")) or index.class_by_name(cls.__name__)
    return info.where if info else None


def _function_where(fn: Any, index: SourceIndex) -> SourceLine | None:
    qualname = getattr(fn, "__qualname__", "")
    info = index.functions.get(qualname) or index.function_by_name(getattr(fn, "__name__", ""))
    if info is None:
        for cls in index.classes.values():
            for m in cls.methods.values():
                if m.qualname == qualname:
                    info = m
    return info.where if info else None


def _budget(value: Any, what: str) -> int | None:
    """A target's ``memory_budget`` (``"512 MB"``, or bytes) as bytes; None when unset."""
    if value is None:
        return None
    size = parse_size(value)
    if size is None:
        raise TargetError(f'{what} = {value!r} is not a size such as "512 MB" or "2 GB"')
    return size


def _with_budget(built: Built, value: Any, what: str) -> Built:
    built.memory_budget = _budget(value, what)
    return built


def _from_factory(
    fn: Callable[[], Any], what: str, dynamic_shapes: Any = None, strict: bool = False, budget: Any = None
) -> Built:
    result = fn()
    if isinstance(result, dict):
        return _from_declaration(result, what, dynamic_shapes, strict, budget)
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise TargetError(f"{what} must return (module, args), (module, args, kwargs) or a dict of the module globals' names, not {type(result).__name__}")
    module = _check_module(result[0], f"the module {what} returns")
    args = _check_args(result[1], f"the args {what} returns")
    kwargs = _check_kwargs(result[2] if len(result) == 3 else None, f"the kwargs {what} returns")
    return _with_budget(Built(module, args, kwargs, dynamic_shapes, strict), budget, "memory_budget")


_DECLARATION_KEYS = ("model", "example_args", "example_kwargs", "dynamic_shapes", "strict", "memory_budget")


def _from_declaration(found: dict[str, Any], what: str, dynamic_shapes: Any, strict: bool, budget: Any = None) -> Built:
    """A factory that returns a dict with the module globals' names (``model``,
    ``example_args``, and optionally ``example_kwargs``, ``dynamic_shapes``,
    ``strict``): the one way a ``pyproject.toml`` target declares dynamic shapes or
    strict mode. Its values win over the decorator's and the defaults."""
    unknown = [k for k in found if k not in _DECLARATION_KEYS]
    if unknown:
        raise TargetError(f"the dict {what} returns has unknown key(s) {', '.join(map(repr, unknown))}: it takes {', '.join(_DECLARATION_KEYS)}")
    for key in ("model", "example_args"):
        if key not in found:
            raise TargetError(f"the dict {what} returns has no {key!r}")
    chosen = found.get("strict", strict)
    if not isinstance(chosen, bool):
        raise TargetError(f"'strict' in the dict {what} returns must be True or False, not {type(chosen).__name__}")
    module = _check_module(found["model"], f"'model' in the dict {what} returns")
    args = _check_args(found["example_args"], f"'example_args' in the dict {what} returns")
    kwargs = _check_kwargs(found.get("example_kwargs"), f"'example_kwargs' in the dict {what} returns")
    built = Built(module, args, kwargs, found.get("dynamic_shapes", dynamic_shapes), chosen)
    return _with_budget(built, found.get("memory_budget", budget), f"'memory_budget' in the dict {what} returns")


def discover(module: types.ModuleType, index: SourceIndex, *, strict_default: bool, pyproject_entries: list[str], root: str | None) -> list[Candidate]:
    out: list[Candidate] = []
    out.extend(_globals_form(module, index, strict_default))
    out.extend(_decorator_form(module, index, strict_default))
    out.extend(_pyproject_form(module, index, strict_default, pyproject_entries))
    return out


def _globals_form(module: types.ModuleType, index: SourceIndex, strict_default: bool) -> list[Candidate]:
    g = vars(module)
    if "example_args" not in g:
        return []
    model = g.get("model")
    assign = index.global_assignments.get("model") or index.global_assignments.get("example_args") or SourceLine(1)
    cls = type(model) if model is not None else None
    name = cls.__name__ if cls is not None and isinstance(model, _nn_module()) else "model"
    where = (_class_where(cls, module, index) if cls is not None else None) or assign
    strict = bool(g.get("strict", strict_default))

    def build() -> Built:
        if "model" not in g:
            raise TargetError("the file defines `example_args` but no `model`: add `model = YourModule()`")
        m = _check_module(g["model"], "`model`")
        built = Built(
            m,
            _check_args(g["example_args"], "`example_args`"),
            _check_kwargs(g.get("example_kwargs"), "`example_kwargs`"),
            g.get("dynamic_shapes"),
            strict,
        )
        return _with_budget(built, g.get("memory_budget"), "`memory_budget`")

    return [Candidate(TargetDecl(name, where.line, "globals", strict), where, build, cls)]


def _decorator_form(module: types.ModuleType, index: SourceIndex, strict_default: bool) -> list[Candidate]:
    from exportlens.core.export.registry import REGISTRY

    out = []
    for obj, options in REGISTRY:
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        strict = options.strict or strict_default
        if isinstance(obj, type):
            name = options.name or obj.__name__
            where = _class_where(obj, module, index) or SourceLine(1)

            def build(cls: type = obj, opts: Any = options, strict: bool = strict) -> Built:
                if not issubclass(cls, _nn_module()):
                    raise TargetError(f"@exportlens.target decorates class `{cls.__name__}`, which is not a torch.nn.Module")
                if opts.example_args is None:
                    raise TargetError(f"@exportlens.target on class `{cls.__name__}` needs example_args=(...)")
                instance = cls()
                built = Built(
                    instance,
                    _check_args(opts.example_args, "example_args"),
                    _check_kwargs(opts.example_kwargs, "example_kwargs"),
                    opts.dynamic_shapes,
                    strict,
                )
                return _with_budget(built, opts.memory_budget, "memory_budget")

            out.append(Candidate(TargetDecl(name, where.line, "decorator", strict), where, build, obj))
        else:
            name = options.name or str(getattr(obj, "__name__", "target"))
            where = _function_where(obj, index) or SourceLine(1)

            def build_fn(fn: Any = obj, opts: Any = options, strict: bool = strict, name: str = name) -> Built:
                return _from_factory(fn, f"`{name}()`", opts.dynamic_shapes, strict, opts.memory_budget)

            out.append(Candidate(TargetDecl(name, where.line, "decorator", strict), where, build_fn))
    return out


def _pyproject_form(module: types.ModuleType, index: SourceIndex, strict_default: bool, entries: list[str]) -> list[Candidate]:
    path = os.path.realpath(getattr(module, "__file__", "") or "")
    out: list[Candidate] = []
    for entry in entries:
        file_part, _, func_name = entry.rpartition(":")
        if os.path.realpath(file_part) != path:
            continue
        obj: Any = module
        for part in func_name.split("."):
            obj = getattr(obj, part, None)
        found = _function_where(obj, index) if obj is not None and callable(obj) else None
        # No such function: the mistake is the entry's, at its line of pyproject.toml
        # (and the target has no line in this file: 0).
        where = found or _entry_where(entry, path) or SourceLine(1)
        line = where.line if where.path is None else 0

        def build(fn: Any = obj, func_name: str = func_name) -> Built:
            if fn is None or not callable(fn):
                raise TargetError(f"{os.path.basename(path)} has no function `{func_name}`{_did_you_mean(func_name, module)}")
            return _from_factory(fn, f"`{func_name}()`", None, strict_default)

        out.append(Candidate(TargetDecl(func_name, line, "pyproject", strict_default), where, build))
    return out


def _entry_where(entry: str, path: str) -> SourceLine | None:
    """The line of pyproject.toml that declares ``entry``, as a location in that file."""
    from exportlens.core.project.settings import declared_line, find_pyproject

    pyproject = find_pyproject(path)
    at = declared_line(pyproject, entry) if pyproject else None
    if pyproject is None or at is None:
        return None
    line, column, end = at
    return SourceLine(line, column, line, end, path=os.path.realpath(pyproject))


def _did_you_mean(name: str, module: types.ModuleType) -> str:
    """`` (did you mean `make_net`?)`` for a misspelt function name, else ""."""
    import difflib

    functions = [k for k, v in vars(module).items() if isinstance(v, types.FunctionType) and getattr(v, "__module__", None) == module.__name__]
    close = difflib.get_close_matches(name, functions, n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""
