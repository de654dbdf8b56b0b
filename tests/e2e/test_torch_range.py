"""The supported torch range (issue 35): ``pyproject.toml`` declares it, and a torch
outside it is said at start in one sentence -- ``check``, ``show`` and ``snapshot``
exit 2 with it, no traceback, no worker -- while a torch inside it (this venv's)
exports as ever.

A torch of another version is made by its metadata alone: a ``torch-X.dist-info``
first on ``PYTHONPATH`` is what ``importlib.metadata`` finds first, the way the
front end reads the version (it never imports torch)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from exportlens.core import torchversion
from tests.conftest import ROOT, run_cli

MODEL = """\
import pathlib

pathlib.Path(__file__).with_name("ran.txt").write_text("the model's code ran")

import torch


class Twice(torch.nn.Module):
    def forward(self, x):
        return x * 2


model = Twice()
example_args = (torch.randn(3),)
"""


def fake_torch(folder: Path, version: str) -> Path:
    """A folder whose only content is the metadata of a torch ``version``."""
    info = folder / f"torch-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    return folder


def test_pyproject_declares_the_range_the_code_knows() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [torch] = [d for d in project["dependencies"] if re.match(r"torch\b", d)]
    assert torch.replace(" ", "") == torchversion.SPEC == "torch>=2.10,<2.16"
    setup = (ROOT / "scripts" / "setup").read_text()
    assert f'"torch=={torchversion.PINNED}"' in setup  # the project's own venv keeps the fast CPU build
    assert torchversion.supported(torchversion.PINNED)


@pytest.mark.parametrize(
    ("version", "ok"),
    [("2.10.0", True), ("2.13.0+cpu", True), ("2.15.0+cu130", True), ("2.9.1", False), ("2.16.0", False), ("2.16.0.dev20260101", False), ("2.10.0a0+git1234", True), ("3.0.0", False)],
)
def test_versions_in_and_out_of_the_range(version: str, ok: bool) -> None:
    assert torchversion.supported(version) is ok
    assert (torchversion.problem(version) is None) is ok


@pytest.mark.parametrize("version", ["2.9.1", "2.16.0"])
@pytest.mark.parametrize("command", ["check", "show", "snapshot"])
def test_a_torch_outside_the_range_is_said_at_start(tmp_path: Path, version: str, command: str) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    fake = fake_torch(tmp_path / "site", version)
    proc = run_cli(command, str(tmp_path / "model.py") if command != "snapshot" else str(tmp_path), cwd=tmp_path, env={"PYTHONPATH": str(fake)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"exportlens {command}: torch {version} is outside the range exportlens supports (torch>=2.10,<2.16")
    assert "-m pip install 'torch>=2.10,<2.16'" in line
    assert not (tmp_path / "ran.txt").exists()  # no worker ran the model


def test_a_torch_inside_the_range_exports(tmp_path: Path) -> None:
    # The same fake metadata mechanism, at a supported version: the front end lets it
    # through and the worker exports with the real torch (the fake is metadata only).
    (tmp_path / "model.py").write_text(MODEL)
    fake = fake_torch(tmp_path / "site", "2.15.0")
    proc = run_cli("check", "--no-cache", str(tmp_path / "model.py"), cwd=tmp_path, env={"PYTHONPATH": str(fake)})
    assert proc.returncode == 0, proc.stderr
    assert "Twice" in proc.stdout and (tmp_path / "ran.txt").exists()


def test_version_names_the_range(tmp_path: Path) -> None:
    proc = run_cli("version", env={"PYTHONPATH": str(fake_torch(tmp_path / "site", "2.9.1"))})
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^torch\s+2\.9\.1 \(outside the supported range torch>=2\.10,<2\.16\)$", proc.stdout, re.M), proc.stdout
    proc = run_cli("version")
    assert re.search(r"^torch\s+\S+ \(supported: torch>=2\.10,<2\.16\)$", proc.stdout, re.M), proc.stdout


# A torch without one of the private names a feature needs: ``torch.nn.init`` loses
# ``_no_grad_trunc_normal_`` as it is imported, in every process of the run (the CLI,
# the worker, its jobs), as a torch that renamed it would be.
WITHOUT_TRUNC_NORMAL = '''\
import importlib.abc
import importlib.util
import sys


class _Strip(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch.nn.init":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            del module._no_grad_trunc_normal_

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Strip())
'''

LARGE = """\
import torch


class Large(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(1024, 1024)  # 4 MB: built fake by default

    def forward(self, x):
        return self.fc(x)


model = Large()
example_args = (torch.randn(2, 1024),)
"""


def test_a_feature_this_torch_lacks_is_said_with_its_version(tmp_path: Path) -> None:
    (tmp_path / "large.py").write_text(LARGE)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WITHOUT_TRUNC_NORMAL)
    proc = run_cli("check", "--format", "json", "--no-cache", str(tmp_path / "large.py"), cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    [target] = json.loads(proc.stdout)["files"][0]["targets"]
    version = torchversion.installed()
    assert version is not None and target["status"] == "ok" and target["weights"] == "real", target
    # torch.__version__ as the job sees it: the metadata's, with the build (2.10.0+cu128).
    note = f"built with real weights: fake weights need torch.nn.init._no_grad_trunc_normal_, which torch {version.split('+')[0]}"
    assert re.fullmatch(re.escape(note) + r"(\+\w+)? does not have", target["weights_note"]), target["weights_note"]
    # The same file with this torch as it is: fake weights, no note.
    proc = run_cli("check", "--format", "json", "--no-cache", str(tmp_path / "large.py"), cwd=tmp_path)
    [target] = json.loads(proc.stdout)["files"][0]["targets"]
    assert target["status"] == "ok" and target["weights"] == "fake" and not target.get("weights_note"), target


def test_executorch_with_another_torch_says_which_torch_lowering_needs(tmp_path: Path) -> None:
    # executorch 1.5.1 (the extra's pin) is built against torch 2.13; this torch claims
    # 2.14.0 (inside the range: the export runs), so lowering says what to install.
    (tmp_path / "model.py").write_text(MODEL)
    fake = fake_torch(tmp_path / "site", "2.14.0")
    proc = run_cli("check", "--format", "json", "--no-cache", "--lower", "executorch", str(tmp_path / "model.py"), cwd=tmp_path, env={"PYTHONPATH": str(fake)})
    assert proc.returncode == 1, proc.stderr
    [entry] = json.loads(proc.stdout)["files"]
    [target] = entry["targets"]
    assert target["status"] == "ok"  # the export itself is this torch's
    assert target["lowering"]["executorch"]["status"] == "unavailable", target["lowering"]
    [diagnostic] = [d for d in entry["diagnostics"] if d["code"] == "lowering/executorch-error"]
    assert diagnostic["message"].startswith("lowering to ExecuTorch is off: executorch 1.5.1")
    assert "is built against torch 2.13 and this environment has torch 2.14.0" in diagnostic["message"]
    assert "-m pip install 'torch==2.13.*' 'executorch==1.5.1'" in diagnostic["message"]
