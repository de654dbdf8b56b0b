"""Every ``exportlens`` command the README and the docs show in a code block is one the
CLI takes: parsed by the CLI's own argument parser, so a renamed or removed option, a
misspelt subcommand or a missing argument in a page fails here. (What the commands do
is tested where each feature is; the README's two commands are what CI runs.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from exportlens.cli import _parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "editors").glob("*/README.md"))]
_FENCE = re.compile(r"^\s*(```|~~~)")
# How a page starts the CLI: the command, the module, the venv's command.
# Not its output: ``exportlens check: torch 2.9.1 is outside the range ...``.
_START = re.compile(r"^(?:\$\s+)?(?:\S*/)?(?:exportlens|python3? -m exportlens|python3? -P -m exportlens)\s+(?!\S*:)")


def commands(text: str) -> list[tuple[int, str]]:
    """``(line, command)`` of each exportlens command in a fenced code block: the
    prompt dropped, cut at a comment or a shell operator, a continued line joined."""
    found: list[tuple[int, str]] = []
    fenced = False
    pending = ""
    start = 0
    for n, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            continue
        stripped = line.strip()
        if pending:
            pending += " " + stripped.rstrip("\\")
            if not stripped.endswith("\\"):
                found.append((start, pending))
                pending = ""
            continue
        if not _START.match(stripped):
            continue
        if stripped.endswith("\\"):
            pending, start = stripped.rstrip("\\"), n
            continue
        found.append((n, stripped))
    return found


def _args(command: str) -> list[str] | None:
    """The arguments after ``exportlens``; None for a line that is not a whole command
    (a usage line with ``[OPTIONS]``, a placeholder in capitals)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    if words and words[0] == "$":
        words = words[1:]
    for stop in ("|", "||", "&&", ";", ">", "2>", "&"):
        if stop in words:
            words = words[: words.index(stop)]
    while words and not words[0].endswith("exportlens"):
        words = words[1:]  # python -m exportlens
    args = words[1:]
    if any(a.startswith("[") or a == "..." for a in args):
        return None
    return args


# Usage patterns (``[OPTIONS]``, ``...``) are not commands to run: test_readme checks their options.
CASES = [(page, line, command) for page in PAGES for line, command in commands(page.read_text()) if _args(command) is not None]


def test_the_pages_show_commands() -> None:
    assert len(CASES) >= 8, CASES  # the extractor finds them (9 when written)


@pytest.mark.parametrize(("page", "line", "command"), CASES, ids=[f"{p.relative_to(ROOT)}:{n}" for p, n, _ in CASES])
def test_each_command_is_one_the_cli_takes(page: Path, line: int, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(command)
    assert args is not None
    try:
        _parser().parse_args(args)
    except SystemExit as e:
        assert e.code == 0, f"{page.relative_to(ROOT)}:{line}: `{command}`: {capsys.readouterr().err.strip()}"


def test_a_wrong_command_fails_the_parse() -> None:
    [(_, command)] = commands("```sh\n$ exportlens check --no-such-option x.py\n```\n")
    args = _args(command)
    assert args == ["check", "--no-such-option", "x.py"]
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(args)
    assert e.value.code == 2
