"""Which model files may import a module: the ones exported to show what they do to it.

A file that declares no target (``pkg/model.py``) shows the view of the model files
whose run imported it (``exportlens.core.model.views``); the language server (an open
module, ``server/views.py``) and ``check``/``show`` on a module
(``exportlens/module_views.py``) both export only the model files this module names,
so a script that no model imports exports nothing, and the two agree on which files
a module's result is made from. Reads text only: torch-free.
"""

from __future__ import annotations

import os
import re

from exportlens.core.project.files import SKIP_DIRS, root_of, survey

MAX_READ = 4 << 20  # an import is near the top; a generated 100 MB file is not read whole


def _name(path: str) -> bytes:
    """The name an import of ``path`` spells: its stem, or its package's folder."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.fsencode(os.path.basename(os.path.dirname(path)) if stem == "__init__" else stem)


def _python_files(root: str) -> dict[str, bytes]:
    """Every regular ``.py`` file and notebook under ``root`` (skipping what ``check`` skips), by real path."""
    out: dict[str, bytes] = {}
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in names:
            full = os.path.join(directory, name)
            if name.endswith((".py", ".ipynb")) and os.path.isfile(full):  # never a FIFO; a notebook imports too
                try:
                    with open(full, "rb") as f:
                        out[os.path.realpath(full)] = f.read(MAX_READ)
                except OSError:
                    continue
    return out


def model_files_importing(path: str) -> list[str]:
    """The model files of ``path``'s project that may import it, directly or through
    other local modules (walks the tree: the server asks on its io thread). A file may import it when
    its text names it, or names a file that may: a static over-approximation, so a
    file that cannot reach the module is never exported just to find that out."""
    real = os.path.realpath(path)
    texts = _python_files(root_of(path))
    reached, names, grew = {real}, {_name(real)}, True
    while grew:
        spelled = re.compile(rb"\b(?:" + b"|".join(re.escape(n) for n in sorted(names)) + rb")\b")
        grew = False
        for file, text in texts.items():
            if file not in reached and spelled.search(text):
                reached.add(file)
                names.add(_name(file))
                grew = True
    return [f for f in survey([root_of(path)]).files if os.path.realpath(f) in reached - {real}]
