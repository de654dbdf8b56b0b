"""The comparison every destination shares: eager outputs, outputs paired, mismatches at the ``return``.

A lowered program is run on the example inputs and its outputs are compared with the
model's own, run as plain PyTorch on copies of the same inputs. Which runtime ran
the program changes nothing here: outputs are paired by the graph output's name
(the lowered program keeps it) or else by position, compared with the per-dtype
tolerances of ``numerics``, and the outputs that differ are reported at the line of
the ``return`` that produced them, one diagnostic per line. Every output structure
torch exports is paired: ``None`` and other constants (which no runtime computes,
and ONNX drops), ints and SymInts, nested tuples, lists and dicts (their leaves, in
torch's pytree order); an output that depends on random numbers is compared by shape
and dtype only (``randomness``). Runs in the job process.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exportlens.core.export.lowering.numerics import compare, dtype_name
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.model.lowering import OutputComparison
from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import Signature, SourceLine


def eager_outputs(built: Built) -> list[Any]:
    """The model's outputs as leaves, run as plain PyTorch on copies of the example
    inputs, its buffers put back afterwards: a lowered program's state is the
    program's at export, which a mutating forward would otherwise move on."""
    import torch
    from torch.utils import _pytree as pytree

    buffers = {n: b.detach().clone() for n, b in built.module.named_buffers()}
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (built.args, built.kwargs or {}))
    try:
        with torch.no_grad():
            out = built.module(*args, **kwargs)
    finally:
        with torch.no_grad():
            for n, b in built.module.named_buffers():
                if n in buffers:
                    b.copy_(buffers[n])
    return [leaf.detach() if isinstance(leaf, torch.Tensor) else leaf for leaf in pytree.tree_leaves(out)]


@dataclass(frozen=True)
class UserOutput:
    """One user output of the exported program, in torch's flat order (the eager
    outputs' pytree leaves have the same order: ``None`` and ints are leaves too)."""

    position: int  # among the user outputs
    name: str  # the graph's name; ``output N`` for a constant, which has none
    kind: str  # "tensor", "symint", "constant", ... (``ArgSpec.kind``)
    value: Any = None  # a constant's value (``None``, a number)


def user_outputs(ep: Any) -> list[UserOutput]:
    """The program's user outputs: what a runtime returns and eager's leaves stand for."""
    from torch.export.graph_signature import ConstantArgument, OutputKind, SymIntArgument, TensorArgument

    out: list[UserOutput] = []
    for spec in ep.graph_signature.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            continue
        arg, i = spec.arg, len(out)
        if isinstance(arg, ConstantArgument):
            out.append(UserOutput(i, f"output {i}", "constant", arg.value))
        else:
            kind = "tensor" if isinstance(arg, TensorArgument) else "symint" if isinstance(arg, SymIntArgument) else type(arg).__name__
            out.append(UserOutput(i, str(getattr(arg, "name", "") or f"output {i}"), kind))
    return out


_ALIAS = re.compile(r"^(.+)_alias_\d+$")  # torch.onnx's name for an output returned twice


def pair(names: Sequence[str], outputs: Sequence[UserOutput]) -> list[int | None]:
    """The user output each of a runtime's outputs (named ``names``) stands for: the
    first unclaimed one of that name (``user_outputs``' names, or the name an ONNX
    alias repeats), else the
    next unclaimed one that is not a constant (a runtime that drops constants, as
    ONNX does, returns the others in order)."""
    claimed: set[int] = set()

    def first(name: str | None) -> int | None:
        """The first unclaimed output named ``name`` (None: the first that is no constant)."""
        return next((o.position for o in outputs if o.position not in claimed and (o.name == name if name is not None else o.kind != "constant")), None)

    out: list[int | None] = []
    for name in names:
        alias = _ALIAS.match(name)
        j = first(name)
        if j is None and alias is not None:
            j = first(alias.group(1))
        if j is None:
            j = first(None)
        if j is not None:
            claimed.add(j)
        out.append(j)
    return out


