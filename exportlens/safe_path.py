"""Keep the working directory off ``sys.path`` when this process is ``python -m exportlens``.

``python -m`` puts the working directory first on ``sys.path`` (its full path in
3.11), and the editors start ``exportlens serve`` in the workspace folder: a
workspace file named like a module exportlens imports (``tokenize.py``,
``attr.py``, ``msgpack.py``, ``typing_extensions.py``) would be imported in place of
the library and kill the server at start-up.

Python imports the package's ``__init__`` (and with it the standard library) before
it runs ``__main__``, so ``__init__`` calls :func:`drop_working_directory` before its
first import. It only acts while Python is locating the ``-m`` module, and only
when that module is exportlens: a user's program that imports exportlens keeps its
``sys.path``. Model files still import their neighbours: the export job puts the
model's own folder on ``sys.path`` itself. The editors also start the server with
``-P``, which keeps the working directory off from the start.

Imports only ``os`` and ``sys``, which are loaded (frozen) before ``sys.path`` is
read (and no ``from __future__``: that is an import too).
"""

import os
import sys


def running_module(argv: list[str], orig_argv: list[str]) -> str | None:
    """The module ``python -m`` is locating, or None.

    While it locates the module, Python sets ``sys.argv`` to ``['-m', *script args]``;
    the word before the script's arguments on the interpreter's own command line
    (``orig_argv``) then names the module: ``exportlens`` or ``-mexportlens``
    (``-Imexportlens``: flags before ``m`` take no argument, or ``m`` would be it).
    """
    if not argv or argv[0] != "-m" or len(orig_argv) < len(argv) + 1:
        return None
    word = orig_argv[-len(argv)]
    return word.partition("m")[2] if word.startswith("-") else word


def drop_working_directory() -> None:
    """Remove the working directory that ``python -m exportlens`` put first on ``sys.path``."""
    module = running_module(sys.argv, getattr(sys, "orig_argv", []))
    if module is None or not (module == "exportlens" or module.startswith("exportlens.")):
        return
    if sys.flags.safe_path or not sys.path:
        return  # -P: sys.path[0] is a PYTHONPATH entry the user chose
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None  # the folder was removed: nothing of it can be imported anyway
    if sys.path[0] in ("", cwd):
        del sys.path[0]
