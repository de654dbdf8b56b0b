"""Server settings: a tree of fully defaulted dataclasses, parsed leniently.

Sources, later ones winning: the defaults below, ``initializationOptions`` (either
``{"exportlens": {...}}`` or the section itself), ``workspace/didChangeConfiguration``
(or ``workspace/configuration``) section ``exportlens``. Per project,
``[tool.exportlens]`` in pyproject.toml supplies ``timeout``, ``memory_mb``, ``strict``,
``lower``, ``weights``, ``start_method``, ``cache_dir`` and ``cache_url`` unless the user set them explicitly in the editor: ``overrides``
hands the explicit ones to ``exportlens.core.pipeline``, which resolves them in the
same order as for the CLI's flags (override, then pyproject, then default).

Names are snake_case (``debounce_ms``); camelCase spellings (``debounceMs``) are
accepted too because that is how VS Code settings are usually written. A bad value
never stops the server: it becomes a problem message naming the setting and the
default is used (the caller reports each distinct message once).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from exportlens.core.model.lowering import LOWER_FORMATS
from exportlens.core.model.results import CODES
from exportlens.core.pipeline import Overrides
from exportlens.core.project.settings import (
    DEFAULT_LOWER,
    DEFAULT_MEMORY_MB,
    DEFAULT_START_METHOD,
    DEFAULT_STRICT,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WEIGHTS,
    MEMORY_RANGE_MB,
    START_METHOD_CHOICES,
    TIMEOUT_RANGE_S,
    WEIGHTS_CHOICES,
)

SECTION = "exportlens"
# Not a setting: the token a client passes to a `serve --tcp` server (server/auth.py),
# taken out before the section is read; a client that sends it over stdio too is not warned.
TOKEN_KEY = "token"
TRUSTED_KEY = "trusted"  # initializationOptions: the client trusts its workspace (``exportlens.server.trust_gate``)


@dataclass(frozen=True)
class DiagnosticsSettings:
    """Which diagnostic codes are shown; every code is on unless turned off."""

    disabled: frozenset[str] = frozenset()

    def enabled(self, code: str) -> bool:
        return code not in self.disabled


@dataclass(frozen=True)
class Settings:
    debounce_ms: int = 300  # wait after the last keystroke before exporting the buffer
    timeout_s: float = DEFAULT_TIMEOUT_S  # per target
    memory_mb: int = DEFAULT_MEMORY_MB  # memory cap of one export job
    workers: int = 1  # warm worker processes; each holds torch (~400 MB)
    cache: bool = True
    cache_dir: str | None = None  # None: $EXPORTLENS_CACHE_DIR, pyproject's cache_dir, else the user cache
    # The shared cache: None: $EXPORTLENS_CACHE_URL, else pyproject's cache_url; "": none.
    cache_url: str | None = None
    # Upload results to it: only when the user says so here (pyproject's cache_write is
    # CI's; an editor's experiments never reach the team unless asked to).
    cache_write: bool = False
    strict: bool = DEFAULT_STRICT  # True: export with strict=True unless a target says otherwise
    lower: tuple[str, ...] = DEFAULT_LOWER  # formats to lower each export to (["onnx"]); pyproject's unless set
    weights: str = DEFAULT_WEIGHTS  # "auto" (fake where values are not needed) or "real"; pyproject's unless set
    # How workers start export processes (``startmethod``): "auto", "fork" or "spawn";
    # $EXPORTLENS_START_METHOD, then pyproject's, unless set.
    start_method: str = DEFAULT_START_METHOD
    diagnostics: DiagnosticsSettings = field(default_factory=DiagnosticsSettings)
    inlay_hints: bool = True  # the dtype and shape after each line the export recorded
    # The settings the user gave explicitly; pyproject values give way to these.
    explicit: frozenset[str] = frozenset()


def overrides(settings: Settings) -> Overrides:
    """What the editor sets above ``[tool.exportlens]``: the limits and strict default
    only when the user gave them explicitly (a default gives way to pyproject), and the
    cache switch and folder as they are."""

    def explicit(name: str) -> Any:
        return getattr(settings, name) if name in settings.explicit else None

    return Overrides(
        timeout_s=explicit("timeout_s"),
        memory_mb=explicit("memory_mb"),
        strict=explicit("strict"),
        lower=explicit("lower"),
        weights=explicit("weights"),
        start_method=explicit("start_method"),
        cache=settings.cache,
        cache_dir=settings.cache_dir,
        cache_url=settings.cache_url,
        cache_write=settings.cache_write,
    )


# ---------------------------------------------------------------- parsing


def _number(minimum: float, maximum: float, integer: bool) -> Callable[[Any], Any]:
    """A number from ``minimum`` to ``maximum``; the JSON a client sends may hold
    ``NaN`` and ``Infinity`` (Python's reader takes them), which fail the range check."""

    def parse(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number, got {value!r}")
        if integer and isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"expected a whole number, got {value!r}")
            value = int(value)
        if not minimum <= value <= maximum:
            raise ValueError(f"expected a value from {minimum:g} to {maximum:g}, got {value!r}")
        return value

    return parse


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _folder(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected a folder path, got {value!r}")
    return os.path.abspath(os.path.expanduser(value))


def _url(value: Any) -> str:
    """A shared cache's URL (``s3://bucket/prefix``...); "" for none."""
    from exportlens.core.cache.remote import url_problem

    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise ValueError(f"expected a URL, got {value!r}")
    problem = url_problem(value)
    if problem is not None:
        raise ValueError(problem.partition(": ")[2])
    return value


def _formats(value: Any) -> tuple[str, ...]:
    """``["onnx"]`` (or ``[]``: lower nothing, whatever pyproject says)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of formats, got {value!r}")
    unknown = [v for v in value if v not in LOWER_FORMATS]
    if unknown:
        raise ValueError(f"unknown format {unknown[0]!r} (known: {', '.join(LOWER_FORMATS)})")
    return tuple(dict.fromkeys(value))


def _choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(repr(w) for w in choices)}, got {value!r}")
        return str(value)

    return parse


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "debounce_ms": _number(0, 60_000, integer=True),
    "timeout_s": lambda v: float(_number(*TIMEOUT_RANGE_S, integer=False)(v)),
    "memory_mb": _number(*MEMORY_RANGE_MB, integer=True),
    "workers": _number(1, 64, integer=True),
    "cache": _bool,
    "cache_dir": _folder,
    "cache_url": _url,
    "cache_write": _bool,
    "strict": _bool,
    "lower": _formats,
    "weights": _choice(WEIGHTS_CHOICES),
    "start_method": _choice(START_METHOD_CHOICES),
    "inlay_hints": _bool,
}


def _diagnostics(value: Any, problems: list[str]) -> DiagnosticsSettings:
    """``{"mutation/buffer": false, ...}``, ``{"disabled": [...]}`` or a list of disabled codes."""
    disabled: set[str] = set()
    if isinstance(value, dict) and set(value) == {"disabled"}:
        value = value["disabled"]
    if isinstance(value, list):
        pairs = [(code, False) for code in value]
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:
        problems.append(f"{SECTION}.diagnostics: expected a map of code to true/false or a list of disabled codes, got {value!r}; all codes stay on")
        return DiagnosticsSettings()
    for code, on in pairs:
        if not isinstance(code, str) or code not in CODES:
            problems.append(f"{SECTION}.diagnostics: unknown diagnostic code {code!r} (ignored)")
        elif not isinstance(on, bool):
            problems.append(f"{SECTION}.diagnostics.{code}: expected true or false, got {on!r}; it stays on")
        elif not on:
            disabled.add(code)
    return DiagnosticsSettings(frozenset(disabled))


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


# The spelling pyproject's [tool.exportlens] and the VS Code extension use.
_ALIASES = {"timeout": "timeout_s"}


def _snake(name: str) -> str:
    name = _CAMEL.sub(r"_\1", name).lower()
    return _ALIASES.get(name, name)


def section_of(raw: Any) -> dict[str, Any]:
    """The ``exportlens`` section of initializationOptions or settings (nested or flat)."""
    if not isinstance(raw, dict):
        return {}
    inner = raw.get(SECTION)
    if isinstance(inner, dict):
        return inner
    return {k: v for k, v in raw.items() if k != SECTION}


def parse(raw: Any) -> tuple[Settings, list[str]]:
    """Settings from one section dict, and the problems found (one message each)."""
    problems: list[str] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return Settings(), [f"{SECTION}: expected a map of settings, got {raw!r}; using the defaults"]
    defaults = Settings()
    values: dict[str, Any] = {}
    explicit: set[str] = set()
    for key, value in raw.items():
        name = _snake(str(key))
        if name in (TOKEN_KEY, TRUSTED_KEY):
            continue  # not settings: the socket's admission (``auth``), the client's trust (``trust_gate``)
        if value is None and (name in _PARSERS or name == "diagnostics"):
            continue  # an unset value in the editor's settings means the default
        if name == "diagnostics":
            values["diagnostics"] = _diagnostics(value, problems)
            continue
        parser = _PARSERS.get(name)
        if parser is None:
            problems.append(f"{SECTION}.{key}: unknown setting (ignored)")
            continue
        if value is None:
            continue  # an unset value in the editor's settings means the default
        try:
            values[name] = parser(value)
        except ValueError as e:
            problems.append(f"{SECTION}.{key}: {e}; using the default {getattr(defaults, name)!r}")
            continue
        explicit.add(name)
    return dataclasses.replace(defaults, **values, explicit=frozenset(explicit)), problems


def merge(*sections: dict[str, Any]) -> dict[str, Any]:
    """Later sections override earlier ones key by key (``diagnostics`` as a whole)."""
    out: dict[str, Any] = {}
    for section in sections:
        out.update(section)
    return out
