"""Imports point down, as docs/architecture.md's package table says.

import-linter checks every import of every product module (core, server, the CLI;
at module level, inside functions and under TYPE_CHECKING alike) against the
contracts in pyproject.toml: the CLI and the API above the server, the server above
core, core's packages in layers, no torch in the server, no LSP library in core. The
table in docs/architecture.md is compared with those contracts (same layers, same
order, every package of core in it) and its "may import" column with the imports the
code makes, so neither can drift from the code.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# The package-level imports of core, read by grimp (the graph import-linter checks):
# {package of core: [packages of core it imports directly]}.
_GRAPH = """
import json, grimp
graph = grimp.build_graph("exportlens", cache_dir=None)
def package(m):
    parts = m.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["exportlens", "core"] else None
out = {}
for m in graph.modules:
    p = package(m)
    if p is None:
        continue
    for t in graph.find_modules_directly_imported_by(m):
        q = package(t)
        out.setdefault(p, set())
        if q is not None and q != p:
            out[p].add(q)
print(json.dumps({p: sorted(q) for p, q in out.items()}))
"""


def _link(target: Path, link: Path) -> None:
    link.symlink_to(target, target_is_directory=target.is_dir())


def installed_tree(tmp: Path, extra: dict[str, str] | None = None) -> Path:
    """exportlens laid out as installed (core/ and server/ under it), as links into this
    checkout (as scripts/typecheck does): grimp finds a package's modules under its own
    folder, and pyproject maps core/ and server/ from beside it. ``extra`` adds modules
    (a path under core/, its text) for the test that sees a violation."""
    top = tmp / "exportlens"
    top.mkdir()
    for entry in (ROOT / "exportlens").iterdir():
        if entry.name != "__pycache__":
            _link(entry, top / entry.name)
    _link(ROOT / "server", top / "server")
    if not extra:
        _link(ROOT / "core", top / "core")
        return tmp
    # Link core file by file, so that a module can be added without touching the checkout.
    for folder, dirs, files in os.walk(ROOT / "core"):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        here = top / "core" / Path(folder).relative_to(ROOT / "core")
        here.mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.endswith(".py"):
                _link(Path(folder) / name, here / name)
    for path, text in extra.items():
        (top / "core" / path).write_text(text, encoding="utf-8")
    return tmp


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Run in the tree: lint-imports puts its working directory first on sys.path, ahead of
    # the editable install's finder, so grimp reads the tree.
    return subprocess.run(
        [str(LINT_IMPORTS), str(PYPROJECT), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )


def contracts() -> dict[str, dict]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def table() -> list[dict[str, str]]:
    """The rows of architecture.md's package table: layer, package, holds, torch?, imports."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Packages and what each may import", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["layer", "package", "holds", "torch?", "may import"], header
    rows = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        rows.append(dict(zip(["layer", "package", "holds", "torch", "imports"], cells, strict=True)))
    return rows


def core_name(package_cell: str) -> str | None:
    """`core/export` -> export, `core/pipeline.py` -> pipeline; None outside core."""
    m = re.match(r"`core/(\w+)(?:\.py)?`", package_cell)
    return m.group(1) if m else None


def core_packages() -> set[str]:
    core = ROOT / "core"
    return {p.name for p in core.iterdir() if (p / "__init__.py").is_file()} | {
        p.stem for p in core.glob("*.py") if p.name != "__init__.py"
    }


def test_no_import_breaks_a_contract(tmp_path: Path) -> None:
    done = lint_imports(installed_tree(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(contracts())} kept, 0 broken" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("path", "text", "contract"),
    [
        ("model/_upward.py", "from exportlens.core.cache import keys\n", "core's packages"),  # a low package reaching up
        ("export/_sibling.py", "def f():\n    from exportlens.core.cache import store\n", "core's packages"),  # a sibling, lazily
        ("disk/_cli.py", "from exportlens import cli\n", "the CLI and the API"),
        ("source/_lsp.py", "import lsprotocol.types\n", "an LSP library"),
    ],
)
def test_a_new_upward_import_breaks_a_contract(tmp_path: Path, path: str, text: str, contract: str) -> None:
    done = lint_imports(installed_tree(tmp_path, {path: text}))
    assert done.returncode != 0, done.stdout
    broken = [line for line in done.stdout.splitlines() if line.endswith(" BROKEN")]
    assert any(contract in line for line in broken), done.stdout


def test_the_table_has_the_contracts_layers() -> None:
    rows = table()
    by_package = {row["package"].split()[0]: int(row["layer"]) for row in rows}
    # The CLI and the API above the server, the server above every package of core.
    top, server = by_package.pop("`exportlens`"), by_package.pop("`exportlens.server`")
    core = {core_name(p): layer for p, layer in by_package.items()}
    assert None not in core, f"a row the table names outside core: {sorted(by_package)}"
    assert top < server < min(core.values())
    assert contracts()["server-above-core"]["layers"] == ["exportlens.server", "exportlens.core"]
    # core's layers: the same packages in the same order, each row once.
    layers: dict[int, set[str]] = {}
    for name, layer in core.items():
        layers.setdefault(layer, set()).add(str(name))
    assert len(core) == len(rows) - 2, "a package of core has two rows"
    in_table = [layers[k] for k in sorted(layers)]
    in_contract = [{name.strip() for name in layer.split("|")} for layer in contracts()["core-layers"]["layers"]]
    assert in_table == in_contract
    # Every package of core is in both.
    assert set().union(*in_contract) == core_packages()


def test_the_cli_contract_names_every_module_of_the_cli() -> None:
    top = ROOT / "exportlens"
    modules = {f"exportlens.{p.stem}" for p in top.glob("*.py") if p.name != "__init__.py"}
    modules |= {f"exportlens.{p.name}" for p in top.iterdir() if (p / "__init__.py").is_file()}
    assert set(contracts()["cli-above"]["forbidden_modules"]) == modules


def test_the_tables_imports_are_the_codes(tmp_path: Path) -> None:
    """Each core row's "may import" names (`core/<package>...`) the packages of core its
    modules import, no more and no fewer."""
    tree = installed_tree(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.')\n" + _GRAPH], cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    imported = {p: set(q) for p, q in json.loads(done.stdout).items()}
    wrong = {}
    for row in table():
        name = core_name(row["package"])
        if name is None:
            continue
        named = set(re.findall(r"`core/(\w+)", row["imports"]))
        if named != imported.get(name, set()):
            wrong[name] = {"table": sorted(named), "code": sorted(imported.get(name, set()))}
    assert wrong == {}


def test_nothing_below_the_cli_imports_the_exportlens_package_itself() -> None:
    """``import exportlens`` names no module import-linter can forbid without forbidding
    core and the server (its descendants); the old test's check, kept: core and the
    server reach only ``exportlens.core`` and ``exportlens.server``."""
    import ast

    found = []
    for folder in (ROOT / "core", ROOT / "server"):
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "exportlens":
                    names = [f"exportlens.{a.name}" for a in node.names if a.name not in ("core", "server")]
                if "exportlens" in names or any(n.startswith("exportlens.") and n.split(".")[1] not in ("core", "server") for n in names):
                    found.append(f"{path.relative_to(ROOT)}: {names}")
    assert found == []
