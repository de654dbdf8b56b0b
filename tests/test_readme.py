"""The docs' Commands section (docs/getting-started.md) and the editor's page say what the CLI and the server take (issue 22, point 10:
it listed ``exportlens.status`` without its required URI and omitted
``--no-signatures``): every option of ``check`` is in its usage line, every server
command with the arguments the command's own documentation gives it."""

from __future__ import annotations

import re
from pathlib import Path

from exportlens.cli import _parser
from exportlens.server.features import commands

ROOT = Path(__file__).resolve().parent.parent
# Where the commands are listed: the check usage line and the lowering options
# (Getting started), the server's commands (In the editor).
COMMANDS = ROOT / "docs" / "getting-started.md"
EDITOR = ROOT / "docs" / "in-the-editor.md"


def _subparser(name: str) -> object:
    parser = _parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    return sub.choices[name]  # type: ignore[attr-defined]


def test_the_check_usage_line_lists_every_option() -> None:
    usage = next(line for line in COMMANDS.read_text().splitlines() if line.startswith("- `exportlens check [PATH...]"))
    check = _subparser("check")
    options = {o for action in check._actions for o in action.option_strings if o.startswith("--") and o != "--help"}  # type: ignore[attr-defined]
    # The lowering options have their own line, next to their sections.
    lowering = {"--lower", "--save-onnx", "--save-pte", "--memory-budget"}
    assert "--no-signatures" in options
    missing = sorted(o for o in options - lowering if f"[{o}" not in usage)
    assert missing == [], usage
    assert all(f"--lower {f}" in COMMANDS.read_text() for f in ("onnx", "executorch"))
    assert "[--memory-budget SIZE]" in COMMANDS.read_text()


def _listed(args: str) -> set[str]:
    """The page's arguments are the quoted names (``target?``: optional); prose may follow."""
    return set(re.findall(r"`([a-z_]+)\??`", args))


def test_every_server_command_is_listed_with_its_arguments() -> None:
    text = " ".join(EDITOR.read_text().split())
    doc = " ".join((commands.__doc__ or "").split())
    for name in commands.COMMANDS:
        documented = re.search(rf"``{re.escape(name)}``(?: \(([^)]*)\))?", doc)
        assert documented is not None, name
        listed = re.search(rf"`{re.escape(name)}`(?: \(([^)]*)\))?", text)
        assert listed is not None, f"{EDITOR.name} does not name {name}"
        assert _listed(listed.group(1) or "") == set(re.findall(r"[a-z_]+", documented.group(1) or "")), (name, listed.group(0))
