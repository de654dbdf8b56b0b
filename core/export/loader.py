"""Running a model file the way Python would import it, inside the job process.

A notebook (``.ipynb``) runs as the module of its code cells
(``core/project/notebooks.py``); the request usually carries that module's text.

``syntax-error`` when it does not compile (encoding errors included), ``import-error``
at the deepest frame of the file when running it raises (``SystemExit`` included), or
when the file cannot be read at all.

Records every local module the run *tried* to import, with its state: the bytes it
compiled (also when running it raised: a failed module leaves ``sys.modules``, but
not this record), or "absent" for each place the import looked and found nothing
(``helpers.py`` before it exists, ``pkg/__init__.py`` of a namespace folder). So
fixing a helper, or creating a missing one, invalidates the result.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import linecache
import os
import stat
import sys
import traceback
import types
from dataclasses import dataclass, field, replace
from typing import Any

from exportlens.core.disk.states import file_state
from exportlens.core.model.results import Diagnostic, Related
from exportlens.core.model.signature import SourceLine
from exportlens.core.project import notebooks
from exportlens.core.source.frames import Frame, deepest_in_file
from exportlens.core.source.project import Sources
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
    root: str | None = None  # the local modules' root
    # real path -> text of the local modules the run imports from an editor's buffer
    overlays: dict[str, str] = field(default_factory=dict)
    modules_before: set[str] = field(default_factory=set)  # sys.modules before the file ran
    missing_modules: list[str] = field(default_factory=list)  # top-level names found nowhere
    error: BaseException | None = None  # what running the file raised, if it did


def sources_of(loaded: Loaded) -> Sources:
    """The user's files of the run: the declaring file's index, and each local
    module's, from its overlay text when it ran from one."""
    return Sources(loaded.index, loaded.root, loaded.overlays)


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
        # Strict export's TorchDynamo raises from its own frames; the user's line it
        # was tracing is in the error's ``real_stack`` ("Dynamo attempts to add
        # additional input" for ``random.uniform``, a graph break), innermost last.
        real = getattr(item, "real_stack", None)
        if isinstance(real, traceback.StackSummary) or isinstance(real, list):
            frames += [Frame(fs.filename, fs.lineno or 0, fs.name) for fs in real if isinstance(fs, traceback.FrameSummary)]
    return frames


def _decode_error_line(data: bytes) -> int:
    """The first line whose bytes are not valid UTF-8 (for encoding errors)."""
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return number
    return 1


