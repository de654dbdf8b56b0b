"""A notebook as JupyterLab's LSP extension sends it: a "virtual document". Torch-free.

jupyterlab-lsp does not use LSP's notebook sync. It opens one plain text document
per notebook, languageId ``python``, at the notebook's own URI when the server's
spec says ``"requires_documents_on_disk": false``, else (jupyter-lsp's default) at
``<root>/.virtual_documents/<notebook path>``, written there too, with
``<root>/.virtual_documents`` as the ``rootUri``. Either way the URI ends in
``.ipynb`` and the text is Python: the notebook's cells in order, each followed by
two blank lines; a markdown cell is one empty line. IPython syntax is rewritten as calls that compile:
``%time x`` as ``get_ipython().run_line_magic("time", " x")``, ``!ls`` as
``get_ipython().getoutput("ls")``, a ``%%bash`` cell as one
``get_ipython().run_cell_magic(...)`` call, and a ``%%time`` or ``%%capture`` cell
between ``# START_CELL_MAGIC`` and ``# END_CELL_MAGIC`` comments. Those calls
compile but fail when run (no ``get_ipython`` outside IPython). The extension maps
each line back to its cell itself, so the server must answer line for line. It
drops a diagnostic on a line it rewrote or on a blank line between cells.

:func:`module_text` gives that text the meaning a notebook on disk has
(``core/project/notebooks.py``), line for line: the extension's rewrites are turned
back into IPython syntax, the cells (the blocks between runs of two or more blank
lines) go through :func:`~exportlens.core.project.notebooks.module_of`, and each line
of a cell that runs keeps its place; every other line is empty. So magics are
neutralised, a cell magic does not run, and nothing after the last cell that
declares a target runs. A cell that itself holds two blank lines in a row counts as
two cells here: the second part is left out when it follows the last declaration.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from exportlens.core.project.notebooks import SUFFIX, Cell, module_of

FOLDER = ".virtual_documents"  # jupyter-lsp's default ``virtual_documents_dir``

# jupyterlab-lsp's overrides (src/transclusions/ipython/overrides.ts), reversed as
# its own ``reverse`` patterns do. The prefix: a line's indentation, or an assignment.
_PREFIX = r"^(\s*|\s*\S+\s*=\s*)"
_SHELL = re.compile(_PREFIX + r'get_ipython\(\)\.getoutput\("(.*?)"\)\s*$')
_HELP = re.compile(r"^(\s*)get_ipython\(\)\.run_line_magic\('(pinfo2?)',( {1,2})'(.*?)'\)\s*$")
_LINE_MAGIC = re.compile(_PREFIX + r'get_ipython\(\)\.run_line_magic\("(.*?)", "(.*?)"\)\s*$')
_CELL_MAGIC = re.compile(r'^get_ipython\(\)\.run_cell_magic\("(.*?)", "(.*?)", """')
_UNWRAPPED = re.compile(r'^# START_CELL_MAGIC\("(.*?)", "(.*?)"\)\s*$')


def notebook_path(path: str) -> str | None:
    """The notebook a virtual document stands for: ``/w/.virtual_documents/a/nb.ipynb``
    is ``/w/a/nb.ipynb``. None for any other path. Only jupyter-lsp's default folder
    is known (``LanguageServerManager.virtual_documents_dir`` can move it)."""
    parts = path.split(os.sep)
    if not path.endswith(SUFFIX) or FOLDER not in parts[:-1]:
        return None
    at = len(parts) - 1 - parts[::-1].index(FOLDER)
    return os.sep.join(parts[:at] + parts[at + 1 :])


def is_virtual(path: str) -> bool:
    return notebook_path(path) is not None


def workspace_root(path: str) -> str:
    """The folder JupyterLab serves: jupyterlab-lsp sends ``<root>/.virtual_documents``
    as the workspace's ``rootUri``."""
    head, tail = os.path.split(path.rstrip(os.sep))
    return head if tail == FOLDER and head else path


def _unescape(text: str) -> str:
    return re.sub(r'\\([\\"])', r"\1", text)


def to_ipython(line: str) -> str:
    """One line with jupyterlab-lsp's rewrite undone: ``%magic args``, ``!command``,
    ``x = !command``, ``?name``, ``name?``. A cell magic's first line becomes
    ``%%name args``. Any other line is returned as it is."""
    m = _SHELL.match(line)
    if m:
        return f"{m.group(1)}!{m.group(2)}"
    m = _HELP.match(line)
    if m:
        marks = "?" if m.group(2) == "pinfo" else "??"
        return f"{m.group(1)}{marks}{m.group(4)}" if len(m.group(3)) == 1 else f"{m.group(1)}{m.group(4)}{marks}"
    m = _LINE_MAGIC.match(line)
    if m:
        return f"{m.group(1)}%{m.group(2)}{_unescape(m.group(3))}"
    m = _CELL_MAGIC.match(line) or _UNWRAPPED.match(line)
    if m:
        return f"%%{m.group(1)}{_unescape(m.group(2))}"
    return line


def blocks(lines: list[str]) -> list[tuple[int, list[str]]]:
    """The cells of a virtual document's lines: ``(index of the first line, lines)``
    for each block of lines between runs of two or more blank lines."""
    out: list[tuple[int, list[str]]] = []
    start: int | None = None
    blank = 0
    for i, line in enumerate([*lines, "", ""]):
        if line.strip():
            if start is None:
                start = i
            blank = 0
            continue
        blank += 1
        if blank == 2 and start is not None:
            end = i - 1  # the first blank line of the run
            out.append((start, lines[start:end]))
            start = None
    return out


def module_text(text: str, names: Iterable[str] = ()) -> str:
    """The virtual document ``text`` as the module to run, line for line (see the
    module's docstring); ``names``: the functions ``pyproject.toml`` entries name in
    the notebook."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    found = blocks(lines)
    module = module_of([Cell("code", "\n".join(to_ipython(line) for line in block)) for _, block in found], names)
    ran = module.text.split("\n")
    out = [""] * len(lines)
    for span in module.spans:
        first = found[span.cell - 1][0]
        out[first : first + span.lines] = ran[span.first - 1 : span.first - 1 + span.lines]
    return "\n".join(out)
