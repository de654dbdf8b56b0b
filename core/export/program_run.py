"""Running the exported program once on the example inputs, after a successful export.

Export traces with fake tensors, which carry shapes and dtypes but check less than a
real run does: ``nn.Linear(8, 8)`` followed by ``nn.Linear(8, 4).double()`` exports,
and calling the model raises ``mat1 and mat2 must have the same dtype``. So, when it
is cheap, the job runs the program it made, node by node (``torch.fx.Interpreter``
over ``ep.graph_module``, with the state and the flat inputs torch itself would pass,
and a new token for each effect token: ``_graph_inputs``), and a node that raises is
an ``eager-error`` at the user's line that made it (the node's ``stack_trace``, in any
of the user's files). The graph is the functional program: a mutation of a buffer or
an input is one more output, so the run changes neither the state nor the inputs.

Cheap means: the model's weights are real (never fake ones: their values are
nothing a run could be judged by), the state and the inputs together hold at most
``MAX_BYTES``, and the run stops, as skipped, once it has taken ``MAX_SECONDS``
(between nodes). What happened is the target's ``ProgramRun``: ``ok``, ``failed``, or
``skipped`` with the reason, which every front end shows.
"""

from __future__ import annotations

import time
from typing import Any

from exportlens.core.export.analyze import clean_message
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.export.weights import values_real
from exportlens.core.model.results import Diagnostic, ProgramRun
from exportlens.core.source.frames import Frame, frames_in_text
from exportlens.core.source.project import UserSources

MAX_BYTES = 256 << 20  # parameters, buffers, constants and example inputs together
MAX_SECONDS = 10.0


class _TooLong(Exception):
    pass


def _bytes(values: Any) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor) and not v.is_meta)


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n} bytes"


def _graph_inputs(ep: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The graph module's inputs, in its placeholders' order: torch's own flat inputs
    (``_graph_module_flat_inputs``: the state, then the user's inputs), with a new token
    wherever the signature has an effect token (``aten._print``, an effectful custom op).
    Torch leaves tokens out there because ``ep.module()`` removes them from its copy of
    the graph (``_remove_effect_tokens``); the graph run here is the program itself, so
    it gets the token its compiled form would make (``prims._make_token``), and its token
    outputs are never read."""
    import torch
    from torch.export.graph_signature import InputKind

    flat = ep._graph_module_flat_inputs(args, kwargs)
    specs = ep.graph_signature.input_specs
    tokens = sum(s.kind == InputKind.TOKEN for s in specs)
    if len(flat) != len(specs) - tokens:
        raise ValueError(f"{len(flat)} inputs for {len(specs) - tokens} placeholders")
    state_count = sum(s.kind not in (InputKind.USER_INPUT, InputKind.TOKEN) for s in specs)
    state, user = iter(flat[:state_count]), iter(flat[state_count:])
    return [
        torch.ops.prims._make_token() if s.kind == InputKind.TOKEN else next(user if s.kind == InputKind.USER_INPUT else state)
        for s in specs
    ]


def check(ep: Any, built: Built, candidate: Candidate, sources: UserSources) -> tuple[ProgramRun, list[Diagnostic]]:
    """Run ``ep`` on ``built``'s example inputs when that is cheap; what happened, and
    the diagnostic of a node that failed."""
    import torch
    from torch.utils import _pytree as pytree

    if not values_real(built):
        return ProgramRun("skipped", "the model was built with fake weights; real ones are needed to run it"), []
    try:
        flat = _graph_inputs(ep, built.args, built.kwargs or {})
    except Exception as e:  # noqa: BLE001 - a private API of torch's, or inputs it refuses
        return ProgramRun("skipped", f"its inputs could not be prepared ({type(e).__name__})"), []
    size = _bytes(flat) + _bytes(pytree.tree_leaves(ep.constants))
    if size > MAX_BYTES:
        return ProgramRun("skipped", f"the weights and inputs hold {_size(size)}, over the {_size(MAX_BYTES)} a check run may take"), []
    if any(isinstance(v, torch.Tensor) and v.is_meta for v in flat):
        return ProgramRun("skipped", "some weights have no values (meta tensors)"), []

    started = time.perf_counter()

    class Run(torch.fx.Interpreter):
        failed: Any = None
        error = ""  # as the op raised it, before the interpreter adds its "While executing ..."

        def run_node(self, n: torch.fx.Node) -> Any:
            if time.perf_counter() - started > MAX_SECONDS:
                raise _TooLong
            try:
                return super().run_node(n)
            except Exception as e:
                if self.failed is None:
                    self.failed, self.error = n, f"{type(e).__name__}: {e}"
                raise

    runner = Run(ep.graph_module)
    try:
        with torch.no_grad():
            runner.run(*flat, enable_io_processing=False)
    except _TooLong:
        return ProgramRun("skipped", f"it ran longer than {MAX_SECONDS:g} s"), []
    except Exception as e:  # noqa: BLE001 - the model's failure is the finding
        error = clean_message(runner.error or f"{type(e).__name__}: {e}", 600)
        return ProgramRun("failed", error), [_diagnostic(error, runner.failed, candidate, sources)]
    return ProgramRun("ok"), []


def _diagnostic(error: str, node: Any, candidate: Candidate, sources: UserSources) -> Diagnostic:
    """At the user's line that made the failing node, else the target's."""
    trace = node.meta.get("stack_trace") if node is not None else None
    frames = frames_in_text(trace) if isinstance(trace, str) else []
    mine = sources.deepest(Frame(file, line, fn) for file, line, fn in frames)
    where = sources.statement(mine) if mine is not None else candidate.where
    op = f" (node `{node.name}`, `{node.target}`)" if node is not None and node.op == "call_function" else ""
    message = (
        f"`{candidate.decl.name}` exports, but the exported program fails when run on the example inputs{op}: {error}\n"
        "Export traces with fake tensors (shapes and dtypes, no values), which do not check everything a real run does."
    )
    return Diagnostic.at("eager-error", message, where, candidate.decl.name)