def compare_outputs(
    names: Sequence[str],
    actual: Sequence[Any],
    expected: Sequence[Any],
    outputs: Sequence[UserOutput],
    random: Mapping[int, str] | None = None,
    runtime: str = "the runtime",
) -> tuple[OutputComparison, ...]:
    """Each user output against its eager leaf (``expected[position]``): the runtime's
    value ``actual[i]`` (named ``names[i]``) where one stands for it. A constant is
    eager's value against the signature's; an output that depends on random numbers
    (``random``: position -> why) is compared by shape and dtype only; one the
    runtime did not return is a mismatch that says so."""
    random = random or {}
    by_position = {j: value for j, value in zip(pair(names, outputs), actual, strict=False) if j is not None}
    out = []
    for o in outputs:
        if o.position >= len(expected):
            break
        eager = expected[o.position]
        if o.kind == "constant":
            out.append(_constant(o, eager, by_position, runtime))
        elif o.position not in by_position:
            out.append(OutputComparison(o.name, _type(eager), float("inf"), float("inf"), 0.0, 0.0, ok=False, shape_ok=False, compared="missing", note=f"{runtime} returned no value for it"))
        elif o.position in random:
            out.append(_shape_only(o.name, by_position[o.position], eager, random[o.position]))
        else:
            try:
                out.append(compare(o.name, by_position[o.position], eager))
            except Exception as e:  # noqa: BLE001 - a value no tensor holds: say so, do not fail
                note = f"not comparable with eager's value ({_type(eager)}): {type(e).__name__}: {e}"
                out.append(OutputComparison(o.name, _type(eager), float("inf"), float("inf"), 0.0, 0.0, ok=False, shape_ok=False, note=note))
    return tuple(out)


def _type(value: Any) -> str:
    import torch

    return dtype_name(value) if isinstance(value, torch.Tensor) else type(value).__name__


def _constant(o: UserOutput, eager: Any, by_position: Mapping[int, Any], runtime: str) -> OutputComparison:
    """A constant output (``return logits, None``): the program returns the value the
    signature holds; eager must return the same, and a runtime that returns it too
    (ExecuTorch) the same again."""
    ok = eager is o.value or (type(eager) is type(o.value) and eager == o.value)
    note = f"a constant of the program ({o.value!r}), computed by no runtime"
    if o.position in by_position:
        returned = by_position[o.position]
        ok = ok and (returned is o.value or returned == o.value)
        note = f"a constant of the program ({o.value!r}); {runtime} returns {returned!r}"
    else:
        note += f": {runtime}'s program has no output for it"
    if not ok:
        note += f"; eager PyTorch returned {eager!r}"
    return OutputComparison(o.name, type(o.value).__name__, 0.0, 0.0, 0.0, 0.0, ok=ok, compared="constant", note=note)


def _shape_only(name: str, actual: Any, expected: Any, why: str) -> OutputComparison:
    """Shapes and dtypes alone: the values are random draws, other ones in each run."""
    import torch

    a = actual if isinstance(actual, torch.Tensor) else torch.as_tensor(actual)
    e = expected if isinstance(expected, torch.Tensor) else torch.as_tensor(expected)
    ok = tuple(a.shape) == tuple(e.shape) and a.dtype == e.dtype
    note = f"{why}: every run draws other numbers, so only its shape and dtype were compared"
    return OutputComparison(name, dtype_name(e), 0.0, 0.0, 0.0, 0.0, ok=ok, shape_ok=ok, compared="shape", note=note)


def mismatch_diagnostics(code: str, runtime: str, outputs: Sequence[OutputComparison], signature: Signature | None, candidate: Candidate) -> list[Diagnostic]:
    """One ``code`` diagnostic per ``return`` line, naming each output that differs
    there; ``runtime`` names what ran the program ("onnxruntime")."""
    name = candidate.decl.name
    sources = {s.arg.name: s.source for s in signature.outputs} if signature else {}
    by_line: dict[tuple[int, int], tuple[SourceLine, list[str]]] = {}
    for o in outputs:
        if o.ok:
            continue
        where = sources.get(o.name) or candidate.where
        if o.compared == "missing" or o.note and o.compared == "values":
            text = f"`{o.name}` ({o.dtype}): {o.note}"
        elif o.compared == "constant":
            text = f"`{o.name}`: {o.note}"
        elif o.compared == "shape":
            text = f"`{o.name}` ({o.dtype}) has another shape or dtype in {runtime} than in eager PyTorch; it {o.note}"
        elif not o.shape_ok:
            text = f"`{o.name}` ({o.dtype}) has another shape in {runtime} than in eager PyTorch"
        else:
            text = f"`{o.name}` ({o.dtype}): max abs error {o.max_abs:.3g}, max rel error {o.max_rel:.3g} (tolerance: atol {o.atol:g} + rtol {o.rtol:g} × |eager|)"
        by_line.setdefault((where.line, where.column), (where, []))[1].append(text)
    found = []
    for where, texts in by_line.values():
        head = f"{runtime}'s output differs from eager PyTorch on the example inputs" if len(texts) == 1 else f"{runtime}'s outputs differ from eager PyTorch on the example inputs"
        found.append(Diagnostic.at(code, head + ":\n" + "\n".join(texts), where, name))
    return found
