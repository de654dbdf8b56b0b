"""The ``@exportlens.target`` decorator. Importing it never imports torch.

It only marks the decorated class or function and records it in the registry
(``exportlens.core.export.registry``, in core so the job reads it without importing
this package) that the export job reads after running the file; the decorated object
itself is returned unchanged, so the file behaves exactly as it would without
exportlens.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, overload

from exportlens.core.export.registry import ATTRIBUTE, REGISTRY, TargetOptions

__all__ = ["ATTRIBUTE", "REGISTRY", "TargetOptions", "target"]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def target(obj: F, /) -> F: ...
@overload
def target(
    *,
    example_args: Any = None,
    example_kwargs: Any = None,
    dynamic_shapes: Any = None,
    strict: bool = False,
    name: str | None = None,
    memory_budget: int | str | None = None,
) -> Callable[[F], F]: ...


def target(
    obj: Any = None,
    /,
    *,
    example_args: Any = None,
    example_kwargs: Any = None,
    dynamic_shapes: Any = None,
    strict: bool = False,
    name: str | None = None,
    memory_budget: int | str | None = None,
) -> Any:
    """Declare a model for exportlens to export.

    On an ``nn.Module`` subclass constructed with no arguments, ``example_args`` is a
    tuple or a zero-argument callable returning one. On a zero-argument function, the
    function returns ``(module, args)`` or ``(module, args, kwargs)``. ``memory_budget``
    (``"512 MB"``, or bytes): the most memory its lowered ExecuTorch program may need
    to run; more is a ``lowering/executorch-over-budget`` error.
    """
    options = TargetOptions(example_args, example_kwargs, dynamic_shapes, strict, name, memory_budget)

    def mark(o: F) -> F:
        if not callable(o):
            raise TypeError("@exportlens.target decorates a class or a function")
        try:
            setattr(o, ATTRIBUTE, options)
        except (AttributeError, TypeError):
            pass
        REGISTRY.append((o, options))
        return o

    if obj is not None:
        return mark(obj)
    return mark
