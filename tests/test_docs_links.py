"""The user-facing docs link only to what ships in the repository.

Every relative link in README.md, docs/ (its folders too) and the editors' READMEs
points at a file of the repository (and at a heading or ``<a id>`` that exists, for
links with an anchor into a Markdown file), and no file of the repository refers to
the team's design notes that users never see.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Built from pieces so that this file does not match itself.
FORBIDDEN = ("../" + "shared", "CONTRACTS" + ".md")
# Never part of the repository: environments, dependencies, caches, build output.
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", "out", "test-artifacts", "artifacts"}

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^)]*[\"'])?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
_HTML_ID = re.compile(r"<a\b[^>]*?\b(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_docs() -> list[Path]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    docs += sorted(p for p in (ROOT / "editors").rglob("README*") if p.is_file() and not SKIP_DIRS & set(p.relative_to(ROOT).parts))
    return docs


def prose_lines(text: str, *, blank_code_spans: bool = True) -> list[tuple[int, str]]:
    """``(line number, line)`` outside fenced code blocks, code spans blanked unless told."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        out.append((number, _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line) if blank_code_spans else line))
    return out


def links(text: str) -> list[tuple[int, str]]:
    """Every link target in ``text``: inline, reference-style and HTML, outside code."""
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(text):
        for pattern in (_INLINE_LINK, _HTML_LINK):
            found.extend((number, m.group(1)) for m in pattern.finditer(line))
        reference = _REFERENCE_LINK.match(line)
        if reference:
            found.append((number, reference.group(1)))
    return found


def heading_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without Markdown, lowercased,
    punctuation dropped (hyphens and underscores kept), spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown file: ``<a id>``/``<a name>`` and its headings (a
    repeated heading gets ``-1``, ``-2``... as on GitHub)."""
    found = set(_HTML_ID.findall(text))
    seen: dict[str, int] = {}
    for _, line in prose_lines(text, blank_code_spans=False):  # a heading's code counts
        heading = _HEADING.match(line)
        if not heading:
            continue
        slug = heading_slug(heading.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(doc: Path, root: Path) -> list[str]:
    """What is wrong with the relative links of ``doc``, one line per problem."""
    problems: list[str] = []
    text = doc.read_text(encoding="utf-8")
    where = doc.relative_to(root)
    for number, target in links(text):
        if _SCHEME.match(target) or target.startswith("//"):
            continue  # https:, mailto:, ...: not a file of the repository
        path_part, _, anchor = target.partition("#")
        path_part = unquote(path_part.split("?", 1)[0])
        linked = (doc.parent / path_part).resolve() if path_part else doc.resolve()
        if not linked.is_relative_to(root.resolve()):
            problems.append(f"{where}:{number}: {target} leaves the repository")
            continue
        if not linked.exists():
            problems.append(f"{where}:{number}: {target}: no such file")
            continue
        if anchor and linked.suffix == ".md" and unquote(anchor) not in anchors(linked.read_text(encoding="utf-8")):
            problems.append(f"{where}:{number}: {target}: no heading or <a id> #{anchor} in {linked.relative_to(root.resolve())}")
    return problems


def repository_files(root: Path) -> list[Path]:
    """Tracked and new (not ignored) files; without git, a walk that skips what is never committed."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout
        return sorted({root / name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name})
    except (OSError, subprocess.CalledProcessError):
        files: list[Path] = []
        for directory, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
            files.extend(Path(directory) / n for n in names)
        return sorted(files)


# -- the repository ----------------------------------------------------------------


@pytest.mark.parametrize("doc", markdown_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    assert broken_links(doc, ROOT) == []


def test_docs_link_into_diagnostics_by_anchor() -> None:
    """The diagnostic codes table links every code to its section, and those anchors exist."""
    contract = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    into_diagnostics = [t for _, t in links(contract) if t.startswith("diagnostics.md#")]
    assert into_diagnostics, "docs/contract.md links no diagnostic code to docs/diagnostics.md"


def test_nothing_refers_to_the_design_notes() -> None:
    offenders = []
    for path in repository_files(ROOT):
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue  # deleted in the working tree, or a submodule
        for needle in FORBIDDEN:
            if needle.encode() in data:
                line = data[: data.index(needle.encode())].count(b"\n") + 1
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {needle}")
    assert offenders == []


# -- the checker itself: it does fail ---------------------------------------------


def test_checker_finds_broken_links(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "diagnostics.md").write_text('<a id="mutation-buffer"></a>\n## mutation/buffer (information)\n\n## Two words `here`\n')
    (tmp_path / "README.md").write_text(
        "[ok](docs/diagnostics.md#mutation-buffer) [heading](docs/diagnostics.md#two-words-here)\n"
        "[web](https://example.com/x.md) `[code](missing.md)`\n"
        "```\n[fenced](missing.md)\n```\n"
        "[gone](docs/missing.md) ![img](docs/images/none.png)\n"
        "[bad anchor](docs/diagnostics.md#mutation-bufer)\n"
        "[outside](../elsewhere/notes.md)\n"
        "[self](#nowhere)\n"
    )
    problems = broken_links(tmp_path / "README.md", tmp_path)
    assert [p.split(": ", 1)[1].split(":")[0].split(" ")[0] for p in problems] == [
        "docs/missing.md",
        "docs/images/none.png",
        "docs/diagnostics.md#mutation-bufer",
        "../elsewhere/notes.md",
        "#nowhere",
    ]


def test_heading_slugs_follow_github() -> None:
    assert heading_slug("`exportlens check`") == "exportlens-check"
    assert heading_slug("3. `pyproject.toml`") == "3-pyprojecttoml"
    assert heading_slug("Neovim (0.11+)") == "neovim-011"
    assert heading_slug("mutation/buffer (information)") == "mutationbuffer-information"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
