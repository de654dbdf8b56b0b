"""Finding banned mutations by running the model once, eagerly, under a mode.

Today's torch rejects a metadata mutation of a graph input with an internal
assertion that names no line, and an in-place update of a parameter that requires
grad with autograd's generic "leaf Variable" error. Running ``forward`` once under
a ``TorchFunctionMode`` that watches in-place calls finds the user's own line for
each. Runs in the job process only, and only after an export failed.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from exportlens.core.export.loader import frames_of
from exportlens.core.source.frames import Frame, deepest_in_file
from exportlens.core.source.project import UserSources

# In-place ops that change a tensor's shape, strides or storage, not its values.
METADATA_INPLACE = {
    "transpose_", "t_", "squeeze_", "unsqueeze_", "resize_", "resize_as_", "as_strided_",
    "swapdims_", "swapaxes_", "set_", "unflatten_", "detach_", "requires_grad_",
}
_INPLACE_DUNDER = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
                   "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__"}


@dataclass(frozen=True)
class Mutation:
    kind: str  # "input-metadata" | "parameter" | "tensor-attribute"
    op: str
    name: str  # the input's or parameter's name; a tensor attribute's torch path
    frame: Frame | None


@dataclass
class EagerOutcome:
    error: BaseException | None = None
    frames: list[Frame] = field(default_factory=list)
    mutations: list[Mutation] = field(default_factory=list)


class _Watch(TorchFunctionMode):
    def __init__(
        self, inputs: dict[int, str], params: dict[int, str], path: str, sources: UserSources | None = None, attributes: dict[int, str] | None = None
    ) -> None:
        super().__init__()
        self.inputs = inputs
        self.params = params
        self.attributes = attributes or {}
        self.path = path
        self.sources = sources
        self.found: list[Mutation] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if args and isinstance(args[0], torch.Tensor) and (name.endswith("_") and not name.endswith("__") or name in _INPLACE_DUNDER or name == "__setitem__"):
            key = id(args[0])
            if name in METADATA_INPLACE and key in self.inputs and name != "requires_grad_":
                self.found.append(Mutation("input-metadata", name, self.inputs[key], self._where()))
            elif key in self.params and name not in METADATA_INPLACE:
                self.found.append(Mutation("parameter", name, self.params[key], self._where()))
            elif key in self.attributes and name not in METADATA_INPLACE:
                # A plain tensor attribute updated in place (a KV cache's slice
                # assignment): export keeps it as a constant, and refuses the update.
                self.found.append(Mutation("tensor-attribute", name, self.attributes[key], self._where()))
        return func(*args, **(kwargs or {}))

    def _where(self) -> Frame | None:
        stack = [Frame(f.filename, f.lineno or 0, f.name) for f in traceback.extract_stack()]
        if self.sources is not None:  # the model's own modules count as its file
            return self.sources.deepest(stack)
        return deepest_in_file(stack, self.path)


def run_eagerly(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any] | None, path: str, sources: UserSources | None = None) -> EagerOutcome:
    """Call the module once on copies of its example inputs, watching mutations."""
    def copy(x: Any) -> Any:
        return x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x

    args2, kwargs2 = pytree.tree_map(copy, (args, kwargs or {}))
    inputs: dict[int, str] = {}
    for keypath, leaf in pytree.tree_flatten_with_path((args2, kwargs2))[0]:
        if isinstance(leaf, torch.Tensor):
            inputs[id(leaf)] = _input_name(keypath)
    params = {id(p): n for n, p in module.named_parameters() if p.requires_grad}
    watch = _Watch(inputs, params, path, sources, tensor_attributes(module))
    outcome = EagerOutcome()
    try:
        with torch.no_grad(), watch:
            module(*args2, **kwargs2)
    except BaseException as e:  # noqa: BLE001 - the model's failure is the finding
        outcome.error = e
        outcome.frames = frames_of(e)
    outcome.mutations = watch.found
    return outcome


def tensor_attributes(module: torch.nn.Module) -> dict[int, str]:
    """id -> torch path (``layers.0.attention.cache_k``) of every plain tensor attribute
    of the module and its submodules: a tensor in ``__dict__``, neither a parameter nor
    a buffer (those live in ``_parameters``/``_buffers``)."""
    found: dict[int, str] = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for attr, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                found.setdefault(id(value), f"{prefix}.{attr}" if prefix else attr)
    return found


def _input_name(keypath: tuple[Any, ...]) -> str:
    """``args[0]``/``kwargs['mask']`` -> a readable name for messages."""
    text = pytree.keystr(keypath)
    if text.startswith("[0]"):
        return "args" + text[3:]
    if text.startswith("[1]"):
        return "kwargs" + text[3:]
    return text
