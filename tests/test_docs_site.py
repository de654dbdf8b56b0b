"""The docs site builds from the repository with warnings as errors (``mkdocs build
--strict``: every page in the nav, every link and anchor resolving), and every page of
docs/ (its folders too: the decision records) is in its nav, so none is left
unreachable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    built = tmp_path / "site"
    for page in _pages():
        where = page.with_suffix("")
        where = where.parent if where.name == "index" else where
        assert (built / where / "index.html").is_file(), page


def _pages() -> list[Path]:
    """Every page of docs/, as a path relative to it (``decisions/index.md``)."""
    return sorted(p.relative_to(ROOT / "docs") for p in (ROOT / "docs").rglob("*.md"))


def test_every_page_is_in_the_nav() -> None:
    nav = re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert sorted(nav) == sorted(p.as_posix() for p in _pages())
