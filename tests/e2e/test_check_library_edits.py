"""Through the real ``exportlens check``: a library that is not a wheel's install (a
folder on ``PYTHONPATH``, an editable install, a namespace package) is keyed by the
bytes of every module of it the model reached -- not by its top-level file's
metadata -- so an edit of one of its submodules is exported again, never served the
result the old code made.

The edit each test makes is the one users make: ``blocks.py`` gains a data-dependent
branch, which torch.export refuses; a stale cache said "ok".
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.conftest import check_json
from tests.e2e.test_check_cache import _run_without_export

BLOCKS = textwrap.dedent(
    """
    import torch


    class Block(torch.nn.Module):
        def forward(self, x):
            return x * 2
    """
)

# The same file with a branch on the input's values: export fails.
BRANCHING = BLOCKS.replace("        return x * 2\n", "        if x.sum() > 0:\n            return x * 2\n        return x - 1\n")

MODEL = textwrap.dedent(
    """
    import torch
    from {module} import Block

    model = Block()
    example_args = (torch.randn(2, 3),)
    """
)


def _project(folder: Path, module: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 120\n")
    (folder / "model.py").write_text(MODEL.format(module=module))
    return folder / "model.py"


def _status(model: Path, cache: Path) -> str:
    """The one target's status, from a run that exports or hits."""
    _, doc = check_json(str(model), extra=("--cache-dir", str(cache)))
    (target,) = doc["files"][0]["targets"]
    return str(target["status"])


def _served(model: Path, cache: Path) -> str:
    """The status a run with no worker at all gives: the result must be a hit."""
    hit = _run_without_export("check", "--format", "json", "--cache-dir", str(cache), str(model))
    assert hit.returncode in (0, 1), hit.stderr
    return str(json.loads(hit.stdout)["files"][0]["targets"][0]["status"])


def _library(site: Path) -> Path:
    """``mylib`` (a regular package) in ``site``; its ``blocks.py``."""
    (site / "mylib").mkdir(parents=True)
    (site / "mylib" / "__init__.py").write_text('"""A library on PYTHONPATH."""\n')
    (site / "mylib" / "blocks.py").write_text(BLOCKS)
    return site / "mylib" / "blocks.py"


def test_editing_a_submodule_of_a_library_on_pythonpath_invalidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sibling checkout on PYTHONPATH: its top-level ``__init__.py`` never changes,
    only the submodule the model imports."""
    blocks = _library(tmp_path / "site")
    model = _project(tmp_path / "proj", "mylib.blocks")
    cache = tmp_path / "cache"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    assert _status(model, cache) == "ok"
    assert _served(model, cache) == "ok"  # unchanged: a hit
    blocks.write_text(BRANCHING)
    assert _status(model, cache) == "error"


def test_a_same_size_edit_with_its_modification_time_restored_invalidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Content, not metadata: the edit keeps the file's size, inode and modification
    time (``os.utime``), as a checkout or a formatter can."""
    blocks = _library(tmp_path / "site")
    original = BLOCKS + "#" * (len(BRANCHING) - len(BLOCKS) - 1) + "\n"  # as long as the branching text
    assert len(original) == len(BRANCHING)
    blocks.write_text(original)
    model = _project(tmp_path / "proj", "mylib.blocks")
    cache = tmp_path / "cache"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    assert _status(model, cache) == "ok"
    before = blocks.stat()
    with open(blocks, "r+") as f:  # in place: the same inode
        f.write(BRANCHING)
    os.utime(blocks, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = blocks.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert _status(model, cache) == "error"


# setuptools' editable install (``pip install -e``, PEP 660) writes, in site-packages,
# a ``.pth`` that imports a finder module, the finder (a meta path finder mapping the
# package's name to the checkout), and a dist-info whose RECORD lists only those: the
# package's own files are in the checkout, on no ``sys.path`` folder and in no RECORD.
# This is that layout, with the finder cut down to the mapping; the site folder is
# processed as the interpreter processes site-packages (``site.addsitedir``), from a
# ``sitecustomize`` on PYTHONPATH, since running pip into a throwaway venv would take
# a minute.
EDITABLE_FINDER = textwrap.dedent(
    """
    import sys
    from importlib.machinery import PathFinder
    from importlib.util import spec_from_file_location

    MAPPING = {mapping!r}


    class _EditableFinder:
        @classmethod
        def find_spec(cls, fullname, path=None, target=None):
            if fullname in MAPPING:
                return spec_from_file_location(fullname, MAPPING[fullname] + "/__init__.py")
            parent = fullname.rpartition(".")[0]
            if parent in MAPPING:
                return PathFinder.find_spec(fullname, path=[MAPPING[parent]])
            return None


    def install():
        if not any(finder is _EditableFinder for finder in sys.meta_path):
            sys.meta_path.append(_EditableFinder)
    """
)


def _editable_install(site: Path, checkout: Path) -> Path:
    """``mylib`` installed editable from ``checkout/src``; the PYTHONPATH folder that
    has the interpreter process ``site``."""
    source = checkout / "src"
    _library(source)
    site.mkdir(parents=True)
    (site / "__editable___mylib_0_1_finder.py").write_text(EDITABLE_FINDER.format(mapping={"mylib": str(source / "mylib")}))
    (site / "__editable__.mylib-0.1.pth").write_text("import __editable___mylib_0_1_finder; __editable___mylib_0_1_finder.install()\n")
    dist = site / "mylib-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mylib\nVersion: 0.1\n")
    (dist / "RECORD").write_text(
        "__editable__.mylib-0.1.pth,,\n__editable___mylib_0_1_finder.py,,\nmylib-0.1.dist-info/METADATA,,\nmylib-0.1.dist-info/RECORD,,\n"
    )
    boot = site.parent / "boot"
    boot.mkdir()
    (boot / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(site)!r})\n")
    return boot


def test_editing_a_module_of_an_editable_install_invalidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    boot = _editable_install(tmp_path / "site", tmp_path / "checkout")
    blocks = tmp_path / "checkout" / "src" / "mylib" / "blocks.py"
    model = _project(tmp_path / "proj", "mylib.blocks")
    cache = tmp_path / "cache"
    monkeypatch.setenv("PYTHONPATH", str(boot))
    assert _status(model, cache) == "ok"
    assert _served(model, cache) == "ok"
    blocks.write_text(BRANCHING)
    assert _status(model, cache) == "error"


def test_editing_a_module_of_a_namespace_package_invalidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nsp`` has no ``__init__.py``: no top-level file at all to key it by."""
    site = tmp_path / "site"
    (site / "nsp").mkdir(parents=True)
    blocks = site / "nsp" / "blocks.py"
    blocks.write_text(BLOCKS)
    model = _project(tmp_path / "proj", "nsp.blocks")
    cache = tmp_path / "cache"
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert _status(model, cache) == "ok"
    assert _served(model, cache) == "ok"
    blocks.write_text(BRANCHING)
    assert _status(model, cache) == "error"
