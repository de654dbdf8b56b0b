"""A target whose module is in training mode, holding layers that compute otherwise in eval.

``nn.Module`` starts in training mode, and a model declared as ``model = Generator()``
is exported that way: its BatchNorm normalises with the batch's statistics and updates
its running ones (the program mutates them), its Dropout zeroes random elements. That
is rarely what a deployed program should do, and it is the most common cause of a
lowering that fails (ExecuTorch has no training-mode batch norm) or differs (a
runtime's batch norm uses the running statistics). So after an export, a target with
such layers in training mode gets one ``training-mode`` warning at its declaration
(the ``model = ...`` statement of the module-globals form, where ``.eval()`` goes),
naming each layer's line (the ``self.bn = nn.BatchNorm2d(...)`` assignment, as the
signature's parameter lines are found), and the quick fix adds ``.eval()``
(``core/fixes/eval_mode.py``). Lowering's findings on such a target say it is in
training mode. Runs in the job process (torch).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from exportlens.core.model.results import Diagnostic, Related
from exportlens.core.model.signature import SourceLine

CODE = "training-mode"


@dataclass(frozen=True)
class Layer:
    path: str  # the submodule's path: "main.1"
    kind: str  # its class: "BatchNorm2d"
    where: SourceLine | None  # the user's line that makes it


def _differs_in_eval(module: Any) -> bool:
    """``module`` computes otherwise in training mode than in eval mode, by its own
    code (its children are asked on their own)."""
    from torch import nn
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.dropout import _DropoutNd
    from torch.nn.modules.instancenorm import _InstanceNorm

    if isinstance(module, (_BatchNorm, _InstanceNorm)):
        return bool(module.track_running_stats)  # without running statistics both modes use the batch's
    if isinstance(module, _DropoutNd):
        return float(module.p) > 0
    if isinstance(module, nn.RNNBase):
        return float(module.dropout) > 0 and int(module.num_layers) > 1
    if isinstance(module, nn.MultiheadAttention):
        return float(module.dropout) > 0
    return False


def layers_in_training(module: Any, line_of: Any) -> list[Layer]:
    """The layers of ``module`` in training mode that compute otherwise in eval mode,
    in module order; ``line_of(path)``: the user's line that makes a submodule."""
    out = []
    for path, sub in module.named_modules():
        if sub.training and _differs_in_eval(sub):
            out.append(Layer(path or "(the model)", type(sub).__name__, line_of(path) if path else None))
    return out


def check(ep: Any, module: Any, index: Any, sources: Any, name: str, where: SourceLine) -> tuple[str, list[Diagnostic]]:
    """The layers in training mode as one phrase for lowering's findings, and the one
    ``training-mode`` warning at the target's declaration (none when there are none)."""
    from exportlens.core.export.specsource import SourceContext, attribute_source

    context = SourceContext(ep, module, index, sources)
    layers = layers_in_training(module, lambda path: attribute_source(context, path))
    if not layers:
        return "", []
    phrase = _phrase(layers, index.path)
    kinds = {layer.kind for layer in layers}
    what = []
    if any("Norm" in k for k in kinds):
        what.append("batch norm uses each batch's statistics and updates its running ones (the program mutates them)")
    if any("Dropout" in k for k in kinds) or any(k in ("LSTM", "GRU", "RNN", "MultiheadAttention") for k in kinds):
        what.append("dropout zeroes random elements (every run differs)")
    message = (
        f"`{name}` is exported in training mode, with {phrase}: in training mode {' and '.join(what)}. "
        "A deployed model runs in eval mode; call `.eval()` on the model before it is exported"
    )
    related = tuple(
        Related(os.path.realpath(layer.where.path or index.path), layer.where.line, f"`{layer.path}` ({layer.kind}) is made here", layer.where.column)
        for layer in _first_per_line(layers)
        if layer.where is not None
    )
    return phrase, [Diagnostic.at(CODE, message, where, name, related)]


def _first_per_line(layers: list[Layer]) -> list[Layer]:
    seen: set[tuple[str | None, int]] = set()
    out = []
    for layer in layers:
        key = (layer.where.path, layer.where.line) if layer.where is not None else (None, -1)
        if key not in seen:
            seen.add(key)
            out.append(layer)
    return out


def _phrase(layers: list[Layer], path: str) -> str:
    """```BatchNorm2d` `main.1` and `main.4` (dcgan.py:8), `Dropout` `drop` (dcgan.py:12)``."""
    groups: dict[tuple[str, str], list[str]] = {}
    for layer in layers:
        place = f"{os.path.basename(layer.where.path or path)}:{layer.where.line}" if layer.where is not None else ""
        groups.setdefault((layer.kind, place), []).append(f"`{layer.path}`")
    parts = []
    for (kind, place), paths in groups.items():
        listed = paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + f" and {paths[-1]}"
        parts.append(f"`{kind}` {listed}" + (f" ({place})" if place else ""))
    return ", ".join(parts)
