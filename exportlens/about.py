"""``exportlens --version`` and ``exportlens version``: what a bug report needs.

The versions of torch and of the optional lowering packages come from their
installed metadata (``importlib.metadata``), never from importing them: importing
torch takes seconds, and the version of an install too broken to import is exactly
what a bug report needs. The formats' versions are the ones this install reads and
writes: the msgpack program schema, the JSON report, the snapshot file. Torch-free.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

from exportlens import __version__
from exportlens.core import torchversion
from exportlens.core.contract.snapshot import FORMAT_VERSION
from exportlens.core.isolation import capabilities, startmethod
from exportlens.core.isolation.speedups import plugins
from exportlens.core.isolation.startmethod import StartMethod
from exportlens.core.project.settings import settings_for
from exportlens.core.serde.schema import SCHEMA_VERSION
from exportlens.report import JSON_VERSION

OPTIONAL = ("onnx", "onnxscript", "onnxruntime", "executorch")  # the exportlens[onnx] and exportlens[executorch] extras


def installed(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def short() -> str:
    """One line, for ``--version``."""
    torch = installed("torch") or "not installed"
    return f"exportlens {__version__} (torch {torch}, Python {platform.python_version()})"


def start_method(cwd: str | None = None) -> StartMethod:
    """How ``check`` run here would start its export processes (``startmethod``):
    ``$EXPORTLENS_START_METHOD``, the project's pyproject, the platform."""
    project = settings_for(os.path.join(cwd or os.getcwd(), "_")).start_method
    return startmethod.resolve(None, project)


def _torch_row() -> str:
    version = installed("torch")
    if version is None:
        return f"not installed (the export workers need it: {torchversion.SPEC})"
    if torchversion.supported(version):
        return f"{version} (supported: {torchversion.SPEC})"
    return f"{version} (outside the supported range {torchversion.SPEC})"


def report() -> str:
    """Every version that decides what exportlens does, for ``exportlens version``."""
    rows = [
        ("exportlens", __version__),
        ("torch", _torch_row()),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("program schema", ".".join(map(str, SCHEMA_VERSION))),
        ("JSON report", str(JSON_VERSION)),
        ("snapshot format", str(FORMAT_VERSION)),
        ("SARIF", "2.1.0"),
        ("start method", str(start_method())),
        ("supervision", "; ".join(capabilities.describe())),
    ]
    rows += [(name, state.why) for name, state in plugins.states()]  # each speed-up of the workers
    rows += [(name, installed(name) or "not installed") for name in OPTIONAL]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)
