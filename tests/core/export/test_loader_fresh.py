"""Local modules are compiled from their source, never from a stale ``__pycache__``.

Python trusts a ``.pyc`` whose recorded mtime (whole seconds) and size match the
source, so a helper rewritten within the same second at the same size would run its
old code, and the cache would keep that wrong result.
"""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from importlib.util import cache_from_source
from pathlib import Path


def test_same_size_same_mtime_rewrite_runs_the_new_code(tmp_path: Path) -> None:
    helpers = tmp_path / "helpers.py"
    helpers.write_text("VALUE = 'old'\n")
    py_compile.compile(str(helpers), cfile=cache_from_source(str(helpers)), doraise=True)
    stat = helpers.stat()
    helpers.write_text("VALUE = 'new'\n")  # same size
    os.utime(helpers, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime: the .pyc looks valid
    (tmp_path / "model.py").write_text("from helpers import VALUE\n")
    code = (
        "import sys\n"
        "from exportlens.core.export.loader import load\n"
        f"loaded = load({str(tmp_path / 'model.py')!r}, None, {str(tmp_path)!r})\n"
        "assert not loaded.diagnostics, loaded.diagnostics\n"
        "print(loaded.module.VALUE, loaded.local_imports)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "new"
    assert str(helpers) in out.stdout  # still recorded as a local import


def test_installed_packages_keep_their_bytecode(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("import json\n")
    code = (
        "import sys, json\n"
        "from exportlens.core.export.loader import load\n"
        f"load({str(tmp_path / 'model.py')!r}, None, {str(tmp_path)!r})\n"
        "import importlib.util\n"
        "spec = importlib.util.find_spec('email.mime.text')\n"
        "print(type(spec.loader).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "SourceFileLoader"
