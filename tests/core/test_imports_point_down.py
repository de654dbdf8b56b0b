"""Imports point down: nothing in core imports the ``exportlens`` package above it
(its CLI, its decorator) or the server beside it; core reaches only ``exportlens.core``."""

from __future__ import annotations

import ast
from pathlib import Path

import exportlens.core

CORE = Path(exportlens.core.__file__).parent


def _imported(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from exportlens import target` imports exportlens.target, not a name of core.
            names.extend(f"{node.module}.{alias.name}" if node.module == "exportlens" else node.module for alias in node.names)
    return names


def test_core_imports_nothing_from_above_or_beside_it() -> None:
    upward = []
    for path in sorted(CORE.rglob("*.py")):
        for name in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            if (name == "exportlens" or name.startswith("exportlens.")) and not name.startswith("exportlens.core"):
                upward.append(f"{path.relative_to(CORE)}: {name}")
    assert upward == []


def test_the_check_sees_an_upward_import() -> None:
    assert _imported(ast.parse("import exportlens\nfrom exportlens import target\nfrom exportlens.server import app\n")) == [
        "exportlens",
        "exportlens.target",
        "exportlens.server",
    ]
