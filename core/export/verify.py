"""A fix's verification: export the fixed text again, and compare its program's
outputs with the model's own.

A verification job gets the request's texts (the model as the user has it, failing)
and ``trials``: each the user's files as one fix leaves them. It runs the original
file once and, for each target a trial names, builds the model and runs it as plain
PyTorch on copies of the example inputs: the reference outputs. Then, per trial, it
forgets the user's modules, runs the fixed texts, builds the target with the same
seeds and the reference's initial weights, exports and analyses it exactly as a save
would (``job.export_target``), and runs the exported program
(``ExportedProgram.module()``) on the example inputs. The trial's ``Verdict``:

* ``kept``: the target exports, no diagnostic of the fix's code and no other error
  is left, and every output equals the reference within its dtype's tolerance
  (``lowering/numerics``); an output that differs between two eager runs with other
  seeds depends on random numbers, and is compared by shape and dtype only;
* ``changed``: it exports, and an output differs (``detail`` says which and by how
  much): the fix is offered, never preferred, and says so;
* ``failed``: anything else; the fixed export's diagnostics ride along, so a next fix
  (a second ``torch._check``) can be found for them (``core/fixes/verified``'s loop).

Runs in the job process (torch); the isolation (its own process, its timeout and
memory cap) is the export's. Everything is seeded: ``torch``, ``random`` and, when
the model imported it, ``numpy``.
"""

from __future__ import annotations

import os
import random
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

from exportlens.core.export.job import Emit, _build, _pyproject_declarations, export_target
from exportlens.core.export.loader import Loaded, load, sources_of
from exportlens.core.export.targets import Built, Candidate, discover
from exportlens.core.export.weights import Policy
from exportlens.core.model.events import TargetsFound
from exportlens.core.model.request import ExportRequest, Trial
from exportlens.core.model.results import Diagnostic, FileResult, Verdict


def _seed(n: int = 0) -> None:
    import torch

    torch.manual_seed(n)
    random.seed(n)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(n)


@dataclass
class Reference:
    """A target of the original file: its outputs, and what they were made from."""

    state: dict[str, Any]
    outputs: list[Any]
    random: set[int] = field(default_factory=set)  # outputs that change with the seed
    error: str = ""  # the model itself failed: nothing to compare with


def _forget(loaded: Loaded) -> None:
    """Drop the modules the file and its local modules made, so the next ``load``
    runs the fixed texts; installed libraries stay (they never change)."""
    sources = sources_of(loaded)
    for name in set(sys.modules) - loaded.modules_before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str) and sources.is_user(os.path.realpath(file)):
            del sys.modules[name]
    if loaded.module is not None:
        sys.modules.pop(loaded.module.__name__, None)


def _load(request: ExportRequest, texts: dict[str, str]) -> Loaded:
    own = os.path.realpath(request.path)
    source = texts.get(own, request.source)
    overlays = dict(request.overlays)
    overlays.update({p: t for p, t in texts.items() if p != own})
    from exportlens.core.export.registry import REGISTRY

    REGISTRY.clear()  # the decorated targets of the text loaded before
    _seed()
    return load(request.path, source, request.root, tuple(overlays.items()))


def _candidates(request: ExportRequest, loaded: Loaded) -> list[Candidate]:
    if loaded.module is None:
        return []
    entries = list(request.pyproject_targets) or _pyproject_declarations(request)[0]
    return discover(loaded.module, loaded.index, strict_default=request.strict_default, pyproject_entries=entries, root=request.root)


def _leaves(value: Any, depth: int = 0) -> list[Any]:
    """``value``'s leaves in torch's pytree order; an object pytree does not know (the
    original model's output class, before the fix registers it) is taken apart by its
    fields, in their order, as its registration will: the fixed program's outputs
    then pair with the model's."""
    import dataclasses

    import torch
    from torch.utils import _pytree as pytree

    out: list[Any] = []
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            out.append(leaf.detach().clone())
        elif depth < 8 and dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            out += _leaves([getattr(leaf, f.name) for f in dataclasses.fields(leaf)], depth + 1)
        elif depth < 8 and not isinstance(leaf, (int, float, bool, str, bytes, type(None))) and isinstance(getattr(leaf, "__dict__", None), dict):
            out += _leaves(list(vars(leaf).values()), depth + 1)
        else:
            out.append(leaf)
    return out


