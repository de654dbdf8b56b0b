"""``[tool.exportlens]``: one settings type, one default per setting. Torch-free.

This is the only reader of pyproject.toml. The CLI reads it once per file it checks,
the server on every keystroke (through the pipeline and ``files.declares_targets``),
the job process once per export (its ``targets``). The defaults live here too, so no
front end carries its own copy of a number.

A setting that is missing or malformed reads as None ("not set here"): the caller's
override, else the default below, applies (``exportlens.core.pipeline``). Malformed
values other than ``targets`` are ignored without a message, as they always were,
except the limits: a ``timeout`` or ``memory_mb`` that is not a number in its range
(TOML has ``nan`` and ``inf``) is ignored and said in ``ignored``, which the pipeline
reports, since an infinite timeout would let a hanging model run forever. An
unreadable file, a section that is not a table or malformed ``targets`` become
``problem``, which the job reports as a ``target-error`` diagnostic. ``targets``
entries that name no file of the project are ``target_problems``, with the line of
each in pyproject.toml, which ``check`` reports there.
"""

from __future__ import annotations

import json
import os
import re
import threading
import tomllib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from exportlens.core.model.lowering import LOWER_FORMATS, parse_size

# The limits' defaults live with the limits (``core/model/request``), named here too.
from exportlens.core.model.request import DEFAULT_MEMORY_MB as DEFAULT_MEMORY_MB
from exportlens.core.model.request import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S

DEFAULT_STRICT = False  # export with strict=False unless a target or the user says otherwise
DEFAULT_LOWER: tuple[str, ...] = ()  # lowering is opt-in: it costs a conversion and a run per target
# How a model's weights are made (``exportlens.core.export.weights``): "auto" builds large
# tensors without values where no step needs them; "real" always materialises them.
WEIGHTS_CHOICES: tuple[str, ...] = ("auto", "real")
DEFAULT_WEIGHTS = "auto"
# How the worker starts a job process (``exportlens.core.isolation.startmethod``): "auto"
# is fork on Linux, spawn on macOS and Windows.
START_METHOD_CHOICES: tuple[str, ...] = ("auto", "fork", "spawn")
DEFAULT_START_METHOD = "auto"
# The range of each limit, for every front end (pyproject, CLI flags, editor settings).
TIMEOUT_RANGE_S = (0.1, 86_400.0)  # a tenth of a second to a day
MEMORY_RANGE_MB = (64, 1 << 22)  # 64 MiB to 4 TiB
# The cache folder has no number to default to: unset, the cache's own default folder
# applies (``exportlens.core.cache.store.default_cache_dir``).

_TARGETS_FORM = '"path.py:function"'


@dataclass(frozen=True)
class ProjectSettings:
    """What the nearest ``[tool.exportlens]`` says; None: not set there (or not valid)."""

    pyproject: str | None = None  # the file these came from; None: there is none
    timeout_s: float | None = None
    memory_mb: int | None = None
    strict: bool | None = None
    cache_dir: str | None = None  # absolute; a relative setting is relative to the pyproject
    cache_url: str | None = None  # the shared cache (``s3://bucket/prefix``, ``file:///folder``...)
    cache_write: bool | None = None  # ``check`` writes to the shared cache too
    targets: tuple[str, ...] = ()  # absolute "path.py:function" entries
    lower: tuple[str, ...] | None = None  # formats to lower to (``lower = ["onnx"]``)
    weights: str | None = None  # "auto" or "real" (``weights = "real"``)
    start_method: str | None = None  # "auto", "fork" or "spawn" (``start_method = "spawn"``)
    # The most memory a lowered program may need to run, bytes (``memory_budget = "512 MB"``).
    memory_budget: int | None = None
    problem: str | None = None  # why the section, or its targets, were ignored
    ignored: tuple[str, ...] = ()  # why a limit was ignored (a value out of its range)
    # Where in the pyproject.toml the problem is (1-based; the TOML error's position,
    # the section's or the ``targets`` key's line): its diagnostic is located there.
    problem_line: int = 1
    problem_column: int = 1


def find_pyproject(path: str, stop: str | None = None) -> str | None:
    """The nearest pyproject.toml at or above ``path``'s folder, not looking above ``stop``."""
    directory = os.path.dirname(os.path.abspath(path))
    stop_real = os.path.realpath(stop) if stop else None
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory or (stop_real and os.path.realpath(directory) == stop_real):
            return None
        directory = parent


def settings_for(path: str, stop: str | None = None) -> ProjectSettings:
    """The settings that apply to the file ``path`` (see :func:`find_pyproject`)."""
    pyproject = find_pyproject(path, stop)
    return read(pyproject) if pyproject else ProjectSettings()


