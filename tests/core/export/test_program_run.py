"""The exported program run once on the example inputs (issue 22, point 8), in
process with real torch: a program that exports but does not run is an
``eager-error`` at the line of the failing node; the run is skipped, and says why,
with fake weights, over the size bound, or over the time bound. The run says ``ok``
exactly when torch's own ``ep.module()`` runs the program: effect tokens, mutations,
constants, keyword and int inputs, control flow (issue 29, point 4)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils import _pytree as pytree

from exportlens.core.export import program_run
from exportlens.core.export.targets import Built, Candidate
from exportlens.core.model.results import TargetDecl
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.project import UserSources
from exportlens.core.source.sourcemap import SourceIndex

MODEL = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class M(nn.Module):
        def __init__(self, mixed: bool) -> None:
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 4).double() if mixed else nn.Linear(8, 4)

        def forward(self, x):
            y = self.a(x)
            return self.b(y)
    """
)


def _load(tmp_path: Path, source: str, stem: str) -> Any:
    path = tmp_path / f"{stem}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _exported(tmp_path: Path, source: str, built: Built, name: str, line: int) -> tuple[Any, Candidate, UserSources]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.export.export(built.module, built.args, built.kwargs, dynamic_shapes=built.dynamic_shapes, strict=built.strict)
        ep = traced.run_decompositions({})
    index = SourceIndex.build(source, str(tmp_path / f"{type(built.module).__module__}.py"))
    candidate = Candidate(TargetDecl(name, line, "globals"), SourceLine(line), lambda: built)
    return ep, candidate, UserSources(index, str(tmp_path))


def _setup(tmp_path: Path, mixed: bool) -> tuple[Any, Built, Candidate, UserSources]:
    module = _load(tmp_path, MODEL, f"m_{mixed}")
    built = Built(module.M(mixed), (torch.randn(2, 8),), None, None, False)
    ep, candidate, sources = _exported(tmp_path, MODEL, built, "M", 5)
    return ep, built, candidate, sources


def test_a_program_that_exports_but_does_not_run_is_an_error_at_the_failing_nodes_line(tmp_path: Path) -> None:
    ep, built, candidate, sources = _setup(tmp_path, mixed=True)
    run, [d] = program_run.check(ep, built, candidate, sources)
    assert run.status == "failed" and "mat1 and mat2 must have the same dtype" in run.reason
    assert (d.code, d.severity, d.line) == ("eager-error", "error", MODEL.splitlines().index("        return self.b(y)") + 1)
    assert "fails when run on the example inputs" in d.message and "While executing" not in d.message


def test_a_program_that_runs_is_ok(tmp_path: Path) -> None:
    ep, built, candidate, sources = _setup(tmp_path, mixed=False)
    run, found = program_run.check(ep, built, candidate, sources)
    assert (run.status, found) == ("ok", [])


def test_a_program_with_effect_tokens_runs(tmp_path: Path) -> None:
    # ``aten._print`` gives the program a TOKEN input and a TOKEN output, which torch's
    # own ``ep.module()`` makes and drops (issue 29, point 4).
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class Printing(nn.Module):
            def forward(self, x):
                torch.ops.aten._print("step")
                return x + 1
        """
    )
    module = _load(tmp_path, source, "printing")
    built = Built(module.Printing(), (torch.randn(2, 8),), None, None, False)
    ep, candidate, sources = _exported(tmp_path, source, built, "Printing", 5)
    run, found = program_run.check(ep, built, candidate, sources)
    assert (run.status, run.reason, found) == ("ok", "", [])


def test_never_with_fake_weights(tmp_path: Path) -> None:
    ep, built, candidate, sources = _setup(tmp_path, mixed=True)
    built.weights = "fake"
    run, found = program_run.check(ep, built, candidate, sources)
    assert (run.status, found) == ("skipped", []) and "fake weights" in run.reason


@pytest.mark.parametrize(("bound", "value", "reason"), [("MAX_BYTES", 100, "a check run may take"), ("MAX_SECONDS", 0.0, "ran longer than")])
def test_skipped_over_its_bounds_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: str, value: float, reason: str) -> None:
    ep, built, candidate, sources = _setup(tmp_path, mixed=True)
    monkeypatch.setattr(program_run, bound, value)
    run, found = program_run.check(ep, built, candidate, sources)
    assert (run.status, found) == ("skipped", []) and reason in run.reason


# Calling conventions of an exported program that ``ep.module()`` supports: each model
# is run both ways, and the check says ``ok`` exactly when torch's own run works.
CONVENTIONS = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch._higher_order_ops.while_loop import while_loop


    class EffectToken(nn.Module):
        def forward(self, x):
            torch.ops.aten._print("step")
            return x + 1


    class EffectTokenWithState(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("steps", torch.zeros(()))

        def forward(self, x):
            torch.ops.aten._print("before")
            self.steps.add_(1)
            y = self.lin(x)
            torch.ops.aten._print("after")
            return y


    class MutatedInput(nn.Module):
        def forward(self, x):
            x.add_(1)
            return x * 2


    class MutatedBuffer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(4))
            self.register_buffer("scratch", torch.ones(4), persistent=False)

        def forward(self, x):
            self.total.add_(x.sum(0))
            return x + self.total + self.scratch


    class LiftedConstant(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.arange(4.0)

        def forward(self, x):
            return x * self.table + torch.tensor(2.0)


    class KeywordOnly(nn.Module):
        def forward(self, x, *, scale, bias=None, extra: dict):
            y = x * scale + extra["a"][0]
            return y if bias is None else y + bias


    class IntInputs(nn.Module):
        def forward(self, x, n: int):
            return x.reshape(x.shape[0] * n, -1) + n


    class NoneInOutputs(nn.Module):
        def forward(self, x):
            return x + 1, None, {"y": x * 2, "nothing": None}


    class Cond(nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: t.cos(), lambda t: t.sin(), (x,))


    class WhileLoop(nn.Module):
        def forward(self, x):
            return while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t * 2), (torch.tensor(0), x))


    class MixedDtypes(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4).double()

        def forward(self, x):
            y = self.a(x)
            return self.b(y)
    """
)


