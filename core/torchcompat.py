"""The private torch APIs exportlens reaches, in one place, for every supported torch.

exportlens runs with the user's torch (``exportlens.core.torchversion``: the range,
read without importing torch). What it reaches beyond torch's public API -- fake
tensors and their dispatch cache, the hooks the fake-weights patches replace, the
operator and sympy types the program format encodes, the export verifier, the trace's
intern table -- is imported here and nowhere else, so a change in torch is fixed once,
here. Torch; imported by the job process and the zygote only.

Names every supported torch has (``scripts/compat`` proves 2.10 to 2.15) are imported
plainly. Those a feature can live without are reached by ``_reach`` (None when the
torch at hand lacks them), and ``lacks(feature)`` says, naming the torch version, why
that feature is off: the caller reports it (a target's ``weights_note``, the worker's
log) and goes on without it instead of crashing:

- ``fake-weights``: building a model's large tensors fake (``core/export/weights``);
  without it every model is built with real weights.
- ``fake-answers``: jobs noting their fake-tensor questions for the zygote to answer
  (``core/isolation/fakecache``); without it each job computes its own.
"""

from __future__ import annotations

import importlib
from typing import Any

import sympy
import torch
from torch._export.verifier import SpecViolationError, load_verifier
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensor, FakeTensorMode
from torch.export.exported_program import _create_graph_module_for_export as create_graph_module_for_export
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._sympy import functions as sympy_functions
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from exportlens.core import torchversion

VERSION: str = str(torch.__version__)

__all__ = [
    "VERSION",
    "DataDependentOutputException",
    "FakeTensor",
    "FakeTensorMode",
    "HigherOrderOperator",
    "OpOverload",
    "OpOverloadPacket",
    "SpecViolationError",
    "TorchDispatchMode",
    "ValueRanges",
    "int_oo",
    "load_verifier",
    "sympy_functions",
    "create_graph_module_for_export",
    "pytree",
    "at_least",
    "lacks",
    "is_tensor_constructor",
    "like_tensor_constructors",
    "has_effects",
    "add_hint",
    "intern_table",
]


def _reach(module: str, path: str) -> Any:
    """``module``'s attribute ``path`` (dotted: ``FakeTensorMode.cache``), or None when
    this torch has no such thing."""
    try:
        value: Any = importlib.import_module(module)
    except ImportError:
        return None
    for name in path.split("."):
        try:
            value = getattr(value, name)
        except AttributeError:
            return None
    return value


# What each feature needs beyond the names imported above: (module, attribute).
NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "fake-weights": (
        ("torch._subclasses.fake_impls", "_is_tensor_constructor"),
        ("torch._subclasses.fake_impls", "_like_tensor_constructors"),
        ("torch.nn.init", "_no_grad_trunc_normal_"),
        ("torch.utils", "swap_tensors"),
        ("torch._functorch.config", "fake_tensor_allow_unsafe_data_ptr_access"),
    ),
    "fake-answers": (
        ("torch._subclasses.fake_tensor", "FakeTensorMode._cached_dispatch_impl"),
        ("torch._subclasses.fake_tensor", "FakeTensorMode.cache"),
        ("torch._subclasses.fake_impls", "_is_tensor_constructor"),
        ("torch._higher_order_ops.effects", "has_effects"),
    ),
}
WHAT = {"fake-weights": "fake weights", "fake-answers": "sharing fake-tensor answers between jobs"}


def lacks(feature: str) -> str | None:
    """Why ``feature`` (a key of ``NEEDS``) is off with this torch, naming the version
    and what is missing; None when this torch has everything it needs."""
    missing = [f"{module}.{path}" for module, path in NEEDS[feature] if _reach(module, path) is None]
    if not missing:
        return None
    return f"{WHAT[feature]} need{'s' * (feature == 'fake-answers')} {', '.join(missing)}, which torch {VERSION} does not have"


def at_least(major: int, minor: int) -> bool:
    """Whether this torch is ``major.minor`` or newer (for a branch on behaviour)."""
    return torchversion.at_least(major, minor, VERSION)


# The optional names, None where this torch lacks them (``lacks`` says which feature goes).
is_tensor_constructor: Any = _reach("torch._subclasses.fake_impls", "_is_tensor_constructor")
like_tensor_constructors: Any = _reach("torch._subclasses.fake_impls", "_like_tensor_constructors") or ()
has_effects: Any = _reach("torch._higher_order_ops.effects", "has_effects")


def add_hint(shape_env: Any, sym: Any, hint: Any) -> None:
    """Record ``hint`` as ``sym``'s value in ``shape_env`` (unless it has one), as this
    torch's own deserializer does (``torch/_export/serde/serialize.py``): torch 2.10
    keeps the values in ``var_to_val``, 2.11 on in ``backed_var_to_val``; 2.15 records
    symbols only (it indexes them by name), where 2.11 to 2.14 took any expression."""
    values = getattr(shape_env, "backed_var_to_val", None)
    if values is None:
        if sym not in shape_env.var_to_val:
            shape_env.add_var_to_val(sym, hint)
        return
    if sym in values or (at_least(2, 15) and not isinstance(sym, sympy.Symbol)):
        return
    shape_env.add_backed_var_to_val(sym, hint)


def intern_table() -> dict[int, str]:
    """The structured trace log's interned file names, by id (empty where this torch
    keeps none)."""
    table = _reach("torch._logging.structured", "INTERN_TABLE")
    return {i: s for s, i in table.items()} if isinstance(table, dict) else {}