def pyproject_targets(pyproject: str) -> tuple[list[str], str | None]:
    """``(absolute "file.py:function" entries, problem)`` of one pyproject.toml."""
    settings = read(pyproject)
    return list(settings.targets), settings.problem


# The parsed settings of recently read files, by absolute path, with the bytes they
# were parsed from. Keyed by content rather than by mtime and size: a file rewritten
# within one tick of the file system's clock at the same size keeps its mtime, and
# a cache that trusted it would serve the old settings. Reading a small file costs
# a few microseconds; parsing it is what is worth saving.
_PARSED: OrderedDict[str, tuple[bytes, ProjectSettings]] = OrderedDict()
_PARSED_MAX = 64
_lock = threading.Lock()  # the server reads settings from its event loop and its io thread


def read(pyproject: str) -> ProjectSettings:
    """The settings in one pyproject.toml; never raises (an unreadable file is a ``problem``)."""
    pyproject = os.path.abspath(pyproject)  # one cache entry per file, one spelling in messages
    try:
        with open(pyproject, "rb") as f:
            data = f.read()
    except OSError as e:
        return ProjectSettings(pyproject=pyproject, problem=f"cannot read {pyproject}: {e}")
    with _lock:
        cached = _PARSED.get(pyproject)
        if cached is not None and cached[0] == data:
            _PARSED.move_to_end(pyproject)
            return cached[1]
    settings = _parse(pyproject, data)
    with _lock:
        _PARSED[pyproject] = (data, settings)
        _PARSED.move_to_end(pyproject)
        while len(_PARSED) > _PARSED_MAX:
            _PARSED.popitem(last=False)
    return settings


def _parse(pyproject: str, data: bytes) -> ProjectSettings:
    section, problem, (line, column) = _section(pyproject, data)
    base = os.path.dirname(pyproject)
    timeout, bad_timeout = _limit(pyproject, section, "timeout", TIMEOUT_RANGE_S, integer=False)
    memory, bad_memory = _limit(pyproject, section, "memory_mb", MEMORY_RANGE_MB, integer=True)
    strict = section.get("strict")
    cache_dir = section.get("cache_dir")
    cache_url = section.get("cache_url")
    cache_write = section.get("cache_write")
    lower, bad_lower = _lower(pyproject, section.get("lower"))
    weights, bad_weights = _choice(pyproject, "weights", WEIGHTS_CHOICES, section.get("weights"))
    start_method, bad_start = _choice(pyproject, "start_method", START_METHOD_CHOICES, section.get("start_method"))
    budget, bad_budget = _budget(pyproject, section.get("memory_budget"))
    targets: tuple[str, ...] = ()
    if problem is None:
        targets, problem = _targets(pyproject, base, section.get("targets", []))
        if problem is not None:
            line, column = _key_line(_lines(data), _TARGETS_KEY), 1
    return ProjectSettings(
        pyproject=pyproject,
        timeout_s=None if timeout is None else float(timeout),
        memory_mb=None if memory is None else int(memory),
        strict=strict if isinstance(strict, bool) else None,
        cache_dir=os.path.join(base, os.path.expanduser(cache_dir)) if isinstance(cache_dir, str) and cache_dir else None,
        cache_url=cache_url if isinstance(cache_url, str) and cache_url else None,
        cache_write=cache_write if isinstance(cache_write, bool) else None,
        targets=targets,
        lower=lower,
        weights=weights,
        start_method=start_method,
        memory_budget=budget,
        problem=problem,
        ignored=tuple(why for why in (bad_timeout, bad_memory, bad_lower, bad_weights, bad_start, bad_budget) if why),
        problem_line=line,
        problem_column=column,
    )


def _limit(pyproject: str, section: dict[str, Any], key: str, bounds: tuple[float, float], *, integer: bool) -> tuple[float | None, str | None]:
    """``(value, None)`` for a number within ``bounds`` (a whole one if ``integer``),
    ``(None, why)`` for any other value (nan and inf fail the comparison), ``(None, None)`` unset."""
    value = section.get(key)
    if value is None:
        return None, None
    number = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if number and bounds[0] <= value <= bounds[1]:
        return value, None
    kind, low, high = ("a whole number", str(bounds[0]), str(bounds[1])) if integer else ("a number", f"{bounds[0]:g}", f"{bounds[1]:g}")
    return None, f"{pyproject}: [tool.exportlens] {key} = {value!r} is not {kind} from {low} to {high}; it is ignored"


