"""A package-layout project (tests/corpus/tinylm): model classes in their own
modules, several levels deep, targets declared elsewhere (pyproject's ``targets``,
decorated factories, several per file). Every line lands in the module where the
code is, and ``check``/``show`` on a model module show the targets that exercise it."""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from tests.conftest import ROOT, check_json, torch_text

CORPUS = ROOT / "tests" / "corpus" / "tinylm"
PKG = CORPUS / "tinylm"


def _path(text: str) -> Path:
    """A path of the JSON document (relative to the folder check ran in)."""
    return (CORPUS / text).resolve()


def _file(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    return next(f for f in doc["files"] if _path(f["path"]) == path.resolve())


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _torch_signature(module_name: str, factory: str) -> str:
    sys.path.insert(0, str(CORPUS))
    try:
        fn = getattr(importlib.import_module(module_name), factory)
        fn = getattr(fn, "__wrapped__", fn)
        model, args = fn()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return str(torch.export.export(model, args, strict=False).run_decompositions({}).graph_signature)
    finally:
        sys.path.remove(str(CORPUS))


def test_lines_name_the_module_where_the_code_is() -> None:
    code, doc = check_json(str(PKG / "factories.py"), str(PKG / "targets.py"), cwd=CORPUS)
    assert code == 1  # `gated` fails: a data-dependent branch in gpt.py
    attention = PKG / "nn" / "layers" / "attention.py"
    factories = _file(doc, PKG / "factories.py")
    gpt = factories["targets"][0]
    assert gpt["name"] == "make_gpt" and gpt["status"] == "ok"
    assert torch_text(gpt["signature"]) == _torch_signature("tinylm.factories", "make_gpt")
    calls = [s for s in gpt["signature"]["inputs"] if s["target"] == "h.0.attn.calls"][0]
    assert _path(calls["file"]) == attention.resolve()
    assert calls["line"] == _line_of(attention, 'register_buffer("calls"')
    mutations = [d for d in factories["diagnostics"] if d["code"] == "mutation/buffer"]
    assert len(mutations) == 1  # one line of code: one diagnostic naming both layers' buffers (issue 22)
    assert "`h.0.attn.calls`" in mutations[0]["message"] and "`h.1.attn.calls`" in mutations[0]["message"]
    for d in mutations:
        assert _path(d["file"]) == attention.resolve()
        assert d["line"] == _line_of(attention, "self.calls.add_(1)")
        back = d["related"][-1]
        assert _path(back["path"]) == (PKG / "factories.py").resolve()  # written as path is: relative
        assert back["line"] == _line_of(PKG / "factories.py", "def make_gpt")

    targets = _file(doc, PKG / "targets.py")
    failed = [d for d in targets["diagnostics"] if d["target"] == "gated"]
    assert [d["code"] for d in failed] == ["data-dependent"]
    assert _path(failed[0]["file"]) == (PKG / "gpt.py").resolve()
    assert failed[0]["line"] == _line_of(PKG / "gpt.py", "if logits.abs().max() > 100")
    rnn = next(t for t in targets["targets"] if t["name"] == "rnn")
    assert rnn["status"] == "ok"
    assert torch_text(rnn["signature"]) == _torch_signature("tinylm.targets", "rnn")


def test_check_on_a_model_module_shows_the_targets_that_exercise_it() -> None:
    attention = PKG / "nn" / "layers" / "attention.py"
    code, doc = check_json(str(attention), cwd=CORPUS)
    assert code == 0  # `gated` fails in gpt.py, not here: its failure is not this file's
    [entry] = doc["files"]
    # `gated` imports this module too, but has no signature and no line here.
    assert [t["name"] for t in entry["targets"]] == ["make_gpt"]
    assert {(d["code"], d["line"]) for d in entry["diagnostics"]} == {("mutation/buffer", _line_of(attention, "self.calls.add_(1)"))}
    assert all("file" not in d for d in entry["diagnostics"])  # the lines are this file's
    gpt = next(t for t in entry["targets"] if t["name"] == "make_gpt")
    lines = {s["target"]: s["line"] for s in gpt["signature"]["inputs"]}
    assert lines["h.1.attn.c_attn.weight"] == _line_of(attention, "self.c_attn =")
    assert lines["wte.weight"] is None  # defined in gpt.py, not here

    code, doc = check_json(str(PKG / "gpt.py"), cwd=CORPUS)
    assert code == 1
    [entry] = doc["files"]
    errors = [d for d in entry["diagnostics"] if d["severity"] == "error"]
    assert [(d["code"], d["target"], d["line"]) for d in errors] == [("data-dependent", "gated", _line_of(PKG / "gpt.py", "if logits.abs().max() > 100"))]


RAN = 'import pathlib\n\npathlib.Path(__file__).with_suffix(".ran").write_text("exported")\n'


def test_check_on_a_module_exports_only_the_model_files_that_may_import_it(tmp_path: Path) -> None:
    """``check`` on a module asks the model files that may import it, as the server
    does (``core.project.importers``): one that cannot reach it is not exported."""
    (tmp_path / "pyproject.toml").write_text("[tool.exportlens]\n")
    (tmp_path / "blocks.py").write_text("import torch\n\n\nclass Double(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n")
    (tmp_path / "uses.py").write_text(RAN + "import torch\nfrom blocks import Double\n\nmodel = Double()\nexample_args = (torch.ones(2),)\n")
    (tmp_path / "other.py").write_text(RAN + "import torch\n\nmodel = torch.nn.ReLU()\nexample_args = (torch.ones(2),)\n")
    code, doc = check_json("blocks.py", cwd=tmp_path, extra=("--no-cache",))
    assert code == 0, doc
    [entry] = doc["files"]
    assert _path_in(tmp_path, entry["path"]) == tmp_path / "blocks.py"
    assert [t["name"] for t in entry["targets"]] == ["Double"]  # uses.py's target, seen from blocks.py
    assert (tmp_path / "uses.ran").exists()  # the model file that imports it was exported
    assert not (tmp_path / "other.ran").exists()  # the one that cannot reach it was not

    # Named too, a model file that does not import the module is checked as itself.
    code, doc = check_json("blocks.py", "other.py", cwd=tmp_path, extra=("--no-cache",))
    assert code == 0, doc
    assert sorted(_path_in(tmp_path, f["path"]).name for f in doc["files"]) == ["blocks.py", "other.py"]
    assert (tmp_path / "other.ran").exists()


def _path_in(folder: Path, text: str) -> Path:
    return (folder / text).resolve()