def _read(path: str) -> bytes:
    """The file's bytes; OSError for a file that is not a regular one (a FIFO would
    block the read forever, and the job with it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return f.read()


def load(path: str, source: str | None, root: str | None, overlays: tuple[tuple[str, str], ...] = ()) -> Loaded:
    """Run the file (``source``: its editor text); ``overlays``: (real path, text) of
    local modules to import from that text, not from the disk (open in the editor,
    unsaved)."""
    path = os.path.abspath(path)
    _use_overlays(overlays)
    data: bytes
    if source is None:
        try:
            data = _read(path)
        except OSError as e:
            loaded = Loaded(path, SourceIndex.build("", path))
            reason = e.strerror or str(e)
            loaded.diagnostics.append(Diagnostic("import-error", f"cannot read the file: {reason}", 1))
            return loaded
    else:
        data = source.encode("utf-8")
    if notebooks.is_notebook(path):
        if source is None:
            try:
                source = notebooks.read(path, data).text
            except notebooks.NotebookError as e:
                loaded = Loaded(path, SourceIndex.build("", path))
                loaded.diagnostics.append(Diagnostic("syntax-error", f"the notebook cannot be read: {e}", 1))
                return loaded
            data = source.encode("utf-8")
        # Tracebacks and torch's messages read lines through linecache: the module's,
        # not the notebook's JSON on disk.
        linecache.cache[path] = (len(source), None, source.splitlines(keepends=True), path)
    try:
        text = source if source is not None else data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
    loaded = Loaded(path, SourceIndex.build(text, path), overlays={p: t for p, t in overlays})

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
    # A file Python compiles but our index could not walk to the bottom (a generated
    # expression of thousands of terms) keeps the partial index: it is exported as
    # usual, and only lines inside the part left unwalked fall back to whole lines.

    name, search_root = module_name_for(path)
    for entry in (root, search_root):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    _compile_local_modules_from_source(root or search_root)
    _TRIED.clear()
    loaded.root, loaded.modules_before = root or search_root, set(sys.modules)
    module = types.ModuleType(name)
    module.__file__ = path
    module.__package__ = name.rpartition(".")[0]
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
        loaded.error = e
        loaded.diagnostics.append(_import_diagnostic(e, path, loaded.index, loaded.root))
        missing = _missing_top_level(e)
        if missing:
            loaded.missing_modules.append(missing)
        record_imports(loaded)
        return loaded
    loaded.module = module
    record_imports(loaded)
    return loaded


def _missing_top_level(e: BaseException) -> str | None:
    """The top-level module a ``ModuleNotFoundError`` found nowhere; None for anything
    else, including a missing submodule of a package that exists (whether that one
    appears depends on the package's contents, which only its import can tell)."""
    name = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
    if isinstance(name, str) and name and "." not in name and name.isidentifier():
        return name
    return None


def record_imports(loaded: Loaded) -> dict[str, str]:
    """Real path -> state of every local module the run imported or tried to import
    so far (see the module's docstring); also kept in ``loaded.local_imports`` and
    ``local_import_hashes``. The job calls it again after the exports, which may
    import more."""
    own = os.path.realpath(loaded.path)
    imports: dict[str, str] = {}
    for path in [*_TRIED, *_local_imports(loaded.modules_before, loaded.path, loaded.root)]:
        if path == own or path in imports:
            continue
        state = _COMPILED.get(path) or file_state(path)
        if state is not None:  # unreadable (a folder named like a module): never ran
            imports[path] = state
    ordered = sorted(imports)
    loaded.local_imports = ordered
    loaded.local_import_hashes = [imports[p] for p in ordered]
    return {p: imports[p] for p in ordered}


class _FreshSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the module from its source every time, never from ``__pycache__``.

    A ``.pyc`` is trusted when the source's mtime (whole seconds) and size match, so a
    helper rewritten within the same second at the same size (a formatter, a
    checkout, an editor's atomic save) would run its *old* code: a wrong result that
    the cache would then keep.

    A module open in the editor with unsaved text (an overlay) is compiled from that
    text, and its recorded state is that text's sha256: the result is keyed by what
    ran, never by the module's bytes on disk.
    """

    def get_code(self, fullname: str) -> types.CodeType:
        source = self._source_bytes()
        _COMPILED[os.path.realpath(self.path)] = hashlib.sha256(source).hexdigest()
        return compile(source, self.path, "exec", dont_inherit=True)

    def get_source(self, fullname: str) -> str | None:
        overlay = _OVERLAYS.get(os.path.realpath(self.path))
        return overlay.decode("utf-8", "surrogatepass") if overlay is not None else super().get_source(fullname)

    def _source_bytes(self) -> bytes:
        overlay = _OVERLAYS.get(os.path.realpath(self.path))
        return overlay if overlay is not None else self.get_data(self.path)


# realpath -> the unsaved text (UTF-8) of a local module open in the editor; its sha256
# is what ``core.disk.states.overlay_text_state`` computes from the text.
_OVERLAYS: dict[str, bytes] = {}


def _use_overlays(overlays: tuple[tuple[str, str], ...]) -> None:
    """Import these modules from their text; their lines (tracebacks, ``inspect``) too."""
    _OVERLAYS.clear()
    for path, text in overlays:
        real = os.path.realpath(path)
        _OVERLAYS[real] = text.encode("utf-8", "surrogatepass")
        lines = text.splitlines(keepends=True)
        # No mtime: linecache never replaces it from the disk (``checkcache`` skips it).
        linecache.cache[real] = (len(text), None, lines, real)
        if path != real:
            linecache.cache[path] = (len(text), None, lines, path)


# realpath -> sha256 of the bytes the fresh loader compiled (what really ran).
_COMPILED: dict[str, str] = {}
# Real paths where an import of this run looked for a local module, in order (an
# ordered set): the file it found, and every candidate before it that was not there.
_TRIED: dict[str, None] = {}


class _LocalModuleFinder(importlib.abc.MetaPathFinder):
    """Finds modules as usual, and gives those under the project root the fresh loader."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root) + os.sep
        self._spellings = (self.root, os.path.abspath(root) + os.sep)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        self._record_candidates(fullname, sys.path if path is None else path, spec)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader) or not spec.origin:
            return spec
        real = os.path.realpath(spec.origin)
        if real.startswith(self.root) and "site-packages" not in real and "dist-packages" not in real:
            spec.loader = _FreshSourceLoader(fullname, spec.origin)
        return spec


    def _record_candidates(self, fullname: str, entries: Any, spec: importlib.machinery.ModuleSpec | None) -> None:
        """Note in ``_TRIED`` the source files the path search looked for under the
        root, in its order (``name/__init__.py``, then ``name.py``, per folder), up to
        the one it found: creating any of them would change what the import finds."""
        name = fullname.rpartition(".")[2]
        origin = os.path.realpath(spec.origin) if spec is not None and spec.has_location and spec.origin else None
        found_in = None
        if origin is not None:
            found_in = os.path.dirname(origin)
            if spec is not None and spec.submodule_search_locations is not None:
                found_in = os.path.dirname(found_in)  # a package: name/__init__.py
        for entry in list(entries or ()):
            if not isinstance(entry, str):
                continue
            directory = os.path.abspath(entry or os.curdir)
            real = None
            if (directory + os.sep).startswith(self._spellings):  # cheap: most entries are not local
                real = os.path.realpath(directory)
                if (real + os.sep).startswith(self.root) and "site-packages" not in real and "dist-packages" not in real:
                    for candidate in (os.path.join(real, name, "__init__.py"), os.path.join(real, name + ".py")):
                        _TRIED.setdefault(candidate)
                        if candidate == origin:
                            return
            if found_in is not None and os.path.basename(directory) == os.path.basename(found_in):
                if (real or os.path.realpath(directory)) == found_in:
                    return  # found here (not as source): the folders after it are never searched


def looked_up(name: str, root: str | None) -> None:
    """Record, as the finder would have, the places under ``root`` where an import of
    the top-level ``name`` looks, for an import ``sys.modules`` answered (a library the
    worker preloaded): creating ``name.py`` there would change what it finds
    (``exportlens.core.export.libraries.unshadow``)."""
    if not root:
        return
    real_root = os.path.realpath(root) + os.sep
    for entry in list(sys.path):
        if not isinstance(entry, str) or not entry:
            continue
        real = os.path.realpath(entry)
        if (real + os.sep).startswith(real_root) and "site-packages" not in real and "dist-packages" not in real:
            for candidate in (os.path.join(real, name, "__init__.py"), os.path.join(real, name + ".py")):
                _TRIED.setdefault(candidate)


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


def _import_diagnostic(e: BaseException, path: str, index: SourceIndex, root: str | None = None) -> Diagnostic:
    """Running the file raised: at the deepest line of the user's files -- in a local
    module it imports when the error is there (its syntax error, its missing import),
    with the declaring file's import line as related information, so the module shows
    it at its own line and the declaring file at the import."""
    frames = frames_of(e)
    frame = deepest_in_file(frames, path)
    where = statement_at(index, frame.line) if frame else SourceLine(1)
    if isinstance(e, SystemExit):
        message = f"running the module called sys.exit({e.code!r}) while it was imported"
    else:
        detail = str(e).strip()
        message = f"running the module raised {type(e).__name__}" + (f": {detail}" if detail else "")
    in_module = _in_local_module(e, frames, path, Sources(index, root, {p: b.decode("utf-8", "surrogatepass") for p, b in _OVERLAYS.items()}), message)
    if in_module is None:
        return Diagnostic.at("import-error", message, where)
    found, module = in_module
    note = Related(os.path.realpath(path), where.line, f"`{os.path.basename(module)}` is imported here", where.column)
    return replace(found, related=(*found.related, note))


def _in_local_module(e: BaseException, frames: list[Frame], path: str, sources: Sources, message: str) -> tuple[Diagnostic, str] | None:
    """The diagnostic of an import that failed inside a local module (not the file
    itself), at that module's line, and the module's real path; None otherwise."""
    if isinstance(e, SyntaxError) and isinstance(e.filename, str):
        module = os.path.realpath(e.filename)
        if module == os.path.realpath(path) or not sources.is_user(module):
            return None
        try:
            data = _OVERLAYS.get(module) or _read(module)
        except OSError:
            data = b""
        found = _syntax_diagnostic(e, data)
        return replace(found, path=module), module
    frame = sources.deepest(frames)
    if frame is None or os.path.realpath(frame.file) == os.path.realpath(path):
        return None
    # The same words as the module's own check says them (``check pkg/blocks.py``).
    return Diagnostic.at("import-error", message, sources.statement(frame)), os.path.realpath(frame.file)


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
