"""The fix corpus (``tests/corpus/fixes``: realistic models torch 2.13 refuses, one
common reason each) through the real CLI.

- ``check --format json`` offers each file the verified fix the table names, preferred
  or not as the table says, and at least 90 % of the failing files get one;
- ``check --diff`` prints those fixes and writes nothing;
- ``check --fix`` writes them, after which every fixed file exports, and its program,
  run on the example inputs, gives what the original model gives: checked here on
  our own, in two fresh interpreters (the original files run as plain PyTorch, the
  fixed ones exported and their programs run), not by asking exportlens.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "fixes"

# file -> (the diagnostic's code, what its first fix's title says, preferred);
# None: no fix (the closing note of issue 45 says why).
EXPECTED: dict[str, tuple[str, str, bool] | None] = {
    "pad_to_longest.py": ("data-dependent", "without `int(...)`", True),
    "strided_frames.py": ("data-dependent", "add `torch._check(step > 0)` before line 14", True),
    "positive_coords.py": ("data-dependent", "use `coords.shape[0]` instead of `len(...)`", True),
    "gated_residual.py": ("data-dependent", "rewrite the `if` as `torch.where(", True),
    "batch_input.py": ("unsupported-type", "register `TokenBatch` as a pytree in `batch.py`", True),
    "detector_output.py": ("unsupported-type", "register `Detections` as a pytree", True),
    "custom_op.py": ("export-error", "add a fake kernel for `corpus::scaled_gelu`", True),
    "layerdrop_strict.py": ("export-error", "with `strict=False`", True),
    "running_average.py": ("banned-mutation/tensor-attribute", "register `average` as a buffer", True),
    "kv_cache_attribute.py": ("banned-mutation/tensor-attribute", "register `cache` as a buffer", True),
    "even_frames.py": ("constraint-violation", "_frames = Dim('_frames', min=1, max=32); frames = 2*_frames", True),
    "batch_range.py": ("constraint-violation", "`Dim('batch', max=8)`", True),
    "partial_shapes.py": ("export-error", '`"bias": None`', True),
    "transpose_input.py": ("banned-mutation/input-metadata", "use the out-of-place `x = x.transpose(0, 1)`", True),
    "packed_tagger.py": ("export-error", "run `self.lstm` on the padded `x` and zero the steps past `lengths`", True),
    # A backward direction reads the padding first: verified as changing the outputs.
    "packed_bidirectional.py": ("export-error", "(changes the outputs: output 0 differs", False),
    # Verified, but batch norm computes otherwise in eval mode: offered, never preferred.
    "training_mode.py": ("training-mode", "(changes the outputs: output 0 differs", False),
    # A branch on each of a loop's `.tolist()` values: no single fact holds.
    "split_by_lengths.py": None,
}


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "exportlens", "check", "--no-cache", *args, "."], cwd=folder, capture_output=True, text=True, timeout=1800)


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    shutil.copytree(CORPUS, folder, ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    return folder


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*.py"))}


def test_the_table_covers_the_corpus() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in CORPUS.glob("*.py"))


def test_each_failure_gets_its_verified_fix_in_json(corpus: Path) -> None:
    proc = _cli(corpus, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    by_file = {f["path"]: f for f in report["files"]}
    fixed = 0
    for name, expected in EXPECTED.items():
        errors = [d for d in by_file[name]["diagnostics"] if d["code"] != "mutation/buffer"]
        assert errors, name
        offered = [fix for d in errors for fix in d.get("fixes", [])]
        if expected is None:
            assert offered == [], (name, offered)
            continue
        code, title, preferred = expected
        [d] = [d for d in errors if d["code"] == code]
        assert d.get("fixes"), (name, d["message"][:300])
        first = d["fixes"][0]
        assert title in first["title"] and first["preferred"] is preferred, (name, first)
        for edit in first["edits"]:
            assert set(edit) == {"path", "line", "column", "end_line", "end_column", "new_text"}
        fixed += 1
    assert fixed / len(EXPECTED) >= 0.9


def test_diff_prints_the_fixes_and_writes_nothing(corpus: Path) -> None:
    before = _digest(corpus)
    proc = _cli(corpus, "--diff")
    assert _digest(corpus) == before
    assert proc.returncode == 1, proc.stderr
    changed = {line.removeprefix("+++ b/") for line in proc.stdout.splitlines() if line.startswith("+++ b/")}
    preferred = {name for name, e in EXPECTED.items() if e is not None and e[2]}
    assert changed == (preferred - {"batch_input.py"}) | {"blocks/batch.py"}  # the dataclass is registered where it is defined
    assert "+        torch._check(step > 0)" in proc.stdout
    assert f"Would fix {len(preferred)} diagnostics" in proc.stderr


# Runs each model file of a folder, seeded, in one fresh interpreter: "eager" saves
# the model's outputs, "program" exports the (fixed) model and saves its program's.
RUNNER = textwrap.dedent(
    """
    import dataclasses, importlib.util, random, sys
    import torch
    from torch.utils import _pytree as pytree

    def leaves(value):
        out = []
        for leaf in pytree.tree_leaves(value):
            if dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
                out += leaves([getattr(leaf, f.name) for f in dataclasses.fields(leaf)])
            elif not isinstance(leaf, (torch.Tensor, int, float, bool, type(None))) and hasattr(leaf, "__dict__"):
                out += leaves(list(vars(leaf).values()))
            else:
                out.append(leaf)
        return out

    mode, folder, target = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.path.insert(0, folder)
    saved = {}
    for name in sys.argv[4:]:
        torch.manual_seed(0); random.seed(0)
        spec = importlib.util.spec_from_file_location(name[:-3], f"{folder}/{name}")
        m = importlib.util.module_from_spec(spec)
        sys.modules[name[:-3]] = m
        spec.loader.exec_module(m)
        kwargs = getattr(m, "example_kwargs", None) or {}
        with torch.no_grad():
            if mode == "eager":
                out = m.model(*m.example_args, **kwargs)
            else:
                ep = torch.export.export(m.model, m.example_args, kwargs, dynamic_shapes=getattr(m, "dynamic_shapes", None), strict=getattr(m, "strict", False))
                out = ep.module()(*m.example_args, **kwargs)
        saved[name] = leaves(out)
    torch.save(saved, target)
    """
)


def test_fix_writes_files_that_export_with_the_models_outputs(corpus: Path, tmp_path: Path) -> None:
    original = tmp_path / "original"
    shutil.copytree(corpus, original)
    proc = _cli(corpus, "--fix", "--format", "json")
    assert "Fixed 15 diagnostics in 15 files" in proc.stderr, proc.stderr
    # What remains: the errors without a preferred fix.
    remaining = {f["path"] for f in json.loads(proc.stdout)["files"] if any(d["severity"] == "error" for d in f["diagnostics"])}
    assert remaining == {"split_by_lengths.py", "packed_bidirectional.py"}
    assert proc.returncode == 1
    fixed = sorted(name for name, e in EXPECTED.items() if e is not None and e[2])
    outputs = {}
    for mode, folder in (("eager", original), ("program", corpus)):
        target = tmp_path / f"{mode}.pt"
        run = subprocess.run([sys.executable, "-c", RUNNER, mode, str(folder), str(target), *fixed], capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        import torch

        outputs[mode] = torch.load(target, weights_only=False)
    for name in fixed:
        eager, program = outputs["eager"][name], outputs["program"][name]
        assert len(eager) == len(program), name
        for a, b in zip(eager, program, strict=True):
            torch.testing.assert_close(b, a, msg=lambda m, name=name: f"{name}: {m}")


def test_a_strict_mode_failure_is_at_the_line_that_causes_it(corpus: Path) -> None:
    """TorchDynamo raises from its own frames; its user stack names the line."""
    proc = subprocess.run([sys.executable, "-m", "exportlens", "check", "--no-cache", "--format", "json", "layerdrop_strict.py"], cwd=corpus, capture_output=True, text=True, timeout=900)
    [d] = json.loads(proc.stdout)["files"][0]["diagnostics"]
    lines = (corpus / "layerdrop_strict.py").read_text().splitlines()
    assert d["line"] == next(i for i, line in enumerate(lines, 1) if "random.uniform" in line), d
    assert "strict export cannot trace" in d["message"] and "strict=False" in d["message"]