def _run(module: Any, built: Built) -> list[Any]:
    import torch
    from torch.utils import _pytree as pytree

    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (built.args, built.kwargs or {}))
    with torch.no_grad():
        return _leaves(module(*args, **kwargs))


def _reference(built: Built) -> Reference:
    state = {k: v.detach().clone() for k, v in built.module.state_dict(keep_vars=True).items()}
    import copy

    try:
        # Each run on a copy as built: a forward that updates its state (a running
        # average kept in a plain attribute) must not make the second run differ.
        first, second = copy.deepcopy(built.module), copy.deepcopy(built.module)
    except Exception:  # noqa: BLE001 - a module that refuses a copy: one run, no randomness found
        first, second = built.module, None
    try:
        _seed()
        outputs = _run(first, built)
        changed: set[int] = set()
        if second is not None:
            _seed(1)
            again = _run(second, built)
            changed = {i for i, (a, b) in enumerate(zip(outputs, again, strict=False)) if not _same(a, b)}
    except Exception as e:  # noqa: BLE001 - the model fails as it is (or returns what cannot be compared): no reference
        return Reference(state, [], error=f"the model fails when run ({type(e).__name__}: {e})")
    return Reference(state, outputs, changed)


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    return bool(a == b)


def compare(reference: Reference, outputs: list[Any]) -> str:
    """Empty when ``outputs`` are the reference's; else what differs."""
    import torch

    from exportlens.core.export.lowering.numerics import compare as close

    if len(outputs) != len(reference.outputs):
        return f"the program returns {len(outputs)} values where the model returns {len(reference.outputs)}"
    for i, (got, want) in enumerate(zip(outputs, reference.outputs, strict=True)):
        if isinstance(want, torch.Tensor) != isinstance(got, torch.Tensor):
            return f"output {i} is a {type(got).__name__} where the model returns a {type(want).__name__}"
        if isinstance(want, torch.Tensor):
            if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
                return f"output {i} is {str(got.dtype).removeprefix('torch.')}{list(got.shape)} where the model returns {str(want.dtype).removeprefix('torch.')}{list(want.shape)}"
            if i in reference.random:
                continue  # random numbers: shape and dtype are what can be compared
            result = close(f"output {i}", got, want)
            if not result.ok:
                return f"output {i} differs from the model's by up to {result.max_abs:.3g} (tolerance {result.atol:g} + {result.rtol:g}×|value|)"
        elif i not in reference.random and got != want:
            return f"output {i} is {got!r} where the model returns {want!r}"
    return ""


RANDOM = "outputs that depend on random numbers compared by shape and dtype only"


def _recorded_shapes(ep: Any, outputs: list[Any]) -> str:
    """Empty when the program's recorded output shapes (its fake values: what a
    compiler downstream plans with) are the shapes its run returns; else a failure.
    A fake kernel that guesses another input's shape runs the real kernel all the
    same, so only the recorded shapes show the guess was wrong."""
    import torch
    from torch.export.graph_signature import OutputKind

    output = next(n for n in ep.graph.nodes if n.op == "output")
    specs = ep.graph_signature.output_specs
    user = [a for a, spec in zip(output.args[0], specs, strict=False) if spec.kind == OutputKind.USER_OUTPUT]
    for i, (node, got) in enumerate(zip(user, outputs, strict=False)):
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor) or not isinstance(got, torch.Tensor):
            continue
        recorded = [d for d in val.shape]
        if all(isinstance(d, int) for d in recorded) and tuple(recorded) != tuple(got.shape):
            return f"failed: the program records output {i} as {list(recorded)} where running it returns {list(got.shape)}"
    return ""


def _load_state(module: Any, state: dict[str, Any]) -> None:
    """The reference's initial weights, where the fixed module has the same names and shapes."""
    import torch

    own = module.state_dict(keep_vars=True)
    fitting = {k: v for k, v in state.items() if k in own and getattr(own[k], "shape", None) == getattr(v, "shape", None)}
    with torch.no_grad():
        module.load_state_dict(fitting, strict=False)


