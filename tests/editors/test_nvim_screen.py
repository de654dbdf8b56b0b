"""The Neovim plugin on a real screen: ``nvim`` with its terminal UI on a pty, read
through a terminal emulator (``tests/editors/terminal.py``), typed into as a user
types. What the headless scenarios check through the API, this checks on the cells a
user sees: the inlay hint after a line of ``forward`` and the code lens on the class
line of a model module, the quick-fix menu ``gra`` opens, and the diagnostic gone
from the screen once the fix is applied and the file exported again.

Each screen is saved as a PNG under ``tests/editors/artifacts/nvim`` (git-ignored);
with ``EXPORTLENS_UPDATE_DOCS_IMAGES=1`` they are also copied to ``docs/images/``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import EXAMPLES, ROOT
from tests.editors.terminal import Terminal
from tests.editors.test_nvim import FEATURES, NVIM_TESTS, PLUGIN, isolated_env, nvim_binary

ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "nvim"
FIRST_EXPORT_S = 180.0  # the worker's warm-up imports torch on a shared 2-core machine
EXPORT_S = 90.0
SHOTS = ("nvim-inlay-hints.png", "nvim-quick-fix.png", "nvim-quick-fix-applied.png")

HINT = re.compile(r"h = self\.proj\(x\)\s+float32\[batch, 16\]")
LENS = re.compile(r"class Block\(nn\.Module\):\s+✓ Block exported in \d+ ms .*\| Show graph")
MEAN_HINT = re.compile(r"self\.mean = 0\.9 \* self\.mean \+ 0\.1 \* x\s+float32\[3\]")
DIAGNOSTIC = "is a tensor attribute assigned"  # banned-mutation/tensor-attribute's message
REGISTERED = re.compile(r"self\.register_buffer\(['\"]mean['\"], torch\.zeros\(3\)")


def has(pattern: re.Pattern[str] | str) -> Callable[[list[str]], bool]:
    """A predicate over the screen's lines: one of them contains ``pattern``."""
    if isinstance(pattern, str):
        return lambda lines: any(pattern in line for line in lines)
    return lambda lines: any(pattern.search(line) for line in lines)


def test_hints_lens_and_a_quick_fix_on_screen(tmp_path: Path) -> None:
    project = tmp_path / "features"
    shutil.copytree(FEATURES, project)
    shutil.copy(EXAMPLES / "pyproject.toml", project / "pyproject.toml")
    env = dict(
        os.environ,
        TERM="xterm-256color",
        COLORTERM="truecolor",
        EXPORTLENS_NVIM_PLUGIN=str(PLUGIN),
        EXPORTLENS_NVIM_PYTHON=sys.executable,
        # Each hint answer comes after a redraw (tests/editors/nvim/init.lua): the order
        # a loaded machine can give, in which Neovim's own refresh handler shows no hint.
        EXPORTLENS_NVIM_REDRAW_BEFORE_HINTS="1",
        **isolated_env(tmp_path),
    )
    # The test init (plugin on the runtimepath, the exportlens config) and a setting
    # many users have: diagnostics as virtual text at the end of the line.
    command = [
        str(nvim_binary()),
        "--clean",
        "-u",
        str(NVIM_TESTS / "init.lua"),
        "-c",
        "lua vim.diagnostic.config({ virtual_text = true })",
        "layers.py",
    ]
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    term = Terminal(command, cwd=project, env=env)
    try:
        # layers.py declares no target: net.py's export of Block shows here.
        lines = term.wait_for(lambda s: has(HINT)(s) and has(LENS)(s), FIRST_EXPORT_S, "the hint after `h = self.proj(x)` and the lens on `class Block`")
        assert has("return torch.relu(h)")(lines) and has(re.compile(r"return torch\.relu\(h\)\s+float32\[batch, 16\]"))(lines)
        term.render(ARTIFACTS / SHOTS[0])

        term.type(":edit running_mean.py\r")
        term.wait_for(
            lambda s: has(DIAGNOSTIC)(s) and has(MEAN_HINT)(s) and has("✓ RunningMean exported")(s),
            EXPORT_S,
            "the tensor-attribute diagnostic, the hint and the lens in running_mean.py",
        )
        term.type(':call search("self.mean = 0.9")\r')
        term.type("gra")
        lines = term.wait_for(has("Type number and <Enter>"), EXPORT_S, "the code action menu")
        assert has(re.compile(r"1: register `mean` as a buffer in `RunningMean.__init__`"))(lines), "\n".join(lines)
        term.render(ARTIFACTS / SHOTS[1])

        term.type("1\r")
        lines = term.wait_for(lambda s: has(REGISTERED)(s) and not has(DIAGNOSTIC)(s), EXPORT_S, "the fix applied and its diagnostic gone")
        term.render(ARTIFACTS / SHOTS[2])
    finally:
        term.type("\x1b:qa!\r")
        term.close(timeout=30)

    if os.environ.get("EXPORTLENS_UPDATE_DOCS_IMAGES") == "1":
        images = ROOT / "docs" / "images"
        images.mkdir(parents=True, exist_ok=True)
        for name in SHOTS:
            shutil.copyfile(ARTIFACTS / name, images / name)
