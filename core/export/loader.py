"""Running a model file the way Python would import it, inside the job process.

``syntax-error`` when it does not compile (encoding errors included), ``import-error``
at the deepest frame of the file when running it raises (``SystemExit`` included).
Records the local modules it imports so editing one of them invalidates the result.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import os
import sys
import traceback
import types
from dataclasses import dataclass, field
from typing import Any

from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.frames import Frame, deepest_in_file
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import statement_at


@dataclass
class Loaded:
    path: str
    index: SourceIndex
    module: types.ModuleType | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    local_imports: list[str] = field(default_factory=list)
    local_import_hashes: list[str] = field(default_factory=list)


def module_name_for(path: str) -> tuple[str, str]:
    """``(dotted name, sys.path entry)`` as if the file were imported from its top
    package's parent: relative imports and sibling imports then work."""
    directory, filename = os.path.split(os.path.abspath(path))
    parts = [os.path.splitext(filename)[0]]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.insert(0, package)
    return ".".join(parts), directory


def frames_of(exc: BaseException) -> list[Frame]:
    """Frames of an exception and its causes, outermost first, innermost last."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.insert(0, e)
        e = e.__cause__ or e.__context__
    frames: list[Frame] = []
    for item in chain:
        for fs in traceback.extract_tb(item.__traceback__):
            frames.append(Frame(fs.filename, fs.lineno or 0, fs.name))
    return frames


def _decode_error_line(data: bytes) -> int:
    """The first line whose bytes are not valid UTF-8 (for encoding errors)."""
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return number
    return 1


def load(path: str, source: str | None, root: str | None) -> Loaded:
    path = os.path.abspath(path)
    data: bytes
    if source is None:
        with open(path, "rb") as f:
            data = f.read()
    else:
        data = source.encode("utf-8")
    try:
        text = source if source is not None else data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
    loaded = Loaded(path, SourceIndex.build(text, path))

    try:
        code = compile(source if source is not None else data, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        loaded.diagnostics.append(_syntax_diagnostic(e, data))
        return loaded
    except ValueError as e:  # null bytes
        loaded.diagnostics.append(Diagnostic("syntax-error", f"the file cannot be compiled: {e}", 1))
        return loaded
    except (RecursionError, MemoryError) as e:  # a generated 100k-term expression, ...
        detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        loaded.diagnostics.append(Diagnostic("syntax-error", f"the file is too deeply nested for Python to compile ({detail})", 1))
        return loaded
    if loaded.index.incomplete:  # Python compiles it; only our index could not walk it all
        message = (
            f"this file nests too deeply for exportlens to index it ({loaded.index.incomplete}); "
            "it is still exported, but some diagnostics cover whole lines and hovers show less"
        )
        loaded.diagnostics.append(Diagnostic("deep-nesting", message, 1))

    name, search_root = module_name_for(path)
    for entry in (root, search_root):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    _compile_local_modules_from_source(root or search_root)
    before = set(sys.modules)
    module = types.ModuleType(name)
    module.__file__ = path
    module.__package__ = name.rpartition(".")[0]
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
        loaded.diagnostics.append(_import_diagnostic(e, path, loaded.index))
        _record_local_imports(loaded, before, root or search_root)
        return loaded
    loaded.module = module
    _record_local_imports(loaded, before, root or search_root)
    return loaded


def _record_local_imports(loaded: Loaded, before: set[str], root: str | None) -> None:
    loaded.local_imports = _local_imports(before, loaded.path, root)
    loaded.local_import_hashes = [_COMPILED.get(p) or _hash_file(p) for p in loaded.local_imports]


def _hash_file(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""


class _FreshSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the module from its source every time, never from ``__pycache__``.

    A ``.pyc`` is trusted when the source's mtime (whole seconds) and size match, so a
    helper rewritten within the same second at the same size (a formatter, a
    checkout, an editor's atomic save) would run its *old* code: a wrong result that
    the cache would then keep.
    """

    def get_code(self, fullname: str) -> types.CodeType:
        source = self.get_data(self.path)
        _COMPILED[os.path.realpath(self.path)] = hashlib.sha256(source).hexdigest()
        return compile(source, self.path, "exec", dont_inherit=True)


# realpath -> sha256 of the bytes the fresh loader compiled (what really ran).
_COMPILED: dict[str, str] = {}


class _LocalModuleFinder(importlib.abc.MetaPathFinder):
    """Finds modules as usual, and gives those under the project root the fresh loader."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root) + os.sep

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader) or not spec.origin:
            return spec
        real = os.path.realpath(spec.origin)
        if real.startswith(self.root) and "site-packages" not in real and "dist-packages" not in real:
            spec.loader = _FreshSourceLoader(fullname, spec.origin)
        return spec


def _compile_local_modules_from_source(root: str | None) -> None:
    if not root or any(isinstance(f, _LocalModuleFinder) and f.root == os.path.realpath(root) + os.sep for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _LocalModuleFinder(root))


def _syntax_diagnostic(e: SyntaxError, data: bytes) -> Diagnostic:
    message = e.msg or "invalid syntax"
    if isinstance(e.__cause__, UnicodeDecodeError) or "codec can't decode" in message or "encoding" in message.lower():
        line = e.lineno or _decode_error_line(data)
        return Diagnostic("syntax-error", f"the file cannot be decoded: {message}", max(line, 1))
    line = max(e.lineno or 1, 1)
    column = max(e.offset or 1, 1)
    end_line = e.end_lineno if e.end_lineno and e.end_lineno >= line else line
    end_column = e.end_offset if e.end_offset and (end_line > line or e.end_offset > column) else column + 1
    kind = type(e).__name__
    return Diagnostic("syntax-error", f"{kind}: {message}", line, column, end_line, end_column)


def _import_diagnostic(e: BaseException, path: str, index: SourceIndex) -> Diagnostic:
    frame = deepest_in_file(frames_of(e), path)
    where = statement_at(index, frame.line) if frame else SourceLine(1)
    if isinstance(e, SystemExit):
        message = f"running the module called sys.exit({e.code!r}) while it was imported"
    else:
        detail = str(e).strip()
        message = f"running the module raised {type(e).__name__}" + (f": {detail}" if detail else "")
    return Diagnostic.at("import-error", message, where)


def _local_imports(before: set[str], path: str, root: str | None) -> list[str]:
    """Files of modules imported by the run that live under the project root and
    outside any installed-packages folder."""
    if not root:
        return []
    root = os.path.realpath(root)
    found = set()
    for name in set(sys.modules) - before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if not file:
            continue
        real = os.path.realpath(file)
        if real == os.path.realpath(path) or not real.startswith(root + os.sep):
            continue
        if "site-packages" in real or "dist-packages" in real:
            continue
        found.add(real)
    return sorted(found)