def _try(request: ExportRequest, trial: Trial, reference: Reference, emit: Emit) -> Verdict:
    loaded = _load(request, dict(trial.texts))
    try:
        if loaded.module is None:
            return Verdict(trial.id, "failed", "the fixed file does not run", tuple(loaded.diagnostics))
        candidate = next((c for c in _candidates(request, loaded) if c.decl.name == trial.target), None)
        if candidate is None:
            return Verdict(trial.id, "failed", f"the fixed file no longer declares `{trial.target}`")
        sources = sources_of(loaded)
        policy = Policy("real", request.limits.memory_mb)
        ran: list[str] = []

        def on_program(ep: Any, built: Built) -> None:
            try:
                _seed()
                outputs = _run(ep.module(), built)
                ran.append(_recorded_shapes(ep, outputs) or compare(reference, outputs))
            except Exception as e:  # noqa: BLE001 - a program that fails to run is a failed fix
                ran.append(f"failed: the exported program fails when run ({type(e).__name__}: {str(e)[:300]})")

        original_build = candidate.build

        def build() -> Built:
            _seed()
            built = original_build()
            _load_state(built.module, reference.state)
            return built

        candidate.build = build
        started = time.perf_counter()
        result, found = export_target(candidate, loaded, sources, policy=policy, emit=emit, on_program=on_program)
        ms = (time.perf_counter() - started) * 1000
        codes = set(trial.codes or (trial.code,))
        left = tuple(d for d in found if d.code in codes or d.severity == "error")
        if result.status != "ok" or left or not ran:
            first = next(iter(left), None) or next(iter(found), None)
            why = f"{first.code}: {first.message.splitlines()[0]}" if first is not None else "it does not export"
            return Verdict(trial.id, "failed", why, tuple(found), ms)
        if ran[0].startswith("failed: "):
            return Verdict(trial.id, "failed", ran[0].removeprefix("failed: "), tuple(found), ms)
        if ran[0]:
            return Verdict(trial.id, "changed", ran[0], (), ms)
        # Kept; but where outputs are random, equal shapes prove less: said, never preferred.
        return Verdict(trial.id, "kept", RANDOM if reference.random else "", (), ms)
    finally:
        _forget(loaded)


def run_trials(request: ExportRequest, emit: Emit) -> FileResult:
    """Every trial of ``request``, in order (``job.run_job`` sends a request with
    trials here)."""
    original = _load(request, {})
    references: dict[str, Reference] = {}
    failed_load = "" if original.module is not None else "the model file does not run as it is"
    candidates = _candidates(request, original)
    emit(TargetsFound(tuple(c.decl for c in candidates)))
    policy = Policy("real", request.limits.memory_mb)
    sources = sources_of(original)
    for name in dict.fromkeys(t.target for t in request.trials):
        candidate = next((c for c in candidates if c.decl.name == name), None)
        if candidate is None:
            references[name] = Reference({}, [], error=f"the file does not declare `{name}`")
            continue
        _seed()
        built = _build(candidate, original, sources, policy)
        if isinstance(built, Diagnostic):
            references[name] = Reference({}, [], error=f"the model cannot be built ({built.message.splitlines()[0]})")
        else:
            references[name] = _reference(built)
    _forget(original)
    verdicts = []
    for trial in request.trials:
        # Each trial is an export of its own: its time starts now (``supervise`` restarts
        # the job's clock at ``TargetsFound``), not at the job's start.
        emit(TargetsFound(tuple(c.decl for c in candidates)))
        reference = references.get(trial.target) or Reference({}, [], error=failed_load)
        if reference.error:
            verdicts.append(Verdict(trial.id, "failed", reference.error))
            continue
        try:
            verdicts.append(_try(request, trial, reference, emit))
        except Exception as e:  # noqa: BLE001 - a bug of ours fails this trial, not the others
            verdicts.append(Verdict(trial.id, "failed", f"exportlens could not verify this fix ({type(e).__name__}: {e})"))
    return replace(FileResult(path=request.path), verdicts=tuple(verdicts))
