"""exportlens: live ``torch.export`` feedback.

Importing this package does not import torch: the decorator and the torch-free
program model are usable anywhere. The torch-facing functions (``dumps``, ``loads``,
``save``, ``load``) import torch when called.
"""

# First of all, before any other import: ``python -m exportlens`` in a workspace
# folder must not import that folder's tokenize.py or attr.py (see safe_path).
from exportlens import safe_path as _safe_path

_safe_path.drop_working_directory()

from typing import Any  # noqa: E402

from exportlens.target import target  # noqa: E402

__version__ = "0.1.0"
__all__ = ["target", "dumps", "loads", "save", "load", "read_program", "ProgramModel", "SchemaError", "__version__"]

_PROGRAM_API = {"dumps", "loads", "save", "load", "read_program", "ProgramModel", "SchemaError"}


def __getattr__(name: str) -> Any:
    """The serialization API, loaded on first use (it needs no torch until dumps/loads run)."""
    if name in _PROGRAM_API:
        from exportlens import program

        return getattr(program, name)
    raise AttributeError(f"module 'exportlens' has no attribute {name!r}")
