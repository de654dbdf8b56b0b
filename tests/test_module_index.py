"""docs/architecture.md's module index names every product module, and only real ones.

The product is every ``.py`` file under ``exportlens/``, ``core/`` and ``server/``.
The ``## Module index`` section lists each by its path from the repository root, in
backticks. A module added without a line, or a line left behind by a renamed or
removed module, fails here. Reads files only: nothing of exportlens is imported.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PRODUCT = ("exportlens", "core", "server")
HEADING = "## Module index"

_ENTRY = re.compile(r"^\s*[-*]\s+`([^`]+\.py)`")


def product_modules(root: Path = ROOT) -> set[str]:
    """Every ``.py`` file of the product, as a POSIX path from ``root``."""
    return {
        path.relative_to(root).as_posix()
        for folder in PRODUCT
        for path in (root / folder).rglob("*.py")
        if "__pycache__" not in path.relative_to(root).parts
    }


def index_section(text: str) -> str:
    """The ``## Module index`` section of a Markdown text, up to the next ``## `` heading."""
    assert HEADING in text, f"{HEADING!r} is missing"
    return text.split(HEADING, 1)[1].split("\n## ", 1)[0]


def indexed_modules(text: str) -> set[str]:
    """The module paths the index lists: the backticked path that opens each list item."""
    return {m.group(1) for line in index_section(text).splitlines() if (m := _ENTRY.match(line))}


def mismatches(modules: set[str], indexed: set[str]) -> tuple[list[str], list[str]]:
    """``(modules not indexed, indexed paths that are no module)``, each sorted."""
    return sorted(modules - indexed), sorted(indexed - modules)


def test_the_index_names_every_module_and_only_modules() -> None:
    modules = product_modules()
    assert len(modules) > 100, f"the product tree looks wrong: {len(modules)} modules under {ROOT}"
    indexed = indexed_modules(ARCHITECTURE.read_text(encoding="utf-8"))
    missing, stale = mismatches(modules, indexed)
    assert not missing, f"add a line to {HEADING} of docs/architecture.md for: {missing}"
    assert not stale, f"{HEADING} of docs/architecture.md lists paths that are no module: {stale}"
    assert all((ROOT / path).is_file() for path in indexed)


def test_each_module_is_listed_once() -> None:
    section = index_section(ARCHITECTURE.read_text(encoding="utf-8"))
    listed = [m.group(1) for line in section.splitlines() if (m := _ENTRY.match(line))]
    duplicates = sorted({path for path in listed if listed.count(path) > 1})
    assert not duplicates, duplicates


def test_the_check_reports_a_stale_line_and_a_missing_module(tmp_path: Path) -> None:
    for path in ("exportlens/cli.py", "core/pipeline.py", "server/app.py", "core/__pycache__/pipeline.cpython-312.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    doc = (
        "# Architecture\n\n"
        f"{HEADING}\n\n### exportlens\n\n"
        "- `exportlens/cli.py`: The command.\n"
        "- `exportlens/renamed.py`: A module that is gone.\n\n"
        "### core\n\n- `core/pipeline.py`: The path.\n\n"
        "## After\n\n- `server/app.py`: Outside the index, so it does not count.\n"
    )
    modules = product_modules(tmp_path)
    assert modules == {"exportlens/cli.py", "core/pipeline.py", "server/app.py"}
    indexed = indexed_modules(doc)
    assert indexed == {"exportlens/cli.py", "exportlens/renamed.py", "core/pipeline.py"}
    assert mismatches(modules, indexed) == (["server/app.py"], ["exportlens/renamed.py"])
