"""A handful of model files exported in every order by one long-lived pool (as one
server session keeps its worker) give each file the result it gets alone in a fresh
worker (issue 29): whatever ran before it -- a file that changed torch's fake-tensor
rules in its job, one whose library patches torch at import and whose library the
worker may have tried to preload, one that changes the default dtype -- and whatever
the worker learned from them while idle."""

from __future__ import annotations

import itertools
import textwrap
import time
from pathlib import Path

import pytest

from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.startmethod import resolve
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.model.results import FileResult

ROOMY = Limits(timeout_s=600, memory_mb=8192)

MATMUL = """
class MatMul(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.ones(7, 3))

    def forward(self, x):
        return torch.nn.functional.gelu(x @ self.w)


model = MatMul()
example_args = (torch.ones(5, 7),)
"""

FILES = {
    "plain.py": "import torch\n" + MATMUL,
    # Gives mm one extra column in its own job, as a model's own meta function would.
    "wider.py": textwrap.dedent(
        """\
        import torch
        from torch._subclasses import fake_impls


        def _wider(fake_mode, func, a, b):
            meta = torch.empty(a.shape[0], b.shape[1] + 1, device="meta")
            return fake_mode.fake_tensor_converter.from_meta_and_device(fake_mode, meta, a.device)


        fake_impls.op_implementations_checks.insert(0, (lambda func: func is torch.ops.aten.mm.default, _wider))
        """
    )
    + MATMUL,
    # Its library replaces gelu (summed: the signature shows it) when imported.
    "patched.py": "import torch\nimport patchlib  # noqa: F401\n" + MATMUL,
    "double.py": "import torch\ntorch.set_default_dtype(torch.float64)\n" + MATMUL,
}

PATCHLIB = textwrap.dedent(
    """\
    import torch


    def _silu_summed(x, approximate="none"):
        return torch.nn.functional.silu(x).sum(-1)


    torch.nn.functional.gelu = _silu_summed
    """
)


def _signature(result: FileResult) -> list[tuple[str, str, tuple[object, ...]]]:
    [target] = result.targets
    assert target.status == "ok" and target.signature is not None, result.diagnostics
    specs = [*target.signature.inputs, *target.signature.outputs]
    return [(s.kind, s.arg.meta.dtype if s.arg.meta else "", tuple(s.arg.meta.shape) if s.arg.meta else ()) for s in specs]


def _export(pool: WorkerPool, path: Path, id: int) -> FileResult:
    source = path.read_text() + f"\n_run = {id}\n"  # never the same request twice
    (result,) = list(pool.run([ExportRequest(id=id, path=str(path), source=source, root=str(path.parent), limits=ROOMY)]))
    return result


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    (site / "patchlib").mkdir(parents=True)
    (site / "patchlib" / "__init__.py").write_text(PATCHLIB)
    monkeypatch.setenv("PYTHONPATH", str(site))
    folder = tmp_path / "project"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    return folder


# 100 exports: with spawn (``EXPORTLENS_START_METHOD=spawn``) each is a fresh interpreter,
# so it takes many times longer than with fork, past the suite's 10-minute limit per test.
@pytest.mark.timeout(600 if resolve().method == "fork" else 3600)
def test_every_order_in_one_pool_gives_each_file_its_result_alone(project: Path, tmp_path: Path) -> None:
    alone = {}
    for i, name in enumerate(FILES):
        with WorkerPool(1, preload_dir=tmp_path / f"alone-{i}") as pool:
            alone[name] = _signature(_export(pool, project / name, 0))
    # What each file is, alone, as torch says: mm widened only in its own file, gelu
    # patched only where its library is imported, float64 only where it is asked for.
    assert alone["plain.py"][-1] == ("USER_OUTPUT", "float32", (5, 3))
    assert alone["wider.py"][-1] == ("USER_OUTPUT", "float32", (5, 4))
    assert alone["patched.py"][-1] == ("USER_OUTPUT", "float32", (5,))
    assert alone["double.py"][-1] == ("USER_OUTPUT", "float64", (5, 3))

    id = 1
    with WorkerPool(1, preload_dir=tmp_path / "session") as pool:
        for order in itertools.permutations(FILES):
            for name in order:
                assert _signature(_export(pool, project / name, id)) == alone[name], (order, name)
                id += 1
            time.sleep(0.3)  # idle: the worker answers questions and preloads meanwhile
