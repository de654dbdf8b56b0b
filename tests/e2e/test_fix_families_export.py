"""Quick fixes checked the way they are meant to work, through the real CLI: a model
that fails to export gets its diagnostic from ``exportlens check --format json``, the
family's preferred fix is applied to the files (the diagnostic's own, or the local
module its edits name), and ``exportlens check`` of the edited files exports every
target, with no error left."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from exportlens.core.fixes import fake_kernel, pytrees
from exportlens.core.fixes.model import Fix, apply
from exportlens.core.model.results import Diagnostic, FileResult
from tests.conftest import check_json

# The model files (name -> text), and the local modules each imports.
PYTREE_AND_FAKE_KERNEL_MODELS = {
    "dc.py": """\
        from dataclasses import dataclass
        import torch
        from torch import nn

        @dataclass
        class Batch:
            tokens: torch.Tensor
            mask: torch.Tensor

        class Net(nn.Module):
            def forward(self, batch: Batch):
                return batch.tokens * batch.mask

        model = Net()
        example_args = (Batch(torch.randn(2, 3), torch.ones(2, 3)),)
        """,
    "outcls.py": """\
        import torch
        from torch import nn

        class Out:
            def __init__(self, logits, hidden):
                self.logits = logits
                self.hidden = hidden

        class Net(nn.Module):
            def forward(self, x):
                return Out(x * 2, x + 1)

        model = Net()
        example_args = (torch.randn(2, 3),)
        """,
    "pairmain.py": """\
        import torch
        from torch import nn

        from pairs import Pair


        class Net(nn.Module):
            def forward(self, p):
                return p.a + p.b


        model = Net()
        example_args = (Pair(torch.randn(2, 3), torch.randn(2, 3)),)
        """,
    "cop.py": """\
        import torch
        from torch import nn

        @torch.library.custom_op("mylib::scale", mutates_args=())
        def scale(x: torch.Tensor, s: float) -> torch.Tensor:
            return x * s

        class Net(nn.Module):
            def forward(self, x):
                return scale(x, 2.0) + 1

        model = Net()
        example_args = (torch.randn(2, 3),)
        """,
    "shiftmain.py": """\
        import torch
        from torch import nn

        from ops import shift


        class Net(nn.Module):
            def forward(self, x):
                return shift(x, 3) * 2


        model = Net()
        example_args = (torch.randn(2, 3),)
        """,
}
LOCAL_MODULES = {
    "pairs.py": """\
        class Pair:
            def __init__(self, a, b):
                self.a = a
                self.b = b
        """,
    "ops.py": """\
        from torch import Tensor
        from torch.library import custom_op


        @custom_op("mylib::shift", mutates_args=())
        def shift(x: Tensor, n: int) -> Tensor:
            return x + n
        """,
}
IMPORTS = {"pairmain.py": ("pairs.py",), "shiftmain.py": ("ops.py",)}
# What each model's diagnostic is, and the family that fixes it.
EXPECTED = {
    "dc.py": ("unsupported-type", pytrees),
    "outcls.py": ("unsupported-type", pytrees),
    "pairmain.py": ("unsupported-type", pytrees),
    "cop.py": ("export-error", fake_kernel),
    "shiftmain.py": ("export-error", fake_kernel),
}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def _preferred_fix(folder: Path, name: str, file: dict[str, Any]) -> Fix:
    code, family = EXPECTED[name]
    [d] = file["diagnostics"]
    assert d["code"] == code, (name, d)
    where = folder / d["file"] if "file" in d else None
    diagnostic = Diagnostic(d["code"], d["message"], d["line"], d["column"], d["end_line"], d["end_column"], d["target"], path=str(where) if where else None)
    result = FileResult(str(folder / name), local_imports=tuple(str(folder / m) for m in IMPORTS.get(name, ())))
    source = (where or folder / name).read_text(encoding="utf-8")
    [fix] = [f for f in family.fixes(source, diagnostic, result, _read) if f.preferred]
    return fix


def _apply(folder: Path, name: str, fix: Fix) -> None:
    by_file: dict[Path, list[Any]] = {}
    for e in fix.edits:
        by_file.setdefault(Path(e.path) if e.path is not None else folder / name, []).append(e)
    for path, edits in by_file.items():
        path.write_text(apply(path.read_text(encoding="utf-8"), edits), encoding="utf-8")


def test_the_pytree_and_fake_kernel_fixes_make_each_model_export(tmp_path: Path) -> None:
    for name, text in {**PYTREE_AND_FAKE_KERNEL_MODELS, **LOCAL_MODULES}.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    models = sorted(PYTREE_AND_FAKE_KERNEL_MODELS)
    code, before = check_json(*models, cwd=tmp_path, extra=("--no-cache",))
    assert code == 1
    by_name = {Path(f["path"]).name: f for f in before["files"]}
    assert sorted(by_name) == models
    for name in models:
        _apply(tmp_path, name, _preferred_fix(tmp_path, name, by_name[name]))
    # the fixes for a class or an operator of a local module edited that module
    assert "torch.utils._pytree.register_dataclass(Pair" in (tmp_path / "pairs.py").read_text(encoding="utf-8")
    assert "@shift.register_fake" in (tmp_path / "ops.py").read_text(encoding="utf-8")
    code, after = check_json(*models, cwd=tmp_path, extra=("--no-cache",))
    for f in after["files"]:
        assert f["diagnostics"] == [], f
        assert [t["status"] for t in f["targets"]] == ["ok"], f
    assert code == 0


# ---------------------------------------------------------------- chained updates, derived dims, value branches, dynamic_shapes keys

# name -> (model text, the diagnostic's code); each fails to export as written.
FAMILY_MODELS = {
    "chained.py": (
        """\
        import torch
        from torch import nn

        class Avg(nn.Module):
            def __init__(self):
                super().__init__()
                self.avg = torch.zeros(4)
            def forward(self, x):
                self.avg.mul_(0.9).add_(x.mean(0) * 0.1)
                return x - self.avg

        model = Avg()
        example_args = (torch.randn(3, 4),)
        """,
        "banned-mutation/tensor-attribute",
    ),
    "derived.py": (
        """\
        import torch
        from torch import nn
        from torch.export import Dim

        class Net(nn.Module):
            def forward(self, x):
                return x.view(x.shape[0] // 2, 2, x.shape[1]).sum(1)

        frames = Dim("frames", min=2, max=64)
        model = Net()
        example_args = (torch.randn(8, 3),)
        dynamic_shapes = {"x": {0: frames}}
        """,
        "constraint-violation",
    ),
    "derived_inline.py": (
        """\
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                return x.view(x.shape[0] // 2, 2, x.shape[1]).sum(1)

        model = Net()
        example_args = (torch.randn(8, 3),)
        dynamic_shapes = {"x": {0: torch.export.Dim("frames", min=2, max=64)}}
        """,
        "constraint-violation",
    ),
    "two_dims.py": (
        """\
        import torch
        from torch import nn
        from torch.export import Dim

        class Net(nn.Module):
            def forward(self, x, y):
                return x + y[1:]

        dx = Dim("dx", min=2, max=64)
        dy = Dim("dy", min=2, max=64)
        model = Net()
        example_args = (torch.randn(4, 3), torch.randn(5, 3))
        dynamic_shapes = {"x": {0: dx}, "y": {0: dy}}
        """,
        "constraint-violation",
    ),
    "branch.py": (
        """\
        import torch
        from torch import nn

        class Gate(nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x * 2
                else:
                    return x - 1

        model = Gate()
        example_args = (torch.randn(3, 4),)
        """,
        "data-dependent",
    ),
    "branch_assign.py": (
        """\
        import torch
        from torch import nn

        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                h = self.fc(x)
                if (h > 0).any():
                    y = self.fc(h).relu()
                else:
                    y = h.sin() + 1
                return y * 2

        model = Gate()
        example_args = (torch.randn(3, 4),)
        """,
        "data-dependent",
    ),
    "dynpart.py": (
        """\
        import torch
        from torch import nn
        from torch.export import Dim

        class Net(nn.Module):
            def forward(self, x, y):
                return x + y.sum()

        batch = Dim("batch", min=2, max=64)
        model = Net()
        example_args = (torch.randn(4, 3), torch.randn(2, 2))
        dynamic_shapes = {"x": {0: batch}}
        """,
        "export-error",
    ),
    "dyntuple.py": (
        """\
        import torch
        from torch import nn
        from torch.export import Dim

        class Net(nn.Module):
            def forward(self, x, y):
                return x + y.sum()

        batch = Dim("batch", min=2, max=64)
        model = Net()
        example_args = (torch.randn(4, 3), torch.randn(2, 2))
        dynamic_shapes = ({0: batch},)
        """,
        "export-error",
    ),
}


def _family_fixes(source: str, diagnostic: Diagnostic, path: Path) -> list[Fix]:
    from exportlens.core.fixes import branches, buffers, dim_suggestions, shape_keys

    if diagnostic.code == "banned-mutation/tensor-attribute":
        return buffers.fixes(source, diagnostic, FileResult(str(path)))
    if diagnostic.code == "constraint-violation":
        return dim_suggestions.fixes(source, diagnostic)
    if diagnostic.code == "data-dependent":
        return branches.fixes(source, diagnostic)
    return shape_keys.fixes(source, diagnostic)


def test_chained_update_derived_dim_branch_and_shape_key_fixes_make_each_model_export(tmp_path: Path) -> None:
    for name, (text, _) in FAMILY_MODELS.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    models = sorted(FAMILY_MODELS)
    code, before = check_json(*models, cwd=tmp_path, extra=("--no-cache",))
    assert code == 1
    by_name = {Path(f["path"]).name: f for f in before["files"]}
    assert sorted(by_name) == models
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    written: list[str] = []
    for name in models:
        [d] = by_name[name]["diagnostics"]
        assert d["code"] == FAMILY_MODELS[name][1], (name, d)
        diagnostic = Diagnostic(d["code"], d["message"], d["line"], d["column"], d["end_line"], d["end_column"], d["target"])
        source = (tmp_path / name).read_text(encoding="utf-8")
        found = _family_fixes(source, diagnostic, tmp_path / name)
        [preferred] = [f for f in found if f.preferred]
        others = [f for f in found if not f.preferred]
        # A value branch also gets torch.cond (not preferred); the other families one fix.
        assert len(others) == (1 if d["code"] == "data-dependent" else 0), (name, [f.title for f in found])
        for suffix, fix in (("", preferred), *(("_cond", f) for f in others)):
            target = f"{name[:-3]}{suffix}.py"
            (fixed / target).write_text(apply(source, fix.edits), encoding="utf-8")
            written.append(target)
    assert "return torch.where(x.sum() > 0, x * 2, x - 1)" in (fixed / "branch.py").read_text(encoding="utf-8")
    assert "y = torch.cond((h > 0).any(), lambda: self.fc(h).relu(), lambda: h.sin() + 1)" in (fixed / "branch_assign_cond.py").read_text(encoding="utf-8")
    assert "_frames = Dim('_frames', min=1, max=32)\nframes = 2*_frames\n" in (fixed / "derived.py").read_text(encoding="utf-8")
    assert 'dynamic_shapes = {"x": {0: batch}, "y": None}' in (fixed / "dynpart.py").read_text(encoding="utf-8")
    code, after = check_json(*sorted(written), cwd=fixed, extra=("--no-cache",))
    assert sorted(Path(f["path"]).name for f in after["files"]) == sorted(written)
    for f in after["files"]:
        assert [d for d in f["diagnostics"] if d["severity"] == "error"] == [], f
        assert [t["status"] for t in f["targets"]] == ["ok"], f
    assert code == 0
