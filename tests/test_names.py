"""One meaning per name (issue 46): no two product modules define a top-level class of
the same name, and no two product modules have the same file name (``__init__.py``
and ``__main__.py`` aside).

Two ``WorkerState`` enums with different values, or a ``views.py`` in core and another
in the server, make every grep, traceback and review ask which one is meant. The
product is every ``.py`` file under ``exportlens/``, ``core/`` and ``server/``; a
class counts when it is defined at module level (also under a module-level ``if`` or
``try``). Reads files only (``ast``): nothing of exportlens is imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("exportlens", "core", "server")
SHARED_FILE_NAMES = frozenset({"__init__.py", "__main__.py"})

# A name two modules may share, with why: one concept in two layers, where renaming
# would hurt. Keep these empty unless a reason is written next to the name.
ALLOWED_CLASSES: dict[str, str] = {}
ALLOWED_FILE_NAMES: dict[str, str] = {}


def product_modules(root: Path = ROOT) -> list[Path]:
    """Every ``.py`` file of the product under ``root``, sorted."""
    return sorted(
        path
        for folder in PRODUCT
        for path in (root / folder).rglob("*.py")
        if "__pycache__" not in path.relative_to(root).parts
    )


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run at import: the body, and what a module-level ``if``,
    ``try`` or ``with`` holds (never a function's or a class's body)."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.With)):
            yield from _module_level(node.body)
            yield from _module_level(getattr(node, "orelse", []))
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level(block)


def top_level_classes(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {node.name for node in _module_level(tree.body) if isinstance(node, ast.ClassDef)}


def duplicate_classes(root: Path = ROOT) -> dict[str, list[str]]:
    """Class name -> the modules (POSIX paths from ``root``) that define it, for each
    name more than one module defines."""
    where: defaultdict[str, list[str]] = defaultdict(list)
    for path in product_modules(root):
        for name in top_level_classes(path):
            where[name].append(path.relative_to(root).as_posix())
    return {name: paths for name, paths in sorted(where.items()) if len(paths) > 1}


def duplicate_file_names(root: Path = ROOT) -> dict[str, list[str]]:
    """File name -> the modules that have it, for each name more than one module has."""
    where: defaultdict[str, list[str]] = defaultdict(list)
    for path in product_modules(root):
        if path.name not in SHARED_FILE_NAMES:
            where[path.name].append(path.relative_to(root).as_posix())
    return {name: paths for name, paths in sorted(where.items()) if len(paths) > 1}


def _listed(found: dict[str, list[str]]) -> str:
    return "\n".join(f"  {name}: {', '.join(paths)}" for name, paths in found.items())


def test_no_two_product_modules_define_a_class_of_the_same_name() -> None:
    assert len(product_modules()) > 100, f"the product tree looks wrong under {ROOT}"
    found = {name: paths for name, paths in duplicate_classes().items() if name not in ALLOWED_CLASSES}
    assert not found, "rename one of each (or allow it in ALLOWED_CLASSES, with why):\n" + _listed(found)


def test_no_two_product_modules_have_the_same_file_name() -> None:
    found = {name: paths for name, paths in duplicate_file_names().items() if name not in ALLOWED_FILE_NAMES}
    assert not found, "rename one of each (or allow it in ALLOWED_FILE_NAMES, with why):\n" + _listed(found)


def test_every_allowed_name_is_still_shared_and_says_why() -> None:
    """An entry left behind once its names were told apart would hide the next clash."""
    for allowed, found in ((ALLOWED_CLASSES, duplicate_classes()), (ALLOWED_FILE_NAMES, duplicate_file_names())):
        for name, why in allowed.items():
            assert why.strip(), f"{name}: say why it may be shared"
            assert name in found, f"{name} is no longer shared: drop it from the allow-list"


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    files = {
        "exportlens/progress.py": "class Progress:\n    class Inner: ...\n",
        "core/isolation/messages.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    class Progress: ...\n",
        "core/isolation/__init__.py": "",
        "core/model/views.py": "def view_for(): ...\nclass Inner: ...\n",
        "server/views.py": "class Bridge: ...\n",
        "server/__init__.py": "try:\n    class Bridge: ...\nexcept ImportError:\n    pass\n",
        "server/__pycache__/views.py": "class Progress: ...\n",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert duplicate_classes(tmp_path) == {
        "Bridge": ["server/__init__.py", "server/views.py"],
        "Progress": ["core/isolation/messages.py", "exportlens/progress.py"],
    }  # a nested class is not top-level: Inner is defined once at module level
    assert duplicate_file_names(tmp_path) == {"views.py": ["core/model/views.py", "server/views.py"]}