def _lower(pyproject: str, value: Any) -> tuple[tuple[str, ...] | None, str | None]:
    """``lower = ["onnx"]``: the formats, in order, without repeats; anything else is
    ignored and said, as for the limits (a misspelt format must not pass silently)."""
    if value is None:
        return None, None
    if isinstance(value, list) and all(isinstance(v, str) and v in LOWER_FORMATS for v in value):
        return tuple(dict.fromkeys(value)), None
    known = ", ".join(repr(f) for f in LOWER_FORMATS)
    return None, f"{pyproject}: [tool.exportlens] lower = {value!r} is not a list of formats ({known}); it is ignored"


def _budget(pyproject: str, value: Any) -> tuple[int | None, str | None]:
    """``memory_budget = "512 MB"`` (or a number of bytes); anything else is ignored and said."""
    if value is None:
        return None, None
    size = parse_size(value)
    if size is not None:
        return size, None
    return (
        None,
        f'{pyproject}: [tool.exportlens] memory_budget = {value!r} is not a size such as "512 MB" or "2 GB"; it is ignored',
    )


def _choice(pyproject: str, key: str, choices: tuple[str, ...], value: Any) -> tuple[str | None, str | None]:
    """``weights = "auto" | "real"``, ``start_method = "auto" | "fork" | "spawn"``;
    anything else is ignored and said, as for ``lower``."""
    if value is None:
        return None, None
    if isinstance(value, str) and value in choices:
        return value, None
    known = " or ".join(repr(w) for w in choices)
    return None, f"{pyproject}: [tool.exportlens] {key} = {value!r} is not {known}; it is ignored"


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _section(pyproject: str, data: bytes) -> tuple[dict[str, Any], str | None, tuple[int, int]]:
    """``([tool.exportlens] table, problem, (line, column) of the problem)``."""
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        return {}, f"cannot read {pyproject}: {e}", (data[: e.start].count(b"\n") + 1, 1)
    except tomllib.TOMLDecodeError as e:
        # tomllib says where only in its message (``lineno`` arrives in Python 3.14).
        at = _TOML_POSITION.search(str(e))
        return {}, f"cannot read {pyproject}: {e}", (int(at.group(1)), int(at.group(2))) if at else (1, 1)
    tool = document.get("tool", {})
    section = tool.get("exportlens", {}) if isinstance(tool, dict) else {}
    if isinstance(section, dict):
        return section, None, (1, 1)
    return {}, f"{pyproject}: [tool.exportlens] must be a table", (_key_line(_lines(data), _EXPORTLENS_KEY), 1)


_EXPORTLENS_KEY = re.compile(r"""^\s*(?:\[\s*tool\s*\]\s*$|(?:tool\s*\.\s*)?["']?exportlens["']?\s*=)""")


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines()


def _key_line(lines: list[str], key: re.Pattern[str]) -> int:
    """The 1-based line of the first line ``key`` matches (from the section's header
    on when there is one), else 1."""
    start = next((i for i, text in enumerate(lines) if _SECTION_HEADER.match(text)), 0)
    found = next((i for i in range(start, len(lines)) if key.match(lines[i])), None)
    if found is None:
        found = next((i for i, text in enumerate(lines) if key.match(text)), None)
    return found + 1 if found is not None else 1


def _targets(pyproject: str, base: str, raw: Any) -> tuple[tuple[str, ...], str | None]:
    """The ``targets`` entries made absolute (relative to the pyproject's folder), or a problem."""
    if not isinstance(raw, list) or not all(isinstance(x, str) and ":" in x for x in raw):
        return (), f"{pyproject}: [tool.exportlens] targets must be a list of {_TARGETS_FORM} strings"
    out = []
    for entry in raw:
        file_part, _, func = entry.rpartition(":")
        out.append(f"{os.path.normpath(os.path.join(base, file_part))}:{func}")
    return tuple(out), None


@dataclass(frozen=True)
class TargetProblem:
    """A ``targets`` entry that names no file of the project, and where it is written."""

    entry: str  # as written in pyproject.toml ("" for a problem of the whole section)
    line: int  # 1-based line of the entry in pyproject.toml
    message: str
    column: int = 1


def problem_message(settings: ProjectSettings) -> str | None:
    """What the diagnostic of the settings' ``problem`` says (the job's and ``check``'s
    alike, so the two are recognised as one)."""
    return f"{settings.problem}; its targets are ignored" if settings.problem else None


