"""The comparison every destination shares: eager outputs, outputs paired, mismatches at the ``return``.

A lowered program is run on the example inputs and its outputs are compared with the
model's own, run as plain PyTorch on copies of the same inputs. Which runtime ran
the program changes nothing here: outputs are paired by the graph output's name
(the lowered program keeps it) or else by position, compared with the per-dtype
tolerances of ``numerics``, and the outputs that differ are reported at the line of
the ``return`` that produced them, one diagnostic per line. Runs in the job process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from exportlens.core.export.lowering.numerics import compare
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


def user_output_names(signature: Signature | None) -> list[str]:
    return [s.arg.name for s in signature.outputs if s.kind == "USER_OUTPUT"] if signature else []


def compare_outputs(names: Sequence[str], actual: Sequence[Any], expected: Sequence[Any], signature: Signature | None) -> tuple[OutputComparison, ...]:
    """Each of the program's outputs (``names[i]`` is ``actual[i]``'s) against the eager
    leaf of the user output it stands for: by name, else by position."""
    users = user_output_names(signature)
    out = []
    for i, (name, value) in enumerate(zip(names, actual, strict=False)):
        j = users.index(name) if name in users else i
        if j < len(expected):
            out.append(compare(name, value, expected[j]))
    return tuple(out)


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
        if not o.shape_ok:
            text = f"`{o.name}` ({o.dtype}) has another shape in {runtime} than in eager PyTorch"
        else:
            text = f"`{o.name}` ({o.dtype}): max abs error {o.max_abs:.3g}, max rel error {o.max_rel:.3g} (tolerance: atol {o.atol:g} + rtol {o.rtol:g} × |eager|)"
        by_line.setdefault((where.line, where.column), (where, []))[1].append(text)
    found = []
    for where, texts in by_line.values():
        head = f"{runtime}'s output differs from eager PyTorch on the example inputs" if len(texts) == 1 else f"{runtime}'s outputs differ from eager PyTorch on the example inputs"
        found.append(Diagnostic.at(code, head + ":\n" + "\n".join(texts), where, name))
    return found
