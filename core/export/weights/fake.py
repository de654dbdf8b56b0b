"""Tensors without values: what a module's construction makes, made fake. Torch.

``torch.export`` never reads a weight's value: it fakifies every parameter, buffer and
constant before tracing. So a module whose large tensors are ``FakeTensor``s (shape,
dtype, device, no storage) exports to the same program as one with real weights, and
its construction costs neither the memory nor the time of initialising them.

:class:`FakeWeights` is the job's one fake mode and the dispatch mode that decides,
op by op while user code runs, which new tensors are fake. A tensor is made fake when

- a *factory* makes it (``empty``, ``zeros``, ``randn``, ``full``, ``*_like``,
  ``new_*``: an op that makes a tensor from nothing but sizes and values), for the CPU
  (the device torch would make it on), and
- it is at least ``min_bytes`` large, and
- a module is being constructed: a method of an ``nn.Module`` instance is on the
  Python stack (``__init__``, ``reset_parameters``, ``_init_weights``, ``to_empty``,
  ``from_pretrained``'s own methods) and no module's ``forward`` is running.

So weights, large buffers and KV caches are fake; example inputs, module-level tensors
and the small tables a constructor computes with (RoPE frequencies, masks, lookup
tables) stay real, and Python code that reads their values runs as it does with real
weights. What is computed *from* a fake tensor is fake (``FakeTensor``'s own dispatch:
``.to(dtype)``, weight norm, tying), and a read of a fake value (``.item()``,
``.tolist()``, ``bool()``) raises :class:`ValuesUnavailable` -- the signal the policy
(``exportlens.core.export.weights``) falls back to real weights on.

Each fake keeps its *recipe* (the factory call that made it) while nothing writes to
its storage, so that it can be made real again (:meth:`FakeWeights.real_again`): a
plain tensor attribute is a constant to ``torch.export``, whose values torch computes
with (constant propagation) -- a fake one there would be read as data.
"""

from __future__ import annotations

import sys
import threading
import types
import weakref
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from exportlens.core.torchcompat import (
    DataDependentOutputException,
    FakeTensor,
    FakeTensorMode,
    OpOverload,
    TorchDispatchMode,
)
from exportlens.core.torchcompat import is_tensor_constructor as _is_tensor_constructor
from exportlens.core.torchcompat import like_tensor_constructors as _like_tensor_constructors

aten = torch.ops.aten

# Ops that make a tensor of their own from another's metadata only (``x.new_empty(n)``).
_NEW_CONSTRUCTORS = {
    aten.new_empty.default,
    aten.new_empty_strided.default,
    aten.new_zeros.default,
    aten.new_ones.default,
    aten.new_full.default,
}
_VALUE_READS = {aten._local_scalar_dense.default, aten.item.default, aten.is_nonzero.default}
# The frames of ``nn.Module.__call__``: a module's forward is running, not its construction.
_MODULE_FILE = torch.nn.Module._call_impl.__code__.co_filename
_CALL_FRAMES = {"_call_impl", "_wrapped_call_impl"}


class _SerialFakeMode(FakeTensorMode):
    """A fake mode that threads take one at a time: a library that loads a checkpoint
    in a thread pool (transformers does) makes and converts fakes from several threads,
    and a fake mode's state (its entered stack, whether it runs a kernel) is shared."""

    def __init__(self, **kwargs: Any) -> None:
        self._turn = threading.RLock()
        self._local = threading.local()
        super().__init__(**kwargs)

    def __deepcopy__(self, memo: dict[int, Any]) -> _SerialFakeMode:
        # A fake tensor keeps its mode in its ``__dict__``, which ``copy.deepcopy`` of
        # the tensor copies (``nn.TransformerEncoder`` deep-copies its layer): the
        # copy's mode is this one, so its fakes are ours.
        return self

    # Whether this thread is inside a fake kernel: a fake tensor's dispatch checks it
    # before it waits for its turn, so another thread's kernel must not show here.
    @property  # type: ignore[override]
    def in_kernel_invocation(self) -> bool:
        return getattr(self._local, "in_kernel", False)

    @in_kernel_invocation.setter
    def in_kernel_invocation(self, value: bool) -> None:
        self._local.in_kernel = value

    def __enter__(self) -> Any:
        self._turn.acquire()
        try:
            return super().__enter__()
        except BaseException:
            self._turn.release()
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            self._turn.release()


class ValuesUnavailable(RuntimeError):
    """Code read a value of a tensor exportlens made without values."""


def is_factory(func: Any) -> bool:
    return func in _NEW_CONSTRUCTORS or func in _like_tensor_constructors or (
        isinstance(func, OpOverload) and _is_tensor_constructor(func)
    )


def constructing_module(frame: types.FrameType | None) -> bool:
    """Whether a module is being constructed at ``frame``: some frame up the stack is a
    method of an ``nn.Module`` instance (its first argument is one), and no module is
    being called (its forward, with what it creates, is computation, not state)."""
    found = False
    while frame is not None:
        code = frame.f_code
        if code.co_name in _CALL_FRAMES and code.co_filename == _MODULE_FILE:
            return False
        if not found and code.co_argcount:
            first = frame.f_locals.get(code.co_varnames[0])
            found = isinstance(first, torch.nn.Module)
        frame = frame.f_back
    return found