def target_problems(pyproject: str, text: str | None = None) -> list[TargetProblem]:
    """What is wrong with the declarations of one pyproject.toml (``text``: an editor's
    buffer of it, else the file): a file that does not parse or whose
    ``[tool.exportlens]`` or ``targets`` is malformed (one problem, at its line), or the
    ``targets`` entries that cannot be checked: a file that does not exist, is not a
    regular file, or lies outside the project (the pyproject's folder), where no check
    would ever look for it. Read afresh each call (the files' existence is not the
    pyproject's content, so it is not in the parse cache)."""
    pyproject = os.path.abspath(pyproject)
    if text is not None:
        data = text.encode("utf-8", errors="surrogatepass")
    else:
        try:
            with open(pyproject, "rb") as f:
                data = f.read()
        except OSError as e:
            return [TargetProblem("", 1, f"cannot read {pyproject}: {e.strerror or e}; its targets are ignored")]
    settings = _parse(pyproject, data)
    message = problem_message(settings)
    if message is not None:
        return [TargetProblem("", settings.problem_line, message, settings.problem_column)]
    section = _section(pyproject, data)[0]
    raw = section.get("targets", [])
    base = os.path.dirname(pyproject)
    real_base = os.path.realpath(base)
    lines = data.decode("utf-8", errors="replace").splitlines()
    out = []
    for entry in raw:
        file_part = entry.rpartition(":")[0]
        path = os.path.normpath(os.path.join(base, file_part))
        if not (os.path.realpath(path) + os.sep).startswith(real_base + os.sep):
            why = f"{file_part} is outside the project ({base}), where no check looks for targets"
        elif not os.path.lexists(path):
            why = f"{file_part} does not exist"
        elif not os.path.isfile(path):
            why = f"{file_part} is not a regular file"
        else:
            continue
        line = _entry_line(lines, entry)
        column = _entry_columns(lines[line - 1] if line <= len(lines) else "", entry)[0]
        out.append(TargetProblem(entry, line, f"[tool.exportlens] targets entry {entry!r}: {why}; the entry is ignored", column))
    return out


_SECTION_HEADER = re.compile(r"^\s*\[\s*tool\s*\.\s*exportlens\s*\]")
_TARGETS_KEY = re.compile(r"""^\s*(?:(?:tool\s*\.\s*)?exportlens\s*\.\s*)?["']?targets["']?\s*=""")


def declared_line(pyproject: str, entry: str) -> tuple[int, int, int] | None:
    """``(line, column, end column)`` (1-based, UTF-8 bytes, the end exclusive) of the
    quoted string of pyproject.toml's ``targets`` entry that reads as ``entry`` (an
    absolute ``"file.py:function"``, as ``targets`` holds them), or None."""
    try:
        with open(pyproject, "rb") as f:
            data = f.read()
    except OSError:
        return None
    section, problem, _ = _section(os.path.abspath(pyproject), data)
    raw = section.get("targets", [])
    if problem is not None or not isinstance(raw, list):
        return None
    base = os.path.dirname(os.path.abspath(pyproject))
    for written in raw:
        if isinstance(written, str) and ":" in written:
            file_part, _, func = written.rpartition(":")
            if f"{os.path.normpath(os.path.join(base, file_part))}:{func}" == entry:
                lines = _lines(data)
                line = _entry_line(lines, written)
                return (line, *_entry_columns(lines[line - 1] if line <= len(lines) else "", written))
    return None


def _entry_columns(text: str, entry: str) -> tuple[int, int]:
    """The byte columns of ``entry``'s quoted string on its line, quotes included; the
    whole line's when it is not there as such (an escaped spelling)."""
    for quoted in (json.dumps(entry, ensure_ascii=False), f"'{entry}'"):
        at = text.find(quoted)
        if at >= 0:
            start = len(text[:at].encode()) + 1
            return start, start + len(quoted.encode())
    indent = len(text) - len(text.lstrip())
    return indent + 1, len(text.rstrip().encode()) + 1


def _entry_line(lines: list[str], entry: str) -> int:
    """The line of ``entry``'s string in the ``targets`` array (TOML has no positions in
    tomllib): the first line from the ``targets`` key on that holds it quoted, else
    the key's line, else 1."""
    start = next((i for i, text in enumerate(lines) if _SECTION_HEADER.match(text)), 0)
    key = next((i for i in range(start, len(lines)) if _TARGETS_KEY.match(lines[i])), None)
    quoted = (json.dumps(entry, ensure_ascii=False), f"'{entry}'")
    for i in range(key if key is not None else 0, len(lines)):
        if any(q in lines[i] for q in quoted):
            return i + 1
    return key + 1 if key is not None else 1
