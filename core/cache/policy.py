"""Which results the cache may keep, and when a kept one no longer holds although its
key still matches (a module it found nowhere was installed since). Torch-free."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys

from exportlens.core.model.results import JOB_DIED, FileResult

UNCACHEABLE_CODES = frozenset({"timeout", "out-of-memory", "worker-crash"})
# A diagnostic with the fact ``JOB_DIED`` says its job was stopped (a lowering that ran
# out of time or memory, or crashed: ``lowering/<format>-error``), as these codes do.

def cacheable(result: FileResult) -> bool:
    """Whether a result depends only on the code, not on the machine's state."""
    for d in result.diagnostics:
        if d.code in UNCACHEABLE_CODES or d.fact(JOB_DIED):
            return False
        # A missing local module is a recorded (absent) dependency, and a missing
        # top-level module is checked at lookup (``still_missing``). Anything else an
        # import can lack (a name inside an installed package, a submodule of one)
        # changes with what is installed, which is in no key: always re-run.
        if d.code == "import-error" and ("ModuleNotFoundError" in d.message or "ImportError" in d.message):
            if not result.missing_modules or "ModuleNotFoundError" not in d.message:
                return False
    return True


def still_missing(result: FileResult) -> bool:
    """Whether every module the run found nowhere is still not installed. Looked up
    the way the job's interpreter would find an installed top-level module (builtins,
    then ``sys.path`` through ``PathFinder``), which imports nothing: the server never
    runs a package's code to answer this. The project's own modules are absent
    dependencies of the result, checked by its key."""
    if not result.missing_modules:
        return True
    importlib.invalidate_caches()  # a package installed since the last look
    for name in result.missing_modules:
        if name in sys.builtin_module_names or importlib.machinery.PathFinder.find_spec(name) is not None:
            return False
    return True
