"""The few places where torch itself cannot handle a value-less weight. Torch.

Installed once per process (the worker installs them before anything imports a model
library, so a library that binds a function at import binds these), and inert for
every tensor that is not one of exportlens's fakes: with real weights nothing changes.

- ``torch.utils.swap_tensors``: ``Module._apply`` (``.to(dtype)``, ``.half()``,
  ``.float()``) swaps a fake parameter with its converted copy, and a fake tensor cannot
  be swapped (its fake mode holds weak references to it): for two fakes, the parameter
  takes the copy's metadata in place (``.data =``), which keeps its identity, so tied
  weights stay tied.
- ``torch.nn.init._no_grad_trunc_normal_``: torch 2.13 redraws out-of-range values
  until ``not mask.any()``, a read of the values; a fake tensor is left as it is, as
  torch leaves a meta tensor. (The other ``nn.init`` functions only write, which a fake
  tensor takes as it is.)
- ``torch.load``: a checkpoint read while a module is built with fake weights gives
  fake tensors (``exportlens.core.export.weights.checkpoints``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.init
import torch.utils

from exportlens.core.torchcompat import FakeTensor

_installed = False


def install(fake_load: Callable[..., Any]) -> None:
    """Install the patches (once); ``fake_load(original, *args, **kwargs)`` stands in
    for ``torch.load``."""
    global _installed
    if _installed:
        return
    _installed = True
    swap = torch.utils.swap_tensors

    def swap_tensors(t1: Any, t2: Any) -> None:
        if isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor):
            t1.data = t2
            return
        swap(t1, t2)

    swap_tensors.__doc__ = swap.__doc__
    torch.utils.swap_tensors = swap_tensors

    trunc_normal = torch.nn.init._no_grad_trunc_normal_

    def _no_grad_trunc_normal_(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if isinstance(tensor, FakeTensor):
            return tensor
        return trunc_normal(tensor, *args, **kwargs)

    torch.nn.init._no_grad_trunc_normal_ = _no_grad_trunc_normal_

    load = torch.load

    def torch_load(*args: Any, **kwargs: Any) -> Any:
        return fake_load(load, *args, **kwargs)

    torch_load.__doc__ = load.__doc__
    torch_load.__wrapped__ = load  # type: ignore[attr-defined]
    torch.load = torch_load  # type: ignore[assignment]