def _conventions_built(module: Any, name: str) -> Built:
    x = torch.randn(3, 4)
    batch = torch.export.Dim("batch", min=2, max=16)
    cases: dict[str, tuple[tuple[Any, ...], dict[str, Any] | None, Any]] = {
        "KeywordOnly": ((x,), {"extra": {"a": [torch.ones(4)]}, "scale": torch.tensor(3.0)}, None),
        "IntInputs": ((x, 2), None, ({0: batch}, None)),
    }
    args, kwargs, dynamic_shapes = cases.get(name, ((x,), None, None))
    return Built(getattr(module, name)(), args, kwargs, dynamic_shapes, False)


def _clone(value: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, torch.Tensor.clone, value)


@pytest.mark.parametrize(
    ("name", "runs"),
    [
        ("EffectToken", True),
        ("EffectTokenWithState", True),
        ("MutatedInput", True),
        ("MutatedBuffer", True),
        ("LiftedConstant", True),
        ("KeywordOnly", True),
        ("IntInputs", True),
        ("NoneInOutputs", True),
        ("Cond", True),
        ("WhileLoop", True),
        ("MixedDtypes", False),
    ],
)
def test_the_run_agrees_with_torchs_own_run_of_the_program(tmp_path: Path, name: str, runs: bool) -> None:
    module = _load(tmp_path, CONVENTIONS, f"conventions_{name}")
    built = _conventions_built(module, name)
    line = CONVENTIONS.splitlines().index(f"class {name}(nn.Module):") + 1
    ep, candidate, sources = _exported(tmp_path, CONVENTIONS, built, name, line)
    run, found = program_run.check(ep, built, candidate, sources)
    try:
        ep.module()(*_clone(built.args), **_clone(built.kwargs or {}))
        torch_runs = True
    except Exception:  # noqa: BLE001 - whether torch's run works is the question
        torch_runs = False
    assert torch_runs == runs
    assert run.status == ("ok" if runs else "failed"), run.reason
    if not runs:
        [d] = found
        assert (d.code, d.line) == ("eager-error", CONVENTIONS.splitlines().index("        return self.b(y)") + 1)


def test_the_run_leaves_the_inputs_and_the_state_as_they_were(tmp_path: Path) -> None:
    module = _load(tmp_path, CONVENTIONS, "conventions_untouched")
    built = Built(module.MutatedBuffer(), (torch.ones(3, 4),), None, None, False)
    ep, candidate, sources = _exported(tmp_path, CONVENTIONS, built, "MutatedBuffer", 1)
    before = _clone((built.args, dict(ep.state_dict), dict(ep.constants)))
    run, _ = program_run.check(ep, built, candidate, sources)
    assert run.status == "ok"
    after = (built.args, dict(ep.state_dict), dict(ep.constants))
    assert all(torch.equal(a, b) for a, b in zip(pytree.tree_leaves(before), pytree.tree_leaves(after), strict=True))