def _on_cpu(kwargs: dict[str, Any], args: tuple[Any, ...], func: Any) -> bool:
    device = kwargs.get("device")
    if device is None:
        if func in _like_tensor_constructors or func in _NEW_CONSTRUCTORS:
            source = args[0] if args else None
            return isinstance(source, torch.Tensor) and source.device.type == "cpu"
        return torch.get_default_device().type == "cpu"
    return torch.device(device).type == "cpu"


class FakeWeights:
    """The job's fake mode and what it made; ``constructing()`` is the window in which
    user code runs with large tensors made fake."""

    def __init__(self, min_bytes: int) -> None:
        self.min_bytes = min_bytes
        self.mode = _SerialFakeMode(allow_non_fake_inputs=True)
        self.made = 0  # fake tensors made by a factory
        self.made_bytes = 0  # what they would take with real values
        self.value_read: str | None = None  # the op that read a fake value, first time
        # The factory call that made each fake, while its storage is untouched.
        self.recipes: WeakIdKeyDictionary = WeakIdKeyDictionary()
        # Storage address (``_cdata``) -> the fakes with a recipe made there. Only read
        # while that storage is alive (a write to it): an address outlives its storage
        # and comes back for the next one, so a set of the addresses written to made a
        # fake built where a written one had been freed lose its recipe.
        self._made_at: dict[int, list[weakref.ref[Any]]] = {}

    def is_fake(self, value: Any) -> bool:
        return isinstance(value, FakeTensor) and value.fake_mode is self.mode

    def constructing(self) -> _Constructing:
        return _Constructing(self)

    def make(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a factory op: fake when its tensor is large and a module is being built."""
        if not _on_cpu(kwargs, args, func):
            return func(*args, **kwargs)
        if args and isinstance(args[0], FakeTensor):  # ``fake.new_empty``: fake already
            return func(*args, **kwargs)
        shape = func(*args, **{**kwargs, "device": "meta"})
        nbytes = shape.numel() * shape.element_size() if isinstance(shape, torch.Tensor) else 0
        if nbytes < self.min_bytes or not constructing_module(sys._getframe(1)):
            return func(*args, **kwargs)
        with self.mode:
            out = func(*args, **kwargs)
        self.made += 1
        self.made_bytes += nbytes
        self.recipes[out] = (func, args, kwargs)
        at = out.untyped_storage()._cdata
        self._made_at[at] = [r for r in self._made_at.get(at, ()) if r() is not None] + [weakref.ref(out)]
        return out

    def note_writes(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Forget the recipe of every fake an in-place op writes to (views included:
        by storage)."""
        schema = func._schema
        if not schema.is_mutable:
            return
        for i, argument in enumerate(schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(argument.name)
            for t in value if isinstance(value, (list, tuple)) else (value,):
                if self.is_fake(t):
                    at = t.untyped_storage()._cdata
                    for ref in self._made_at.pop(at, ()):
                        made = ref()
                        if made is not None and made.untyped_storage()._cdata == at:
                            self.recipes.pop(made, None)

    def real_again(self, t: Any) -> torch.Tensor | None:
        """``t`` made for real by its recipe (the same factory call: the same values, or
        fresh random ones for a random factory); None when it has none or was written to."""
        recipe = self.recipes.get(t)
        if recipe is None:
            return None
        func, args, kwargs = recipe
        out = func(*args, **kwargs)
        if func in _like_tensor_constructors or func in _NEW_CONSTRUCTORS:
            return None if self.is_fake(out) else out  # made from a fake: it stays one
        return out

    def fake_from(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A fake CPU tensor of that shape and dtype (a checkpoint's entry, unread)."""
        with self.mode:
            out = torch.empty(shape, dtype=dtype, device="cpu")
        self.made += 1
        self.made_bytes += out.numel() * out.element_size()
        return out


class _Constructing(TorchDispatchMode):
    def __init__(self, weights: FakeWeights) -> None:
        super().__init__()
        self.weights = weights

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func in _VALUE_READS and args and self.weights.is_fake(args[0]):
            self.weights.value_read = self.weights.value_read or str(func.overloadpacket.__name__)
            raise ValuesUnavailable(
                f"this reads a value of a tensor (shape {list(args[0].shape)}) made from large tensors that "
                "exportlens built without values: the export never reads them"
            )
        if is_factory(func):
            return self.weights.make(func, args, kwargs)
        self.weights.note_writes(func, args, kwargs)
        return func(*args, **kwargs)


# Failures that a value-less tensor causes where a real one would not: its own dispatch
# asked for data, a library wanted its storage or a NumPy view.
_FAKE_TYPES = (ValuesUnavailable, DataDependentOutputException)
_FAKE_TEXTS = (
    "not supported for tensor subclasses",  # .numpy()
    "Not available for 'meta' device type",  # storage bytes
    "Cannot access data pointer",
    "doesn't have storage",
    "FakeTensor",
    "meta tensor",
)


def fake_caused(error: BaseException) -> bool:
    """Whether ``error`` (or one it was raised from) is what a fake tensor causes."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _FAKE_TYPES) or any(text in str(current) for text in _FAKE_TEXTS):
            return True
        current = current.__cause__ or current.__context__
    return False
