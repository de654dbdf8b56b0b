"""No import cycle between product modules (core, server, the CLI).

Every import counts, where it is written: at module level, inside a function (an
import moved into a function to dodge a cycle still ties the two modules together),
and under ``TYPE_CHECKING`` (the types of one module are then another's to know).
An import names the module it reaches: ``from pkg import mod`` the submodule
``pkg.mod`` when there is one, else ``pkg`` itself (its ``__init__``); the parent
packages Python imports on the way are not counted, or every package that imports a
submodule would close a cycle with it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where each package's modules lie (pyproject maps core/ and server/ into exportlens).
FOLDERS = {"exportlens.core": ROOT / "core", "exportlens.server": ROOT / "server", "exportlens": ROOT / "exportlens"}


def product_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def imports_of(name: str, is_package: bool, text: str, modules: dict[str, Path]) -> set[str]:
    """The product modules ``name`` (a package's ``__init__`` or a module, its source
    ``text``) imports, anywhere in it."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                if f"{module}.{alias.name}" in modules:
                    out.add(f"{module}.{alias.name}")
                elif module in modules:
                    out.add(module)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = product_modules()
    return {name: imports_of(name, path.name == "__init__.py", path.read_text(encoding="utf-8"), modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        # Iterative: a deep chain of imports must not reach the recursion limit.
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycle_between_product_modules() -> None:
    graph = import_graph()
    assert len(graph) > 150  # core, the server and the CLI were all read
    assert cycles(graph) == []


def test_a_cycle_is_found_wherever_its_imports_are() -> None:
    modules = {f"pkg.{n}": Path(f"{n}.py") for n in "abcd"}
    sources = {
        "pkg.a": "from pkg import b\n",
        "pkg.b": "def f():\n    from . import c\n",  # inside a function, relative
        "pkg.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n",
        "pkg.d": "import pkg.a\n",  # imports the cycle, is not in it
    }
    graph = {name: imports_of(name, False, text, modules) for name, text in sources.items()}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
