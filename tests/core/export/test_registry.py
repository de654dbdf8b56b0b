"""The decorator's record lives in core, where the job reads it; ``exportlens.target``
writes to that same list."""

from __future__ import annotations

import subprocess
import sys

import exportlens
from exportlens.core.export import registry


def test_the_decorator_records_in_the_core_registry() -> None:
    before = len(registry.REGISTRY)
    try:

        @exportlens.target(example_args=(1,), name="probe")
        def make() -> None: ...

        obj, options = registry.REGISTRY[-1]
        assert len(registry.REGISTRY) == before + 1 and obj is make
        assert options == registry.TargetOptions(example_args=(1,), name="probe")
        assert getattr(make, registry.ATTRIBUTE) is options
    finally:
        del registry.REGISTRY[before:]


def test_the_registry_and_the_decorator_import_no_torch() -> None:
    code = "import sys, exportlens.core.export.registry, exportlens.target; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
